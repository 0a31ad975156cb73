// hwarb/x86/xsave.h — which bytes of its XSAVE area one execution of XSAVE, XSAVEOPT or XSAVEC
// wrote, from the requested-feature bitmap and the header the instruction left behind.
//
// The decoder gives an XSAVE-family instruction the whole enabled state area as its operand
// (insn.h), but the processor writes only part of it: XSAVEC skips every state component in its
// initial configuration (the init optimization; XINUSE[i] = 0), so whether a byte of the area is
// written depends on what the program's registers held. A watch that treats the operand as
// written reports writes the processor never made, where a debug register sees none. After the
// instruction ran, its header says what it saved: XSTATE_BV (bytes 512..519) has bit i set for
// each component saved (XSAVEC, XSAVEOPT) or in use (XSAVE).
//
// The XSAVE area (Intel SDM vol. 1, 13.4), offsets from its 64-byte-aligned base:
//
//     0        24  32                 160                 416      512      520      528   576
//     +--------+---+------------------+-------------------+--------+--------+--------+-----+----
//     | x87    |MX-| x87 ST0..ST7     | SSE XMM0..XMM15   | unused |XSTATE_ |XCOMP_  | res.| ext.
//     | FCW..  |CSR|                  |                   |        |BV      |BV      |     | region
//     +--------+---+------------------+-------------------+--------+--------+--------+-----+----
//     component 0: 0..23 and 32..159; component 1: 160..415, with MXCSR/MXCSR_MASK at 24..31.
//     Extended region, component i >= 2: standard form (XSAVE, XSAVEOPT) at CPUID(0xD, i).EBX;
//     compacted form (XSAVEC) packed from 576 in order of i over the components in XCOMP_BV,
//     each aligned to 64 bytes where CPUID(0xD, i).ECX bit 1 says so. Size: CPUID(0xD, i).EAX.
//
// What each form writes (cases numbered as in xsave_written()):
//  1. XSAVE: every component of RFBM; MXCSR when RFBM has bit 1 or 2; XSTATE_BV.
//  2. XSAVEOPT: as XSAVE, except a component in its initial configuration (XSTATE_BV[i] = 0
//     after it) is not written. A component in use may be skipped too (the modified
//     optimization) and that cannot be seen afterwards: it counts as written.
//  3. XSAVEC: each component of RFBM with XSTATE_BV[i] = 1 after it, MXCSR with component 1;
//     XSTATE_BV and XCOMP_BV.
// XSAVES runs only in the kernel; it is treated as XSAVEC. The spans never miss a byte written;
// a processor may leave part of a saved component as it was (a Xeon VM's XSAVEC left the first
// 32 bytes of Hi16_ZMM), so within a saved component they can be larger than what was written.
//
// Contract: pure functions (host_xsave_layout() reads CPUID and XCR0 once, thread-safe).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace hwarb::x86 {

enum class XsaveForm : std::uint8_t { kNone, kStandard, kOptimized, kCompacted };

struct XsaveComponent {
  std::uint32_t offset = 0;  // standard form
  std::uint32_t size = 0;    // 0: not supported
  bool align64 = false;      // compacted form
};

struct XsaveLayout {
  std::uint64_t xcr0 = 0;  // the state components the OS enabled
  std::array<XsaveComponent, 63> components{};
};

// This processor's layout (CPUID leaf 0xD) and XCR0; all zero without XSAVE.
const XsaveLayout& host_xsave_layout();

// A byte range of the area: [offset, offset + size).
struct AreaSpan {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  friend bool operator==(const AreaSpan&, const AreaSpan&) = default;
};

// The requested-feature bitmap of an execution with the instruction mask EDX:EAX from `rdx` and
// `rax`, and the OS's XCR0.
inline std::uint64_t xsave_rfbm(std::uint64_t rax, std::uint64_t rdx, const XsaveLayout& layout) {
  return ((rdx << 32) | (rax & 0xffffffffu)) & layout.xcr0;
}

// The spans written by one execution of `form` with `rfbm`, given the XSTATE_BV it left in the
// area, in increasing order of offset, adjacent spans merged. Empty for kNone.
std::vector<AreaSpan> xsave_written(XsaveForm form, std::uint64_t rfbm, std::uint64_t xstate_bv,
                                    const XsaveLayout& layout);

// The spans an execution of `form` reads: the standard forms read XSTATE_BV back to keep the
// bits outside RFBM; XSAVEC reads nothing.
std::vector<AreaSpan> xsave_read(XsaveForm form);

}  // namespace hwarb::x86

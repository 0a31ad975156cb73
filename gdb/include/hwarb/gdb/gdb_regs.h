// hwarb/gdb/gdb_regs.h — the x86-64 register file as gdb sees it through the Remote Serial
// Protocol: the target description (target.xml), and the 'g'/'G'/'p'/'P' encodings of a thread's
// registers (x86::Regs, as PTRACE_GETREGS gives them, and the FXSAVE area, as PTRACE_GETFPREGS
// gives it).
//
// Contract:
//  - The numbering is gdb's amd64-linux one: 0-15 rax rbx rcx rdx rsi rdi rbp rsp r8-r15 (8
//    bytes), 16 rip (8), 17 eflags and 18-23 cs ss ds es fs gs (4), 24-31 st0-st7 (10), 32-39
//    fctrl fstat ftag fiseg fioff foseg fooff fop (4), 40-55 xmm0-xmm15 (16), 56 mxcsr (4),
//    57 orig_rax, 58 fs_base, 59 gs_base (8): the kGdbCoreRegisterCount registers of a 'g'
//    packet, kGdbRegistersSize bytes in all. Then, where the thread has them (ExtRegs::features):
//    60-75 ymm0h-ymm15h (16; AVX), 76-91 xmm16-xmm31 (16), 92-107 ymm16h-ymm31h (16), 108-115
//    k0-k7 (8), 116-147 zmm0h-zmm31h (32; AVX-512), 148 pkru (4; PKU), read and written with
//    'p'/'P' only (gdb asks for the registers a 'g' reply leaves out with 'p').
//    gdb_target_xml(features) describes exactly the registers the thread has (features
//    org.gnu.gdb.i386.core, .sse, .linux, .segments, and .avx, .avx512, .pkeys as the XSAVE
//    components say; every register with its regnum), so gdb uses this numbering whatever its
//    own defaults, and builds its $ymmN, $zmmN pseudo-registers from them.
//  - Each register travels as its bytes least significant first, two lowercase hex digits a byte.
//    eflags and the segment registers are 8 bytes in Regs and 4 in gdb: read truncated, written
//    zero-extended.
//  - The x87 and SSE registers come from the 512-byte FXSAVE area (user_fpregs_struct): fctrl,
//    fstat and fop (11 bits) from its 16-bit fields, zero-extended; fioff/fiseg and fooff/foseg
//    the low and high halves of its 64-bit instruction and operand pointers (as gdb reads a
//    64-bit FXSAVE); st0-st7 the 10 significant bytes of each 16-byte slot (in stack order, as
//    FXSAVE stores them); mxcsr and xmm0-xmm15 as stored. ftag is the full 16-bit tag word gdb
//    shows (2 bits per physical register: 0 valid, 1 zero, 2 special, 3 empty), computed from
//    FXSAVE's abridged tag (1 bit per register: not empty) and the register contents the way gdb
//    does; written back it becomes the abridged tag again (any tag but 3 sets the bit).
//    Writing a register changes only its own bytes of Regs, the FXSAVE area or ExtRegs (the
//    padding of an st slot and the reserved bits of fop's field are kept).
//  - gdb_decode_registers takes a 'G' packet's hex: registers 0..N-1 in order for any N >= 1 (a
//    shorter packet is what an older gdb may send), so its length must end on a register
//    boundary. EINVAL naming `registers` when it is empty, longer than the 'g' registers, ends
//    inside a register, or holds a non-hex digit; nothing is changed then.
//  - gdb_read_register / gdb_write_register are 'p' and 'P': EINVAL naming `regno` outside
//    0..kGdbRegisterCount-1 or for a register of a component the thread does not have, EINVAL
//    naming `value` when the hex is not exactly the register's size or not hex (nothing
//    changed).
//  - xsave_to_ext / ext_to_xsave convert between an NT_X86_XSTATE area (the XSAVE standard
//    format) and ExtRegs, with the component offsets of an XsaveLayout (the CPU's, from CPUID).
//    A component whose XSTATE_BV bit is clear is in its initial state: zeros. Written back,
//    every component of `features` is stored and its XSTATE_BV bit set; the FXSAVE part and
//    the other components are left as they are. EINVAL naming `xstate` for an area too short
//    for its header or for a component it claims.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/x86/insn.h"

namespace hwarb::gdb {

inline constexpr int kGdbCoreRegisterCount = 60;       // the registers of a 'g' packet
inline constexpr std::size_t kGdbRegistersSize = 560;  // bytes of a 'g' reply, before hex
inline constexpr int kGdbRegisterCount = 149;          // with AVX, AVX-512 and PKU

// The XSAVE components beyond FXSAVE that gdb shows, gathered into one block (what gdb calls
// them, and the XSAVE component each comes from, with its bit in XCR0 / XSTATE_BV):
//
//   ext offset  bytes  registers                              component
//   ----------  -----  -------------------------------------  ----------------
//            0    256  ymm0h-ymm15h: bits 128-255 of ymm0-15   AVX (2)
//          256     64  k0-k7                                  opmask (5)
//          320    512  zmm0h-zmm15h: bits 256-511 of zmm0-15   ZMM_Hi256 (6)
//          832   1024  zmm16-zmm31, 64 bytes each: xmm16-31    Hi16_ZMM (7)
//                      at +0, ymm16h-31h at +16, zmm16h-31h
//                      at +32
//         1856      4  pkru                                   PKRU (9)
struct ExtRegs {
  static constexpr std::uint64_t kAvx = 1u << 2;
  static constexpr std::uint64_t kAvx512 = 1u << 5 | 1u << 6 | 1u << 7;
  static constexpr std::uint64_t kPkru = 1u << 9;
  std::uint64_t features = 0;  // the thread's XCR0: which components it has
  std::array<std::uint8_t, 1860> bytes{};
  friend bool operator==(const ExtRegs&, const ExtRegs&) = default;
};

// The FXSAVE area as PTRACE_GETFPREGS / NT_PRFPREG return it (struct user_fpregs_struct): cwd at
// 0, swd at 2, abridged ftw at 4, fop at 6, rip at 8, rdp at 16, mxcsr at 24, st_space at 32 (8 x
// 16 bytes), xmm_space at 160 (16 x 16 bytes); and the registers beyond it.
struct FpRegs {
  std::array<std::uint8_t, 512> fxsave{};
  ExtRegs ext;
  friend bool operator==(const FpRegs&, const FpRegs&) = default;
};

// Where the XSAVE standard format puts component i (CPUID leaf 0xD sub-leaf i: EBX its offset,
// EAX its size), for the components ExtRegs holds; size 0 for one the CPU lacks.
struct XsaveLayout {
  std::array<std::uint32_t, 10> offset{};
  std::array<std::uint32_t, 10> size{};
};
// This CPU's layout (CPUID); all sizes 0 on a CPU without XSAVE.
[[nodiscard]] XsaveLayout host_xsave_layout();
// An NT_X86_XSTATE area into ExtRegs (features: its XCR0, at byte 464 of the area).
Result<ExtRegs> xsave_to_ext(std::span<const std::uint8_t> area, const XsaveLayout& layout);
// ext's components into `area`, for PTRACE_SETREGSET.
Result<void> ext_to_xsave(const ExtRegs& ext, std::span<std::uint8_t> area,
                          const XsaveLayout& layout);

// "rax", ..., "gs_base"; "" outside 0..kGdbRegisterCount-1.
[[nodiscard]] std::string_view gdb_register_name(int regno);
// The register's size in bytes as gdb has it; 0 outside 0..kGdbRegisterCount-1.
[[nodiscard]] int gdb_register_size(int regno);

// The full x87 tag word from FXSAVE's abridged tag and the st registers, as gdb computes it.
[[nodiscard]] std::uint16_t fxsave_full_tag(const FpRegs& fp);
// The abridged (FXSAVE) tag of a full tag word: bit i set when register i is not empty (3).
[[nodiscard]] std::uint8_t fxsave_abridged_tag(std::uint16_t full_tag);

// The description of the registers of a thread with XSAVE components `features` (XCR0).
[[nodiscard]] std::string gdb_target_xml(std::uint64_t features = 0);

[[nodiscard]] std::string gdb_encode_registers(const x86::Regs& r, const FpRegs& fp);
Result<void> gdb_decode_registers(std::string_view hex, x86::Regs& r, FpRegs& fp);
Result<std::string> gdb_read_register(int regno, const x86::Regs& r, const FpRegs& fp);
Result<void> gdb_write_register(int regno, std::string_view hex, x86::Regs& r, FpRegs& fp);

}  // namespace hwarb::gdb

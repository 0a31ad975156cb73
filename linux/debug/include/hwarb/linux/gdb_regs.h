// hwarb/linux/gdb_regs.h — the x86-64 register file as gdb sees it through the Remote Serial
// Protocol: the target description (target.xml), and the 'g'/'G'/'p'/'P' encodings of a thread's
// registers (x86::Regs, as PTRACE_GETREGS gives them, and the FXSAVE area, as PTRACE_GETFPREGS
// gives it).
//
// Contract:
//  - The numbering is gdb's amd64-linux one, without AVX: 0-15 rax rbx rcx rdx rsi rdi rbp rsp
//    r8-r15 (8 bytes), 16 rip (8), 17 eflags and 18-23 cs ss ds es fs gs (4), 24-31 st0-st7
//    (10), 32-39 fctrl fstat ftag fiseg fioff foseg fooff fop (4), 40-55 xmm0-xmm15 (16),
//    56 mxcsr (4), 57 orig_rax, 58 fs_base, 59 gs_base (8): kGdbRegisterCount registers,
//    kGdbRegistersSize bytes in all. gdb_target_xml() describes exactly these (features
//    org.gnu.gdb.i386.core, .sse, .linux, .segments; every register with its regnum), so gdb
//    uses this numbering whatever its own defaults.
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
//    Writing a register changes only its own bytes of Regs or the FXSAVE area (the padding of an
//    st slot and the reserved bits of fop's field are kept).
//  - gdb_decode_registers takes a 'G' packet's hex: registers 0..N-1 in order for any N >= 1 (a
//    shorter packet is what an older gdb may send), so its length must end on a register
//    boundary. EINVAL naming `registers` when it is empty, longer than all registers, ends inside
//    a register, or holds a non-hex digit; nothing is changed then.
//  - gdb_read_register / gdb_write_register are 'p' and 'P': EINVAL naming `regno` outside
//    0..kGdbRegisterCount-1, EINVAL naming `value` when the hex is not exactly the register's
//    size or not hex (nothing changed).
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

inline constexpr int kGdbRegisterCount = 60;
inline constexpr std::size_t kGdbRegistersSize = 560;  // bytes of a 'g' reply, before hex

// The FXSAVE area as PTRACE_GETFPREGS / NT_PRFPREG return it (struct user_fpregs_struct): cwd at
// 0, swd at 2, abridged ftw at 4, fop at 6, rip at 8, rdp at 16, mxcsr at 24, st_space at 32 (8 x
// 16 bytes), xmm_space at 160 (16 x 16 bytes).
struct FpRegs {
  std::array<std::uint8_t, 512> fxsave{};
  friend bool operator==(const FpRegs&, const FpRegs&) = default;
};

// "rax", ..., "gs_base"; "" outside 0..kGdbRegisterCount-1.
[[nodiscard]] std::string_view gdb_register_name(int regno);
// The register's size in bytes as gdb has it; 0 outside 0..kGdbRegisterCount-1.
[[nodiscard]] int gdb_register_size(int regno);

// The full x87 tag word from FXSAVE's abridged tag and the st registers, as gdb computes it.
[[nodiscard]] std::uint16_t fxsave_full_tag(const FpRegs& fp);
// The abridged (FXSAVE) tag of a full tag word: bit i set when register i is not empty (3).
[[nodiscard]] std::uint8_t fxsave_abridged_tag(std::uint16_t full_tag);

[[nodiscard]] std::string gdb_target_xml();

[[nodiscard]] std::string gdb_encode_registers(const x86::Regs& r, const FpRegs& fp);
Result<void> gdb_decode_registers(std::string_view hex, x86::Regs& r, FpRegs& fp);
Result<std::string> gdb_read_register(int regno, const x86::Regs& r, const FpRegs& fp);
Result<void> gdb_write_register(int regno, std::string_view hex, x86::Regs& r, FpRegs& fp);

}  // namespace hwarb::native

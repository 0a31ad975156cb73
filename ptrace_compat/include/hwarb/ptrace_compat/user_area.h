// hwarb/ptrace_compat/user_area.h — the `struct user` offsets PTRACE_PEEKUSER/POKEUSER address,
// and how Linux x86 decodes them.
//
// Two layouts:
//  - kX86_64: the native 64-bit `struct user` (8-byte words). The offsets of u_debugreg[] and of
//    the general registers come from <sys/user.h>. The kernel's struct (asm/user_64.h) has two
//    more longs after u_debugreg[], error_code and fault_address, which glibc's copy leaves out:
//    the kernel accepts offsets up to offsetof(u_debugreg) + 8*8 + 2*8 = 928, and so do we.
//  - kI386: the 32-bit `struct user` with 4-byte words: `struct user32`, which a 32-bit tracer
//    sees on a 64-bit kernel (the compat path: getreg32/putreg32), and the native struct user of
//    a 32-bit kernel, which has the same offsets. <sys/user.h> on x86_64 has no such struct, so it
//    is declared in user_area.cpp field by field (offsets checked by static_assert): u_debugreg
//    at 252, size 284.
//
// Decoding, as Linux's arch_ptrace (native: x86_64, or i386 on a 32-bit kernel) and
// getreg32/putreg32 (compat: i386 on a 64-bit kernel), in this order:
//   native:
//     1. offset not 8-byte aligned, or >= the kernel's sizeof(struct user): EIO;
//     2. offset < sizeof(user_regs_struct): a general register;
//     3. offsetof(u_debugreg[0]) <= offset <= offsetof(u_debugreg[7]): DR(offset - base) / 8;
//     4. anything else: a field with no register behind it (peek reads 0, poke is EIO).
//   compat:
//     1. offsetof(u_debugreg[0]) <= offset <= offsetof(u_debugreg[7]): DR(offset - base) / 4.
//        The kernel's `case` range comes before its alignment check, so a misaligned offset
//        inside the range (253 is DR0, 279 is DR6) is accepted. Linux oddity, followed.
//     2. offset not 4-byte aligned, or > sizeof(struct user32) (note: >, so 284 itself passes):
//        EIO;
//     3. a general register offset (< sizeof(user_regs_struct32) = 68);
//     4. anything else: a dummy field (peek reads 0, poke is accepted and ignored).
//
// General registers are not modelled by this layer (a sandbox or emulator keeps its own); the
// emulation answers them with EOPNOTSUPP naming the offset.
#pragma once

#include <cstdint>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::ptrace_compat {

enum class UserLayout : std::uint8_t { kX86_64, kI386 };
std::string_view to_string(UserLayout layout);  // "x86_64", "i386"
// EINVAL naming `layout` for anything but "x86_64" and "i386".
Result<UserLayout> parse_user_layout(std::string_view name);

struct UserArea {
  std::uint64_t word = 0;       // bytes per PEEKUSER/POKEUSER word: 8 or 4
  std::uint64_t regs_size = 0;  // sizeof(user_regs_struct) of the layout
  std::uint64_t debugreg = 0;   // offsetof(u_debugreg[0])
  std::uint64_t size = 0;       // the kernel's sizeof(struct user) of the layout
};
const UserArea& user_area(UserLayout layout);

// The offset of u_debugreg[n] (n in 0..7).
constexpr std::uint64_t debugreg_offset(const UserArea& area, int n) {
  return area.debugreg + static_cast<std::uint64_t>(n) * area.word;
}

enum class OffsetKind : std::uint8_t {
  kRegister,  // a general register (user_regs_struct)
  kDebugReg,  // u_debugreg[debugreg]
  kOther,     // a field with no register behind it
};
struct UserOffset {
  OffsetKind kind = OffsetKind::kOther;
  int debugreg = 0;  // kDebugReg: 0..7
};

// Which kernel decodes the offset: the layout's own (native) or a 64-bit kernel serving a 32-bit
// tracer (compat; kI386 only).
enum class UserAbi : std::uint8_t { kNative, kCompat };

// The decoding above; EIO naming the offset and the reason. kCompat with kX86_64 is EINVAL.
Result<UserOffset> decode_offset(UserLayout layout, UserAbi abi, std::uint64_t offset);

}  // namespace hwarb::ptrace_compat

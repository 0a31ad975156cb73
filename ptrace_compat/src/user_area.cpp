#include "hwarb/ptrace_compat/user_area.h"

#include <sys/user.h>

#include <cstddef>
#include <string>

#include "hwarb/base/format.h"

namespace hwarb::ptrace_compat {

namespace {

// The 64-bit kernel's struct user ends with two longs glibc leaves out (asm/user_64.h).
constexpr std::uint64_t kKernelUserTail = 2 * sizeof(unsigned long);
constexpr std::uint64_t kUser64Size =
    offsetof(struct user, u_debugreg) + sizeof(user::u_debugreg) + kKernelUserTail;
static_assert(sizeof(struct user) == offsetof(struct user, u_debugreg) + sizeof(user::u_debugreg),
              "glibc's struct user is expected to end with u_debugreg[]");

// struct user32 (Linux arch/x86/include/asm/user32.h), the layout a 32-bit tracer sees. Written
// out here because the x86_64 <sys/user.h> does not declare it.
struct UserRegs32 {
  std::uint32_t ebx, ecx, edx, esi, edi, ebp, eax;
  std::uint16_t ds, ds_hi, es, es_hi, fs, fs_hi, gs, gs_hi;
  std::uint32_t orig_eax, eip;
  std::uint16_t cs, cs_hi;
  std::uint32_t eflags, esp;
  std::uint16_t ss, ss_hi;
};
struct UserI387Ia32 {
  std::uint32_t cwd, swd, twd, fip, fcs, foo, fos;
  std::uint32_t st_space[20];
};
struct User32 {
  UserRegs32 regs;
  std::int32_t u_fpvalid;
  UserI387Ia32 i387;
  std::uint32_t u_tsize, u_dsize, u_ssize, start_code, start_stack, signal;
  std::int32_t reserved;
  std::uint32_t u_ar0, u_fpstate, magic;
  char u_comm[32];
  std::int32_t u_debugreg[8];
};
static_assert(sizeof(UserRegs32) == 68);
static_assert(offsetof(User32, u_debugreg) == 252);
static_assert(sizeof(User32) == 284);

constexpr UserArea kAreas[] = {
    {8, sizeof(struct user_regs_struct), offsetof(struct user, u_debugreg), kUser64Size},
    {4, sizeof(UserRegs32), offsetof(User32, u_debugreg), sizeof(User32)},
};

std::string offset_text(std::uint64_t offset) {
  return "offset " + std::to_string(offset) + " (" + hex(offset) + ")";
}

}  // namespace

std::string_view to_string(UserLayout layout) {
  return layout == UserLayout::kX86_64 ? "x86_64" : "i386";
}

Result<UserLayout> parse_user_layout(std::string_view name) {
  if (name == "x86_64") return UserLayout::kX86_64;
  if (name == "i386") return UserLayout::kI386;
  return make_error(ErrorCode::kInval, "layout: '" + std::string(name) + "' is not x86_64 or i386");
}

const UserArea& user_area(UserLayout layout) {
  return kAreas[layout == UserLayout::kX86_64 ? 0 : 1];
}

Result<UserOffset> decode_offset(UserLayout layout, UserAbi abi, std::uint64_t offset) {
  const UserArea& a = user_area(layout);
  const std::uint64_t last_dr = debugreg_offset(a, 7);
  const std::string word = std::to_string(a.word);
  if (abi == UserAbi::kNative) {
    // 1.
    if (offset % a.word != 0) {
      return make_error(ErrorCode::kIo,
                        offset_text(offset) + ": not aligned to " + word + " bytes");
    }
    if (offset >= a.size) {
      return make_error(ErrorCode::kIo, offset_text(offset) + ": past the user area (" +
                                            std::to_string(a.size) + " bytes)");
    }
    // 2.
    if (offset < a.regs_size) return UserOffset{OffsetKind::kRegister, 0};
    // 3.
    if (offset >= a.debugreg && offset <= last_dr) {
      return UserOffset{OffsetKind::kDebugReg, static_cast<int>((offset - a.debugreg) / a.word)};
    }
    // 4.
    return UserOffset{OffsetKind::kOther, 0};
  }
  if (layout != UserLayout::kI386) {
    return make_error(ErrorCode::kInval, "abi: compat decoding is for the i386 layout only");
  }
  // compat 1.
  if (offset >= a.debugreg && offset <= last_dr) {
    return UserOffset{OffsetKind::kDebugReg, static_cast<int>((offset - a.debugreg) / a.word)};
  }
  // compat 2.
  if (offset % a.word != 0) {
    return make_error(ErrorCode::kIo, offset_text(offset) + ": not aligned to " + word + " bytes");
  }
  if (offset > a.size) {
    return make_error(ErrorCode::kIo, offset_text(offset) + ": past the user area (" +
                                          std::to_string(a.size) + " bytes)");
  }
  // compat 3, 4.
  if (offset < a.regs_size) return UserOffset{OffsetKind::kRegister, 0};
  return UserOffset{OffsetKind::kOther, 0};
}

}  // namespace hwarb::ptrace_compat

// hwarb/breakpoints/validate.h — Linux's breakpoint attribute checks, in Linux's order
// (docs/architecture.md section 4).
//
// Pure functions; no state. The checks run in Linux's order (arch_build_bp_info, then the
// alignment check of hw_breakpoint_arch_parse, then arch_check_bp_in_kernelspace), after the slot
// check of the caller: a bad request on a full CPU is ENOSPC, not EINVAL.
//
//   1. type: r/w/rw/x. x86 has no read-only watchpoint (r: EINVAL); empty and values outside
//      the enumeration: EINVAL.
//   2. len; for an x86 execute breakpoint first its address: at or above TASK_SIZE_MAX it is
//      EINVAL naming addr, whatever exclude_kernel and the privilege (Linux's arch_build_bp_info
//      takes only addresses kprobes could probe, none without CONFIG_KPROBES: the kernel hwarb
//      models, measured on 6.18). Execute needs len == sizeof(long) of the arch (8 on x86_64, 4 on
//      i386 and arm64); data needs 1, 2, 4 or 8 (no 8 on i386). On x86 any other power of two is an
//      AMD range breakpoint to Linux: EINVAL when the address is not aligned to it, else EOPNOTSUPP
//      (it needs X86_FEATURE_BPEXT, which hwarb's CPUs lack; so i386 len 8 is EOPNOTSUPP too).
//   3. addr: data aligned to len; arm64 execute aligned to 4. x86 execute breakpoints may start
//      at any byte (Linux encodes them as LEN_1, whose alignment mask is 0).
//   4. a range reaching user space's end (>= TASK_SIZE_MAX) is kernel space: EINVAL when
//      exclude_kernel is set, else EPERM unless the caller is privileged (CAP_SYS_ADMIN). The
//      range is what the register covers: one byte for an x86 execute breakpoint (Linux encodes
//      it as LEN_1), so an x86 execute breakpoint at TASK_SIZE_MAX - 1 is user space. No range
//      can wrap past 2^64 (data is aligned to len; arm64 execute to 4).
// Every error is EINVAL, EOPNOTSUPP or EPERM and its message starts with the field it is about.
//
// Checks Linux makes before the slot count (__reserve_bp_slot), so that they win over ENOSPC:
// check_reservable() refuses the types "empty" and RW|X (HW_BREAKPOINT_INVALID) with EINVAL.
#pragma once

#include <cstdint>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/pmu/event.h"

namespace hwarb::breakpoints {

enum class Arch : std::uint8_t { kX86_64, kI386, kArm64 };
std::string_view to_string(Arch arch);
// "x86_64", "i386", "arm64"; anything else EINVAL naming `arch`.
Result<Arch> parse_arch(std::string_view name);

// sizeof(long): the length of an execute breakpoint.
constexpr std::uint64_t exec_len(Arch arch) {
  return arch == Arch::kX86_64 ? 8 : 4;
}
// The first address that is not user space (Linux's TASK_SIZE_MAX).
constexpr std::uint64_t task_size_max(Arch arch) {
  switch (arch) {
    case Arch::kX86_64:
      return 0x00007ffffffff000ULL;
    case Arch::kI386:
      return 0xc0000000ULL;
    case Arch::kArm64:
      return 0x0001000000000000ULL;
  }
  return 0;
}
// The default len of a type when the user names none: exec_len for x, else 4.
constexpr std::uint64_t default_len(Arch arch, pmu::BpType type) {
  return type == pmu::BpType::kX ? exec_len(arch) : 4;
}

// The checks above on attr.bp_type, bp_len, bp_addr, exclude_kernel and privileged.
Result<void> validate_breakpoint(Arch arch, const pmu::EventAttr& attr);
// The checks of __reserve_bp_slot, made before the slots are counted (see above).
Result<void> check_reservable(const pmu::EventAttr& attr);

}  // namespace hwarb::breakpoints

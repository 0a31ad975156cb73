#include "hwarb/breakpoints/validate.h"

#include <bit>

#include "hwarb/base/format.h"

#include <cstdio>
#include <string>

namespace hwarb::breakpoints {

std::string_view to_string(Arch arch) {
  switch (arch) {
    case Arch::kX86_64:
      return "x86_64";
    case Arch::kI386:
      return "i386";
    case Arch::kArm64:
      return "arm64";
  }
  return "?";
}

Result<Arch> parse_arch(std::string_view name) {
  for (Arch a : {Arch::kX86_64, Arch::kI386, Arch::kArm64}) {
    if (name == to_string(a)) return a;
  }
  return make_error(ErrorCode::kInval,
                    "arch: '" + std::string(name) + "' is not x86_64, i386 or arm64");
}

Result<void> check_reservable(const pmu::EventAttr& attr) {
  constexpr unsigned kInvalid = 7;  // HW_BREAKPOINT_RW | HW_BREAKPOINT_X
  const unsigned type = static_cast<unsigned>(attr.bp_type);
  if (attr.bp_type == pmu::BpType::kEmpty || type == kInvalid) {
    return make_error(ErrorCode::kInval,
                      "type " + std::to_string(type) + ": not a breakpoint type (r, w, rw or x)");
  }
  return {};
}

Result<void> validate_breakpoint(Arch arch, const pmu::EventAttr& attr) {
  const bool x86 = arch != Arch::kArm64;
  const std::uint64_t len = attr.bp_len;
  const std::string len_s = std::to_string(len);
  // 1. type
  switch (attr.bp_type) {
    case pmu::BpType::kEmpty:
      return make_error(ErrorCode::kInval, "type: a breakpoint needs a type (r, w, rw or x)");
    case pmu::BpType::kR:
      if (x86) {
        return make_error(ErrorCode::kInval, "type r: x86 has no read-only watchpoint (use rw)");
      }
      break;
    case pmu::BpType::kW:
    case pmu::BpType::kRw:
    case pmu::BpType::kX:
      break;
    default:  // a value outside the enumeration (R|X, W|X, RW|X)
      return make_error(ErrorCode::kInval, "type " +
                                               std::to_string(static_cast<unsigned>(attr.bp_type)) +
                                               ": not a breakpoint type (r, w, rw or x)");
  }
  // 2. len, 3. addr alignment
  if (attr.bp_type == pmu::BpType::kX) {
    // x86's arch_build_bp_info refuses an execute breakpoint at or above TASK_SIZE_MAX that
    // kprobes could not take (within_kprobe_blacklist), before it looks at the len; without
    // CONFIG_KPROBES, as on the kernel hwarb is measured on, that is every such address.
    if (x86 && attr.bp_addr >= task_size_max(arch)) {
      return make_error(ErrorCode::kInval,
                        "addr: " + hex(attr.bp_addr) +
                            " is kernel space, where x86 takes no execute breakpoint (a kernel "
                            "without kprobes)");
    }
    if (len != exec_len(arch)) {
      return make_error(ErrorCode::kInval, "len " + len_s + ": an execute breakpoint on " +
                                               std::string(to_string(arch)) + " needs len " +
                                               std::to_string(exec_len(arch)));
    }
    if (!x86 && attr.bp_addr % 4 != 0) {
      return make_error(ErrorCode::kInval,
                        "addr: an execute breakpoint on arm64 needs a 4-byte aligned address");
    }
  } else {
    const std::uint64_t max_len = arch == Arch::kI386 ? 4 : 8;
    const bool encodable = (len == 1 || len == 2 || len == 4 || len == 8) && len <= max_len;
    if (!encodable && x86 && std::has_single_bit(len)) {
      // Linux's arch_build_bp_info takes any other power of two as an AMD range breakpoint:
      // aligned to its len, it needs X86_FEATURE_BPEXT, which hwarb's CPUs do not have.
      if (attr.bp_addr % len != 0) {
        return make_error(ErrorCode::kInval, "addr: not aligned to len " + len_s);
      }
      return make_error(
          ErrorCode::kOpNotSupp,
          "len " + len_s + ": a range breakpoint, which needs AMD's BPEXT (this CPU has none)");
    }
    if (!encodable) {
      return make_error(ErrorCode::kInval, "len " + len_s + ": a data breakpoint on " +
                                               std::string(to_string(arch)) + " needs len 1, 2, 4" +
                                               (max_len == 8 ? " or 8" : ""));
    }
    if (attr.bp_addr % len != 0) {
      return make_error(ErrorCode::kInval, "addr: not aligned to len " + len_s);
    }
  }
  // 4. kernel space. The span is what the register covers: an x86 execute breakpoint is encoded
  // as LEN_1 (Linux's X86_BREAKPOINT_LEN_X), so it covers one byte whatever its len, and Linux's
  // arch_check_bp_in_kernelspace measures that encoding, not attr.bp_len. The span cannot wrap:
  // data ranges are aligned to their len, arm64 execute ones to 4 with len 4.
  const std::uint64_t span = (x86 && attr.bp_type == pmu::BpType::kX) ? 1 : len;
  const std::uint64_t last = attr.bp_addr + (span - 1);
  if (last >= task_size_max(arch)) {
    if (attr.exclude_kernel) {
      return make_error(ErrorCode::kInval, "addr: " + hex(attr.bp_addr) +
                                               " reaches kernel space, and exclude_kernel is set");
    }
    if (!attr.privileged) {
      return make_error(ErrorCode::kPerm, "addr: " + hex(attr.bp_addr) +
                                              " reaches kernel space; needs a privileged caller");
    }
  }
  return {};
}

}  // namespace hwarb::breakpoints

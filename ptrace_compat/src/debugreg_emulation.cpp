#include "hwarb/ptrace_compat/debugreg_emulation.h"

#include <string>

#include "hwarb/base/format.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::ptrace_compat {

namespace {

using breakpoints::Arch;
using breakpoints::PtraceThread;
using pmu::BpType;

constexpr std::uint64_t kWord32 = 0xffffffffULL;

// Linux's ptrace_breakpoint_init: a pinned breakpoint, every hit delivered, user space only.
pmu::EventAttr ptrace_attr(std::uint64_t addr, std::uint64_t len, BpType type, bool disabled) {
  pmu::EventAttr a = breakpoints::breakpoint_attr(addr, len, type);
  a.exclude_kernel = true;
  a.disabled = disabled;
  return a;
}

std::string dr_name(int n) {
  return "dr" + std::to_string(n);
}

}  // namespace

std::uint64_t rebuild_dr7(const PtraceThread& thread) {
  std::uint64_t image = 0;
  for (int i = 0; i < breakpoints::kPtraceSlots; ++i) {
    const pmu::Event* e = thread.bps[i].event();
    if (e == nullptr || e->attr().disabled) continue;
    image |= x86::dr7::encode_slot(i, breakpoints::dr_type(e->attr().bp_type),
                                   breakpoints::dr_len(e->attr()));
  }
  // Linux accumulates this in an `int`: bit 31 (LEN3's high bit) sign-extends.
  return static_cast<std::uint64_t>(
      static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(image))));
}

Result<SlotRequest> decode_dr7_slot(Arch arch, std::uint64_t dr7, int slot) {
  SlotRequest r;
  r.enabled = x86::dr7::enabled(dr7, slot);
  const x86::DrType rw = x86::dr7::type(dr7, slot);
  const x86::DrLen len = x86::dr7::len(dr7, slot);
  switch (rw) {
    case x86::DrType::kExecute:
      if (len != x86::DrLen::k1) {
        return make_error(ErrorCode::kInval,
                          "LEN" + std::to_string(slot) + ": an execute breakpoint needs LEN 00");
      }
      r.type = BpType::kX;
      r.len = breakpoints::exec_len(arch);
      return r;
    case x86::DrType::kWrite:
      r.type = BpType::kW;
      break;
    case x86::DrType::kReadWrite:
      r.type = BpType::kRw;
      break;
    case x86::DrType::kIo:
      return make_error(ErrorCode::kInval, "RW" + std::to_string(slot) +
                                               ": 10 is an I/O breakpoint, which ptrace refuses");
  }
  if (len == x86::DrLen::k8 && arch == Arch::kI386) {
    return make_error(ErrorCode::kInval,
                      "LEN" + std::to_string(slot) + ": 10 (8 bytes) does not exist on i386");
  }
  r.len = static_cast<std::uint64_t>(x86::len_bytes(len));
  return r;
}

UserAbi DebugRegEmulation::abi(UserLayout layout) const {
  return layout == UserLayout::kI386 && api_.pmu().arch() == Arch::kX86_64 ? UserAbi::kCompat
                                                                           : UserAbi::kNative;
}

Result<void> DebugRegEmulation::check(TaskId task) const {
  if (api_.pmu().arch() == Arch::kArm64) {
    return make_error(ErrorCode::kOpNotSupp,
                      "arch: the ptrace debug registers DR0-DR7 are x86 only (this is arm64)");
  }
  return api_.check_task(task);
}

Result<std::uint64_t> DebugRegEmulation::peek_user(TaskId task, UserLayout layout,
                                                   std::uint64_t offset) const {
  if (auto r = check(task); !r) return std::unexpected(r.error());
  auto where = decode_offset(layout, abi(layout), offset);
  if (!where) return std::unexpected(where.error());
  switch (where->kind) {
    case OffsetKind::kRegister:
      return make_error(ErrorCode::kOpNotSupp,
                        "offset " + std::to_string(offset) +
                            ": a general register, which the debug-register emulation does not "
                            "model");
    case OffsetKind::kOther:
      return std::uint64_t{0};
    case OffsetKind::kDebugReg:
      break;
  }
  auto v = get_debugreg(task, where->debugreg);
  if (!v) return v;
  return layout == UserLayout::kI386 ? (*v & kWord32) : *v;
}

Result<void> DebugRegEmulation::poke_user(TaskId task, UserLayout layout, std::uint64_t offset,
                                          std::uint64_t value) {
  if (auto r = check(task); !r) return r;
  auto where = decode_offset(layout, abi(layout), offset);
  if (!where) return std::unexpected(where.error());
  if (layout == UserLayout::kI386 && value > kWord32) {
    return make_error(ErrorCode::kInval,
                      "value " + hex(value) + ": the i386 layout has 4-byte words");
  }
  switch (where->kind) {
    case OffsetKind::kRegister:
      return make_error(ErrorCode::kOpNotSupp,
                        "offset " + std::to_string(offset) +
                            ": a general register, which the debug-register emulation does not "
                            "model");
    case OffsetKind::kOther:
      // Native: no register behind the field, EIO. Compat: dummy fields are ignored.
      if (abi(layout) == UserAbi::kCompat) return {};
      return make_error(ErrorCode::kIo,
                        "offset " + std::to_string(offset) + ": not a register of the user area");
    case OffsetKind::kDebugReg:
      break;
  }
  return set_debugreg(task, where->debugreg, value);
}

Result<std::uint64_t> DebugRegEmulation::get_debugreg(TaskId task, int n) const {
  if (auto r = check(task); !r) return std::unexpected(r.error());
  if (n < 0 || n > 7) {
    return make_error(ErrorCode::kIo, "n: " + std::to_string(n) + " is not a debug register");
  }
  const PtraceThread* t = api_.find_ptrace_thread(task);
  if (n < breakpoints::kPtraceSlots) {
    const pmu::Event* e = t ? t->bps[n].event() : nullptr;
    return e ? e->attr().bp_addr : 0;
  }
  if (n == 6) return (t ? t->virtual_dr6 : 0) ^ x86::dr6::kHardwareInit;
  if (n == 7) return t ? t->dr7 : 0;
  return std::uint64_t{0};  // DR4, DR5
}

Result<void> DebugRegEmulation::set_debugreg(TaskId task, int n, std::uint64_t value) {
  if (auto r = check(task); !r) return r;
  if (n < breakpoints::kPtraceSlots && n >= 0) {
    auto r = set_breakpoint_addr(task, n, value);
    if (!r) return std::unexpected(r.error().with_context(dr_name(n)));
    return r;
  }
  if (n == 6) {
    api_.ptrace_thread(task).virtual_dr6 = value ^ x86::dr6::kHardwareInit;
    return {};
  }
  if (n == 7) {
    auto r = write_dr7(task, value);
    if (!r) return std::unexpected(r.error().with_context("dr7"));
    api_.ptrace_thread(task).dr7 = value;
    return {};
  }
  if (n == 4 || n == 5) {
    return make_error(ErrorCode::kIo, dr_name(n) + ": x86_64 has no DR4 or DR5 to write");
  }
  return make_error(ErrorCode::kIo, "n: " + std::to_string(n) + " is not a debug register");
}

Result<void> DebugRegEmulation::set_breakpoint_addr(TaskId task, int slot, std::uint64_t addr) {
  const PtraceThread* t = api_.find_ptrace_thread(task);
  const pmu::Event* e = t ? t->bps[slot].event() : nullptr;
  // 1. No breakpoint yet: a disabled placeholder, len 1, type w.
  if (e == nullptr) {
    auto id = api_.register_ptrace_hw_breakpoint(ptrace_attr(addr, 1, BpType::kW, true),
                                                 triggered(slot), task, slot);
    if (!id) return std::unexpected(id.error());
    return {};
  }
  // 2. Move it.
  pmu::EventAttr attr = e->attr();
  attr.bp_addr = addr;
  return api_.modify_user_hw_breakpoint(e->id(), attr);
}

Result<void> DebugRegEmulation::write_dr7(TaskId task, std::uint64_t value) {
  // 1., 2.
  const std::uint64_t data = x86::dr7::drop_reserved(value);
  const PtraceThread* t = api_.find_ptrace_thread(task);
  const std::uint64_t old = t ? rebuild_dr7(*t) : 0;
  // 3.
  auto first = apply_dr7(task, data);
  if (first) return first;
  // 4. The second pass. Linux WARNs when it fails too and still returns the first error.
  if (auto second = apply_dr7(task, old); !second) ++failed_restores_;
  return first;
}

Result<void> DebugRegEmulation::apply_dr7(TaskId task, std::uint64_t dr7) {
  const Arch arch = api_.pmu().arch();
  for (int i = 0; i < breakpoints::kPtraceSlots; ++i) {
    const std::string slot = "slot " + std::to_string(i);
    const PtraceThread* t = api_.find_ptrace_thread(task);
    const pmu::Event* e = t ? t->bps[i].event() : nullptr;
    if (e == nullptr && !x86::dr7::enabled(dr7, i)) continue;
    auto req = decode_dr7_slot(arch, dr7, i);
    if (!req) return std::unexpected(req.error().with_context(slot));
    if (e == nullptr) {
      auto id = api_.register_ptrace_hw_breakpoint(ptrace_attr(0, req->len, req->type, false),
                                                   triggered(i), task, i);
      if (!id) return std::unexpected(id.error().with_context(slot));
      continue;
    }
    pmu::EventAttr attr = e->attr();
    attr.bp_len = req->len;
    attr.bp_type = req->type;
    attr.disabled = !req->enabled;
    if (auto r = api_.modify_user_hw_breakpoint(e->id(), attr); !r) {
      return std::unexpected(r.error().with_context(slot));
    }
  }
  return {};
}

pmu::OverflowHandler DebugRegEmulation::triggered(int slot) {
  return [this, slot](pmu::Event& event, const pmu::Sample&) {
    if (event.task() == exception_task_) exception_bits_ |= x86::dr6::trap_bit(slot);
  };
}

void DebugRegEmulation::begin_exception(TaskId task) {
  exception_task_ = task;
  exception_bits_ = 0;
}

DebugException DebugRegEmulation::end_exception(TaskId task, std::uint64_t raised,
                                                std::uint64_t consumed) {
  DebugException ex;
  ex.virtual_dr6 =
      (raised & x86::dr6::kSingleStep) | (task == exception_task_ ? exception_bits_ : 0);
  const std::uint64_t unclaimed = raised & ~consumed & x86::dr6::kTrapMask;
  ex.sigtrap =
      (ex.virtual_dr6 & (x86::dr6::kSingleStep | x86::dr6::kTrapMask)) != 0 || unclaimed != 0;
  exception_task_ = TaskId{};
  exception_bits_ = 0;
  return ex;
}

void DebugRegEmulation::set_virtual_dr6(TaskId task, std::uint64_t happened) {
  if (happened == 0 && api_.find_ptrace_thread(task) == nullptr) return;
  api_.ptrace_thread(task).virtual_dr6 = happened;
}

}  // namespace hwarb::ptrace_compat

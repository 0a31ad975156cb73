// hwarb/breakpoints/hw_breakpoint.h — the kernel-style breakpoint API (names follow Linux's
// include/linux/hw_breakpoint.h), on top of the perf-event core and the breakpoint PMU.
//
// Contract:
//  - Every call is all or nothing: on error no event, no reservation and no register changes.
//  - register_user_hw_breakpoint(attr, handler, task[, cpu]): one event for `task` (on all CPUs,
//    or on one). register_cpu_hw_breakpoint: one CPU-bound event (no task).
//    register_wide_hw_breakpoint(attr, handler): one event per ONLINE CPU, opened with
//    Core::open_all, so no arbiter user ever sees a part of it. The privileged credential is set
//    for wide and CPU breakpoints (kernel users), not for user ones.
//  - The order of checks is Linux's: the owner, then the slots (ENOSPC/ENODEV), then the fields
//    (validate.h), so a bad request on a full CPU is ENOSPC.
//  - perf_event_open(attr, handler, owner, who, paranoid): the system call of a process with
//    credentials `who` while kernel.perf_event_paranoid is `paranoid` (pmu/permission.h), in
//    Linux's order: 1. perf_allow_kernel (EACCES), 2. the task (ESRCH), 3. the slots and the
//    fields as above (the kernel-space EPERM asks who.sys_admin), 4. perf_allow_cpu for an
//    owner without a task (EACCES; the event of 3 is then opened disabled, so never installed,
//    and released).
//  - modify_user_hw_breakpoint(bp, attr): only bp_addr, bp_len, bp_type and disabled may differ
//    from the event's attributes. Order as Linux's modify_user_hw_breakpoint_check: the new
//    fields are validated (EINVAL/EPERM), then any other difference is EINVAL naming the field,
//    then the slots (a data <-> execute change on a machine with separate pools). On any error the
//    breakpoint is exactly as before and still armed if it was; on success an installed one is
//    re-installed at once with the new address.
//  - unregister_*: releases (also done by the handles' destructors).
//  - ptrace_thread(task): the task's ptrace debug state, Linux's thread_struct fields
//    ptrace_bps[HBP_NUM], ptrace_dr7 and virtual_dr6. The ptrace emulation (ptrace_compat/)
//    registers the slots' breakpoints with register_ptrace_hw_breakpoint and keeps dr7/dr6 there;
//    the API owns the handles. flush_ptrace_hw_breakpoint(task) unregisters all of them and zeroes
//    dr7 and virtual_dr6, as Linux's, which runs at exit and exec only: a tracer's detach leaves
//    them in place (debuggers clear DR7 before they detach).
//  - Handlers run inside the debug exception (Event::deliver) and must not call back into the API.
// Not thread-safe: callers serialise with the Core (sim/system.h does).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/bp_pmu.h"
#include "hwarb/pmu/core.h"
#include "hwarb/pmu/permission.h"

namespace hwarb::breakpoints {

// perf_event_attr for a breakpoint, as Linux's hw_breakpoint_init: type breakpoint, pinned,
// sample_period 1 (every hit calls the handler).
pmu::EventAttr breakpoint_attr(std::uint64_t addr, std::uint64_t len, pmu::BpType type);

using BreakpointHandle = pmu::EventHandle;

// Linux's HBP_NUM: the debug address registers ptrace exposes (DR0–DR3).
inline constexpr int kPtraceSlots = 4;

// A task's ptrace debug state (Linux's thread_struct ptrace_bps[], ptrace_dr7, virtual_dr6).
struct PtraceThread {
  std::array<BreakpointHandle, kPtraceSlots> bps;  // slot n: the breakpoint behind DRn, if any
  std::uint64_t dr7 = 0;          // the DR7 value last written successfully, as written
  std::uint64_t virtual_dr6 = 0;  // DR6 with "set means happened" polarity
};

// A wide breakpoint: one event per CPU that was online when it was registered.
struct WideBreakpointHandle {
  std::vector<BreakpointHandle> per_cpu;
  bool valid() const { return !per_cpu.empty(); }
};

class HwBreakpoints {
 public:
  // The core must have `pmu` registered for EventType::kBreakpoint.
  HwBreakpoints(pmu::Core& core, BreakpointPmu& pmu) : core_(core), pmu_(pmu) {}

  Result<BreakpointHandle> register_user_hw_breakpoint(const pmu::EventAttr& attr,
                                                       pmu::OverflowHandler handler, TaskId task,
                                                       std::optional<CpuId> cpu = std::nullopt);
  Result<BreakpointHandle> register_cpu_hw_breakpoint(const pmu::EventAttr& attr,
                                                      pmu::OverflowHandler handler, CpuId cpu);
  Result<BreakpointHandle> perf_event_open(const pmu::EventAttr& attr, pmu::OverflowHandler handler,
                                           pmu::EventOwner owner, pmu::Credentials who,
                                           int paranoid);
  Result<WideBreakpointHandle> register_wide_hw_breakpoint(const pmu::EventAttr& attr,
                                                           pmu::OverflowHandler handler);

  Result<void> modify_user_hw_breakpoint(const BreakpointHandle& bp, const pmu::EventAttr& attr);
  Result<void> modify_user_hw_breakpoint(pmu::EventId id, const pmu::EventAttr& attr);

  void unregister_hw_breakpoint(BreakpointHandle& bp) {
    ignore_error(bp.close(), "as Linux's, returns nothing; a closed handle is a no-op");
  }
  void unregister_wide_hw_breakpoint(WideBreakpointHandle& bp) { bp.per_cpu.clear(); }

  // A user breakpoint of `task` kept in slot `slot` (0..3) of its ptrace state. EBUSY when the
  // slot already has one, EINVAL for a slot outside 0..3; otherwise as register_user.
  Result<pmu::EventId> register_ptrace_hw_breakpoint(const pmu::EventAttr& attr,
                                                     pmu::OverflowHandler handler, TaskId task,
                                                     int slot);
  // The task's ptrace state, created empty on first use (no breakpoint, dr7 0, virtual_dr6 0).
  PtraceThread& ptrace_thread(TaskId task) { return ptrace_[task]; }
  // The task's ptrace state if it has one.
  const PtraceThread* find_ptrace_thread(TaskId task) const;
  // The task's ptrace breakpoints in slot order (empty slots skipped).
  std::vector<pmu::EventId> ptrace_breakpoints(TaskId task) const;
  void flush_ptrace_hw_breakpoint(TaskId task);
  // Linux's hw_breakpoint_is_used(): does any user (ptrace, perf or kernel) hold a slot of the
  // core's arbiter?
  bool is_used() const;

  // How the API tells a live task (the machine sets it). Without one every task id is accepted.
  // register_user_* and register_ptrace_* for a task it does not know: ESRCH.
  void set_task_lookup(std::function<bool(TaskId)> exists) { task_exists_ = std::move(exists); }
  // ESRCH naming `task` when the lookup does not know it.
  Result<void> check_task(TaskId task) const;

  pmu::Core& core() { return core_; }
  BreakpointPmu& pmu() { return pmu_; }

 private:
  static pmu::EventAttr as_breakpoint(pmu::EventAttr attr, bool privileged);

  pmu::Core& core_;
  BreakpointPmu& pmu_;
  std::map<TaskId, PtraceThread> ptrace_;
  std::function<bool(TaskId)> task_exists_;
};

}  // namespace hwarb::breakpoints

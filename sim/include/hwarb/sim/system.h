// hwarb/sim/system.h — the simulated machine wired to the whole stack: the arbiter, the perf-event
// core, the breakpoint PMU, the hw_breakpoint API and the Watchpoint layer, and the BTS facility
// with its tracing contexts, its perf PMU and the legacy ptrace BTS API.
//
// What it connects (everything is deterministic; same calls, same results and hits):
//  - Machine scheduler reports -> Core: a switch is sched_out(prev) then sched_in(next); a tick is
//    Core::tick; fork is Core::fork (its error vetoes the machine's fork, so a fork that cannot
//    copy its inherited breakpoints fails and nothing of the child remains); exit is Core::exit,
//    then the task's watchpoints and ptrace breakpoints are dropped; CPU hotplug goes to the
//    arbiter's online set and to Core::set_cpu_online.
//  - The breakpoint PMU programs the machine's DR0–DR3/DR7 (System is its DebugRegisterFile).
//  - The machine's debug exceptions -> BreakpointPmu::handle; the trap bits it consumed are
//    cleared from the CPU's DR6 (BS and foreign bits stay for their owners).
//  - ptrace (ptrace_compat/): the DR0–DR7 emulation of every task (ptrace()), and tracers
//    (ptrace_attach .. ptrace_detach; sim::SimTracee wraps them as a ptrace_compat::Tracee):
//      1. attach puts the task in a stop (SIGSTOP, as PTRACE_ATTACH); a stopped task does no work
//         (Machine::set_stopped) until the tracer resumes it with cont or step.
//      2. Each debug exception of a task runs Linux's user-mode #DB path: the emulation's
//         begin_exception, BreakpointPmu::handle (ptrace breakpoints record their trap bits), then
//         end_exception gives the exception's virtual DR6 and whether SIGTRAP is due. For a
//         traced task that is not stopped the value becomes the virtual DR6 and SIGTRAP stops it.
//         An untraced task only gets the value (the machine has no signals).
//      3. One access()/exec() can raise two exceptions (an execute fault, then the single-step
//         trap after the instruction). The machine finishes the call, so the second exception of a
//         task the first one stopped is queued and takes effect when the tracer resumes: its
//         virtual DR6 is stored then and, if it stops, the task stops again at once. The tracer
//         thus sees the stops one at a time, each with its own DR6, as on Linux. A `cont` from
//         the fault's stop switches single-stepping off before the instruction runs, so on Linux
//         the single-step trap never happens: queued single-step-only exceptions are dropped on
//         cont and kept on step.
//      4. step arms the machine's single-step for the task; cont disarms it. Detach resumes the
//         task and disarms single-step; it keeps the ptrace breakpoints (Linux flushes them only
//         at exec and exit). A task's exit flushes them and ends its tracing; its tracer's next
//         ptrace_wait reports the exit (then it is reaped: ESRCH).
//  - Guests (hwarb/sim/guest.h): guest_enter / guest_exit run a KVM guest on a CPU with its own
//    debug registers; the breakpoint PMU's writes go to a per-CPU host image, which guest_exit
//    writes back.
//  - BTS (pmu/bts, docs/architecture.md section 6): the Tracer owns every CPU's BTS facility and
//    programs the machine's DS area and DEBUGCTL (System is its BtsHardware); the machine's BTS
//    interrupt goes to Tracer::on_interrupt. A switch is, in this order: Core::sched_out(prev) (the
//    BTS PMU deactivates prev's event contexts, flushing the CPU's records to them), then
//    Tracer::on_switch (timestamps, the task contexts follow the running task), then
//    Core::sched_in(next). BTS events of the core (EventType::kBts) go to the BtsPmu. The ptrace
//    BTS API (ptrace_bts()) keeps one task context per tracee; when a SIGNAL-mode buffer of a
//    traced task that is not in a stop fills, the task stops with SIGIO
//    (ptrace_compat::kBtsFullSignal) and its tracer sees that stop in ptrace_wait. A task's exit
//    frees its ptrace BTS buffer; its other task contexts stay readable.
//  - Kernel symbols and the ksym tracer: kernel_symbols() is the machine's symbol table (kernel
//    start: task_size_max of the arch), ksym_tracer() the tracer over it and breakpoints(). A
//    Machine::kernel_access exception goes to BreakpointPmu::handle as a kernel-mode trap (events
//    with exclude_kernel eat it; the sample's task is the CPU's task, none when idle); its
//    consumed trap bits are cleared from DR6 and, being no user-mode #DB, it bypasses ptrace.
//
// Locking. The arbiter is thread-safe by itself; nothing else is. Rules:
//  1. A System used from several threads is used under lock(): every call on machine(), core(),
//     breakpoints(), watchpoints() and bp_pmu(), and the destruction of their handles, happens
//     while the caller holds the lock.
//  2. Handlers (overflow and watch handlers) run inside machine().access()/exec(), so under the
//     caller's lock; they must not take it again and must not call into the stack.
//  3. arbiter() may be used without the lock (it has its own); its decisions then depend on the
//     interleaving, as in Linux.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/breakpoints/bp_pmu.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/breakpoints/kallsyms.h"
#include "hwarb/breakpoints/ksym_tracer.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/bts/bts_pmu.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/pmu/core.h"
#include "hwarb/ptrace_compat/bts_ptrace.h"
#include "hwarb/ptrace_compat/debugreg_emulation.h"
#include "hwarb/ptrace_compat/tracee.h"
#include "hwarb/sim/guest.h"
#include "hwarb/sim/machine.h"

namespace hwarb::sim {

struct SystemConfig {
  int cpus = 2;
  breakpoints::Arch arch = breakpoints::Arch::kX86_64;
  arbiter::FlexiblePolicy flexible = arbiter::FlexiblePolicy::kMultiplexed;
};

class System final : SchedulerObserver,
                     DebugExceptionHandler,
                     BtsInterruptHandler,
                     breakpoints::DebugRegisterFile,
                     bts::BtsHardware {
 public:
  // EINVAL for cpus outside 1..kMaxCpus. On arm64 the breakpoint PMU keeps arm64's pools without
  // programming the (x86) registers of the machine: such breakpoints are accounted, never fire.
  static Result<std::unique_ptr<System>> create(const SystemConfig& config);
  ~System() override;
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  const SystemConfig& config() const { return config_; }
  [[nodiscard]] std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }

  Machine& machine() { return *machine_; }
  arbiter::Arbiter& arbiter() { return *arbiter_; }
  pmu::Core& core() { return *core_; }
  breakpoints::BreakpointPmu& bp_pmu() { return *bp_pmu_; }
  breakpoints::HwBreakpoints& breakpoints() { return *api_; }
  breakpoints::Watchpoints& watchpoints() { return *watch_; }
  ptrace_compat::DebugRegEmulation& ptrace() { return *ptrace_; }
  bts::Tracer& tracer() { return *tracer_; }
  bts::BtsPmu& bts_pmu() { return *bts_pmu_; }
  ptrace_compat::PtraceBts& ptrace_bts() { return *ptrace_bts_; }
  breakpoints::KernelSymbols& kernel_symbols() { return *ksyms_; }
  breakpoints::KsymTracer& ksym_tracer() { return *ksym_; }

  // Tracing (rules 1-4 above). ESRCH for an unknown task.
  // attach: EPERM when the task is traced already. The task stops with SIGSTOP.
  Result<void> ptrace_attach(TaskId task);
  // detach: ESRCH unless the task is traced and stopped (as PTRACE_DETACH).
  Result<void> ptrace_detach(TaskId task);
  // What a tracer's exit does: detach whether the task is stopped or not (no-op if untraced).
  void ptrace_release(TaskId task);
  bool ptrace_traced(TaskId task) const { return traced_.contains(task); }
  // The stop the traced task is in (with DR6 read now), or nullopt while it runs. ESRCH when it
  // is not traced; kBlock on a running task is EAGAIN (nothing runs it but the caller). A traced
  // task that exited is Stop::exited(0) once (the machine has no exit codes), then ESRCH.
  Result<std::optional<ptrace_compat::Stop>> ptrace_wait(TaskId task, ptrace_compat::WaitMode mode);
  // cont (step == false) or step from a stop; ESRCH unless traced and stopped.
  Result<void> ptrace_resume(TaskId task, bool step);
  // ESRCH unless the task is traced and in a stop: what PEEKUSER/POKEUSER require.
  Result<void> ptrace_check_stopped(TaskId task) const;

  // Guests (guest.h; sim/src/system_guest.cpp).
  Result<void> guest_enter(CpuId cpu, const DebugRegisters& guest);
  Result<DebugRegisters> guest_exit(CpuId cpu, GuestRestore restore = GuestRestore::kAll);
  // The host image of a CPU (cpu_debugreg[0..3], dr7; dr6 unused): EINVAL for a bad cpu.
  Result<DebugRegisters> host_debug_registers(CpuId cpu) const;
  // TIF_DEBUG: the task has an enabled ptrace breakpoint.
  bool tif_debug(TaskId task) const;

 private:
  struct Traced {
    std::optional<int> stop;                            // the signal of the stop it is in
    std::deque<ptrace_compat::DebugException> pending;  // rule 3
  };
  explicit System(const SystemConfig& config);

  // SchedulerObserver
  void on_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next) override;
  void on_tick(CpuId cpu) override;
  Result<void> on_fork(TaskId parent, TaskId child) override;
  void on_fork_rollback(TaskId parent, TaskId child) override;
  void on_exit(TaskId task) override;
  void on_cpu_online(CpuId cpu) override;
  void on_cpu_offline(CpuId cpu) override;
  // DebugExceptionHandler
  void on_debug_exception(const DebugException& e) override;
  // BtsInterruptHandler
  void on_bts_interrupt(CpuId cpu) override;
  // BtsHardware
  void program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
               std::uint64_t debugctl) override;
  x86::DsArea ds_area(CpuId cpu) const override;
  void set_bts_index(CpuId cpu, std::uint64_t index) override;
  // The Tracer's full handler: a ptrace SIGNAL-mode buffer filled.
  void on_bts_full(bts::ContextId context, std::optional<TaskId> task);
  // DebugRegisterFile
  std::uint64_t dr7(CpuId cpu) const override;
  void set_dr7(CpuId cpu, std::uint64_t value) override;
  void set_address(CpuId cpu, int slot, std::uint64_t addr) override;
  // Rule 2 for an exception of a traced task that is not stopped (or a queued one, rule 3).
  void take_effect(TaskId task, Traced& t, const ptrace_compat::DebugException& ex);
  // Linux's hw_breakpoint_restore on cpu, whose current task is `task`.
  void hw_breakpoint_restore(CpuId cpu, TaskId task);

  SystemConfig config_;
  std::mutex mu_;
  // Destruction order matters: the layers above go before the ones below.
  std::unique_ptr<Machine> machine_;
  std::unique_ptr<pmu::Clock> clock_;  // the machine's clock
  std::unique_ptr<arbiter::Arbiter> arbiter_;
  std::unique_ptr<breakpoints::BreakpointPmu> bp_pmu_;
  std::unique_ptr<pmu::Core> core_;
  std::unique_ptr<breakpoints::HwBreakpoints> api_;
  std::unique_ptr<breakpoints::Watchpoints> watch_;
  std::unique_ptr<ptrace_compat::DebugRegEmulation> ptrace_;
  std::unique_ptr<bts::Tracer> tracer_;
  std::unique_ptr<bts::BtsPmu> bts_pmu_;
  std::unique_ptr<ptrace_compat::PtraceBts> ptrace_bts_;
  std::unique_ptr<breakpoints::KernelSymbols> ksyms_;
  std::unique_ptr<breakpoints::KsymTracer> ksym_;
  std::map<TaskId, Traced> traced_;
  // Traced tasks that exited, until their tracer's ptrace_wait reports it (or the tracer goes).
  std::set<TaskId> exited_;
  std::vector<DebugRegisters> host_regs_;  // per CPU: the image the PMU programs (guest.h)
};

}  // namespace hwarb::sim

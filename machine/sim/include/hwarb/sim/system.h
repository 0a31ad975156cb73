// hwarb/sim/system.h — the simulated machine wired to the whole stack: the arbiter, the perf-event
// core, the breakpoint PMU, the hw_breakpoint API and the Watchpoint layer.
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

#include <memory>
#include <mutex>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/breakpoints/bp_pmu.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/pmu/core.h"
#include "hwarb/sim/machine.h"

namespace hwarb::sim {

struct SystemConfig {
  int cpus = 2;
  breakpoints::Arch arch = breakpoints::Arch::kX86_64;
  arbiter::FlexiblePolicy flexible = arbiter::FlexiblePolicy::kMultiplexed;
};

class System final : SchedulerObserver, DebugExceptionHandler, breakpoints::DebugRegisterFile {
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

 private:
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
  // DebugRegisterFile
  std::uint64_t dr7(CpuId cpu) const override;
  void set_dr7(CpuId cpu, std::uint64_t value) override;
  void set_address(CpuId cpu, int slot, std::uint64_t addr) override;

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
};

}  // namespace hwarb::sim

#include "hwarb/sim/system.h"

#include <csignal>

#include "hwarb/base/check.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {

namespace {

class MachineClock final : public pmu::Clock {
 public:
  explicit MachineClock(const Machine& m) : m_(m) {}
  pmu::Time now() const override { return m_.now(); }

 private:
  const Machine& m_;
};

pmu::AccessKind access_kind(AccessKind k) {
  switch (k) {
    case AccessKind::kRead:
      return pmu::AccessKind::kRead;
    case AccessKind::kWrite:
      return pmu::AccessKind::kWrite;
    case AccessKind::kExec:
      return pmu::AccessKind::kExecute;
  }
  return pmu::AccessKind::kNone;
}

arbiter::ArchProfile profile_of(breakpoints::Arch arch) {
  switch (arch) {
    case breakpoints::Arch::kX86_64:
      return arbiter::ArchProfile::x86_64();
    case breakpoints::Arch::kI386:
      return arbiter::ArchProfile::i386();
    case breakpoints::Arch::kArm64:
      return arbiter::ArchProfile::arm64();
  }
  return arbiter::ArchProfile::x86_64();
}

}  // namespace

System::System(const SystemConfig& config) : config_(config) {}

Result<std::unique_ptr<System>> System::create(const SystemConfig& config) {
  auto machine = Machine::create(config.cpus);
  if (!machine) return std::unexpected(machine.error());
  arbiter::ArbiterConfig ac;
  ac.profile = profile_of(config.arch);
  ac.cpus = config.cpus;
  ac.flexible = config.flexible;
  auto arb = arbiter::Arbiter::create(ac);
  if (!arb) return std::unexpected(arb.error());

  std::unique_ptr<System> s(new System(config));
  s->machine_ = std::move(*machine);
  s->host_regs_.resize(static_cast<std::size_t>(config.cpus));
  s->clock_ = std::make_unique<MachineClock>(*s->machine_);
  s->arbiter_ = std::move(*arb);
  const bool x86 = config.arch != breakpoints::Arch::kArm64;
  breakpoints::DebugRegisterFile* regs = x86 ? s.get() : nullptr;
  s->bp_pmu_ = std::make_unique<breakpoints::BreakpointPmu>(config.arch, config.cpus, regs);
  s->core_ = std::make_unique<pmu::Core>(*s->arbiter_, *s->clock_);
  HWARB_CHECK(s->core_->register_pmu(pmu::EventType::kBreakpoint, *s->bp_pmu_).has_value(),
              "register the breakpoint PMU");
  const x86::BtsFormat format =
      config.arch == breakpoints::Arch::kI386 ? x86::BtsFormat::k32 : x86::BtsFormat::k64;
  HWARB_CHECK(s->machine_->set_bts_format(format).has_value(), "BTS format");
  bts::TracerConfig tc;
  tc.cpus = config.cpus;
  tc.format = format;
  tc.kernel_start = s->machine_->kernel_start();
  auto tracer = bts::Tracer::create(tc, *s, s->arbiter_.get());
  if (!tracer) return std::unexpected(tracer.error());
  s->tracer_ = std::move(*tracer);
  s->bts_pmu_ = std::make_unique<bts::BtsPmu>(*s->tracer_);
  HWARB_CHECK(s->core_->register_pmu(pmu::EventType::kBts, *s->bts_pmu_).has_value(),
              "register the BTS PMU");
  s->ptrace_bts_ = std::make_unique<ptrace_compat::PtraceBts>(*s->tracer_);
  System* self = s.get();
  s->tracer_->set_full_handler(
      [self](bts::ContextId c, std::optional<TaskId> t) { self->on_bts_full(c, t); });
  s->api_ = std::make_unique<breakpoints::HwBreakpoints>(*s->core_, *s->bp_pmu_);
  Machine* m = s->machine_.get();
  s->api_->set_task_lookup([m](TaskId t) { return m->task_exists(t); });
  s->ptrace_ = std::make_unique<ptrace_compat::DebugRegEmulation>(*s->api_);
  s->watch_ = std::make_unique<breakpoints::Watchpoints>(
      *s->api_, *s->arbiter_,
      [m](TaskId t, std::uint64_t addr, int size) { return m->read_memory(t, addr, size); });
  s->ksyms_ = std::make_unique<breakpoints::KernelSymbols>(breakpoints::task_size_max(config.arch));
  s->ksym_ = std::make_unique<breakpoints::KsymTracer>(*s->api_, *s->ksyms_);
  SchedulerObserver* observer = s.get();
  DebugExceptionHandler* handler = s.get();
  BtsInterruptHandler* pmi = s.get();
  HWARB_CHECK(s->machine_->add_observer(observer).has_value(), "add the scheduler observer");
  HWARB_CHECK(s->machine_->set_debug_handler(handler).has_value(), "set the debug handler");
  HWARB_CHECK(s->machine_->set_bts_interrupt_handler(pmi).has_value(), "set the BTS PMI handler");
  return s;
}

System::~System() {
  // Handles first (they close events on the core), then the core, then the machine.
  ksym_.reset();
  watch_.reset();
  traced_.clear();
  api_.reset();
  ptrace_.reset();
  ptrace_bts_.reset();
  core_.reset();
  bts_pmu_.reset();
  tracer_.reset();
  ignore_error(machine_->remove_observer(this), "teardown: ENOENT if never added");
  ignore_error(machine_->set_debug_handler(nullptr), "teardown, outside any callback");
  ignore_error(machine_->set_bts_interrupt_handler(nullptr), "teardown, outside any callback");
}

void System::on_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next) {
  if (prev) HWARB_CHECK(core_->sched_out(cpu, *prev).has_value(), "core sched_out");
  HWARB_CHECK(tracer_->on_switch(cpu, prev, next, machine_->now()).has_value(), "BTS switch");
  if (next) HWARB_CHECK(core_->sched_in(cpu, *next).has_value(), "core sched_in");
}

void System::on_tick(CpuId cpu) {
  HWARB_CHECK(core_->tick(cpu).has_value(), "core tick");
}

Result<void> System::on_fork(TaskId parent, TaskId child) {
  return core_->fork(parent, child);
}

void System::on_fork_rollback(TaskId, TaskId child) {
  HWARB_CHECK(core_->exit(child).has_value(), "core exit of a vetoed child");
}

void System::on_exit(TaskId task) {
  HWARB_CHECK(core_->exit(task).has_value(), "core exit");
  watch_->forget_task(task);
  api_->flush_ptrace_hw_breakpoint(task);
  tracer_->on_exit(task);
  ptrace_bts_->release(task);
  if (traced_.erase(task) != 0) exited_.insert(task);
}

void System::on_cpu_online(CpuId cpu) {
  HWARB_CHECK(arbiter_->set_cpu_online(cpu, true).has_value(), "arbiter online");
  HWARB_CHECK(core_->set_cpu_online(cpu, true).has_value(), "core online");
}

void System::on_cpu_offline(CpuId cpu) {
  HWARB_CHECK(core_->set_cpu_online(cpu, false).has_value(), "core offline");
  HWARB_CHECK(arbiter_->set_cpu_online(cpu, false).has_value(), "arbiter offline");
}

void System::on_debug_exception(const DebugException& e) {
  breakpoints::DebugTrap trap;
  trap.dr6 = e.dr6;
  pmu::Sample& sample = trap.sample;
  sample.ip = e.ip;
  sample.addr = e.addr;
  sample.task = e.task;
  sample.cpu = e.cpu;
  sample.time = e.time;
  sample.access = access_kind(e.kind);
  sample.size = e.size;
  sample.old_value = e.old_value;
  sample.new_value = e.new_value;
  if (e.kernel) {
    if (e.task == TaskId{}) sample.task.reset();
    trap.kernel = true;
    if (const std::uint64_t consumed = bp_pmu_->handle(trap); consumed != 0) {
      auto dr6 = machine_->dr6(e.cpu);
      HWARB_CHECK(dr6.has_value(), "dr6 of the trapping CPU");
      HWARB_CHECK(machine_->set_dr6(e.cpu, *dr6 & ~consumed).has_value(), "clear DR6");
    }
    return;
  }
  ptrace_->begin_exception(e.task);
  const std::uint64_t consumed = bp_pmu_->handle(trap);
  if (consumed != 0) {
    auto dr6 = machine_->dr6(e.cpu);
    HWARB_CHECK(dr6.has_value(), "dr6 of the trapping CPU");
    HWARB_CHECK(machine_->set_dr6(e.cpu, *dr6 & ~consumed).has_value(), "clear DR6");
  }
  const ptrace_compat::DebugException ex = ptrace_->end_exception(e.task, e.dr6, consumed);
  auto it = traced_.find(e.task);
  if (it == traced_.end()) {
    ptrace_->set_virtual_dr6(e.task, ex.virtual_dr6);
    return;
  }
  Traced& t = it->second;
  if (t.stop) {
    t.pending.push_back(ex);
    return;
  }
  take_effect(e.task, t, ex);
}

void System::take_effect(TaskId task, Traced& t, const ptrace_compat::DebugException& ex) {
  ptrace_->set_virtual_dr6(task, ex.virtual_dr6);
  if (ex.sigtrap) {
    t.stop = SIGTRAP;
    HWARB_CHECK(machine_->set_stopped(task, true).has_value(), "stop a traced task");
  }
}

Result<void> System::ptrace_attach(TaskId task) {
  if (auto r = api_->check_task(task); !r) return r;
  if (traced_.contains(task)) {
    return make_error(ErrorCode::kPerm,
                      "task: " + std::to_string(task.value()) + " is traced already");
  }
  traced_[task].stop = SIGSTOP;
  HWARB_CHECK(machine_->set_stopped(task, true).has_value(), "stop an attached task");
  return {};
}

Result<void> System::ptrace_check_stopped(TaskId task) const {
  if (auto r = api_->check_task(task); !r) return r;
  auto it = traced_.find(task);
  if (it == traced_.end()) {
    return make_error(ErrorCode::kSrch, "task: " + std::to_string(task.value()) + " is not traced");
  }
  if (!it->second.stop) {
    return make_error(ErrorCode::kSrch, "task: " + std::to_string(task.value()) +
                                            " is running, not in a ptrace stop");
  }
  return {};
}

Result<void> System::ptrace_detach(TaskId task) {
  if (auto r = ptrace_check_stopped(task); !r) return r;
  ptrace_release(task);
  return {};
}

void System::ptrace_release(TaskId task) {
  exited_.erase(task);
  if (traced_.erase(task) == 0) return;
  HWARB_CHECK(machine_->set_single_step(task, false).has_value(), "single-step off at detach");
  HWARB_CHECK(machine_->set_stopped(task, false).has_value(), "resume at detach");
}

Result<std::optional<ptrace_compat::Stop>> System::ptrace_wait(TaskId task,
                                                               ptrace_compat::WaitMode mode) {
  // The task is gone from the machine, so this comes before check_task; reported once (reaped).
  if (exited_.erase(task) != 0) return ptrace_compat::Stop::exited(0);
  if (auto r = api_->check_task(task); !r) return std::unexpected(r.error());
  auto it = traced_.find(task);
  if (it == traced_.end()) {
    return make_error(ErrorCode::kSrch, "task: " + std::to_string(task.value()) + " is not traced");
  }
  if (!it->second.stop) {
    if (mode == ptrace_compat::WaitMode::kBlock) {
      return make_error(ErrorCode::kAgain,
                        "task: " + std::to_string(task.value()) +
                            " is running, and only its machine's caller can make it stop");
    }
    return std::optional<ptrace_compat::Stop>{};
  }
  auto dr6 = ptrace_->get_debugreg(task, 6);
  if (!dr6) return std::unexpected(dr6.error());
  return std::optional<ptrace_compat::Stop>{ptrace_compat::Stop{*it->second.stop, *dr6}};
}

Result<void> System::ptrace_resume(TaskId task, bool step) {
  if (auto r = ptrace_check_stopped(task); !r) return r;
  if (auto r = machine_->set_single_step(task, step); !r) return r;
  Traced& t = traced_[task];
  t.stop.reset();
  if (!step) {
    std::erase_if(t.pending, [](const ptrace_compat::DebugException& ex) {
      return ex.virtual_dr6 == x86::dr6::kSingleStep;
    });
  }
  HWARB_CHECK(machine_->set_stopped(task, false).has_value(), "resume a traced task");
  while (!t.pending.empty() && !t.stop) {
    const ptrace_compat::DebugException ex = t.pending.front();
    t.pending.pop_front();
    take_effect(task, t, ex);
  }
  return {};
}

void System::on_bts_interrupt(CpuId cpu) {
  HWARB_CHECK(tracer_->on_interrupt(cpu).has_value(), "BTS interrupt");
}

void System::program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
                     std::uint64_t debugctl) {
  HWARB_CHECK(machine_->set_ds_area(cpu, area, buffer).has_value(), "install the DS area");
  auto old = machine_->debugctl(cpu);
  HWARB_CHECK(old.has_value(), "debugctl of a possible CPU");
  const std::uint64_t value =
      (*old & ~x86::debugctl::kBtsMask) | (debugctl & x86::debugctl::kBtsMask);
  HWARB_CHECK(machine_->set_debugctl(cpu, value).has_value(), "set debugctl");
}

x86::DsArea System::ds_area(CpuId cpu) const {
  auto area = machine_->ds_area(cpu);
  HWARB_CHECK(area.has_value(), "the DS area the tracer installed");
  return *area;
}

void System::set_bts_index(CpuId cpu, std::uint64_t index) {
  HWARB_CHECK(machine_->set_bts_index(cpu, index).has_value(), "move bts_index");
}

void System::on_bts_full(bts::ContextId context, std::optional<TaskId> task) {
  if (!task || !ptrace_bts_ || !ptrace_bts_->is_full_context(context)) return;
  auto it = traced_.find(*task);
  if (it == traced_.end() || it->second.stop) return;
  it->second.stop = ptrace_compat::kBtsFullSignal;
  HWARB_CHECK(machine_->set_stopped(*task, true).has_value(),
              "stop a task whose BTS buffer filled");
}

// The PMU programs the host image; the CPU's registers follow unless a guest runs there.
std::uint64_t System::dr7(CpuId cpu) const {
  return host_regs_.at(static_cast<std::size_t>(cpu.value())).dr7;
}

void System::set_dr7(CpuId cpu, std::uint64_t value) {
  host_regs_.at(static_cast<std::size_t>(cpu.value())).dr7 = value;
  if (*machine_->in_guest(cpu)) return;
  HWARB_CHECK(machine_->set_dr7(cpu, value).has_value(), "set dr7");
}

void System::set_address(CpuId cpu, int slot, std::uint64_t addr) {
  HWARB_CHECK(slot >= 0 && slot < x86::kSlots, "DRn slot");
  host_regs_.at(static_cast<std::size_t>(cpu.value())).dr[slot] = addr;
  if (*machine_->in_guest(cpu)) return;
  HWARB_CHECK(machine_->set_debug_address(cpu, slot, addr).has_value(), "set DRn");
}

}  // namespace hwarb::sim

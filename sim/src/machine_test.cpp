#include "hwarb/sim/machine.h"

#include <gtest/gtest.h>

#include "hwarb/x86/debugreg.h"

#include <algorithm>
#include <string>
#include <vector>

namespace hwarb::sim {
namespace {

std::unique_ptr<Machine> make(int cpus) {
  auto m = Machine::create(cpus);
  EXPECT_TRUE(m.has_value());
  return std::move(*m);
}

std::string name(std::optional<TaskId> t) {
  return t ? std::to_string(t->value()) : "idle";
}

// Logs every callback as a line.
class Recorder : public SchedulerObserver, public DebugExceptionHandler {
 public:
  std::vector<std::string> log;
  void on_switch(CpuId c, std::optional<TaskId> p, std::optional<TaskId> n) override {
    log.push_back("switch " + std::to_string(c.value()) + " " + name(p) + "->" + name(n));
  }
  void on_tick(CpuId c) override { log.push_back("tick " + std::to_string(c.value())); }
  Result<void> on_fork(TaskId p, TaskId c) override {
    log.push_back("fork " + name(p) + " " + name(c));
    return {};
  }
  void on_fork_rollback(TaskId p, TaskId c) override {
    log.push_back("rollback " + name(p) + " " + name(c));
  }
  void on_exit(TaskId t) override { log.push_back("exit " + name(t)); }
  void on_cpu_online(CpuId c) override { log.push_back("online " + std::to_string(c.value())); }
  void on_cpu_offline(CpuId c) override { log.push_back("offline " + std::to_string(c.value())); }
  void on_debug_exception(const DebugException& e) override {
    log.push_back("db cpu=" + std::to_string(e.cpu.value()) + " task=" + name(e.task) +
                  " dr6=" + std::to_string(e.dr6) + " ip=" + std::to_string(e.ip) +
                  " addr=" + std::to_string(e.addr) + " size=" + std::to_string(e.size) + " kind=" +
                  std::to_string(static_cast<int>(e.kind)) + " old=" + std::to_string(e.old_value) +
                  " new=" + std::to_string(e.new_value) + " t=" + std::to_string(e.time));
  }
};

TEST(Machine, CreateBounds) {
  EXPECT_EQ(Machine::create(0).error().code(), ErrorCode::kInval);
  EXPECT_EQ(Machine::create(65537).error().code(), ErrorCode::kInval);
  EXPECT_NE(Machine::create(0).error().message().find("cpus: 0"), std::string::npos);
  auto m = make(65536);
  EXPECT_EQ(m->possible_cpus(), 65536);
  EXPECT_EQ(m->online_cpus(), 65536);
}

TEST(Machine, CpuErrorsNameTheField) {
  auto m = make(4);
  auto r = m->switch_to_idle(CpuId(9));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(r.error().message(), "cpu: 9 is not a possible CPU (0..3)");
  EXPECT_EQ(m->tick(CpuId(-1)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(m->dr7(CpuId(4)).error().code(), ErrorCode::kInval);
  auto t = m->switch_to(CpuId(0), TaskId(42));
  EXPECT_EQ(t.error().code(), ErrorCode::kSrch);
  EXPECT_EQ(t.error().message(), "task: 42 does not exist");
}

TEST(Machine, SwitchRules) {
  auto m = make(2);
  Recorder rec;
  ASSERT_TRUE(m->add_observer(&rec));
  TaskId a = *m->create_task(), b = *m->create_task();
  EXPECT_EQ(a.value(), 1);
  EXPECT_EQ(b.value(), 2);
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  EXPECT_EQ(*m->current(CpuId(0)), a);
  EXPECT_EQ(*m->running_on(a), CpuId(0));
  // A task runs on at most one CPU; the failed call changes nothing.
  auto busy = m->switch_to(CpuId(1), a);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code(), ErrorCode::kBusy);
  EXPECT_EQ(busy.error().message(), "task: 1 is already running on cpu 0");
  EXPECT_EQ(*m->current(CpuId(1)), std::nullopt);
  // Same task again: no-op, no report.
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  ASSERT_TRUE(m->switch_to(CpuId(0), b));
  EXPECT_EQ(*m->running_on(a), std::nullopt);
  ASSERT_TRUE(m->switch_to(CpuId(1), a));
  ASSERT_TRUE(m->switch_to_idle(CpuId(0)));
  ASSERT_TRUE(m->switch_to_idle(CpuId(0)));  // already idle: no-op
  EXPECT_EQ(rec.log, (std::vector<std::string>{"switch 0 idle->1", "switch 0 1->2",
                                               "switch 1 idle->1", "switch 0 2->idle"}));
}

TEST(Machine, ClockAndTicks) {
  auto m = make(2);
  TaskId a = *m->create_task();
  EXPECT_EQ(m->now(), 0u);
  ASSERT_TRUE(m->tick(CpuId(1)));
  EXPECT_EQ(m->now(), kTickNs);
  EXPECT_EQ(*m->ticks(CpuId(1)), 1u);
  EXPECT_EQ(*m->ticks(CpuId(0)), 0u);
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  EXPECT_EQ(m->now(), kTickNs);  // switches are free
  ASSERT_TRUE(m->access(CpuId(0), a, AccessKind::kWrite, 0x10, 4, 1));
  ASSERT_TRUE(m->exec(CpuId(0), a, 0x400000));
  EXPECT_EQ(m->now(), kTickNs + 2 * kAccessNs);
  // Failed calls do not advance the clock.
  EXPECT_FALSE(m->access(CpuId(1), a, AccessKind::kWrite, 0x10, 4, 1));
  EXPECT_FALSE(m->access(CpuId(0), a, AccessKind::kWrite, 0x10, 3, 1));
  EXPECT_EQ(m->now(), kTickNs + 2 * kAccessNs);
}

TEST(Machine, Hotplug) {
  auto m = make(3);
  Recorder rec;
  ASSERT_TRUE(m->add_observer(&rec));
  TaskId a = *m->create_task();
  ASSERT_TRUE(m->switch_to(CpuId(1), a));
  auto busy = m->set_online(CpuId(1), false);
  EXPECT_EQ(busy.error().code(), ErrorCode::kBusy);
  EXPECT_EQ(busy.error().message(), "cpu: 1 is running task 1");
  EXPECT_TRUE(*m->is_online(CpuId(1)));
  ASSERT_TRUE(m->switch_to_idle(CpuId(1)));
  ASSERT_TRUE(m->set_debug_address(CpuId(1), 2, 0x1234));
  ASSERT_TRUE(m->set_online(CpuId(1), false));
  EXPECT_FALSE(*m->is_online(CpuId(1)));
  EXPECT_EQ(m->online_cpus(), 2);
  EXPECT_EQ(m->set_online(CpuId(1), false).error().code(), ErrorCode::kInval);
  // Everything that runs on a CPU is refused while it is offline.
  EXPECT_EQ(m->switch_to(CpuId(1), a).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(m->switch_to(CpuId(1), a).error().message(), "cpu: 1 is offline");
  EXPECT_EQ(m->switch_to_idle(CpuId(1)).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(m->tick(CpuId(1)).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(m->access(CpuId(1), a, AccessKind::kRead, 0, 1).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(m->exec(CpuId(1), a, 0).error().code(), ErrorCode::kNoDev);
  // Registers survive offline.
  EXPECT_EQ(*m->debug_address(CpuId(1), 2), 0x1234u);
  ASSERT_TRUE(m->set_online(CpuId(0), false));
  auto last = m->set_online(CpuId(2), false);
  EXPECT_EQ(last.error().code(), ErrorCode::kBusy);
  EXPECT_EQ(last.error().message(), "cpu: 2 is the last online CPU");
  ASSERT_TRUE(m->set_online(CpuId(1), true));
  EXPECT_EQ(m->set_online(CpuId(1), true).error().code(), ErrorCode::kInval);
  ASSERT_TRUE(m->switch_to(CpuId(1), a));
  EXPECT_EQ(rec.log, (std::vector<std::string>{"switch 1 idle->1", "switch 1 1->idle", "offline 1",
                                               "offline 0", "online 1", "switch 1 idle->1"}));
}

TEST(Machine, ForkCopiesMemoryAndExitSwitchesToIdle) {
  auto m = make(2);
  Recorder rec;
  ASSERT_TRUE(m->add_observer(&rec));
  TaskId p = *m->create_task();
  ASSERT_TRUE(m->write_memory(p, 0x1000, 8, 0x1122334455667788));
  ASSERT_TRUE(m->set_single_step(p, true));
  TaskId c = *m->fork(p);
  EXPECT_EQ(c.value(), 2);
  EXPECT_EQ(*m->parent(c), p);
  EXPECT_EQ(*m->parent(p), std::nullopt);
  EXPECT_EQ(*m->read_memory(c, 0x1000, 8), 0x1122334455667788u);
  ASSERT_TRUE(m->write_memory(c, 0x1000, 1, 0));
  EXPECT_EQ(*m->read_memory(p, 0x1000, 1), 0x88u);  // separate copies
  // The child does not inherit single-step: an access raises nothing.
  ASSERT_TRUE(m->switch_to(CpuId(0), c));
  EXPECT_EQ(m->access(CpuId(0), c, AccessKind::kRead, 0, 1)->exceptions, 0);
  EXPECT_EQ(m->fork(TaskId(99)).error().message(), "parent: 99 does not exist");
  EXPECT_EQ(m->fork(TaskId(99)).error().code(), ErrorCode::kSrch);
  // Exit of a running task switches its CPU to idle first.
  ASSERT_TRUE(m->exit(c));
  EXPECT_FALSE(m->task_exists(c));
  EXPECT_EQ(*m->current(CpuId(0)), std::nullopt);
  EXPECT_EQ(m->exit(c).error().code(), ErrorCode::kSrch);
  ASSERT_TRUE(m->exit(p));
  EXPECT_EQ(m->task_count(), 0u);
  EXPECT_EQ(rec.log, (std::vector<std::string>{"fork 1 2", "switch 0 idle->2", "switch 0 2->idle",
                                               "exit 2", "exit 1"}));
  EXPECT_EQ(m->create_task()->value(), 3);  // ids are never reused
}

class Veto : public SchedulerObserver {
 public:
  Result<void> on_fork(TaskId, TaskId) override {
    return make_error(ErrorCode::kNoSpc, "bp: no slot for the child");
  }
};

TEST(Machine, ForkVetoRollsBack) {
  auto m = make(1);
  Recorder first, third;
  Veto veto;
  ASSERT_TRUE(m->add_observer(&first));
  ASSERT_TRUE(m->add_observer(&veto));
  ASSERT_TRUE(m->add_observer(&third));
  EXPECT_EQ(m->add_observer(&veto).error().code(), ErrorCode::kExist);
  TaskId p = *m->create_task();
  auto r = m->fork(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(m->task_count(), 1u);
  EXPECT_EQ(first.log, (std::vector<std::string>{"fork 1 2", "rollback 1 2"}));
  EXPECT_TRUE(third.log.empty());
  ASSERT_TRUE(m->remove_observer(&veto));
  EXPECT_EQ(m->remove_observer(&veto).error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(m->fork(p)->value(), 3);
}

// A callback may touch debug registers and memory but not schedule.
class Reentrant : public SchedulerObserver, public DebugExceptionHandler {
 public:
  Machine* m = nullptr;
  std::vector<ErrorCode> refused;
  bool wrote_regs = false;
  void on_switch(CpuId cpu, std::optional<TaskId>, std::optional<TaskId> next) override {
    refused.push_back(m->switch_to_idle(cpu).error().code());
    refused.push_back(m->tick(cpu).error().code());
    refused.push_back(m->create_task().error().code());
    if (next) refused.push_back(m->exit(*next).error().code());
    if (next) refused.push_back(m->access(cpu, *next, AccessKind::kRead, 0, 1).error().code());
    wrote_regs = m->set_dr7(cpu, 0).has_value() && m->set_debug_address(cpu, 0, 5).has_value();
  }
  void on_debug_exception(const DebugException& e) override {
    EXPECT_EQ(m->exec(e.cpu, e.task, 0).error().message(),
              "machine: exec called from inside an observer callback");
    EXPECT_TRUE(m->set_dr6(e.cpu, 0));
    EXPECT_TRUE(m->write_memory(e.task, 0, 1, 7));
  }
};

TEST(Machine, ReentrancyRules) {
  auto m = make(1);
  Reentrant r;
  r.m = m.get();
  ASSERT_TRUE(m->add_observer(&r));
  ASSERT_TRUE(m->set_debug_handler(&r));
  TaskId a = *m->create_task();
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  EXPECT_EQ(r.refused, (std::vector<ErrorCode>(5, ErrorCode::kBusy)));
  EXPECT_TRUE(r.wrote_regs);
  EXPECT_EQ(*m->current(CpuId(0)), a);
  ASSERT_TRUE(m->set_single_step(a, true));
  auto o = m->access(CpuId(0), a, AccessKind::kRead, 0x100, 1);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->exceptions, 1);
  EXPECT_EQ(*m->dr6(CpuId(0)), 0u);  // the handler cleared it
  EXPECT_EQ(*m->read_memory(a, 0, 1), 7u);
}

TEST(Machine, ScriptedWorkNeedsTheRunningTask) {
  auto m = make(2);
  TaskId a = *m->create_task(), b = *m->create_task();
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  auto r = m->access(CpuId(0), b, AccessKind::kWrite, 0, 4, 1);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(r.error().message(), "task: 2 is not running on cpu 0 (running: 1)");
  EXPECT_EQ(m->exec(CpuId(1), a, 0).error().message(),
            "task: 1 is not running on cpu 1 (running: idle)");
  EXPECT_EQ(m->access(CpuId(0), TaskId(7), AccessKind::kRead, 0, 1).error().code(),
            ErrorCode::kSrch);
  EXPECT_EQ(m->access(CpuId(0), a, AccessKind::kExec, 0, 1).error().code(), ErrorCode::kInval);
  EXPECT_EQ(m->access(CpuId(0), a, AccessKind::kRead, 0, 16).error().message(),
            "size: 16 is not 1, 2, 4 or 8");
  EXPECT_EQ(m->access(CpuId(0), a, AccessKind::kRead, 0xffff'ffff'ffff'fffe, 4).error().message(),
            "addr: 0xfffffffffffffffe + 4 wraps past 2^64");
  EXPECT_EQ(*m->read_memory(b, 0, 8), 0u);  // nothing was written
}

TEST(Machine, AccessValuesLittleEndian) {
  auto m = make(1);
  TaskId a = *m->create_task();
  ASSERT_TRUE(m->switch_to(CpuId(0), a));
  auto w = m->access(CpuId(0), a, AccessKind::kWrite, 0x2000, 4, 0xffff'aabb'ccdd'eeff);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->old_value, 0u);
  EXPECT_EQ(w->new_value, 0xccdd'eeffu);  // truncated to the access size
  auto r = m->access(CpuId(0), a, AccessKind::kRead, 0x2001, 2);
  EXPECT_EQ(r->old_value, 0xddeeu);  // bytes 0x2001, 0x2002 = ee, dd
  EXPECT_EQ(r->new_value, 0xddeeu);
  EXPECT_EQ(*m->read_memory(a, 0x2000, 8), 0xccdd'eeffu);
  EXPECT_EQ(m->read_memory(a, 0, 5).error().code(), ErrorCode::kInval);
  EXPECT_EQ(m->write_memory(TaskId(9), 0, 1, 0).error().code(), ErrorCode::kSrch);
}

TEST(Machine, DebugRegisterAccessors) {
  auto m = make(2);
  EXPECT_EQ(*m->debug_registers(CpuId(1)), DebugRegisters{});
  ASSERT_TRUE(m->set_debug_address(CpuId(1), 3, 0xdead));
  EXPECT_EQ(m->set_debug_address(CpuId(1), 4, 0).error().message(),
            "slot: 4 is not a debug address register (0..3)");
  EXPECT_EQ(m->debug_address(CpuId(1), -1).error().code(), ErrorCode::kInval);
  EXPECT_EQ(m->set_dr7(CpuId(1), 1ull << 32).error().code(), ErrorCode::kInval);
  ASSERT_TRUE(m->set_dr7(CpuId(1), 0x402));
  ASSERT_TRUE(m->set_dr6(CpuId(1), 0x4001));
  EXPECT_EQ(*m->dr6_hardware(CpuId(1)), 0xffff0ff0u ^ 0x4001u);
  EXPECT_EQ(*m->dr6_hardware(CpuId(0)), 0xffff0ff0u);
  DebugRegisters want;
  want.dr[3] = 0xdead;
  want.dr7 = 0x402;
  want.dr6 = 0x4001;
  EXPECT_EQ(*m->debug_registers(CpuId(1)), want);
  EXPECT_EQ(*m->debug_registers(CpuId(0)), DebugRegisters{});
}

// A fixed script over 8 CPUs and a few tasks; returns every callback.
std::vector<std::string> run_script() {
  auto m = make(8);
  Recorder rec;
  EXPECT_TRUE(m->add_observer(&rec));
  EXPECT_TRUE(m->set_debug_handler(&rec));
  std::vector<TaskId> tasks;
  for (int i = 0; i < 4; ++i) tasks.push_back(*m->create_task());
  tasks.push_back(*m->fork(tasks[0]));
  for (int c = 0; c < 8; ++c) {
    const int data = c % 4, code = (c + 1) % 4;
    EXPECT_TRUE(m->set_debug_address(CpuId(c), data, 0x1000 + 8 * c));
    EXPECT_TRUE(m->set_debug_address(CpuId(c), code, 0x1000 + 8 * ((c + 3) % 8)));
    std::uint64_t dr7 = x86::dr7::install(
        0, data, c % 2 ? x86::DrType::kWrite : x86::DrType::kReadWrite, x86::DrLen::k8);
    dr7 = x86::dr7::install(dr7, code, x86::DrType::kExecute, x86::DrLen::k1);
    EXPECT_TRUE(m->set_dr7(CpuId(c), dr7));
  }
  std::uint64_t x = 12345;
  for (int step = 0; step < 2000; ++step) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int cpu = static_cast<int>((x >> 33) % 8);
    const TaskId t = tasks[(x >> 40) % tasks.size()];
    switch ((x >> 50) % 5) {
      case 0:
        (void)m->switch_to(CpuId(cpu), t);
        break;
      case 1:
        (void)m->tick(CpuId(cpu));
        break;
      case 2:
        (void)m->exec(CpuId(cpu), t, 0x1000 + 8 * ((x >> 20) % 8));
        break;
      default:
        (void)m->access(CpuId(cpu), t, (x & 1) ? AccessKind::kWrite : AccessKind::kRead,
                        0x1000 + ((x >> 10) % 80), 4, x);
        break;
    }
  }
  return rec.log;
}

TEST(Machine, Deterministic) {
  auto a = run_script();
  auto b = run_script();
  EXPECT_GT(a.size(), 300u);
  EXPECT_GT(
      std::count_if(a.begin(), a.end(), [](const std::string& l) { return l.starts_with("db "); }),
      10);
  EXPECT_EQ(a, b);
}

TEST(Machine, Smoke4096Cpus) {
  auto m = make(4096);
  std::vector<TaskId> tasks;
  for (int i = 0; i < 4096; ++i) tasks.push_back(*m->create_task());
  for (int c = 0; c < 4096; ++c) {
    ASSERT_TRUE(m->set_debug_address(CpuId(c), 0, 0x5000));
    ASSERT_TRUE(m->set_dr7(CpuId(c), x86::dr7::install(0, 0, x86::DrType::kWrite, x86::DrLen::k8)));
    ASSERT_TRUE(m->switch_to(CpuId(c), tasks[static_cast<std::size_t>(c)]));
  }
  int hits = 0;
  for (int c = 0; c < 4096; ++c) {
    auto o = m->access(CpuId(c), tasks[static_cast<std::size_t>(c)], AccessKind::kWrite, 0x5000, 8,
                       static_cast<std::uint64_t>(c));
    ASSERT_TRUE(o);
    hits += o->exceptions;
    ASSERT_TRUE(m->tick(CpuId(c)));
  }
  EXPECT_EQ(hits, 4096);
  for (int c = 4095; c >= 1; --c) {
    ASSERT_TRUE(m->switch_to_idle(CpuId(c)));
    ASSERT_TRUE(m->set_online(CpuId(c), false));
  }
  EXPECT_EQ(m->online_cpus(), 1);
  for (int c = 1; c < 4096; ++c) ASSERT_TRUE(m->set_online(CpuId(c), true));
  EXPECT_EQ(m->online_cpus(), 4096);
  EXPECT_EQ(m->now(), 4096 * (kTickNs + kAccessNs));
}

}  // namespace
}  // namespace hwarb::sim

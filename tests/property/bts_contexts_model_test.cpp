// Property test of BTS tracing contexts on the whole simulated stack (sim::System: the machine's
// BTS facility, the Tracer, the System's wiring): random machines, tasks, context switches,
// branches, and sets of contexts opened, drained and closed at random times.
//
// The reference is the global branch log: every branch the test makes gets a unique `from`
// address (a sequence number in it), so each drained record names its log entry. For each context
// and each drain interval (from its open or its previous drain to this drain), the reference is
// the log filtered the way the context is defined — its task (or every task, on the CPUs it
// covers) and its privilege (kernel iff from >= TASK_SIZE_MAX). The rules checked per mode
// (tracer.h), with `ref` that filtered interval and `got` the drained records:
//   - every record of `got` is in `ref`, once (nothing foreign, nothing twice), and `got` keeps the
//     branch order of each CPU; a task context keeps the global order (its task runs on one CPU
//     at a time and every switch flushes);
//   - lost == |ref| - |got| (every loss is reported, nothing is reported twice);
//   - aux and signal: nothing is lost unless the buffer is full, and the records kept are the
//     oldest: per CPU, `got` is a prefix of `ref` (without a consumer in between, a full buffer
//     stays full until the drain);
//   - wrap and snapshot: exactly the newest capacity records: |got| == min(capacity, |ref|) and,
//     per CPU, `got` is a suffix of `ref`.
// Across CPUs the records of a global context are in flush order (tracer.h), which the checks
// above allow without modelling it.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "hwarb/bts/tracer.h"
#include "hwarb/sim/system.h"

namespace hwarb::sim {
namespace {

using bts::BufferMode;
using bts::ContextConfig;
using bts::ContextId;
using bts::TraceRecord;

constexpr std::uint64_t kUserBase = 0x400000;
constexpr std::uint64_t kKernelBase = 0xffffffff81000000;

enum class OpKind { kSwitch, kIdle, kBranch, kOpen, kClose, kDrain };

struct Op {
  OpKind kind = OpKind::kBranch;
  int cpu = 0;
  int task = 0;  // index into the tasks
  bool kernel = false;
  bool global = false;
  bool all_cpus = true;
  std::uint32_t flags = bts::kUser | bts::kKernel;
  BufferMode mode = BufferMode::kAux;
  int records = 1;
  int pick = 0;  // which open context
};

rc::Gen<Op> gen_op() {
  return rc::gen::exec([] {
    Op op;
    op.kind = *rc::gen::weightedElement<OpKind>({{3, OpKind::kSwitch},
                                                 {1, OpKind::kIdle},
                                                 {20, OpKind::kBranch},
                                                 {2, OpKind::kOpen},
                                                 {1, OpKind::kClose},
                                                 {2, OpKind::kDrain}});
    op.cpu = *rc::gen::inRange(0, 4);
    op.task = *rc::gen::inRange(0, 4);
    op.kernel = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    op.global = *rc::gen::arbitrary<bool>();
    op.all_cpus = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
    op.flags =
        *rc::gen::element<std::uint32_t>(std::uint32_t{bts::kUser}, std::uint32_t{bts::kKernel},
                                         std::uint32_t{bts::kUser | bts::kKernel});
    op.mode = *rc::gen::element(BufferMode::kAux, BufferMode::kSnapshot, BufferMode::kWrap,
                                BufferMode::kSignal);
    op.records = *rc::gen::weightedElement<int>({{1, 1}, {2, 3}, {3, 8}, {3, 40}, {2, 200}});
    op.pick = *rc::gen::inRange(0, 64);
    return op;
  });
}

struct LogEntry {
  std::uint64_t seq = 0;
  int cpu = 0;
  TaskId task{};
  bool kernel = false;
  std::uint64_t to = 0;
};

struct OpenContext {
  ContextId id{};
  ContextConfig config;
  std::size_t capacity = 0;  // records
  std::uint64_t since = 0;   // the first log sequence number of the current interval
};

bool wants(const OpenContext& c, const LogEntry& e) {
  if (c.config.task ? *c.config.task != e.task : (c.config.cpu && c.config.cpu->value() != e.cpu)) {
    return false;
  }
  return e.kernel ? (c.config.flags & bts::kKernel) != 0 : (c.config.flags & bts::kUser) != 0;
}

// Is `part` a prefix (or suffix) of `whole`?
bool is_prefix(const std::vector<std::uint64_t>& part, const std::vector<std::uint64_t>& whole) {
  return part.size() <= whole.size() && std::equal(part.begin(), part.end(), whole.begin());
}
bool is_suffix(const std::vector<std::uint64_t>& part, const std::vector<std::uint64_t>& whole) {
  return part.size() <= whole.size() && std::equal(part.rbegin(), part.rend(), whole.rbegin());
}

class Harness {
 public:
  Harness(int cpus, int tasks) : cpus_(cpus) {
    SystemConfig sc;
    sc.cpus = cpus;
    system_ = std::move(*System::create(sc));
    for (int i = 0; i < tasks; ++i) tasks_.push_back(*system_->machine().create_task());
  }

  void apply(const Op& op) {
    Machine& m = system_->machine();
    const CpuId cpu(op.cpu % cpus_);
    const TaskId task = tasks_[static_cast<std::size_t>(op.task) % tasks_.size()];
    switch (op.kind) {
      case OpKind::kSwitch:
        (void)m.switch_to(cpu, task);  // EBUSY when it runs elsewhere: nothing happens
        return;
      case OpKind::kIdle:
        RC_ASSERT(m.switch_to_idle(cpu).has_value());
        return;
      case OpKind::kBranch: {
        auto cur = m.current(cpu);
        RC_ASSERT(cur.has_value());
        if (!*cur) return;
        const std::uint64_t seq = log_.size();
        const std::uint64_t from = (op.kernel ? kKernelBase : kUserBase) + seq * 16;
        // Every third branch crosses between user and kernel space (a syscall or its return):
        // the privilege is the source's.
        const bool cross = seq % 3 == 0;
        const std::uint64_t to = ((op.kernel != cross) ? kKernelBase : kUserBase) + seq * 16 + 8;
        RC_ASSERT(m.branch(cpu, **cur, from, to).has_value());
        log_.push_back(LogEntry{seq, cpu.value(), **cur, op.kernel, to});
        by_from_[from] = seq;
        return;
      }
      case OpKind::kOpen: {
        ContextConfig c;
        if (!op.global) c.task = task;
        if (op.global && !op.all_cpus) c.cpu = cpu;
        c.flags = op.flags;
        c.mode = op.mode;
        c.size = static_cast<std::size_t>(op.records) * bts::kTraceRecordSize;
        auto id = system_->tracer().open(c);
        RC_ASSERT(id.has_value());
        auto st = system_->tracer().status(*id);
        RC_ASSERT(st.has_value());
        RC_ASSERT(st->capacity == static_cast<std::size_t>(op.records));
        open_.push_back(OpenContext{*id, c, st->capacity, log_.size()});
        return;
      }
      case OpKind::kClose: {
        if (open_.empty()) return;
        const std::size_t i = static_cast<std::size_t>(op.pick) % open_.size();
        RC_ASSERT(system_->tracer().close(open_[i].id).has_value());
        open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
      case OpKind::kDrain: {
        if (open_.empty()) return;
        drain_and_check(open_[static_cast<std::size_t>(op.pick) % open_.size()]);
        return;
      }
    }
  }

  void drain_all() {
    for (OpenContext& c : open_) drain_and_check(c);
  }
  std::size_t branches() const { return log_.size(); }

 private:
  void drain_and_check(OpenContext& c) {
    auto d = system_->tracer().drain(c.id);
    RC_ASSERT(d.has_value());
    std::vector<std::uint64_t> ref;  // sequence numbers, log order
    for (std::uint64_t s = c.since; s < log_.size(); ++s) {
      if (wants(c, log_[s])) ref.push_back(s);
    }
    c.since = log_.size();
    std::vector<std::uint64_t> got;
    std::set<std::uint64_t> seen;
    for (const TraceRecord& r : d->records) {
      RC_ASSERT(r.kind == bts::RecordKind::kBranch);
      auto it = by_from_.find(r.from);
      RC_ASSERT(it != by_from_.end());
      RC_ASSERT(r.to == log_[it->second].to);
      RC_ASSERT(seen.insert(it->second).second);
      RC_ASSERT(std::binary_search(ref.begin(), ref.end(), it->second));
      got.push_back(it->second);
    }
    RC_ASSERT(d->lost == ref.size() - got.size());
    // Per CPU, in branch order, and the mode's prefix/suffix rule.
    std::map<int, std::vector<std::uint64_t>> ref_cpu;
    std::map<int, std::vector<std::uint64_t>> got_cpu;
    for (std::uint64_t s : ref) ref_cpu[log_[s].cpu].push_back(s);
    for (std::uint64_t s : got) got_cpu[log_[s].cpu].push_back(s);
    const bool keeps_newest =
        c.config.mode == BufferMode::kWrap || c.config.mode == BufferMode::kSnapshot;
    for (const auto& [cpu, g] : got_cpu) {
      const auto& r = ref_cpu[cpu];
      const bool kept_right = keeps_newest ? is_suffix(g, r) : is_prefix(g, r);
      RC_ASSERT(kept_right);
    }
    if (keeps_newest) {
      RC_ASSERT(got.size() == std::min<std::size_t>(c.capacity, ref.size()));
    } else if (c.config.mode == BufferMode::kSignal) {
      RC_ASSERT(got.size() == std::min<std::size_t>(c.capacity, ref.size()));
    } else {
      // The drain emptied the ring, and one record never needs padding: the first one fits.
      RC_ASSERT(got.size() >= std::min<std::size_t>(1, ref.size()));
    }
    if (c.config.task) {
      const bool in_order = keeps_newest ? is_suffix(got, ref) : is_prefix(got, ref);
      RC_ASSERT(in_order);
    }
  }

  int cpus_;
  std::unique_ptr<System> system_;
  std::vector<TaskId> tasks_;
  std::vector<LogEntry> log_;
  std::map<std::uint64_t, std::uint64_t> by_from_;
  std::vector<OpenContext> open_;
};

RC_GTEST_PROP(BtsContextsModel, DrainedRecordsAreTheReferenceFilterOfTheBranchLog, ()) {
  const int cpus = *rc::gen::inRange(1, 5);
  const int tasks = *rc::gen::inRange(1, 5);
  const auto ops = *rc::gen::scale(8.0, rc::gen::container<std::vector<Op>>(gen_op()));
  Harness h(cpus, tasks);
  for (const Op& op : ops) h.apply(op);
  h.drain_all();
  RC_TAG(h.branches() > 200 ? "many branches" : "few branches");
}

// Fixed: a long stream through small DS buffers and a ring that never fills loses nothing.
TEST(BtsContextsModel, AuxContextsLoseNothingWhenTheyHaveRoom) {
  SystemConfig sc;
  sc.cpus = 2;
  auto system = std::move(*System::create(sc));
  Machine& m = system->machine();
  const TaskId a = *m.create_task();
  const TaskId b = *m.create_task();
  ContextConfig task_ctx;
  task_ctx.task = a;
  task_ctx.size = 100000 * bts::kTraceRecordSize;
  ContextConfig global = task_ctx;
  global.task.reset();
  const ContextId ta = *system->tracer().open(task_ctx);
  const ContextId g = *system->tracer().open(global);
  ASSERT_TRUE(m.switch_to(CpuId(0), a).has_value());
  ASSERT_TRUE(m.switch_to(CpuId(1), b).has_value());
  std::uint64_t n_a = 0;
  for (std::uint64_t i = 0; i < 30000; ++i) {
    const CpuId cpu(static_cast<int>(i % 2));
    const TaskId t = i % 2 == 0 ? a : b;
    ASSERT_TRUE(m.branch(cpu, t, kUserBase + i * 16, kUserBase + i * 16 + 8).has_value());
    if (t == a) ++n_a;
    if (i % 7919 == 0) {  // migrate: a and b swap CPUs
      ASSERT_TRUE(m.switch_to_idle(CpuId(0)).has_value());
      ASSERT_TRUE(m.switch_to_idle(CpuId(1)).has_value());
      ASSERT_TRUE(m.switch_to(CpuId(0), a).has_value());
      ASSERT_TRUE(m.switch_to(CpuId(1), b).has_value());
    }
  }
  auto da = system->tracer().drain(ta);
  auto dg = system->tracer().drain(g);
  ASSERT_TRUE(da.has_value());
  ASSERT_TRUE(dg.has_value());
  EXPECT_EQ(da->records.size(), n_a);
  EXPECT_EQ(da->lost, 0u);
  EXPECT_EQ(dg->records.size(), 30000u);
  EXPECT_EQ(dg->lost, 0u);
  for (std::size_t i = 1; i < da->records.size(); ++i) {
    EXPECT_LT(da->records[i - 1].from, da->records[i].from);
  }
}

}  // namespace
}  // namespace hwarb::sim

// Stress test: many threads hammer one arbiter with reserve / release / modify / reserve_all on
// shared tasks and CPUs while a checker thread keeps verifying that no CPU's pool is
// oversubscribed and that the incremental counters match a recomputation. At the end the live
// reservations must be exactly what the model admits, and releasing them must empty the arbiter.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "model.h"

namespace hwarb::model {
namespace {

using arbiter::Arbiter;
using arbiter::ArchProfile;
using arbiter::Reservation;
using arbiter::SlotType;
using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_THREAD__)
constexpr int kIterationsPerThread = 40000;
constexpr auto kTimeBudget = std::chrono::seconds(12);
#else
constexpr int kIterationsPerThread = 200000;
constexpr auto kTimeBudget = std::chrono::seconds(3);
#endif
constexpr int kWorkers = 8;
constexpr int kTasks = 4;
constexpr std::size_t kMaxHeld = 6;

struct StressConfig {
  const char* name;
  ArbiterConfig config;
  bool hotplug;  // the checker also takes the last CPU offline and online again
};

class Worker {
 public:
  Worker(Arbiter& a, int index) : a_(a), rng_(0x5eed0000u + static_cast<unsigned>(index)) {}

  // Random request: task on one CPU, task on all CPUs, CPU-bound; pinned or flexible.
  Request random_request() {
    Request r;
    const int kind = pick(100);
    r.kind = kind < 97   ? ResourceKind::kBreakpoint
             : kind < 98 ? ResourceKind::kBts
             : kind < 99 ? ResourceKind::kPt
                         : ResourceKind::kLbr;
    switch (pick(3)) {
      case 0:
        r.cpu = CpuId(pick(a_.cpus()));
        break;
      case 1:
        r.task = TaskId(1 + pick(kTasks));
        r.cpu = CpuId(pick(a_.cpus()));
        break;
      default:
        r.task = TaskId(1 + pick(kTasks));
        break;
    }
    r.type = pick(2) ? SlotType::kData : SlotType::kInst;
    r.weight = is_exclusive(r.kind) ? 1 : 1 + pick(pick(4) == 0 ? 3 : 1);
    r.pinned = pick(3) != 0;
    r.id = RequestId(static_cast<std::uint64_t>(pick(1000)));
    return r;
  }

  void run(const std::atomic<bool>& stop, Clock::time_point deadline) {
    for (int i = 0; i < kIterationsPerThread && !stop.load(std::memory_order_relaxed); ++i) {
      if (i % 64 == 0 && Clock::now() > deadline) break;
      step();
    }
  }

  void step() {
    const int dice = pick(100);
    if (!held_.empty() && (dice < 35 || held_.size() >= kMaxHeld)) {
      const std::size_t k = static_cast<std::size_t>(pick(static_cast<int>(held_.size())));
      release_by(a_, held_[k], static_cast<unsigned>(pick(3)));
      EXPECT_FALSE(held_[k].valid());
      held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(k));
      ++released;
    } else if (!held_.empty() && dice < 55) {
      Reservation& r = held_[static_cast<std::size_t>(pick(static_cast<int>(held_.size())))];
      const Request old = r.request();
      Request next = random_request();
      next.task = old.task;
      next.kind = old.kind;
      if (!next.task && !next.cpu) next.cpu = CpuId(pick(a_.cpus()));
      if (is_exclusive(next.kind)) next.weight = 1;
      auto res = a_.modify(r, next);
      EXPECT_TRUE(r.valid());
      if (res) {
        EXPECT_EQ(r.request(), next);
        ++modified;
      } else {
        note(res.error());
        EXPECT_EQ(r.request(), old) << "a refused modify changed the reservation";
      }
    } else if (dice < 65) {
      std::vector<Request> group;
      for (int j = 0, n = 2 + pick(2); j < n; ++j) group.push_back(random_request());
      auto res = a_.reserve_all(group);
      if (res) {
        EXPECT_EQ(res->size(), group.size());
        for (std::size_t j = 0; j < res->size(); ++j) {
          EXPECT_EQ((*res)[j].request(), group[j]);
          held_.push_back(std::move((*res)[j]));
        }
        ++admitted;
      } else {
        note(res.error());
      }
    } else {
      const Request req = random_request();
      auto res = a_.reserve(req);
      if (res) {
        EXPECT_EQ(res->request(), req);
        held_.push_back(std::move(*res));
        ++admitted;
      } else {
        note(res.error());
      }
    }
  }

  std::vector<Reservation>& held() { return held_; }

  int admitted = 0;
  int released = 0;
  int modified = 0;
  std::map<ErrorCode, int> refused;

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  void note(const Error& e) {
    // Valid requests can only be refused for space, an exclusive kind, or an offline CPU.
    EXPECT_TRUE(e.code() == ErrorCode::kNoSpc || e.code() == ErrorCode::kBusy ||
                e.code() == ErrorCode::kNoDev)
        << e.to_string();
    ++refused[e.code()];
  }

  Arbiter& a_;
  std::mt19937 rng_;
  std::vector<Reservation> held_;
};

// Fails the test when the snapshot shows an oversubscribed pool or the counters disagree.
void check_snapshot_and_counters(const Arbiter& a, const ArbiterConfig& cfg) {
  const arbiter::Snapshot snap = a.snapshot();
  ASSERT_EQ(snap.usage.size(), static_cast<std::size_t>(cfg.cpus));
  for (int c = 0; c < cfg.cpus; ++c) {
    for (int p = 0; p < cfg.profile.pool_count(); ++p) {
      const arbiter::PoolUsage& u =
          snap.usage[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
      EXPECT_LE(u.pinned_load(), cfg.profile.pool_slots(p))
          << "cpu " << c << " pool " << p << " oversubscribed: CP " << u.cpu_pinned << " maxTP "
          << u.max_task_pinned << " R " << u.flexible_reserve;
    }
  }
  int kinds_in_use = 0;
  for (int k = 1; k < 4; ++k) kinds_in_use += snap.exclusive[k] > 0;
  EXPECT_LE(kinds_in_use, 1) << "two exclusive kinds live at once";
  const auto ok = a.check_consistency();
  EXPECT_TRUE(ok.has_value()) << ok.error().to_string();
}

class ArbiterStress : public ::testing::TestWithParam<StressConfig> {};

TEST_P(ArbiterStress, ConcurrentOperationsNeverOversubscribe) {
  const ArbiterConfig cfg = GetParam().config;
  auto created = Arbiter::create(cfg);
  ASSERT_TRUE(created.has_value());
  Arbiter& a = **created;

  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(std::make_unique<Worker>(a, i));
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + kTimeBudget;
  std::atomic<bool> stop{false};
  std::atomic<int> running{kWorkers};
  int snapshots = 0;
  int toggles = 0;
  {
    std::vector<std::jthread> threads;
    for (auto& w : workers) {
      threads.emplace_back([&, wp = w.get()] {
        wp->run(stop, deadline);
        running.fetch_sub(1);
      });
    }
    threads.emplace_back([&] {
      const CpuId last(cfg.cpus - 1);
      while (running.load() > 0) {
        check_snapshot_and_counters(a, cfg);
        if (::testing::Test::HasFailure()) stop.store(true);
        ++snapshots;
        if (GetParam().hotplug && snapshots % 8 == 0) {
          EXPECT_TRUE(a.set_cpu_online(last, !a.cpu_online(last)).has_value());
          ++toggles;
        }
        std::this_thread::yield();
      }
    });
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  int admitted = 0;
  int refused_nospc = 0;
  for (auto& w : workers) {
    admitted += w->admitted;
    refused_nospc += w->refused[ErrorCode::kNoSpc];
  }
  std::printf("%s: %.2f s, %d admitted, %d ENOSPC, %d snapshots, %d hotplug toggles\n",
              GetParam().name, seconds, admitted, refused_nospc, snapshots, toggles);
  // The run must have exercised both admission and refusal, under observation.
  EXPECT_GT(admitted, 100);
  EXPECT_GT(refused_nospc, 100);
  EXPECT_GT(snapshots, 0);

  // Quiescent: the live reservations are exactly what the model admits, in any order.
  for (int c = 0; c < cfg.cpus; ++c) ASSERT_TRUE(a.set_cpu_online(CpuId(c), true).has_value());
  check_snapshot_and_counters(a, cfg);
  Model m(cfg);
  int live = 0;
  for (auto& w : workers) {
    for (const Reservation& r : w->held()) {
      ASSERT_TRUE(r.valid());
      const auto h = m.reserve(r.request());
      EXPECT_TRUE(h.has_value()) << "live set not admissible at " << describe(r.request()) << ": "
                                 << outcome_name(h ? std::nullopt : std::optional(h.error()));
      ++live;
    }
  }
  const arbiter::Snapshot snap = a.snapshot();
  EXPECT_EQ(snap.live, live);
  for (int c = 0; c < cfg.cpus; ++c) {
    for (int p = 0; p < cfg.profile.pool_count(); ++p) {
      const arbiter::PoolUsage& u =
          snap.usage[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
      const Usage want = m.usage(c, p);
      EXPECT_EQ(u.pinned_load(), want.pinned_load()) << "cpu " << c << " pool " << p;
      if (cfg.flexible == FlexiblePolicy::kMultiplexed) {
        EXPECT_EQ(u.cpu_pinned, want.cpu_pinned) << "cpu " << c << " pool " << p;
        EXPECT_EQ(u.max_task_pinned, want.max_task_pinned) << "cpu " << c << " pool " << p;
        EXPECT_EQ(u.flexible_reserve, want.flexible_reserve) << "cpu " << c << " pool " << p;
        EXPECT_EQ(u.flexible_count, want.flexible_count) << "cpu " << c << " pool " << p;
      }
    }
  }

  // Release everything, from all threads at once.
  {
    std::vector<std::jthread> threads;
    for (auto& w : workers) {
      threads.emplace_back([wp = w.get()] {
        for (Reservation& r : wp->held()) r.release();
        wp->held().clear();
      });
    }
  }
  EXPECT_FALSE(a.is_used());
  const auto ok = a.check_consistency();
  EXPECT_TRUE(ok.has_value()) << ok.error().to_string();
  const arbiter::Snapshot empty = a.snapshot();
  EXPECT_EQ(empty.live, 0);
  for (const auto& per_pool : empty.usage) {
    for (const arbiter::PoolUsage& u : per_pool) {
      EXPECT_EQ(u.pinned_load(), 0);
      EXPECT_EQ(u.flexible_count, 0);
    }
  }
}

ArbiterConfig make_config(ArchProfile profile, int cpus, FlexiblePolicy policy) {
  ArbiterConfig c;
  c.profile = std::move(profile);
  c.cpus = cpus;
  c.flexible = policy;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ArbiterStress,
    ::testing::Values(
        StressConfig{"x86_64_4cpu_multiplexed",
                     make_config(ArchProfile::x86_64(), 4, FlexiblePolicy::kMultiplexed), true},
        StressConfig{"arm64_3cpu_as_pinned",
                     make_config(ArchProfile::arm64(), 3, FlexiblePolicy::kAsPinned), false},
        StressConfig{
            "custom_3x2_2cpu_multiplexed",
            make_config(ArchProfile::custom(3, 2, false).value(), 2, FlexiblePolicy::kMultiplexed),
            true}),
    [](const ::testing::TestParamInfo<StressConfig>& info) {
      return std::string(info.param.name);
    });

// CPU-bound reservations on the fast path (the read side and the CPU's lock, locking rules 1 and
// 3 of arbiter.cpp) against a writer. Two threads fill and empty the pools of CPUs 0 and 1 with
// whole-pool CPU-bound reservations, so that a writer running alongside a fast path, or seeing a
// fast path's weight without its holder, reads a count of 2N, or N with no holder, while the
// checker takes the write side again and again: every consistency check must pass, every
// reservation must be admitted (the two threads use different CPUs), and the arbiter must be
// empty at the end.
TEST(ArbiterCpuFastPath, WriterSeesExactCounts) {
  for (ArchProfile profile : {ArchProfile::x86_64(), ArchProfile::arm64()}) {
    ArbiterConfig cfg;
    cfg.profile = profile;
    cfg.cpus = 2;
    auto created = Arbiter::create(cfg);
    ASSERT_TRUE(created.has_value());
    Arbiter& a = **created;
    std::atomic<int> running{2};
    std::atomic<int> refused{0};
    std::atomic<int> checks{0};
    std::atomic<bool> checker_done{false};
    {
      std::vector<std::jthread> threads;
      for (int cpu = 0; cpu < 2; ++cpu) {
        threads.emplace_back([&, cpu] {
          Request r;
          r.cpu = CpuId(cpu);
          // At least kIterationsPerThread / 4 rounds, and until the checker has run 1000 times
          // (or has stopped on a failure).
          for (int i = 0;
               i < kIterationsPerThread / 4 || (checks.load() < 1000 && !checker_done.load());
               ++i) {
            r.type = i % 2 ? SlotType::kData : SlotType::kInst;
            r.weight = cfg.profile.slots(r.type);
            auto held = a.reserve(r);
            if (!held) {
              refused.fetch_add(1);
              continue;
            }
            held->release();
          }
          running.fetch_sub(1);
        });
      }
      threads.emplace_back([&] {
        struct Done {
          std::atomic<bool>& flag;
          ~Done() { flag.store(true); }
        } done{checker_done};
        while (running.load() > 0) {
          const auto ok = a.check_consistency();
          ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
          const arbiter::Snapshot snap = a.snapshot();
          for (const auto& per_pool : snap.usage) {
            for (int p = 0; p < cfg.profile.pool_count(); ++p) {
              ASSERT_LE(per_pool[static_cast<std::size_t>(p)].cpu_pinned,
                        cfg.profile.pool_slots(p));
            }
          }
          checks.fetch_add(1);
        }
      });
    }
    std::printf("%s: %d consistency checks alongside the CPU fast paths\n",
                std::string(profile.name()).c_str(), checks.load());
    EXPECT_EQ(refused.load(), 0);
    EXPECT_GE(checks.load(), 1000);
    EXPECT_FALSE(a.is_used());
    const auto ok = a.check_consistency();
    EXPECT_TRUE(ok.has_value()) << ok.error().to_string();
  }
}

}  // namespace
}  // namespace hwarb::model

// Linearizability test: small concurrent histories run for real on threads started together,
// then checked by brute force against the sequential model (model.h): some total order of the
// operations, consistent with their real-time order, must give every operation the result it
// actually got.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "model.h"

namespace hwarb::model {
namespace {

using arbiter::Arbiter;
using arbiter::ArchProfile;
using arbiter::Reservation;
using arbiter::SlotType;

enum class OpKind { kReserve, kReserveAll, kRelease, kModify, kSetOnline };

struct Op {
  OpKind kind = OpKind::kReserve;
  std::vector<Request> requests;  // reserve: 1; reserve_all: 1..3; modify: the new shape
  int slot = 0;                   // release / modify: index into the thread's reservations
  int cpu = 0;                    // set_cpu_online
  bool online = true;
  int jitter = 0;  // a short busy delay before the operation, to vary the interleaving
};

// A thread's reservations ("slots"): first the pre-existing ones it owns, then one per reserve,
// k per reserve_all (empty when refused).
struct Scenario {
  int cpus = 1;
  int inst = 2;
  int data = 2;
  bool shared = true;
  bool as_pinned = false;
  std::vector<Request> pre;  // reserved before the threads start
  std::vector<int> pre_owner;
  std::vector<std::vector<Op>> threads;
  // Every thread waits for all the others before its operations at these positions (always 0).
  std::vector<std::size_t> sync_points{0};

  ArbiterConfig config() const {
    ArbiterConfig c;
    c.profile = ArchProfile::custom(inst, data, shared).value();
    c.cpus = cpus;
    c.flexible = as_pinned ? FlexiblePolicy::kAsPinned : FlexiblePolicy::kMultiplexed;
    return c;
  }
};

std::string describe_op(const Op& op) {
  std::ostringstream os;
  switch (op.kind) {
    case OpKind::kReserve:
      os << "reserve(" << describe(op.requests[0]) << ")";
      break;
    case OpKind::kReserveAll:
      os << "reserve_all(";
      for (std::size_t i = 0; i < op.requests.size(); ++i) {
        os << (i ? ", " : "") << describe(op.requests[i]);
      }
      os << ")";
      break;
    case OpKind::kRelease:
      os << "release(slot " << op.slot << ")";
      break;
    case OpKind::kModify:
      os << "modify(slot " << op.slot << ", " << describe(op.requests[0]) << ")";
      break;
    case OpKind::kSetOnline:
      os << "set_cpu_online(" << op.cpu << ", " << (op.online ? "true" : "false") << ")";
      break;
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Scenario& sc) {
  os << describe(sc.config()) << "\n";
  for (std::size_t i = 0; i < sc.pre.size(); ++i) {
    os << "  pre (thread " << sc.pre_owner[i] << "): " << describe(sc.pre[i]) << "\n";
  }
  for (std::size_t t = 0; t < sc.threads.size(); ++t) {
    for (const Op& op : sc.threads[t]) os << "  thread " << t << ": " << describe_op(op) << "\n";
  }
  return os;
}

Request gen_request(int cpus, int tasks) {
  Request r;
  r.kind = *rc::gen::weightedElement<ResourceKind>(
      {{18, ResourceKind::kBreakpoint}, {1, ResourceKind::kBts}, {1, ResourceKind::kPt}});
  const int owner = *rc::gen::inRange(0, 3);  // CPU-bound, task on one CPU, task on all CPUs
  if (owner != 0) r.task = TaskId(*rc::gen::inRange<std::int64_t>(1, tasks + 1));
  if (owner != 2) r.cpu = CpuId(*rc::gen::inRange(0, cpus));
  r.type = *rc::gen::element(SlotType::kInst, SlotType::kData);
  r.weight = is_exclusive(r.kind) ? 1 : *rc::gen::weightedElement<int>({{6, 1}, {3, 2}, {1, 3}});
  r.pinned = *rc::gen::weightedElement<bool>({{2, true}, {1, false}});
  r.id = RequestId(*rc::gen::inRange<std::uint64_t>(1, 1000));
  return r;
}

rc::Gen<Scenario> gen_scenario() {
  return rc::gen::exec([] {
    Scenario sc;
    sc.cpus = *rc::gen::inRange(1, 4);
    sc.shared = *rc::gen::arbitrary<bool>();
    sc.inst = *rc::gen::inRange(2, 5);
    sc.data = sc.shared ? sc.inst : *rc::gen::inRange(2, 5);
    sc.as_pinned = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    const int tasks = *rc::gen::inRange(2, 4);
    const int nthreads = *rc::gen::inRange(3, 5);
    sc.threads.resize(static_cast<std::size_t>(nthreads));
    std::vector<int> slots(static_cast<std::size_t>(nthreads), 0);
    const int npre = *rc::gen::inRange(0, 4);
    for (int i = 0; i < npre; ++i) {
      sc.pre.push_back(gen_request(sc.cpus, tasks));
      const int owner = *rc::gen::inRange(0, nthreads);
      sc.pre_owner.push_back(owner);
      ++slots[static_cast<std::size_t>(owner)];
    }
    for (int t = 0; t < nthreads; ++t) {
      int& have = slots[static_cast<std::size_t>(t)];
      const int nops = *rc::gen::inRange(3, 7);
      for (int i = 0; i < nops; ++i) {
        Op op;
        op.kind =
            have > 0
                ? *rc::gen::weightedElement<OpKind>({{4, OpKind::kReserve},
                                                     {1, OpKind::kReserveAll},
                                                     {3, OpKind::kRelease},
                                                     {2, OpKind::kModify},
                                                     {1, OpKind::kSetOnline}})
                : *rc::gen::weightedElement<OpKind>(
                      {{4, OpKind::kReserve}, {1, OpKind::kReserveAll}, {1, OpKind::kSetOnline}});
        switch (op.kind) {
          case OpKind::kReserve:
            op.requests.push_back(gen_request(sc.cpus, tasks));
            ++have;
            break;
          case OpKind::kReserveAll: {
            const int k = *rc::gen::inRange(1, 4);
            for (int j = 0; j < k; ++j) op.requests.push_back(gen_request(sc.cpus, tasks));
            have += k;
            break;
          }
          case OpKind::kRelease:
            op.slot = *rc::gen::inRange(0, have);
            break;
          case OpKind::kModify:
            op.slot = *rc::gen::inRange(0, have);
            op.requests.push_back(gen_request(sc.cpus, tasks));
            break;
          case OpKind::kSetOnline:
            op.cpu = *rc::gen::inRange(0, sc.cpus);
            op.online = *rc::gen::weightedElement<bool>({{1, false}, {2, true}});
            break;
        }
        op.jitter = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 4}});
        sc.threads[static_cast<std::size_t>(t)].push_back(std::move(op));
      }
    }
    if (*rc::gen::arbitrary<bool>()) sc.sync_points.push_back(1);
    if (*rc::gen::arbitrary<bool>()) sc.sync_points.push_back(2);  // every thread has 3 ops
    return sc;
  });
}

// The request a modify passes: the shape, keeping the target's task and kind (a CPU-bound
// request stays CPU-bound).
Request modify_target(const Request& old, const Request& shape) {
  Request n = shape;
  n.task = old.task;
  n.kind = old.kind;
  if (!n.task && !n.cpu) n.cpu = old.cpu;
  if (is_exclusive(n.kind)) n.weight = 1;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Execution.

struct Outcome {
  std::uint64_t inv = 0;  // logical times from one global counter
  std::uint64_t resp = 0;
  bool skipped = false;  // release / modify of an empty slot: nothing called
  std::optional<ErrorCode> error;
  std::string message;
  Request next;  // modify: the request actually passed
};

std::atomic<std::uint64_t> g_clock{0};

// A short busy delay (no syscall), to shift operations against each other.
void spin(int units) {
  std::atomic<int> sink{0};
  for (int i = 0; i < units * 200; ++i) sink.fetch_add(1, std::memory_order_relaxed);
}
std::uint64_t tick() {
  return g_clock.fetch_add(1, std::memory_order_seq_cst);
}

// A busy barrier (yielding now and then, as there may be more threads than cores), so that the
// threads that are running leave it at the same moment.
void arrive_and_wait(std::atomic<int>& arrived, int nthreads) {
  arrived.fetch_add(1);
  for (int spins = 1; arrived.load() < nthreads; ++spins) {
    if (spins % 4096 == 0) std::this_thread::yield();
  }
}

void run_thread(Arbiter& a, const Scenario& sc, std::size_t t, std::vector<Reservation>& slots,
                std::vector<Outcome>& out, std::vector<std::atomic<int>>& barriers) {
  const auto nthreads = static_cast<int>(sc.threads.size());
  const std::vector<Op>& ops = sc.threads[t];
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    for (std::size_t b = 0; b < sc.sync_points.size(); ++b) {
      if (sc.sync_points[b] == i) arrive_and_wait(barriers[b], nthreads);
    }
    spin(op.jitter);
    Outcome o;
    switch (op.kind) {
      case OpKind::kReserve: {
        o.inv = tick();
        auto r = a.reserve(op.requests[0]);
        o.resp = tick();
        if (r) {
          slots.push_back(std::move(*r));
        } else {
          o.error = r.error().code();
          o.message = r.error().message();
          slots.emplace_back();
        }
        break;
      }
      case OpKind::kReserveAll: {
        o.inv = tick();
        auto r = a.reserve_all(op.requests);
        o.resp = tick();
        if (r) {
          for (Reservation& x : *r) slots.push_back(std::move(x));
          if (r->size() != op.requests.size()) o.message = "reserve_all returned a wrong count";
        } else {
          o.error = r.error().code();
          o.message = r.error().message();
          for (std::size_t j = 0; j < op.requests.size(); ++j) slots.emplace_back();
        }
        break;
      }
      case OpKind::kRelease: {
        Reservation& s = slots[static_cast<std::size_t>(op.slot)];
        if (!s.valid()) {
          o.skipped = true;
          break;
        }
        o.inv = tick();
        a.release(s);
        o.resp = tick();
        if (s.valid()) o.message = "still valid after release";
        break;
      }
      case OpKind::kModify: {
        Reservation& s = slots[static_cast<std::size_t>(op.slot)];
        if (!s.valid()) {
          o.skipped = true;
          break;
        }
        o.next = modify_target(s.request(), op.requests[0]);
        o.inv = tick();
        auto r = a.modify(s, o.next);
        o.resp = tick();
        if (!r) {
          o.error = r.error().code();
          o.message = r.error().message();
        }
        break;
      }
      case OpKind::kSetOnline: {
        o.inv = tick();
        auto r = a.set_cpu_online(CpuId(op.cpu), op.online);
        o.resp = tick();
        if (!r) {
          o.error = r.error().code();
          o.message = r.error().message();
        }
        break;
      }
    }
    out.push_back(std::move(o));
  }
}

// ---------------------------------------------------------------------------------------------
// Brute-force linearizability check.

class Checker {
 public:
  Checker(const Scenario& sc, const std::vector<std::vector<Outcome>>& out) : sc_(sc), out_(out) {
    std::size_t base = 0;
    for (const auto& ops : sc.threads) {
      offset_.push_back(base);
      base += ops.size();
    }
  }

  // Searches for a linearization starting from `m` with the threads' pre-existing slots.
  bool search(const Model& m, const std::vector<std::vector<std::optional<Handle>>>& slots) {
    std::vector<std::size_t> next(sc_.threads.size(), 0);
    return dfs(m, slots, next, 0);
  }

  const Model& final_model() const { return *final_; }

 private:
  using Slots = std::vector<std::vector<std::optional<Handle>>>;

  bool dfs(const Model& m0, const Slots& s0, std::vector<std::size_t> next, std::uint64_t done) {
    Model m = m0;
    Slots slots = s0;
    // Skipped operations touch nothing; take them at once, checking the thread's view.
    for (std::size_t t = 0; t < next.size(); ++t) {
      while (next[t] < out_[t].size() && out_[t][next[t]].skipped) {
        const Op& op = sc_.threads[t][next[t]];
        if (slots[t][static_cast<std::size_t>(op.slot)].has_value()) return false;
        done |= std::uint64_t{1} << (offset_[t] + next[t]);
        ++next[t];
      }
    }
    bool finished = true;
    std::uint64_t min_resp = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t t = 0; t < next.size(); ++t) {
      if (next[t] < out_[t].size()) {
        finished = false;
        min_resp = std::min(min_resp, out_[t][next[t]].resp);
      }
    }
    if (finished) {
      final_ = m;
      return true;
    }
    std::uint64_t online_bits = 0;
    for (int c = 0; c < m.cpus(); ++c) online_bits |= std::uint64_t{m.cpu_online(c)} << c;
    const std::uint64_t key = done | (online_bits << 48);
    if (failed_.contains(key)) return false;

    for (std::size_t t = 0; t < next.size(); ++t) {
      if (next[t] >= out_[t].size()) continue;
      const Outcome& o = out_[t][next[t]];
      if (o.inv > min_resp) continue;  // another pending operation finished before this began
      Model m1 = m;
      Slots s1 = slots;
      if (!apply(sc_.threads[t][next[t]], o, t, m1, s1)) continue;
      std::vector<std::size_t> n1 = next;
      ++n1[t];
      if (dfs(m1, s1, n1, done | (std::uint64_t{1} << (offset_[t] + next[t])))) return true;
    }
    failed_.insert(key);
    return false;
  }

  // Applies one operation to the model; false when the model disagrees with the outcome.
  static bool apply(const Op& op, const Outcome& o, std::size_t t, Model& m, Slots& slots) {
    if (!o.message.empty() && !o.error) return false;  // a broken postcondition, never linear
    std::vector<std::optional<Handle>>& mine = slots[t];
    switch (op.kind) {
      case OpKind::kReserve: {
        auto r = m.reserve(op.requests[0]);
        if ((r ? std::nullopt : std::optional(r.error())) != o.error) return false;
        mine.push_back(r ? std::optional(*r) : std::nullopt);
        return true;
      }
      case OpKind::kReserveAll: {
        auto r = m.reserve_all(op.requests);
        if ((r ? std::nullopt : std::optional(r.error())) != o.error) return false;
        for (std::size_t j = 0; j < op.requests.size(); ++j) {
          mine.push_back(r ? std::optional((*r)[j]) : std::nullopt);
        }
        return true;
      }
      case OpKind::kRelease: {
        auto& h = mine[static_cast<std::size_t>(op.slot)];
        if (!h) return false;
        m.release(*h);
        h.reset();
        return true;
      }
      case OpKind::kModify: {
        const auto& h = mine[static_cast<std::size_t>(op.slot)];
        if (!h) return false;
        auto r = m.modify(*h, o.next);
        return (r ? std::nullopt : std::optional(r.error())) == o.error;
      }
      case OpKind::kSetOnline: {
        auto r = m.set_cpu_online(op.cpu, op.online);
        return (r ? std::nullopt : std::optional(r.error())) == o.error;
      }
    }
    return false;
  }

  const Scenario& sc_;
  const std::vector<std::vector<Outcome>>& out_;
  std::vector<std::size_t> offset_;
  std::unordered_set<std::uint64_t> failed_;
  std::optional<Model> final_;
};

std::string show_history(const Scenario& sc, const std::vector<std::vector<Outcome>>& out) {
  std::ostringstream os;
  os << describe(sc.config()) << "\n";
  for (std::size_t i = 0; i < sc.pre.size(); ++i) {
    os << "  pre (thread " << sc.pre_owner[i] << "): " << describe(sc.pre[i]) << "\n";
  }
  for (std::size_t t = 0; t < sc.threads.size(); ++t) {
    for (std::size_t i = 0; i < out[t].size(); ++i) {
      const Op& op = sc.threads[t][i];
      const Outcome& o = out[t][i];
      os << "  thread " << t << " ";
      if (o.skipped) {
        os << "[skipped, slot empty] " << describe_op(op) << "\n";
        continue;
      }
      os << "[" << o.inv << ", " << o.resp << "] " << describe_op(op);
      if (op.kind == OpKind::kModify) os << " as " << describe(o.next);
      os << " -> " << outcome_name(o.error);
      if (!o.message.empty()) os << " (" << o.message << ")";
      os << "\n";
    }
  }
  return os.str();
}

// Runs the scenario once on a fresh arbiter and checks the history.
void run_and_check(const Scenario& sc) {
  const ArbiterConfig cfg = sc.config();
  auto created = Arbiter::create(cfg);
  RC_ASSERT(created.has_value());
  Arbiter& a = **created;
  const std::size_t nthreads = sc.threads.size();

  // Pre-existing reservations, made sequentially and checked against the model.
  Model model(cfg);
  std::vector<std::vector<Reservation>> slots(nthreads);
  std::vector<std::vector<std::optional<Handle>>> model_slots(nthreads);
  for (std::size_t i = 0; i < sc.pre.size(); ++i) {
    const auto owner = static_cast<std::size_t>(sc.pre_owner[i]);
    auto want = model.reserve(sc.pre[i]);
    auto got = a.reserve(sc.pre[i]);
    RC_ASSERT(want.has_value() == got.has_value());
    slots[owner].push_back(got ? std::move(*got) : Reservation());
    model_slots[owner].push_back(want ? std::optional(*want) : std::nullopt);
  }

  std::vector<std::vector<Outcome>> out(nthreads);
  {
    std::vector<std::atomic<int>> barriers(sc.sync_points.size());
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < nthreads; ++t) {
      threads.emplace_back([&, t] { run_thread(a, sc, t, slots[t], out[t], barriers); });
    }
  }

  Checker checker(sc, out);
  if (!checker.search(model, model_slots)) {
    RC_FAIL("history is not linearizable:\n" + show_history(sc, out));
  }
  // The final state is the model's whatever the order (the online flags aside).
  if (auto ok = a.check_consistency(); !ok) {
    RC_FAIL("check_consistency: " + ok.error().to_string() + "\n" + show_history(sc, out));
  }
  const Model& fin = checker.final_model();
  const arbiter::Snapshot snap = a.snapshot();
  RC_ASSERT(snap.live == static_cast<int>(fin.live().size()));
  for (int c = 0; c < cfg.cpus; ++c) {
    for (int p = 0; p < cfg.profile.pool_count(); ++p) {
      const arbiter::PoolUsage& u =
          snap.usage[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
      if (u.pinned_load() != fin.usage(c, p).pinned_load() ||
          u.pinned_load() > cfg.profile.pool_slots(p)) {
        RC_FAIL("final usage of cpu " + std::to_string(c) + " pool " + std::to_string(p) + " is " +
                std::to_string(u.pinned_load()) + ", model " +
                std::to_string(fin.usage(c, p).pinned_load()) + "\n" + show_history(sc, out));
      }
    }
  }
  for (auto& mine : slots) {
    for (Reservation& r : mine) a.release(r);
  }
  RC_ASSERT(!a.is_used());
  RC_ASSERT(a.check_consistency().has_value());
}

RC_GTEST_PROP(ArbiterLinearizability, ConcurrentHistoriesAreLinearizable, ()) {
  const Scenario sc = *gen_scenario();
  // The same history several times: each run interleaves differently.
  for (int run = 0; run < 3; ++run) run_and_check(sc);
}

}  // namespace
}  // namespace hwarb::model

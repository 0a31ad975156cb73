// Stateful property test: random command sequences on the arbiter, every decision compared with
// the sequential model (model.h), and the arbiter's snapshot and counters checked after each
// command.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "model.h"

namespace hwarb::model {
namespace {

using arbiter::Arbiter;
using arbiter::ArchProfile;
using arbiter::Reservation;
using arbiter::SlotType;

// ---------------------------------------------------------------------------------------------
// Generators.

// A configuration as generated (shows readably in counterexamples).
struct ConfigSpec {
  int profile = 0;  // 0 x86_64, 1 i386, 2 arm64, 3 custom
  int inst = 4;
  int data = 4;
  bool shared = true;
  int cpus = 1;
  bool as_pinned = false;

  ArbiterConfig config() const {
    ArbiterConfig c;
    switch (profile) {
      case 0:
        c.profile = ArchProfile::x86_64();
        break;
      case 1:
        c.profile = ArchProfile::i386();
        break;
      case 2:
        c.profile = ArchProfile::arm64();
        break;
      default:
        c.profile = ArchProfile::custom(inst, data, shared).value();
        break;
    }
    c.cpus = cpus;
    c.flexible = as_pinned ? FlexiblePolicy::kAsPinned : FlexiblePolicy::kMultiplexed;
    return c;
  }
};

std::ostream& operator<<(std::ostream& os, const ConfigSpec& spec) {
  return os << describe(spec.config());
}

rc::Gen<ConfigSpec> gen_config() {
  return rc::gen::exec([] {
    ConfigSpec s;
    s.profile = *rc::gen::weightedElement<int>({{1, 0}, {1, 1}, {1, 2}, {3, 3}});
    s.shared = *rc::gen::arbitrary<bool>();
    s.inst = *rc::gen::inRange(1, 9);
    s.data = s.shared ? s.inst : *rc::gen::inRange(1, 9);
    // Mostly few CPUs (so requests collide), sometimes up to 64.
    s.cpus =
        *rc::gen::weightedOneOf<int>({{3, rc::gen::inRange(1, 5)}, {1, rc::gen::inRange(1, 65)}});
    s.as_pinned = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    return s;
  });
}

// A CPU index biased towards the low ones; rarely out of range (EINVAL).
rc::Gen<int> gen_cpu(int cpus) {
  return rc::gen::weightedOneOf<int>({{12, rc::gen::inRange(0, std::min(cpus, 2))},
                                      {6, rc::gen::inRange(0, cpus)},
                                      {1, rc::gen::element(-1, cpus, cpus + 7)}});
}

// A generated request; shows readably in counterexamples.
struct Req {
  Request r;
};
std::ostream& operator<<(std::ostream& os, const Req& req) {
  return os << describe(req.r);
}

rc::Gen<Req> gen_req(int cpus);
Request gen_request_now(int cpus) {
  return (*gen_req(cpus)).r;
}

Request gen_request_fields(int cpus) {
  Request r;
  r.kind = *rc::gen::weightedElement<ResourceKind>({{26, ResourceKind::kBreakpoint},
                                                    {2, ResourceKind::kBts},
                                                    {1, ResourceKind::kPt},
                                                    {1, ResourceKind::kLbr}});
  // 0 CPU-bound, 1 task on one CPU, 2 task on all CPUs, 3 neither (EINVAL).
  const int owner = *rc::gen::weightedElement<int>({{4, 0}, {4, 1}, {4, 2}, {1, 3}});
  if (owner == 1 || owner == 2) r.task = TaskId(*rc::gen::inRange<std::int64_t>(1, 4));
  if (owner == 0 || owner == 1) r.cpu = CpuId(*gen_cpu(cpus));
  r.type = *rc::gen::element(SlotType::kInst, SlotType::kData);
  if (is_exclusive(r.kind)) {
    r.weight = 1;  // exclusive kinds use no slots; their weight is never in question here
  } else {
    r.weight = *rc::gen::weightedOneOf<int>(
        {{30, rc::gen::inRange(1, 4)}, {1, rc::gen::element(0, -1)}, {1, rc::gen::inRange(4, 10)}});
  }
  r.pinned = *rc::gen::weightedElement<bool>({{3, true}, {2, false}});
  r.id = RequestId(*rc::gen::inRange<std::uint64_t>(0, 100));
  return r;
}

rc::Gen<Req> gen_req(int cpus) {
  return rc::gen::exec([cpus] { return Req{gen_request_fields(cpus)}; });
}

// ---------------------------------------------------------------------------------------------
// System under test and the checks made after every command.

struct Sut {
  std::unique_ptr<Arbiter> arbiter;
  std::map<Handle, Reservation> held;  // by model handle; destroyed before `arbiter`
  ~Sut() { held.clear(); }
};

std::string err_of(const std::optional<ErrorCode>& e) {
  return outcome_name(e);
}

#define EXPECT_OUTCOME(got, want, what)                                                        \
  do {                                                                                         \
    if (code_of(got) != code_of(want)) {                                                       \
      RC_FAIL(std::string(what) + ": arbiter says " + err_of(code_of(got)) +                   \
              (got ? std::string() : " (" + (got).error().message() + ")") + ", model says " + \
              err_of(code_of(want)));                                                          \
    }                                                                                          \
  } while (false)

// Compares the whole observable state of the arbiter with the model.
void check_state(const Model& m, Sut& sut) {
  const Arbiter& a = *sut.arbiter;
  const ArbiterConfig& cfg = m.config();
  if (a.is_used() != m.is_used()) {
    RC_FAIL("is_used() is " + std::to_string(a.is_used()) + ", model has " +
            std::to_string(m.live().size()) + " live requests");
  }
  if (auto ok = a.check_consistency(); !ok) {
    RC_FAIL("check_consistency: " + ok.error().to_string() + "\n" + a.dump());
  }
  const arbiter::Snapshot snap = a.snapshot();
  RC_ASSERT(snap.usage.size() == static_cast<std::size_t>(cfg.cpus));
  RC_ASSERT(snap.live == static_cast<int>(m.live().size()));
  for (ResourceKind k : {ResourceKind::kBts, ResourceKind::kPt, ResourceKind::kLbr}) {
    RC_ASSERT(snap.exclusive[static_cast<int>(k)] == m.exclusive_count(k));
  }
  for (int c = 0; c < cfg.cpus; ++c) {
    const auto& per_pool = snap.usage[static_cast<std::size_t>(c)];
    RC_ASSERT(per_pool.size() == static_cast<std::size_t>(cfg.profile.pool_count()));
    for (int p = 0; p < cfg.profile.pool_count(); ++p) {
      const arbiter::PoolUsage& got = per_pool[static_cast<std::size_t>(p)];
      const Usage want = m.usage(c, p);
      const std::string where = "cpu " + std::to_string(c) + " pool " + std::to_string(p);
      if (got.pinned_load() > cfg.profile.pool_slots(p)) {
        RC_FAIL(where + ": oversubscribed, pinned_load " + std::to_string(got.pinned_load()) +
                " > " + std::to_string(cfg.profile.pool_slots(p)));
      }
      const bool same =
          cfg.flexible == FlexiblePolicy::kMultiplexed
              ? (got.cpu_pinned == want.cpu_pinned && got.max_task_pinned == want.max_task_pinned &&
                 got.flexible_reserve == want.flexible_reserve &&
                 got.flexible_count == want.flexible_count)
              : got.pinned_load() == want.pinned_load();
      if (!same) {
        RC_FAIL(where + ": snapshot CP/maxTP/R/flex = " + std::to_string(got.cpu_pinned) + "/" +
                std::to_string(got.max_task_pinned) + "/" + std::to_string(got.flexible_reserve) +
                "/" + std::to_string(got.flexible_count) + ", model " +
                std::to_string(want.cpu_pinned) + "/" + std::to_string(want.max_task_pinned) + "/" +
                std::to_string(want.flexible_reserve) + "/" + std::to_string(want.flexible_count));
      }
    }
    RC_ASSERT(a.cpu_online(CpuId(c)) == m.cpu_online(c));
  }
  RC_ASSERT(sut.held.size() == m.live().size());
  for (const LiveRequest& l : m.live()) {
    auto it = sut.held.find(l.handle);
    RC_ASSERT(it != sut.held.end());
    RC_ASSERT(it->second.valid());
    if (!(it->second.request() == l.request)) {
      RC_FAIL("Reservation::request() is " + describe(it->second.request()) + ", model has " +
              describe(l.request));
    }
  }
}

// The explanation must agree with the model's decision.
void check_explain(const Model& m, const Arbiter& a, const Request& r) {
  const arbiter::Explanation e = a.explain(r);
  const auto want = m.refusal(r);
  if (e.admitted != !want.has_value() || (!e.admitted && e.code != *want)) {
    RC_FAIL("explain(" + describe(r) + ") says " +
            (e.admitted ? std::string("admitted") : errno_name(e.code)) + " (" + e.reason +
            "), model says " + err_of(want));
  }
}

// ---------------------------------------------------------------------------------------------
// Commands.

using Cmd = rc::state::Command<Model, Sut>;

struct Reserve : Cmd {
  Request req;
  explicit Reserve(const Model& m) : req(gen_request_now(m.cpus())) {}
  void apply(Model& m) const override { (void)m.reserve(req); }
  void run(const Model& m0, Sut& sut) const override {
    Model m = m0;
    check_explain(m, *sut.arbiter, req);
    const auto want = m.reserve(req);
    auto got = sut.arbiter->reserve(req);
    EXPECT_OUTCOME(got, want, "reserve(" + describe(req) + ")");
    if (got) {
      RC_ASSERT(got->valid());
      sut.held.emplace(*want, std::move(*got));
    }
    check_state(m, sut);
  }
  void show(std::ostream& os) const override { os << "reserve(" << describe(req) << ")"; }
};

struct ReserveAll : Cmd {
  std::vector<Request> reqs;
  explicit ReserveAll(const Model& m) {
    const int n = *rc::gen::inRange(1, 5);
    for (int i = 0; i < n; ++i) reqs.push_back(gen_request_now(m.cpus()));
  }
  void apply(Model& m) const override { (void)m.reserve_all(reqs); }
  void run(const Model& m0, Sut& sut) const override {
    Model m = m0;
    const auto want = m.reserve_all(reqs);
    auto got = sut.arbiter->reserve_all(reqs);
    EXPECT_OUTCOME(got, want, "reserve_all");
    if (got) {
      RC_ASSERT(got->size() == want->size());
      for (std::size_t i = 0; i < got->size(); ++i) {
        RC_ASSERT((*got)[i].valid());
        sut.held.emplace((*want)[i], std::move((*got)[i]));
      }
    }
    check_state(m, sut);
  }
  void show(std::ostream& os) const override {
    os << "reserve_all(";
    for (std::size_t i = 0; i < reqs.size(); ++i) os << (i ? ", " : "") << describe(reqs[i]);
    os << ")";
  }
};

// Picks a live reservation by an index taken modulo the live count (stays valid under shrinking).
struct WithTarget : Cmd {
  std::size_t pick = 0;
  Handle target(const Model& m) const { return m.live()[pick % m.live().size()].handle; }
  void checkPreconditions(const Model& m) const override { RC_PRE(m.is_used()); }
};

struct Release : WithTarget {
  int how = 0;  // 0 Arbiter::release, 1 Reservation::release, 2 destroy the Reservation
  Release() {
    pick = *rc::gen::inRange<std::size_t>(0, 64);
    how = *rc::gen::inRange(0, 3);
  }
  void apply(Model& m) const override { m.release(target(m)); }
  void run(const Model& m0, Sut& sut) const override {
    Model m = m0;
    const Handle h = target(m);
    m.release(h);
    auto it = sut.held.find(h);
    RC_ASSERT(it != sut.held.end());
    if (how == 0) {
      sut.arbiter->release(it->second);
      RC_ASSERT(!it->second.valid());
    } else if (how == 1) {
      it->second.release();
      RC_ASSERT(!it->second.valid());
    }
    sut.held.erase(it);
    check_state(m, sut);
  }
  void show(std::ostream& os) const override {
    static constexpr const char* kHow[] = {"Arbiter::release", "Reservation::release", "destroy"};
    os << "release(live[" << pick << " % n]) via " << kHow[how];
  }
};

struct Modify : WithTarget {
  Request shape;   // the new request; task and kind are taken from the target unless changed
  int change = 0;  // 0 keep task and kind, 1 change the task, 2 change the kind
  explicit Modify(const Model& m) : shape(gen_request_now(m.cpus())) {
    pick = *rc::gen::inRange<std::size_t>(0, 64);
    change = *rc::gen::weightedElement<int>({{18, 0}, {1, 1}, {1, 2}});
  }
  Request next(const Model& m) const {
    const Request& old = *m.find(target(m));
    Request n = shape;
    n.task = old.task;
    n.kind = old.kind;
    if (change == 1)
      n.task = shape.task == old.task ? std::optional<TaskId>(TaskId(99)) : shape.task;
    if (change == 2)
      n.kind = shape.kind == old.kind
                   ? (old.kind == ResourceKind::kBreakpoint ? ResourceKind::kPt
                                                            : ResourceKind::kBreakpoint)
                   : shape.kind;
    if (n.task && !n.cpu && !shape.task && shape.cpu) n.cpu = shape.cpu;  // keep CPU choice
    if (!n.task && !n.cpu) n.cpu = CpuId(0);  // CPU-bound stays CPU-bound
    if (is_exclusive(n.kind) && n.weight < 1) n.weight = 1;
    return n;
  }
  void apply(Model& m) const override { (void)m.modify(target(m), next(m)); }
  void run(const Model& m0, Sut& sut) const override {
    Model m = m0;
    const Handle h = target(m);
    const Request n = next(m);
    const std::string before = sut.arbiter->dump();
    const auto want = m.modify(h, n);
    auto it = sut.held.find(h);
    RC_ASSERT(it != sut.held.end());
    auto got = sut.arbiter->modify(it->second, n);
    EXPECT_OUTCOME(got, want, "modify(" + describe(*m0.find(h)) + " -> " + describe(n) + ")");
    RC_ASSERT(it->second.valid());
    if (!got && sut.arbiter->dump() != before) {
      RC_FAIL("refused modify changed the state; before:\n" + before + "after:\n" +
              sut.arbiter->dump());
    }
    check_state(m, sut);
  }
  void show(std::ostream& os) const override {
    os << "modify(live[" << pick << " % n], " << describe(shape)
       << (change == 1   ? ", other task"
           : change == 2 ? ", other kind"
                         : "")
       << ")";
  }
};

struct SetOnline : Cmd {
  int cpu = 0;
  bool online = true;
  explicit SetOnline(const Model& m) {
    cpu = *rc::gen::weightedOneOf<int>(
        {{10, rc::gen::inRange(0, std::min(m.cpus(), 2))}, {1, rc::gen::element(-1, m.cpus())}});
    online = *rc::gen::arbitrary<bool>();
  }
  void apply(Model& m) const override { (void)m.set_cpu_online(cpu, online); }
  void run(const Model& m0, Sut& sut) const override {
    Model m = m0;
    const auto want = m.set_cpu_online(cpu, online);
    auto got = sut.arbiter->set_cpu_online(CpuId(cpu), online);
    EXPECT_OUTCOME(got, want, "set_cpu_online(" + std::to_string(cpu) + ")");
    check_state(m, sut);
  }
  void show(std::ostream& os) const override {
    os << "set_cpu_online(" << cpu << ", " << (online ? "true" : "false") << ")";
  }
};

rc::Gen<std::shared_ptr<const Cmd>> gen_command(const Model& m) {
  using rc::state::gen::execOneOfWithArgs;
  if (!m.is_used()) {
    return rc::gen::weightedOneOf<std::shared_ptr<const Cmd>>(
        {{8, execOneOfWithArgs<Reserve>()(m)},
         {2, execOneOfWithArgs<ReserveAll>()(m)},
         {1, execOneOfWithArgs<SetOnline>()(m)}});
  }
  return rc::gen::weightedOneOf<std::shared_ptr<const Cmd>>(
      {{8, execOneOfWithArgs<Reserve>()(m)},
       {2, execOneOfWithArgs<ReserveAll>()(m)},
       {5, execOneOfWithArgs<Release>()()},
       {4, execOneOfWithArgs<Modify>()(m)},
       {1, execOneOfWithArgs<SetOnline>()(m)}});
}

std::unique_ptr<Arbiter> make_arbiter(const ArbiterConfig& cfg) {
  auto a = Arbiter::create(cfg);
  RC_ASSERT(a.has_value());
  return std::move(*a);
}

RC_GTEST_PROP(ArbiterModel, RandomCommandsMatchModel, ()) {
  const ConfigSpec spec = *gen_config();
  const ArbiterConfig cfg = spec.config();
  Sut sut;
  sut.arbiter = make_arbiter(cfg);
  const Model initial(cfg);
  check_state(initial, sut);
  // Longer sequences than the default size gives, so that pools fill up and drain.
  const auto commands = *rc::gen::scale(4.0, rc::state::gen::commands(initial, &gen_command));
  rc::state::runAll(commands, initial, sut);
}

// ---------------------------------------------------------------------------------------------
// Plain properties.

// Reserves what fits of `reqs` into `held`, checking each decision against the model.
void reserve_some(Arbiter& a, Model& m, const std::vector<Request>& reqs,
                  std::vector<Reservation>& held) {
  for (const Request& r : reqs) {
    const auto want = m.reserve(r);
    auto got = a.reserve(r);
    EXPECT_OUTCOME(got, want, "reserve(" + describe(r) + ")");
    if (got) held.push_back(std::move(*got));
  }
}

std::vector<Request> gen_requests(int cpus, int min_count, int max_count) {
  // Variable length (shrinks by removing elements), capped.
  auto all = rc::gen::container<std::vector<Req>>(gen_req(cpus));
  auto generated = min_count > 0 ? *rc::gen::nonEmpty(all) : *all;
  if (generated.size() > static_cast<std::size_t>(max_count)) {
    generated.resize(static_cast<std::size_t>(max_count));
  }
  std::vector<Request> reqs;
  for (const Req& g : generated) reqs.push_back(g.r);
  return reqs;
}

// Releases in a random order, by a random method each; `held` ends empty.
void release_all_randomly(Arbiter& a, std::vector<Reservation>& held) {
  const auto keys =
      *rc::gen::container<std::vector<unsigned>>(held.size(), rc::gen::arbitrary<unsigned>());
  std::vector<std::size_t> order(held.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return keys[x] < keys[y]; });
  for (std::size_t i : order) {
    release_by(a, held[i], keys[i]);
    RC_ASSERT(!held[i].valid());
  }
  held.clear();
}

RC_GTEST_PROP(ArbiterModel, ReleasingEverythingInAnyOrderEmpties, ()) {
  const ConfigSpec spec = *gen_config();
  const ArbiterConfig cfg = spec.config();
  auto a = make_arbiter(cfg);
  const std::string fresh = a->dump();
  Model m(cfg);
  std::vector<Reservation> held;
  reserve_some(*a, m, gen_requests(cfg.cpus, 0, 40), held);
  RC_ASSERT(a->is_used() == !held.empty());
  release_all_randomly(*a, held);

  RC_ASSERT(!a->is_used());
  const auto ok = a->check_consistency();
  if (!ok) RC_FAIL("check_consistency: " + ok.error().to_string());
  const arbiter::Snapshot snap = a->snapshot();
  RC_ASSERT(snap.live == 0);
  for (int k = 0; k < 4; ++k) RC_ASSERT(snap.exclusive[k] == 0);
  RC_ASSERT(snap.usage.size() == static_cast<std::size_t>(cfg.cpus));
  for (const auto& per_pool : snap.usage) {
    for (const arbiter::PoolUsage& u : per_pool) {
      RC_ASSERT(u.cpu_pinned == 0);
      RC_ASSERT(u.max_task_pinned == 0);
      RC_ASSERT(u.flexible_reserve == 0);
      RC_ASSERT(u.flexible_count == 0);
    }
  }
  const std::string after = a->dump();
  if (after != fresh)
    RC_FAIL("dump after releasing everything differs from a fresh arbiter:\n" + fresh + "---\n" +
            after);
}

RC_GTEST_PROP(ArbiterModel, RefusedOrReleasedLeavesDumpUnchanged, ()) {
  const ConfigSpec spec = *gen_config();
  const ArbiterConfig cfg = spec.config();
  auto a = make_arbiter(cfg);
  Model m(cfg);
  std::vector<Reservation> held;
  reserve_some(*a, m, gen_requests(cfg.cpus, 0, 15), held);
  const std::string before = a->dump();

  // One request: reserve then release (or refused).
  const Request r = gen_request_now(cfg.cpus);
  {
    Model mm = m;
    const auto want = mm.reserve(r);
    auto got = a->reserve(r);
    EXPECT_OUTCOME(got, want, "reserve(" + describe(r) + ")");
    if (got) a->release(*got);
  }
  if (a->dump() != before)
    RC_FAIL("dump changed after reserve+release:\n" + before + "---\n" + a->dump());

  // Several requests at once: reserve_all then release all (or refused).
  const std::vector<Request> group = gen_requests(cfg.cpus, 1, 4);
  {
    Model mm = m;
    const auto want = mm.reserve_all(group);
    auto got = a->reserve_all(group);
    EXPECT_OUTCOME(got, want, "reserve_all");
    if (got) release_all_randomly(*a, *got);
  }
  if (a->dump() != before)
    RC_FAIL("dump changed after reserve_all+release:\n" + before + "---\n" + a->dump());
  release_all_randomly(*a, held);
  RC_ASSERT(!a->is_used());
}

}  // namespace
}  // namespace hwarb::model

#include "hwarb/breakpoints/watchpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {
namespace {

using pmu::BpType;
using sim::AccessKind;

TEST(SplitRange, FewestAlignedPieces) {
  EXPECT_EQ(split_range(0x1001, 7), (std::vector<Piece>{{0x1001, 1}, {0x1002, 2}, {0x1004, 4}}));
  EXPECT_EQ(split_range(0x1000, 16), (std::vector<Piece>{{0x1000, 8}, {0x1008, 8}}));
  EXPECT_EQ(split_range(0x1003, 2), (std::vector<Piece>{{0x1003, 1}, {0x1004, 1}}));
  EXPECT_EQ(split_range(0x1000, 8, 4), (std::vector<Piece>{{0x1000, 4}, {0x1004, 4}}));
  EXPECT_EQ(split_range(0x1007, 1), (std::vector<Piece>{{0x1007, 1}}));
}

// The fewest aligned 1/2/4/.../max_len pieces covering [addr, addr+len) exactly, by dynamic
// programming over the end positions (independent of the greedy algorithm under test).
std::size_t min_pieces(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len) {
  const std::size_t kInf = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> best(len + 1, kInf);  // best[i]: pieces covering [addr, addr+i)
  best[0] = 0;
  for (std::uint64_t i = 0; i < len; ++i) {
    if (best[i] == kInf) continue;
    for (std::uint64_t size = 1; size <= max_len; size *= 2) {
      if ((addr + i) % size != 0 || i + size > len) continue;
      best[i + size] = std::min(best[i + size], best[i] + 1);
    }
  }
  return best[len];
}

TEST(SplitRange, ExhaustiveAgainstMinimalCover) {
  int checked = 0;
  for (std::uint64_t base : {std::uint64_t{0}, std::uint64_t{0x1000}, std::uint64_t{0x7ff8}}) {
    for (std::uint64_t mis = 0; mis < 8; ++mis) {
      for (std::uint64_t len = 1; len <= 40; ++len) {
        for (std::uint64_t max_len : {std::uint64_t{8}, std::uint64_t{4}}) {
          const std::uint64_t addr = base + mis;
          SCOPED_TRACE(testing::Message()
                       << "addr " << addr << " len " << len << " max " << max_len);
          const std::vector<Piece> pieces = split_range(addr, len, max_len);
          ASSERT_FALSE(pieces.empty());
          std::uint64_t at = addr;
          for (const Piece& p : pieces) {
            ASSERT_TRUE(p.len == 1 || p.len == 2 || p.len == 4 || p.len == 8) << p.len;
            ASSERT_LE(p.len, max_len);
            ASSERT_EQ(p.addr % p.len, 0u) << "piece at " << p.addr << " len " << p.len;
            ASSERT_EQ(p.addr, at);  // contiguous, in address order
            at += p.len;
          }
          ASSERT_EQ(at, addr + len);  // exact cover
          ASSERT_EQ(pieces.size(), min_pieces(addr, len, max_len));
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 8 * 40 * 2);
}

TEST(SplitRange, CountPiecesWithoutMakingThem) {
  for (std::uint64_t mis = 0; mis < 16; ++mis) {
    for (std::uint64_t len = 1; len <= 70; ++len) {
      for (std::uint64_t max_len : {std::uint64_t{8}, std::uint64_t{4}}) {
        EXPECT_EQ(count_pieces(0x1000 + mis, len, max_len),
                  split_range(0x1000 + mis, len, max_len).size())
            << mis << " " << len << " " << max_len;
      }
    }
  }
  // Long ranges: the whole 8-byte pieces in the middle are counted at once.
  EXPECT_EQ(count_pieces(0x1003, kMaxWatchLen), split_range(0x1003, kMaxWatchLen).size());
  EXPECT_EQ(count_pieces(0x1000, kMaxWatchLen), kMaxWatchLen / 8);
  EXPECT_EQ(count_pieces(0x1001, std::numeric_limits<std::uint64_t>::max() / 2),
            std::numeric_limits<std::uint64_t>::max() / 16 + 3);
}

std::unique_ptr<sim::System> make(int cpus = 2) {
  auto s = sim::System::create({cpus, Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(s.has_value());
  return std::move(*s);
}

struct Fixture {
  std::unique_ptr<sim::System> s;
  TaskId t;
  std::vector<WatchHit> hits;
  explicit Fixture(int cpus = 2) : s(make(cpus)) {
    t = *s->machine().create_task();
    EXPECT_TRUE(s->machine().switch_to(CpuId(0), t));
  }
  Watchpoints& w() { return s->watchpoints(); }
  WatchHandler handler() {
    return [this](const WatchHit& h) { hits.push_back(h); };
  }
  Result<WatchId> watch(std::optional<TaskId> task, std::uint64_t addr, std::uint64_t len,
                        BpType type = BpType::kW) {
    WatchSpec spec;
    spec.task = task;
    spec.addr = addr;
    spec.len = len;
    spec.type = type;
    return w().watch(spec, handler());
  }
  sim::Outcome access(AccessKind kind, std::uint64_t addr, int size, std::uint64_t v = 0,
                      int cpu = 0, std::optional<TaskId> task = std::nullopt) {
    auto o = s->machine().access(CpuId(cpu), task.value_or(t), kind, addr, size, v);
    EXPECT_TRUE(o.has_value());
    return o ? *o : sim::Outcome{};
  }
  int armed(int cpu) {
    int n = 0;
    for (const pmu::Event* e : s->bp_pmu().installed(CpuId(cpu))) n += e != nullptr;
    return n;
  }
};

struct Snapshot {
  std::string dump;
  std::vector<pmu::EventId> events;
  std::size_t shared, size;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};
Snapshot snap(Fixture& f) {
  return {f.s->arbiter().dump(), f.s->core().events(), f.w().shared_pieces(), f.w().size()};
}

TEST(Watchpoints, UnalignedSevenBytesUseThreeRegisters) {
  Fixture f;
  auto id = f.watch(f.t, 0x1001, 7);
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(f.w().pieces(*id), (std::vector<Piece>{{0x1001, 1}, {0x1002, 2}, {0x1004, 4}}));
  EXPECT_EQ(f.w().events(*id).size(), 3u);
  EXPECT_EQ(f.w().shared_pieces(), 3u);
  EXPECT_EQ(f.armed(0), 3);
  auto regs = *f.s->machine().debug_registers(CpuId(0));
  std::set<std::uint64_t> addrs(regs.dr, regs.dr + 3);
  EXPECT_EQ(addrs, (std::set<std::uint64_t>{0x1001, 0x1002, 0x1004}));
  for (int slot = 0; slot < 3; ++slot) {
    EXPECT_EQ(x86::dr7::type(regs.dr7, slot), x86::DrType::kWrite);
  }
  // Each byte of the range is watched; the bytes next to it are not.
  for (std::uint64_t b = 0x1000; b <= 0x1008; ++b) {
    f.hits.clear();
    f.access(AccessKind::kWrite, b, 1, 0x5a);
    const bool inside = b >= 0x1001 && b < 0x1008;
    EXPECT_EQ(f.hits.size(), inside ? 1u : 0u) << b;
  }
  ASSERT_TRUE(f.w().unwatch(*id));
  EXPECT_EQ(f.armed(0), 0);
  EXPECT_FALSE(f.s->arbiter().is_used());
  EXPECT_EQ(f.w().shared_pieces(), 0u);
}

TEST(Watchpoints, AllOrNothingWhenRegistersRunOut) {
  Fixture f;
  std::vector<BreakpointHandle> others;
  for (int i = 0; i < 2; ++i) {
    auto h = f.s->breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, f.t);
    ASSERT_TRUE(h);
    others.push_back(std::move(*h));
  }
  const Snapshot before = snap(f);
  auto id = f.watch(f.t, 0x1001, 7);  // 3 registers, 2 left
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(id.error().message().find("register"), std::string::npos) << id.error().message();
  EXPECT_NE(id.error().message().find("3"), std::string::npos) << id.error().message();
  EXPECT_EQ(snap(f), before);
  EXPECT_EQ(f.armed(0), 2);
  // A 2-register range fits.
  auto ok = f.watch(f.t, 0x2002, 4);
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(f.w().pieces(*ok), (std::vector<Piece>{{0x2002, 2}, {0x2004, 2}}));
  EXPECT_EQ(f.armed(0), 4);
  // Wide: one CPU full is enough to refuse it on every CPU.
  const Snapshot before_wide = snap(f);
  auto wide = f.watch(std::nullopt, 0x3000, 4);
  ASSERT_FALSE(wide);
  EXPECT_EQ(wide.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(snap(f), before_wide);
  others.clear();
  ASSERT_TRUE(f.w().unwatch(*ok));
  EXPECT_FALSE(f.s->arbiter().is_used());
}

TEST(Watchpoints, IdenticalRequestsShareOneRegister) {
  Fixture f;
  auto a = f.watch(f.t, 0x1000, 4);
  ASSERT_TRUE(a);
  const auto events_a = f.w().events(*a);
  ASSERT_EQ(events_a.size(), 1u);
  const std::size_t core_events = f.s->core().events().size();
  auto b = f.watch(f.t, 0x1000, 4);
  ASSERT_TRUE(b);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(f.w().events(*b), events_a);
  EXPECT_EQ(f.s->core().events().size(), core_events);  // no new breakpoint
  EXPECT_EQ(f.w().shared_pieces(), 1u);
  EXPECT_EQ(f.w().users_of(events_a[0]), (std::vector<WatchId>{*a, *b}));
  EXPECT_EQ(f.armed(0), 1);
  // One access: each watchpoint reports it once, in WatchId order.
  f.access(AccessKind::kWrite, 0x1000, 4, 7);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits[0].id, *a);
  EXPECT_EQ(f.hits[1].id, *b);
  // A partly overlapping range shares only its identical piece.
  auto c = f.watch(f.t, 0x0ffc, 8);  // one piece: [0xffc, +4) is not aligned to 8
  ASSERT_TRUE(c);
  EXPECT_EQ(f.w().pieces(*c), (std::vector<Piece>{{0x0ffc, 4}, {0x1000, 4}}));
  EXPECT_EQ(f.w().shared_pieces(), 2u);
  EXPECT_EQ(f.w().users_of(events_a[0]), (std::vector<WatchId>{*a, *b, *c}));
  EXPECT_EQ(f.armed(0), 2);
  // Other owners or types do not share.
  TaskId other = *f.s->machine().create_task();
  auto d = f.watch(other, 0x1000, 4);
  auto e = f.watch(f.t, 0x1000, 4, BpType::kRw);
  ASSERT_TRUE(d && e);
  EXPECT_NE(f.w().events(*d), events_a);
  EXPECT_NE(f.w().events(*e), events_a);
  EXPECT_EQ(f.w().shared_pieces(), 4u);
  // The shared register goes with its last user.
  ASSERT_TRUE(f.w().unwatch(*a));
  EXPECT_NE(f.s->core().find(events_a[0]), nullptr);
  ASSERT_TRUE(f.w().unwatch(*c));
  EXPECT_NE(f.s->core().find(events_a[0]), nullptr);
  EXPECT_EQ(f.w().users_of(events_a[0]), (std::vector<WatchId>{*b}));
  ASSERT_TRUE(f.w().unwatch(*b));
  EXPECT_EQ(f.s->core().find(events_a[0]), nullptr);
  EXPECT_TRUE(f.w().users_of(events_a[0]).empty());
  ASSERT_TRUE(f.w().unwatch(*d));
  ASSERT_TRUE(f.w().unwatch(*e));
  EXPECT_EQ(f.w().unwatch(*e).error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(f.w().size(), 0u);
  EXPECT_FALSE(f.s->arbiter().is_used());
}

TEST(Watchpoints, OneReportPerAccessAcrossPieces) {
  Fixture f;
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x1000, 8, 0x8877665544332211));
  auto id = f.watch(f.t, 0x1002, 4);  // pieces [0x1002,+2) and [0x1004,+2)
  ASSERT_TRUE(id);
  ASSERT_EQ(f.w().pieces(*id).size(), 2u);
  auto o = f.access(AccessKind::kWrite, 0x1000, 8, 0x0102030405060708);
  EXPECT_EQ(o.exceptions, 1);
  EXPECT_EQ(o.dr6 & 0x3, 0x3u);  // both registers matched
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_EQ(f.hits[0].id, *id);
  EXPECT_TRUE(f.hits[0].has_value);
  EXPECT_EQ(f.hits[0].old_value, 0x66554433u);
  EXPECT_EQ(f.hits[0].new_value, 0x03040506u);
  EXPECT_EQ(f.hits[0].sample.addr, 0x1000u);
  EXPECT_EQ(f.hits[0].sample.task, f.t);
  // The next access is a new report, even with the same values.
  f.access(AccessKind::kWrite, 0x1000, 8, 0x0102030405060708);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits[1].old_value, 0x03040506u);
  EXPECT_EQ(f.hits[1].new_value, 0x03040506u);
  // Touching one piece only.
  f.access(AccessKind::kWrite, 0x1005, 1, 0xee);
  ASSERT_EQ(f.hits.size(), 3u);
  EXPECT_EQ(f.hits[2].old_value, 0x03040506u);
  EXPECT_EQ(f.hits[2].new_value, 0xee040506u);
}

TEST(Watchpoints, WriteReportsTheWholeWatchedValue) {
  Fixture f;
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x2000, 4, 0x11223344));
  auto id = f.watch(f.t, 0x2000, 4);
  ASSERT_TRUE(id);
  f.access(AccessKind::kWrite, 0x2001, 1, 0xab);  // one byte into the int
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_TRUE(f.hits[0].has_value);
  EXPECT_EQ(f.hits[0].old_value, 0x11223344u);
  EXPECT_EQ(f.hits[0].new_value, 0x1122ab44u);
  EXPECT_EQ(f.hits[0].sample.size, 1);
  EXPECT_EQ(f.hits[0].sample.access, pmu::AccessKind::kWrite);
  // A write straddling the watched range's end: only the watched bytes count.
  f.access(AccessKind::kWrite, 0x2002, 4, 0xccddeeff);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits[1].old_value, 0x1122ab44u);
  EXPECT_EQ(f.hits[1].new_value, 0xeeffab44u);
  // Reads are not reported by a w watchpoint.
  f.access(AccessKind::kRead, 0x2000, 4);
  EXPECT_EQ(f.hits.size(), 2u);
}

TEST(Watchpoints, UnalignedSevenByteValue) {
  Fixture f;
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x1000, 8, 0x0807060504030201));
  auto id = f.watch(f.t, 0x1001, 7);
  ASSERT_TRUE(id);
  f.access(AccessKind::kWrite, 0x1003, 2, 0xbbaa);
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_EQ(f.hits[0].old_value, 0x08070605040302u);
  EXPECT_EQ(f.hits[0].new_value, 0x080706bbaa0302u);
}

TEST(Watchpoints, ReadsReportTheValue) {
  Fixture f;
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x3000, 8, 0xdeadbeefcafef00d));
  auto id = f.watch(f.t, 0x3000, 8, BpType::kRw);
  ASSERT_TRUE(id);
  f.access(AccessKind::kRead, 0x3004, 2);
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_TRUE(f.hits[0].has_value);
  EXPECT_EQ(f.hits[0].sample.access, pmu::AccessKind::kRead);
  EXPECT_EQ(f.hits[0].old_value, 0xdeadbeefcafef00du);
  EXPECT_EQ(f.hits[0].new_value, 0xdeadbeefcafef00du);
  f.access(AccessKind::kWrite, 0x3000, 1, 0x11);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits[1].new_value, 0xdeadbeefcafef011u);
}

TEST(Watchpoints, LongerThanEightBytesReportsTheAccessBytes) {
  Fixture f;
  auto id = f.watch(f.t, 0x4000, 16);
  ASSERT_TRUE(id);
  EXPECT_EQ(f.w().pieces(*id).size(), 2u);
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x400c, 4, 0x44332211));
  f.access(AccessKind::kWrite, 0x400e, 4, 0xaabbccdd);  // 2 bytes inside, 2 past the end
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_EQ(f.hits[0].old_value, 0x4433u);
  EXPECT_EQ(f.hits[0].new_value, 0xccddu);
}

TEST(Watchpoints, ConditionFiltersOnTheNewValue) {
  Fixture f;
  WatchSpec spec;
  spec.task = f.t;
  spec.addr = 0x5000;
  spec.len = 4;
  spec.condition = [](std::uint64_t v) { return v == 5; };
  auto id = f.w().watch(spec, f.handler());
  ASSERT_TRUE(id);
  f.access(AccessKind::kWrite, 0x5000, 4, 3);
  EXPECT_TRUE(f.hits.empty());
  f.access(AccessKind::kWrite, 0x5000, 4, 5);
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_EQ(f.hits[0].old_value, 3u);
  EXPECT_EQ(f.hits[0].new_value, 5u);
  f.access(AccessKind::kWrite, 0x5000, 4, 5);
  EXPECT_EQ(f.hits.size(), 2u);
  f.access(AccessKind::kWrite, 0x5001, 1, 1);  // whole value 0x105
  EXPECT_EQ(f.hits.size(), 2u);
  // The breakpoint counted every hit; the condition only filtered the reports.
  const auto evs = f.w().events(*id);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(f.s->core().find(evs[0])->count(), 4u);
}

TEST(Watchpoints, ExecuteWatchpoint) {
  Fixture f;
  auto id = f.watch(f.t, 0x400003, 1, BpType::kX);
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(f.w().pieces(*id), (std::vector<Piece>{{0x400003, 8}}));  // sizeof(long)
  auto regs = *f.s->machine().debug_registers(CpuId(0));
  EXPECT_EQ(regs.dr[0], 0x400003u);
  EXPECT_EQ(x86::dr7::type(regs.dr7, 0), x86::DrType::kExecute);
  ASSERT_TRUE(f.s->machine().exec(CpuId(0), f.t, 0x400000));
  ASSERT_TRUE(f.s->machine().exec(CpuId(0), f.t, 0x400004));
  EXPECT_TRUE(f.hits.empty());
  ASSERT_TRUE(f.s->machine().exec(CpuId(0), f.t, 0x400003));
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_FALSE(f.hits[0].has_value);
  EXPECT_EQ(f.hits[0].sample.ip, 0x400003u);
  EXPECT_EQ(f.hits[0].sample.access, pmu::AccessKind::kExecute);
  // Data accesses at that address do not trigger it.
  f.access(AccessKind::kWrite, 0x400003, 1, 1);
  EXPECT_EQ(f.hits.size(), 1u);
  // Executing it again reports again.
  ASSERT_TRUE(f.s->machine().exec(CpuId(0), f.t, 0x400003));
  EXPECT_EQ(f.hits.size(), 2u);
}

TEST(Watchpoints, InvalidSpecsNameTheField) {
  Fixture f;
  struct Bad {
    WatchSpec spec;
    const char* field;
  };
  std::vector<Bad> bads;
  WatchSpec s;
  s.task = f.t;
  s.addr = 0x1000;
  s.len = 0;
  bads.push_back({s, "len"});
  s.len = 16;
  s.addr = std::numeric_limits<std::uint64_t>::max() - 7;
  bads.push_back({s, "len"});  // wraps
  s.addr = 0x1000;
  s.len = 4;
  s.type = BpType::kX;
  bads.push_back({s, "len"});  // execute watches one instruction
  s.len = 1;
  s.condition = [](std::uint64_t) { return true; };
  bads.push_back({s, "if"});
  s.condition = {};
  s.type = BpType::kR;
  s.len = 4;
  bads.push_back({s, "type"});  // no read-only watchpoint on x86
  s.type = BpType::kW;
  s.addr = task_size_max(Arch::kX86_64);
  bads.push_back({s, "addr"});  // kernel space for a task: EPERM
  s.addr = 0x1000;
  s.len = kMaxWatchLen + 1;
  bads.push_back({s, "len"});  // over the limit
  s.len = std::numeric_limits<std::uint64_t>::max();
  bads.push_back({s, "len"});
  const Snapshot before = snap(f);
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.field);
    auto r = f.w().watch(b.spec, f.handler());
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().message().starts_with(b.field)) << r.error().message();
    EXPECT_EQ(snap(f), before);
  }
}

// The longest watchpoint is refused for registers (ENOSPC, with its piece count) in time linear
// in its pieces: no pairwise comparison of pieces, nothing left behind.
TEST(Watchpoints, LongestWatchpointIsRefusedInLinearTime) {
  Fixture f;
  const Snapshot before = snap(f);
  const auto start = std::chrono::steady_clock::now();
  auto r = f.watch(f.t, 0x1000, kMaxWatchLen);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(r.error().message().find("needs 131072 debug registers (0 shared, 131072 new)"),
            std::string::npos)
      << r.error().message();
  EXPECT_LT(seconds, 20.0);  // about 0.1 s; quadratic was minutes
  EXPECT_EQ(snap(f), before);
}

// users_of, unwatch and forget_task find a watchpoint's pieces without scanning the others.
TEST(Watchpoints, ManySharedUsersAreIndexed) {
  Fixture f;
  std::vector<WatchId> ids;
  for (int i = 0; i < 2000; ++i) {
    auto id = f.watch(f.t, 0x1000, 8);
    ASSERT_TRUE(id) << id.error().to_string();
    ids.push_back(*id);
  }
  const std::vector<pmu::EventId> events = f.w().events(ids.front());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(f.w().users_of(events[0]), ids);
  for (std::size_t i = 0; i < ids.size(); i += 2) ASSERT_TRUE(f.w().unwatch(ids[i]));
  EXPECT_EQ(f.w().users_of(events[0]).size(), 1000u);
  EXPECT_EQ(f.w().users_of(events[0]).front(), ids[1]);
  f.w().forget_task(f.t);
  EXPECT_EQ(f.w().size(), 0u);
  EXPECT_TRUE(f.w().users_of(events[0]).empty());
  EXPECT_EQ(f.w().shared_pieces(), 0u);
}

TEST(Watchpoints, WideWatchpointFiresForAnyTaskOnAnyCpu) {
  Fixture f(3);
  sim::Machine& m = f.s->machine();
  TaskId u = *m.create_task(), v = *m.create_task();
  ASSERT_TRUE(m.switch_to(CpuId(1), u));
  ASSERT_TRUE(m.write_memory(v, 0x6000, 4, 0xaaaaaaaa));
  auto id = f.watch(std::nullopt, 0x6000, 4);
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(f.w().events(*id).size(), 3u);  // one per online CPU
  for (int c = 0; c < 3; ++c) EXPECT_EQ(f.armed(c), 1);
  f.access(AccessKind::kWrite, 0x6000, 4, 1, 0, f.t);
  f.access(AccessKind::kWrite, 0x6002, 2, 2, 1, u);
  ASSERT_TRUE(m.switch_to(CpuId(2), v));
  f.access(AccessKind::kWrite, 0x6003, 1, 0xbb, 2, v);
  ASSERT_EQ(f.hits.size(), 3u);
  EXPECT_EQ(f.hits[0].sample.task, f.t);
  EXPECT_EQ(f.hits[0].sample.cpu, CpuId(0));
  EXPECT_EQ(f.hits[1].sample.task, u);
  EXPECT_EQ(f.hits[1].sample.cpu, CpuId(1));
  EXPECT_EQ(f.hits[2].sample.task, v);
  EXPECT_EQ(f.hits[2].sample.cpu, CpuId(2));
  // Values come from the accessing task's memory.
  EXPECT_EQ(f.hits[2].old_value, 0xaaaaaaaau);
  EXPECT_EQ(f.hits[2].new_value, 0xbbaaaaaau);
  // A wide and an identical second wide share.
  auto again = f.watch(std::nullopt, 0x6000, 4);
  ASSERT_TRUE(again);
  EXPECT_EQ(f.w().events(*again), f.w().events(*id));
  // The task exits: the wide watchpoint stays.
  ASSERT_TRUE(m.exit(v));
  EXPECT_EQ(f.w().size(), 2u);
  ASSERT_TRUE(f.w().unwatch(*id));
  ASSERT_TRUE(f.w().unwatch(*again));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(f.armed(c), 0);
  EXPECT_FALSE(f.s->arbiter().is_used());
}

TEST(Watchpoints, WideWatchpointSkipsOfflineCpus) {
  Fixture f(3);
  ASSERT_TRUE(f.s->machine().set_online(CpuId(2), false));
  auto id = f.watch(std::nullopt, 0x6000, 4);
  ASSERT_TRUE(id);
  const auto evs = f.w().events(*id);
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(f.s->core().find(evs[0])->cpu(), CpuId(0));
  EXPECT_EQ(f.s->core().find(evs[1])->cpu(), CpuId(1));
}

TEST(Watchpoints, ForgetTaskDropsOnlyThatTasksWatchpoints) {
  Fixture f;
  sim::Machine& m = f.s->machine();
  TaskId u = *m.create_task();
  auto a = f.watch(f.t, 0x1000, 4);
  auto b = f.watch(f.t, 0x1001, 3);  // two pieces
  auto c = f.watch(u, 0x1000, 4);
  auto wide = f.watch(std::nullopt, 0x2000, 8);
  ASSERT_TRUE(a && b && c && wide);
  EXPECT_EQ(f.w().size(), 4u);
  const auto ea = f.w().events(*a);
  f.w().forget_task(f.t);
  EXPECT_EQ(f.w().size(), 2u);
  EXPECT_TRUE(f.w().pieces(*a).empty());
  EXPECT_TRUE(f.w().events(*b).empty());
  EXPECT_EQ(f.s->core().find(ea[0]), nullptr);
  EXPECT_EQ(f.w().unwatch(*a).error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(f.w().events(*c).size(), 1u);
  EXPECT_EQ(f.armed(0), 1);  // only the wide one on cpu 0 (u does not run)
  f.access(AccessKind::kWrite, 0x1000, 4, 9);
  EXPECT_TRUE(f.hits.empty());
  // A task's exit forgets its watchpoints through the System.
  ASSERT_TRUE(m.exit(u));
  EXPECT_EQ(f.w().size(), 1u);
  EXPECT_TRUE(f.w().pieces(*c).empty());
  f.w().forget_task(TaskId(999));  // unknown: fine
  ASSERT_TRUE(f.w().unwatch(*wide));
  EXPECT_FALSE(f.s->arbiter().is_used());
  // Ids are never reused.
  auto d = f.watch(f.t, 0x1000, 4);
  ASSERT_TRUE(d);
  EXPECT_GT(*d, *wide);
}

TEST(Watchpoints, ReportsOfOneAccessComeInRegisterOrder) {
  Fixture f;
  // Occupy DR0 so that the first watchpoint gets DR1; then free DR0 for the second one.
  auto plug = f.s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x100, 8, BpType::kRw),
                                                             {}, f.t);
  ASSERT_TRUE(plug);
  auto first = f.watch(f.t, 0x7000, 4);
  ASSERT_TRUE(first);
  EXPECT_TRUE(plug->close());
  auto second = f.watch(f.t, 0x7000, 2);
  ASSERT_TRUE(second);
  const auto e1 = f.w().events(*first), e2 = f.w().events(*second);
  ASSERT_EQ(e1.size(), 1u);
  ASSERT_EQ(e2.size(), 1u);
  EXPECT_LT(f.s->core().find(e2[0])->hw_index, f.s->core().find(e1[0])->hw_index);
  f.access(AccessKind::kWrite, 0x7000, 1, 1);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits[0].id, *second);  // its register is DR0
  EXPECT_EQ(f.hits[1].id, *first);
}

// A hit whose sample carries no value (size 0: a driver that could not read the access, as a
// real process's debug exception may be) or none of the range's bytes is reported without one:
// has_value false, never zeros passed off as the old and new value.
TEST(Watchpoints, ASampleWithoutTheValueReportsNoValue) {
  Fixture f;
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x2000, 4, 0x11223344));
  auto id = f.watch(f.t, 0x2000, 4);
  ASSERT_TRUE(id);
  const auto events = f.w().events(*id);
  ASSERT_EQ(events.size(), 1u);
  const int reg = f.s->core().find(events[0])->hw_index;
  DebugTrap trap;
  trap.dr6 = x86::dr6::trap_bit(reg);
  trap.sample.addr = 0x2000;
  trap.sample.task = f.t;
  trap.sample.cpu = CpuId(0);
  trap.sample.access = pmu::AccessKind::kWrite;
  trap.sample.time = 1;
  EXPECT_NE(f.s->bp_pmu().handle(trap), 0u);
  ASSERT_EQ(f.hits.size(), 1u);
  EXPECT_FALSE(f.hits[0].has_value);
  EXPECT_EQ(f.hits[0].old_value, 0u);
  EXPECT_EQ(f.hits[0].new_value, 0u);
  // A later access's sample, delivered through the same trap.
  auto access = [&](std::uint64_t addr, int size, std::uint64_t old_value,
                    std::uint64_t new_value) {
    trap.sample.addr = addr;
    trap.sample.size = size;
    trap.sample.old_value = old_value;
    trap.sample.new_value = new_value;
    ++trap.sample.time;
    f.s->bp_pmu().handle(trap);
  };
  // Bytes beside the range only (one trap's sample serves every register the access hit).
  access(0x2004, 4, 1, 2);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_FALSE(f.hits[1].has_value);
  // With the value: reported, the reader completing the whole watched value.
  ASSERT_TRUE(f.s->machine().write_memory(f.t, 0x2000, 1, 0x55));
  access(0x2000, 1, 0x44, 0x55);
  ASSERT_EQ(f.hits.size(), 3u);
  EXPECT_TRUE(f.hits[2].has_value);
  EXPECT_EQ(f.hits[2].old_value, 0x11223344u);
  EXPECT_EQ(f.hits[2].new_value, 0x11223355u);
}

TEST(Watchpoints, DestroyingTheLayerReleasesEverything) {
  auto s = make();
  TaskId t = *s->machine().create_task();
  {
    Watchpoints w(s->breakpoints(), s->arbiter());
    WatchSpec spec;
    spec.task = t;
    spec.addr = 0x1001;
    spec.len = 7;
    ASSERT_TRUE(w.watch(spec, {}));
    EXPECT_EQ(s->core().events().size(), 3u);
  }
  EXPECT_TRUE(s->core().events().empty());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(Watchpoints, WithoutAReaderValuesAreTheAccessBytes) {
  auto s = make();
  TaskId t = *s->machine().create_task();
  ASSERT_TRUE(s->machine().switch_to(CpuId(0), t));
  ASSERT_TRUE(s->machine().write_memory(t, 0x2000, 4, 0x11223344));
  std::vector<WatchHit> hits;
  Watchpoints w(s->breakpoints(), s->arbiter());
  WatchSpec spec;
  spec.task = t;
  spec.addr = 0x2000;
  spec.len = 4;
  ASSERT_TRUE(w.watch(spec, [&](const WatchHit& h) { hits.push_back(h); }));
  ASSERT_TRUE(s->machine().access(CpuId(0), t, AccessKind::kWrite, 0x2001, 1, 0xab));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].old_value, 0x33u);
  EXPECT_EQ(hits[0].new_value, 0xabu);
}

}  // namespace
}  // namespace hwarb::breakpoints

#include "hwarb/breakpoints/bp_pmu.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/pmu/core.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {
namespace {

using pmu::BpType;
using x86::DrLen;
using x86::DrType;

// A register file that records every write, in order.
class FakeRegs final : public DebugRegisterFile {
 public:
  struct Write {
    enum Kind { kDr7, kAddr } kind;
    int cpu;
    int slot;  // kAddr only
    std::uint64_t value;
    friend bool operator==(const Write&, const Write&) = default;
  };
  explicit FakeRegs(int cpus)
      : dr7_(static_cast<std::size_t>(cpus), 0),
        addr_(static_cast<std::size_t>(cpus), std::vector<std::uint64_t>(4, 0)) {}
  std::uint64_t dr7(CpuId cpu) const override { return dr7_.at(idx(cpu)); }
  void set_dr7(CpuId cpu, std::uint64_t value) override {
    dr7_.at(idx(cpu)) = value;
    log.push_back({Write::kDr7, cpu.value(), -1, value});
  }
  void set_address(CpuId cpu, int slot, std::uint64_t addr) override {
    addr_.at(idx(cpu)).at(static_cast<std::size_t>(slot)) = addr;
    log.push_back({Write::kAddr, cpu.value(), slot, addr});
  }
  std::uint64_t addr(int cpu, int slot) const {
    return addr_.at(static_cast<std::size_t>(cpu)).at(static_cast<std::size_t>(slot));
  }
  static Write dr7_write(int cpu, std::uint64_t v) { return {Write::kDr7, cpu, -1, v}; }
  static Write addr_write(int cpu, int slot, std::uint64_t v) {
    return {Write::kAddr, cpu, slot, v};
  }

  std::vector<Write> log;

 private:
  static std::size_t idx(CpuId c) { return static_cast<std::size_t>(c.value()); }
  std::vector<std::uint64_t> dr7_;
  std::vector<std::vector<std::uint64_t>> addr_;
};

DrType dr_type_of(BpType t) {
  switch (t) {
    case BpType::kW:
      return DrType::kWrite;
    case BpType::kRw:
      return DrType::kReadWrite;
    default:
      return DrType::kExecute;
  }
}

// A Core with the breakpoint PMU on a FakeRegs (or on no hardware).
struct Fixture {
  explicit Fixture(Arch arch = Arch::kX86_64, int cpus = 2, bool hardware = true)
      : regs(cpus), pmu(arch, cpus, hardware ? static_cast<DebugRegisterFile*>(&regs) : nullptr) {
    arbiter::ArbiterConfig ac;
    ac.profile =
        arch == Arch::kArm64 ? arbiter::ArchProfile::arm64() : arbiter::ArchProfile::x86_64();
    ac.cpus = cpus;
    arb = std::move(*arbiter::Arbiter::create(ac));
    core = std::make_unique<pmu::Core>(*arb, clock);
    EXPECT_TRUE(core->register_pmu(pmu::EventType::kBreakpoint, pmu).has_value());
  }
  ~Fixture() {
    // Uninstall what the test added by hand before the core frees the events.
    for (int c = 0; c < core->cpus(); ++c) {
      auto inst = pmu.installed(CpuId(c));
      for (const pmu::Event* e : inst) {
        if (e && direct.contains(e)) pmu.del(const_cast<pmu::Event&>(*e), CpuId(c));
      }
    }
    handles.clear();
    core.reset();
  }

  // A disabled event (never scheduled by the core) that the test adds to the driver by hand.
  // Each belongs to its own task, so the arbiter admits any number of them.
  pmu::Event& event(std::uint64_t addr, std::uint64_t len, BpType type) {
    auto a = breakpoint_attr(addr, len, type);
    a.disabled = true;
    auto h = core->open(a, {TaskId(next_task++), std::nullopt});
    EXPECT_TRUE(h.has_value()) << h.error().to_string();
    pmu::Event& e = const_cast<pmu::Event&>(*h->event());
    handles.push_back(std::move(*h));
    direct.insert(&e);
    return e;
  }
  // A CPU-bound, enabled event: the core installs and starts it at once.
  pmu::EventHandle cpu_event(int cpu, std::uint64_t addr, std::uint64_t len, BpType type,
                             std::vector<pmu::Sample>* hits, bool exclude_user = false) {
    auto a = breakpoint_attr(addr, len, type);
    a.exclude_user = exclude_user;
    auto h = core->open(a, {std::nullopt, CpuId(cpu)},
                        [hits](pmu::Event&, const pmu::Sample& s) { hits->push_back(s); });
    EXPECT_TRUE(h.has_value()) << h.error().to_string();
    return h ? std::move(*h) : pmu::EventHandle();
  }
  std::uint64_t dr7(int cpu) const { return regs.dr7(CpuId(cpu)); }

  pmu::ManualClock clock;
  FakeRegs regs;
  BreakpointPmu pmu;
  std::unique_ptr<arbiter::Arbiter> arb;
  std::unique_ptr<pmu::Core> core;
  std::vector<pmu::EventHandle> handles;
  std::set<const pmu::Event*> direct;
  std::int64_t next_task = 100;
};

TEST(BpPmu, NameArchAndRegisters) {
  Fixture x86;
  EXPECT_EQ(x86.pmu.name(), "breakpoint");
  EXPECT_EQ(x86.pmu.arch(), Arch::kX86_64);
  EXPECT_EQ(x86.pmu.registers(), 4);
  EXPECT_EQ(x86.pmu.installed(CpuId(1)).size(), 4u);
  Fixture nohw(Arch::kX86_64, 2, /*hardware=*/false);
  EXPECT_EQ(nohw.pmu.registers(), 4);
  Fixture arm(Arch::kArm64, 2, /*hardware=*/false);
  EXPECT_EQ(arm.pmu.registers(), 10);
  EXPECT_EQ(arm.pmu.installed(CpuId(0)).size(), 10u);
}

TEST(BpPmu, ValidateUsesTheDriversArch) {
  Fixture x86;
  Fixture arm(Arch::kArm64, 2, false);
  EXPECT_FALSE(x86.pmu.validate(breakpoint_attr(0x1000, 4, BpType::kR)));
  EXPECT_TRUE(arm.pmu.validate(breakpoint_attr(0x1000, 4, BpType::kR)));
  EXPECT_TRUE(x86.pmu.validate(breakpoint_attr(0x1000, 8, BpType::kX)));
  EXPECT_FALSE(arm.pmu.validate(breakpoint_attr(0x1000, 8, BpType::kX)));
  // event_init refuses through the core: nothing remains.
  auto h = x86.core->open(breakpoint_attr(0x1001, 4, BpType::kW), {std::nullopt, CpuId(0)});
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(h.error().message().starts_with("addr"));
  EXPECT_FALSE(x86.arb->is_used());
  EXPECT_TRUE(x86.regs.log.empty());
}

// Every slot x every type x every length: the first free register, DRn = addr, then
// DR7 = x86::dr7::install(DR7, n, type, len); other CPUs untouched.
TEST(BpPmu, AddInstallsIntoFirstFreeRegisterExactlyAsInstall) {
  struct Kind {
    BpType type;
    std::uint64_t len;
  };
  const Kind kinds[] = {{BpType::kW, 1},  {BpType::kW, 2},  {BpType::kW, 4},
                        {BpType::kW, 8},  {BpType::kRw, 1}, {BpType::kRw, 2},
                        {BpType::kRw, 4}, {BpType::kRw, 8}, {BpType::kX, 8}};
  int checked = 0;
  for (int slot = 0; slot < 4; ++slot) {
    for (const Kind& k : kinds) {
      SCOPED_TRACE(testing::Message()
                   << "slot " << slot << " type " << to_string(k.type) << " len " << k.len);
      Fixture f;
      for (int i = 0; i < slot; ++i) {
        ASSERT_TRUE(f.pmu.add(f.event(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw),
                              CpuId(1)));
      }
      // x86 execute breakpoints may sit at any byte.
      const std::uint64_t addr = k.type == BpType::kX ? 0x400003 : 0x7000;
      pmu::Event& e = f.event(addr, k.len, k.type);
      const std::uint64_t before = f.dr7(1);
      f.regs.log.clear();
      ASSERT_TRUE(f.pmu.add(e, CpuId(1)));
      EXPECT_EQ(e.hw_index, slot);
      EXPECT_EQ(f.pmu.installed(CpuId(1))[static_cast<std::size_t>(slot)], &e);
      const DrLen len =
          k.type == BpType::kX ? DrLen::k1 : *x86::len_from_bytes(static_cast<int>(k.len));
      const std::uint64_t want = x86::dr7::install(before, slot, dr_type_of(k.type), len);
      EXPECT_EQ(f.regs.log, (std::vector<FakeRegs::Write>{FakeRegs::addr_write(1, slot, addr),
                                                          FakeRegs::dr7_write(1, want)}));
      EXPECT_EQ(f.regs.addr(1, slot), addr);
      const std::uint64_t dr7 = f.dr7(1);
      EXPECT_EQ(dr7, want);
      EXPECT_TRUE(x86::dr7::global_enabled(dr7, slot));
      EXPECT_FALSE(x86::dr7::local_enabled(dr7, slot));
      EXPECT_TRUE(x86::dr7::global_exact(dr7));
      EXPECT_EQ(x86::dr7::type(dr7, slot), dr_type_of(k.type));
      EXPECT_EQ(x86::dr7::len(dr7, slot), len);
      // The slots below are untouched.
      EXPECT_EQ(dr7 & ~(x86::dr7::control_mask(slot) | x86::dr7::enable_bits(slot)),
                before | (slot == 0 ? x86::dr7::kGlobalExact : 0));
      EXPECT_EQ(f.dr7(0), 0u);
      for (int s = 0; s < 4; ++s) EXPECT_EQ(f.regs.addr(0, s), 0u);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
}

TEST(BpPmu, InstallUninstallSequenceWithHandDerivedDr7) {
  Fixture f;
  pmu::Event& a = f.event(0x1000, 4, BpType::kW);   // slot 0: RW 01, LEN 11, G0
  pmu::Event& b = f.event(0x2000, 8, BpType::kRw);  // slot 1: RW 11, LEN 10, G1
  pmu::Event& c = f.event(0x3001, 8, BpType::kX);   // slot 2: RW 00, LEN 00, G2
  pmu::Event& d = f.event(0x4003, 1, BpType::kRw);  // slot 3: RW 11, LEN 00, G3
  ASSERT_TRUE(f.pmu.add(a, CpuId(0)));
  EXPECT_EQ(f.dr7(0), 0xd0202u);
  ASSERT_TRUE(f.pmu.add(b, CpuId(0)));
  EXPECT_EQ(f.dr7(0), 0xbd020au);
  ASSERT_TRUE(f.pmu.add(c, CpuId(0)));
  EXPECT_EQ(f.dr7(0), 0xbd022au);
  ASSERT_TRUE(f.pmu.add(d, CpuId(0)));
  EXPECT_EQ(f.dr7(0), 0x30bd02aau);
  EXPECT_EQ(f.regs.addr(0, 0), 0x1000u);
  EXPECT_EQ(f.regs.addr(0, 1), 0x2000u);
  EXPECT_EQ(f.regs.addr(0, 2), 0x3001u);
  EXPECT_EQ(f.regs.addr(0, 3), 0x4003u);

  // Remove the 2nd: DR7 first, then DR1 = 0.
  f.regs.log.clear();
  f.pmu.del(b, CpuId(0));
  EXPECT_EQ(b.hw_index, -1);
  EXPECT_EQ(f.regs.log, (std::vector<FakeRegs::Write>{FakeRegs::dr7_write(0, 0x300d02a2),
                                                      FakeRegs::addr_write(0, 1, 0)}));
  EXPECT_EQ(f.pmu.installed(CpuId(0)), (std::vector<const pmu::Event*>{&a, nullptr, &c, &d}));

  // The next add takes slot 1: RW 01, LEN 01.
  pmu::Event& e = f.event(0x6002, 2, BpType::kW);
  ASSERT_TRUE(f.pmu.add(e, CpuId(0)));
  EXPECT_EQ(e.hw_index, 1);
  EXPECT_EQ(f.regs.addr(0, 1), 0x6002u);
  EXPECT_EQ(f.dr7(0), 0x305d02aau);

  f.pmu.del(a, CpuId(0));
  EXPECT_EQ(f.dr7(0), 0x305002a8u);
  f.pmu.del(c, CpuId(0));
  EXPECT_EQ(f.dr7(0), 0x30500288u);
  f.pmu.del(d, CpuId(0));
  EXPECT_EQ(f.dr7(0), 0x00500208u);
  // The last one: no enable bit remains, and GE goes with it.
  f.pmu.del(e, CpuId(0));
  EXPECT_EQ(f.dr7(0), 0u);
  EXPECT_FALSE(x86::dr7::any_enabled(f.dr7(0)));
  for (int s = 0; s < 4; ++s) EXPECT_EQ(f.regs.addr(0, s), 0u);
  for (const pmu::Event* p : f.pmu.installed(CpuId(0))) EXPECT_EQ(p, nullptr);
  // Slot 0 is first free again.
  ASSERT_TRUE(f.pmu.add(c, CpuId(0)));
  EXPECT_EQ(c.hw_index, 0);
  EXPECT_EQ(f.dr7(0), 0x202u);
}

TEST(BpPmu, FifthAddIsEnospcAndWritesNothing) {
  Fixture f;
  std::vector<pmu::Event*> evs;
  for (int i = 0; i < 4; ++i) {
    evs.push_back(&f.event(0x1000 + 0x10 * static_cast<std::uint64_t>(i), 4, BpType::kRw));
    ASSERT_TRUE(f.pmu.add(*evs.back(), CpuId(0)));
  }
  const auto before = f.pmu.installed(CpuId(0));
  const auto log = f.regs.log;
  const std::uint64_t dr7 = f.dr7(0);
  pmu::Event& fifth = f.event(0x9000, 8, BpType::kX);
  auto r = f.pmu.add(fifth, CpuId(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(r.error().message().find("cpu 0"), std::string::npos) << r.error().message();
  EXPECT_EQ(fifth.hw_index, -1);
  EXPECT_EQ(f.regs.log, log);
  EXPECT_EQ(f.dr7(0), dr7);
  EXPECT_EQ(f.pmu.installed(CpuId(0)), before);
  // The other CPU has its own registers.
  ASSERT_TRUE(f.pmu.add(fifth, CpuId(1)));
  EXPECT_EQ(fifth.hw_index, 0);
  EXPECT_EQ(f.regs.addr(1, 0), 0x9000u);
  EXPECT_EQ(f.dr7(0), dr7);
  // Freeing one register on cpu 0 lets a fifth event in there.
  f.pmu.del(*evs[3], CpuId(0));
  pmu::Event& sixth = f.event(0xa000, 4, BpType::kW);
  ASSERT_TRUE(f.pmu.add(sixth, CpuId(0)));
  EXPECT_EQ(sixth.hw_index, 3);
}

TEST(BpPmu, CoreSchedulingProgramsTheRegisters) {
  Fixture f;
  auto a = breakpoint_attr(0x1000, 4, BpType::kW);
  auto h = f.core->open(a, {TaskId(1), std::nullopt});
  ASSERT_TRUE(h);
  EXPECT_EQ(f.dr7(0), 0u);
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(1)));
  EXPECT_EQ(f.dr7(1), x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4));
  EXPECT_EQ(f.regs.addr(1, 0), 0x1000u);
  EXPECT_EQ(f.pmu.installed(CpuId(1))[0], h->event());
  ASSERT_TRUE(f.core->sched_out(CpuId(1), TaskId(1)));
  EXPECT_EQ(f.dr7(1), 0u);
  EXPECT_EQ(f.regs.addr(1, 0), 0u);
  EXPECT_EQ(f.pmu.installed(CpuId(1))[0], nullptr);
}

DebugTrap trap(int cpu, std::uint64_t dr6) {
  DebugTrap t;
  t.dr6 = dr6;
  t.sample.cpu = CpuId(cpu);
  t.sample.task = TaskId(7);
  t.sample.ip = 0x401000;
  t.sample.addr = 0x1002;
  t.sample.access = pmu::AccessKind::kWrite;
  t.sample.size = 2;
  t.sample.old_value = 0x1111;
  t.sample.new_value = 0x2222;
  t.sample.time = 12345;
  return t;
}

TEST(BpPmu, HandleSkipsEmptySlotsWithoutHidingLaterBits) {
  Fixture f;
  std::vector<pmu::Sample> h0, h1, h2;
  auto e0 = f.cpu_event(0, 0x1000, 4, BpType::kW, &h0);
  auto e1 = f.cpu_event(0, 0x2000, 4, BpType::kW, &h1);
  auto e2 = f.cpu_event(0, 0x3000, 4, BpType::kW, &h2);
  ASSERT_EQ(e2.event()->hw_index, 2);
  ASSERT_TRUE(e1.close());  // slot 1 is empty now; slot 3 never was used
  ASSERT_EQ(f.pmu.installed(CpuId(0)),
            (std::vector<const pmu::Event*>{e0.event(), nullptr, e2.event(), nullptr}));

  const std::uint64_t b0 = x86::dr6::trap_bit(0), b1 = x86::dr6::trap_bit(1),
                      b2 = x86::dr6::trap_bit(2), b3 = x86::dr6::trap_bit(3);
  // Only empty slots' bits: nothing consumed, nothing delivered.
  EXPECT_EQ(f.pmu.handle(trap(0, b1)), 0u);
  EXPECT_EQ(f.pmu.handle(trap(0, b3)), 0u);
  EXPECT_EQ(f.pmu.handle(trap(0, b1 | b3 | x86::dr6::kSingleStep)), 0u);
  EXPECT_TRUE(h0.empty());
  EXPECT_TRUE(h2.empty());
  // An empty slot's bit before an occupied one does not hide it.
  DebugTrap t = trap(0, b1 | b2);
  EXPECT_EQ(f.pmu.handle(t), b2);
  ASSERT_EQ(h2.size(), 1u);
  EXPECT_EQ(h2[0], t.sample);
  EXPECT_TRUE(h0.empty());
  // Every bit, plus BS and BD: only the occupied slots' bits come back.
  t = trap(0, 0xf | x86::dr6::kSingleStep | x86::dr6::kDebugAccess);
  t.sample.time = 99999;
  EXPECT_EQ(f.pmu.handle(t), b0 | b2);
  ASSERT_EQ(h0.size(), 1u);
  ASSERT_EQ(h2.size(), 2u);
  EXPECT_EQ(h0[0], t.sample);
  EXPECT_EQ(h2[1], t.sample);
  EXPECT_EQ(e0.read()->count, 1u);
  EXPECT_EQ(e2.read()->count, 2u);
  // BS alone belongs to someone else.
  EXPECT_EQ(f.pmu.handle(trap(0, x86::dr6::kSingleStep)), 0u);
  // Another CPU's trap does not reach cpu 0's events.
  EXPECT_EQ(f.pmu.handle(trap(1, 0xf)), 0u);
  EXPECT_EQ(h0.size(), 1u);
  EXPECT_EQ(h2.size(), 2u);
}

TEST(BpPmu, HandleDeliversInSlotOrder) {
  Fixture f;
  std::vector<pmu::EventHandle> hs;
  std::vector<pmu::EventId> order;
  for (int i = 0; i < 4; ++i) {
    auto a = breakpoint_attr(0x1000 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw);
    auto h = f.core->open(a, {std::nullopt, CpuId(1)},
                          [&order](pmu::Event& e, const pmu::Sample&) { order.push_back(e.id()); });
    ASSERT_TRUE(h);
    hs.push_back(std::move(*h));
  }
  EXPECT_EQ(f.pmu.handle(trap(1, 0xb)), 0xbu);
  EXPECT_EQ(order, (std::vector<pmu::EventId>{hs[0].id(), hs[1].id(), hs[3].id()}));
}

TEST(BpPmu, StoppedEventsStayInstalledButAreNotDelivered) {
  Fixture f;
  std::vector<pmu::Sample> hits;
  auto h = f.cpu_event(0, 0x1000, 4, BpType::kRw, &hits);
  pmu::Event& e = const_cast<pmu::Event&>(*h.event());
  ASSERT_EQ(e.hw_index, 0);
  const std::uint64_t dr7 = f.dr7(0);
  f.regs.log.clear();
  f.pmu.stop(e, CpuId(0));
  EXPECT_TRUE(f.regs.log.empty());  // stop writes nothing: still installed
  EXPECT_EQ(f.dr7(0), dr7);
  EXPECT_EQ(f.pmu.installed(CpuId(0))[0], &e);
  EXPECT_EQ(f.pmu.handle(trap(0, 0x1)), 0x1u);  // its bit is consumed (it is its slot's)
  EXPECT_TRUE(hits.empty());
  EXPECT_EQ(h.read()->count, 0u);
  f.pmu.start(e, CpuId(0));
  EXPECT_EQ(f.pmu.handle(trap(0, 0x1)), 0x1u);
  EXPECT_EQ(hits.size(), 1u);
  EXPECT_EQ(h.read()->count, 1u);
}

// The count is the hits delivered: read() (the core's, at each user read and each sched-out)
// folds in nothing more, so no hit is counted twice and none is lost across a sched-out.
TEST(BpPmu, ReadCountsEveryDeliveredHitExactlyOnce) {
  Fixture f;
  std::vector<pmu::Sample> hits;
  auto cpu_bound = f.cpu_event(0, 0x1000, 4, BpType::kW, &hits);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f.pmu.handle(trap(0, 0x1)), 0x1u);
  EXPECT_EQ(cpu_bound.read()->count, 3u);
  EXPECT_EQ(cpu_bound.read()->count, 3u);
  f.pmu.read(const_cast<pmu::Event&>(*cpu_bound.event()));
  EXPECT_EQ(cpu_bound.event()->count(), 3u);
  EXPECT_EQ(hits.size(), 3u);

  // A task's event, scheduled out (stop, read, del) and in again between hits.
  auto h = f.core->open(breakpoint_attr(0x2000, 4, BpType::kW), {TaskId(1), std::nullopt});
  ASSERT_TRUE(h);
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(1)));
  const int slot = h->event()->hw_index;
  ASSERT_GE(slot, 0);
  EXPECT_EQ(f.pmu.handle(trap(1, x86::dr6::trap_bit(slot))), x86::dr6::trap_bit(slot));
  EXPECT_EQ(f.pmu.handle(trap(1, x86::dr6::trap_bit(slot))), x86::dr6::trap_bit(slot));
  ASSERT_TRUE(f.core->sched_out(CpuId(1), TaskId(1)));
  EXPECT_EQ(h->event()->count(), 2u);
  EXPECT_EQ(h->read()->count, 2u);
  // Scheduled out: the registers are free, a trap there is nobody's and counts nowhere.
  EXPECT_EQ(f.pmu.handle(trap(1, x86::dr6::trap_bit(slot))), 0u);
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(1)));
  const int again = h->event()->hw_index;
  EXPECT_EQ(f.pmu.handle(trap(1, x86::dr6::trap_bit(again))), x86::dr6::trap_bit(again));
  EXPECT_EQ(h->read()->count, 3u);
  ASSERT_TRUE(f.core->sched_out(CpuId(1), TaskId(1)));
  EXPECT_EQ(h->read()->count, 3u);
}

TEST(BpPmuDeathTest, ReadOfAnEventThatIsNotInstalledIsABug) {
  Fixture f;
  pmu::Event& e = f.event(0x1000, 4, BpType::kW);  // never added
  EXPECT_DEATH(f.pmu.read(e), "not installed");
}

TEST(BpPmu, ExcludeUserEventsAreConsumedButNotDelivered) {
  Fixture f;
  std::vector<pmu::Sample> user, kernel;
  auto a = f.cpu_event(0, 0x1000, 4, BpType::kRw, &user, /*exclude_user=*/true);
  auto b = f.cpu_event(0, 0x2000, 4, BpType::kRw, &kernel);
  EXPECT_EQ(f.pmu.handle(trap(0, 0x3)), 0x3u);
  EXPECT_TRUE(user.empty());
  EXPECT_EQ(kernel.size(), 1u);
  EXPECT_EQ(a.read()->count, 0u);
}

TEST(BpPmu, Arm64WithoutHardwareUsesSixInstructionAndFourDataRegisters) {
  Fixture f(Arch::kArm64, 2, /*hardware=*/false);
  std::vector<pmu::Event*> inst, data;
  for (int i = 0; i < 6; ++i) {
    inst.push_back(&f.event(0x400000 + 4 * static_cast<std::uint64_t>(i), 4, BpType::kX));
    ASSERT_TRUE(f.pmu.add(*inst.back(), CpuId(0)));
    EXPECT_EQ(inst.back()->hw_index, i);
  }
  pmu::Event& x7 = f.event(0x500000, 4, BpType::kX);
  auto r = f.pmu.add(x7, CpuId(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(x7.hw_index, -1);
  // The data pool is separate: registers 6..9, in order, whatever the type (r, w, rw).
  const BpType types[] = {BpType::kR, BpType::kW, BpType::kRw, BpType::kR};
  for (int i = 0; i < 4; ++i) {
    data.push_back(&f.event(0x1000 + 8 * static_cast<std::uint64_t>(i), 8, types[i]));
    ASSERT_TRUE(f.pmu.add(*data.back(), CpuId(0)));
    EXPECT_EQ(data.back()->hw_index, 6 + i);
  }
  pmu::Event& d5 = f.event(0x2000, 4, BpType::kW);
  r = f.pmu.add(d5, CpuId(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  auto installed = f.pmu.installed(CpuId(0));
  ASSERT_EQ(installed.size(), 10u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(installed[static_cast<std::size_t>(i)], inst[i]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(installed[static_cast<std::size_t>(6 + i)], data[i]);
  // Freeing an instruction register lets an execute breakpoint in, not a data one.
  f.pmu.del(*inst[2], CpuId(0));
  EXPECT_FALSE(f.pmu.add(d5, CpuId(0)));
  ASSERT_TRUE(f.pmu.add(x7, CpuId(0)));
  EXPECT_EQ(x7.hw_index, 2);
  f.pmu.del(*data[1], CpuId(0));
  ASSERT_TRUE(f.pmu.add(d5, CpuId(0)));
  EXPECT_EQ(d5.hw_index, 7);
  // Nothing is ever written (there is no hardware).
  EXPECT_TRUE(f.regs.log.empty());
  // The other CPU is empty.
  for (const pmu::Event* p : f.pmu.installed(CpuId(1))) EXPECT_EQ(p, nullptr);
}

TEST(BpPmu, X86WithoutHardwareKeepsTheSlotTableOnly) {
  Fixture f(Arch::kX86_64, 1, /*hardware=*/false);
  for (int i = 0; i < 4; ++i) {
    pmu::Event& e = f.event(0x1000 + 4 * static_cast<std::uint64_t>(i), 4, BpType::kW);
    ASSERT_TRUE(f.pmu.add(e, CpuId(0)));
    EXPECT_EQ(e.hw_index, i);
  }
  EXPECT_FALSE(f.pmu.add(f.event(0x400000, 8, BpType::kX), CpuId(0)));
  EXPECT_TRUE(f.regs.log.empty());
}

}  // namespace
}  // namespace hwarb::breakpoints

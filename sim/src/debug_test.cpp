// The x86 debug semantics of access()/exec(), checked against an independent byte-overlap model.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "hwarb/sim/machine.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using x86::DrLen;
using x86::DrType;

class Log : public DebugExceptionHandler {
 public:
  std::vector<DebugException> seen;
  void on_debug_exception(const DebugException& e) override { seen.push_back(e); }
};

struct Fixture {
  std::unique_ptr<Machine> m;
  Log log;
  TaskId task;
  CpuId cpu{0};
  Fixture() {
    m = std::move(*Machine::create(2));
    EXPECT_TRUE(m->set_debug_handler(&log));
    task = *m->create_task();
    EXPECT_TRUE(m->switch_to(cpu, task));
  }
  void arm(int slot, std::uint64_t addr, DrType type, DrLen len) {
    ASSERT_TRUE(m->set_debug_address(cpu, slot, addr));
    ASSERT_TRUE(m->set_dr7(cpu, x86::dr7::install(*m->dr7(cpu), slot, type, len)));
  }
};

// The model: the set of bytes a breakpoint watches, and whether any accessed byte is among them.
bool model_hit(std::uint64_t dr, int len, DrType type, AccessKind kind, std::uint64_t addr,
               int size) {
  if (type == DrType::kIo || type == DrType::kExecute) return false;
  if (type == DrType::kWrite && kind != AccessKind::kWrite) return false;
  std::set<std::uint64_t> watched;
  const std::uint64_t base = dr - dr % static_cast<std::uint64_t>(len);
  for (int i = 0; i < len; ++i) watched.insert(base + static_cast<std::uint64_t>(i));
  for (int i = 0; i < size; ++i) {
    if (watched.contains(addr + static_cast<std::uint64_t>(i))) return true;
  }
  return false;
}

// Every len × DR alignment × access size × access address around the range (one before the
// first byte through one after the last, plus whole-size reach) × access kind × type.
TEST(DebugSemantics, DataBreakpointMatrixAgainstByteModel) {
  const DrLen lens[] = {DrLen::k1, DrLen::k2, DrLen::k4, DrLen::k8};
  const DrType types[] = {DrType::kWrite, DrType::kReadWrite, DrType::kIo};
  const AccessKind kinds[] = {AccessKind::kRead, AccessKind::kWrite};
  const std::uint64_t base = 0x10000;
  int checked = 0, hits = 0;
  for (DrLen len : lens) {
    const int n = x86::len_bytes(len);
    for (int misalign = 0; misalign < n; ++misalign) {  // the hardware ignores the low bits
      for (DrType type : types) {
        for (int size : {1, 2, 4, 8}) {
          for (std::uint64_t addr = base - 9; addr <= base + 9; ++addr) {
            for (AccessKind kind : kinds) {
              for (int slot = 0; slot < 4; slot += 3) {
                Fixture f;
                f.arm(slot, base + static_cast<std::uint64_t>(misalign), type, len);
                auto o = f.m->access(f.cpu, f.task, kind, addr, size, 0xabcdef);
                ASSERT_TRUE(o);
                const bool want = model_hit(base + static_cast<std::uint64_t>(misalign), n, type,
                                            kind, addr, size);
                SCOPED_TRACE(testing::Message()
                             << "len=" << n << " mis=" << misalign
                             << " type=" << static_cast<int>(type) << " size=" << size
                             << " addr=" << addr << " kind=" << static_cast<int>(kind));
                ASSERT_EQ(f.log.seen.size(), want ? 1u : 0u);
                ASSERT_EQ(o->exceptions, want ? 1 : 0);
                ++checked;
                if (!want) continue;
                ++hits;
                const DebugException& e = f.log.seen[0];
                EXPECT_EQ(e.dr6, x86::dr6::trap_bit(slot));
                EXPECT_EQ(*f.m->dr6(f.cpu), x86::dr6::trap_bit(slot));
                EXPECT_EQ(e.addr, addr);
                EXPECT_EQ(e.size, size);
                EXPECT_EQ(e.kind, kind);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(hits, 1000);
  EXPECT_GT(checked, 10000);
}

TEST(DebugSemantics, EdgesOfAnAlignedFourByteRange) {
  // [0x1000, 0x1004): first byte, last byte, one before, one after.
  struct Case {
    std::uint64_t addr;
    int size;
    bool hit;
  } cases[] = {{0x1000, 1, true}, {0x1003, 1, true},  {0x0fff, 1, false}, {0x1004, 1, false},
               {0x0fff, 2, true}, {0x0ffe, 2, false}, {0x1003, 8, true},  {0x0ff8, 8, false},
               {0x0ff9, 8, true}, {0x1004, 8, false}};
  for (const Case& c : cases) {
    Fixture f;
    f.arm(1, 0x1000, DrType::kWrite, DrLen::k4);
    ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, c.addr, c.size, 1));
    EXPECT_EQ(f.log.seen.size(), c.hit ? 1u : 0u) << c.addr << "/" << c.size;
  }
}

TEST(DebugSemantics, DataTrapHappensAfterTheAccess) {
  Fixture f;
  ASSERT_TRUE(f.m->write_memory(f.task, 0x2000, 8, 0x1111111111111111));
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x401000));  // the ip of the following accesses
  f.arm(0, 0x2000, DrType::kReadWrite, DrLen::k8);
  const std::uint64_t t0 = f.m->now();
  auto o = f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x2002, 2, 0xbeef);
  ASSERT_TRUE(o);
  ASSERT_EQ(f.log.seen.size(), 1u);
  const DebugException& e = f.log.seen[0];
  EXPECT_EQ(e.cpu, f.cpu);
  EXPECT_EQ(e.task, f.task);
  EXPECT_EQ(e.ip, 0x401000u);
  EXPECT_EQ(e.addr, 0x2002u);
  EXPECT_EQ(e.old_value, 0x1111u);
  EXPECT_EQ(e.new_value, 0xbeefu);
  EXPECT_EQ(e.time, t0 + kAccessNs);
  EXPECT_EQ(*f.m->read_memory(f.task, 0x2000, 8), 0x11111111beef1111u);  // memory was updated
  auto r = f.m->access(f.cpu, f.task, AccessKind::kRead, 0x2000, 4);
  ASSERT_EQ(f.log.seen.size(), 2u);
  EXPECT_EQ(f.log.seen[1].old_value, 0xbeef1111u);
  EXPECT_EQ(f.log.seen[1].new_value, 0xbeef1111u);
  EXPECT_EQ(r->old_value, 0xbeef1111u);
}

TEST(DebugSemantics, ExecuteFaultReportsOncePerExec) {
  Fixture f;
  f.arm(2, 0x400100, DrType::kExecute, DrLen::k1);
  const std::uint64_t t0 = f.m->now();
  auto o = f.m->exec(f.cpu, f.task, 0x400100);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->exceptions, 1);
  EXPECT_EQ(o->dr6, x86::dr6::trap_bit(2));
  ASSERT_EQ(f.log.seen.size(), 1u);
  EXPECT_EQ(f.log.seen[0].kind, AccessKind::kExec);
  EXPECT_EQ(f.log.seen[0].ip, 0x400100u);
  EXPECT_EQ(f.log.seen[0].time, t0);  // a fault: before the instruction ran
  EXPECT_EQ(f.m->now(), t0 + kAccessNs);
  // Exactly DRn: neighbours do not fault.
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x4000ff));
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x400101));
  EXPECT_EQ(f.log.seen.size(), 1u);
  // Each new exec of that ip faults again (RF only covers the resumed instruction).
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x400100));
  EXPECT_EQ(f.log.seen.size(), 2u);
  // Execute slots never match data accesses, data slots never match fetches.
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kRead, 0x400100, 8));
  f.arm(0, 0x500000, DrType::kReadWrite, DrLen::k8);
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x500000));
  EXPECT_EQ(f.log.seen.size(), 2u);
}

TEST(DebugSemantics, MultipleSlotsInOneException) {
  Fixture f;
  f.arm(0, 0x3000, DrType::kWrite, DrLen::k1);
  f.arm(1, 0x3004, DrType::kReadWrite, DrLen::k4);
  f.arm(2, 0x3008, DrType::kWrite, DrLen::k8);      // not touched
  f.arm(3, 0x3003, DrType::kReadWrite, DrLen::k2);  // watches [0x3002, 0x3004)
  auto o = f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x3000, 8, 5);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->exceptions, 1);
  ASSERT_EQ(f.log.seen.size(), 1u);
  EXPECT_EQ(f.log.seen[0].dr6, 0b1011u);
  // Reads skip the write-only slot.
  f.log.seen.clear();
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kRead, 0x3000, 8));
  EXPECT_EQ(f.log.seen.at(0).dr6, 0b1010u);
  // Two execute slots on the same ip: one fault with both bits.
  f.arm(0, 0x7000, DrType::kExecute, DrLen::k1);
  f.arm(2, 0x7000, DrType::kExecute, DrLen::k1);
  f.log.seen.clear();
  ASSERT_TRUE(f.m->exec(f.cpu, f.task, 0x7000));
  ASSERT_EQ(f.log.seen.size(), 1u);
  EXPECT_EQ(f.log.seen[0].dr6, 0b0101u);
}

TEST(DebugSemantics, DisabledSlotsNeverFire) {
  Fixture f;
  for (int slot = 0; slot < 4; ++slot) f.arm(slot, 0x6000, DrType::kReadWrite, DrLen::k8);
  // Control nibbles and GE stay, enable bits cleared: nothing fires.
  std::uint64_t dr7 = *f.m->dr7(f.cpu);
  for (int slot = 0; slot < 4; ++slot) dr7 &= ~x86::dr7::enable_bits(slot);
  ASSERT_TRUE(f.m->set_dr7(f.cpu, dr7));
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x6000, 8, 1));
  EXPECT_TRUE(f.log.seen.empty());
  EXPECT_EQ(*f.m->dr6(f.cpu), 0u);
  // The local enable bit alone arms a slot.
  ASSERT_TRUE(f.m->set_dr7(f.cpu, dr7 | x86::dr7::local_bit(2)));
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x6000, 8, 1));
  ASSERT_EQ(f.log.seen.size(), 1u);
  EXPECT_EQ(f.log.seen[0].dr6, x86::dr6::trap_bit(2));
  // uninstall disarms.
  ASSERT_TRUE(f.m->set_dr7(f.cpu, x86::dr7::uninstall(dr7 | x86::dr7::local_bit(2), 2)));
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x6000, 8, 1));
  EXPECT_EQ(f.log.seen.size(), 1u);
}

TEST(DebugSemantics, OnlyTheCpusOwnRegistersApply) {
  Fixture f;
  TaskId other = *f.m->create_task();
  ASSERT_TRUE(f.m->switch_to(CpuId(1), other));
  f.arm(0, 0x8000, DrType::kWrite, DrLen::k4);  // cpu 0 only
  ASSERT_TRUE(f.m->access(CpuId(1), other, AccessKind::kWrite, 0x8000, 4, 1));
  EXPECT_TRUE(f.log.seen.empty());
  EXPECT_EQ(*f.m->dr6(CpuId(1)), 0u);
}

TEST(DebugSemantics, Dr6PolarityAndStickiness) {
  Fixture f;
  f.arm(0, 0x100, DrType::kWrite, DrLen::k1);
  f.arm(1, 0x200, DrType::kWrite, DrLen::k1);
  EXPECT_EQ(*f.m->dr6_hardware(f.cpu), x86::dr6::kHardwareInit);
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x100, 1, 1));
  EXPECT_EQ(*f.m->dr6(f.cpu), 0b01u);
  EXPECT_EQ(*f.m->dr6_hardware(f.cpu), x86::dr6::to_hardware(0b01));
  EXPECT_EQ(x86::dr6::from_hardware(*f.m->dr6_hardware(f.cpu)), 0b01u);
  // Sticky: a second hit ORs in; the exception itself carries only its own bits.
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x200, 1, 1));
  EXPECT_EQ(f.log.seen.back().dr6, 0b10u);
  EXPECT_EQ(*f.m->dr6(f.cpu), 0b11u);
  ASSERT_TRUE(f.m->set_dr6(f.cpu, 0));
  EXPECT_EQ(*f.m->dr6_hardware(f.cpu), 0xffff0ff0u);
}

TEST(DebugSemantics, SingleStep) {
  Fixture f;
  ASSERT_TRUE(f.m->set_single_step(f.task, true));
  f.arm(0, 0x100, DrType::kWrite, DrLen::k1);
  f.arm(1, 0x400000, DrType::kExecute, DrLen::k1);
  // Access: data trap and BS in one exception.
  auto a = f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x100, 1, 1);
  EXPECT_EQ(a->exceptions, 1);
  EXPECT_EQ(f.log.seen.at(0).dr6, x86::dr6::trap_bit(0) | x86::dr6::kSingleStep);
  // Access without a hit: BS alone.
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kRead, 0x900, 1));
  EXPECT_EQ(f.log.seen.at(1).dr6, x86::dr6::kSingleStep);
  // Faulting exec: the fault, then the BS trap after the instruction.
  auto e = f.m->exec(f.cpu, f.task, 0x400000);
  EXPECT_EQ(e->exceptions, 2);
  ASSERT_EQ(f.log.seen.size(), 4u);
  EXPECT_EQ(f.log.seen[2].dr6, x86::dr6::trap_bit(1));
  EXPECT_EQ(f.log.seen[3].dr6, x86::dr6::kSingleStep);
  EXPECT_EQ(f.log.seen[3].time, f.log.seen[2].time + kAccessNs);
  ASSERT_TRUE(f.m->set_single_step(f.task, false));
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kRead, 0x900, 1));
  EXPECT_EQ(f.log.seen.size(), 4u);
  EXPECT_EQ(f.m->set_single_step(TaskId(99), true).error().code(), ErrorCode::kSrch);
}

TEST(DebugSemantics, PureMatchers) {
  DebugRegisters regs;
  regs.dr[0] = 0x10;
  regs.dr[1] = 0x20;
  regs.dr7 = x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4);
  regs.dr7 = x86::dr7::install(regs.dr7, 1, DrType::kExecute, DrLen::k1);
  EXPECT_EQ(data_breakpoint_hits(regs, AccessKind::kWrite, 0x13, 1), 1u);
  EXPECT_EQ(data_breakpoint_hits(regs, AccessKind::kRead, 0x13, 1), 0u);
  EXPECT_EQ(data_breakpoint_hits(regs, AccessKind::kExec, 0x10, 1), 0u);
  EXPECT_EQ(data_breakpoint_hits(regs, AccessKind::kWrite, 0x20, 1), 0u);
  EXPECT_EQ(exec_breakpoint_hits(regs, 0x20), 2u);
  EXPECT_EQ(exec_breakpoint_hits(regs, 0x10), 0u);
}

}  // namespace
}  // namespace hwarb::sim

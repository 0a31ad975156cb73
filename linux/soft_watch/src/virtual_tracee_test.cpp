// Tests of VirtualTracee on real processes (tests/programs), through the Tracee interface as a
// debugger uses it: watchpoints and execute breakpoints that stop with x86's semantics, DR6 as
// PEEKUSER shows it, Linux's errors, and the same answers as the kernel's own ptrace.
#include "hwarb/linux/virtual_tracee.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/format.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/linux/linux_tracee.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/pmu/core.h"
#include "hwarb/x86/debugreg.h"
#include "hwarb/x86/insn.h"
#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

using pmu::BpType;
using ptrace_compat::Stop;
using ptrace_compat::Tracee;
using ptrace_compat::UserLayout;
using ptrace_compat::WaitMode;
using testing::refused;
using testing::skip_reason;
using x86::DrLen;
using x86::DrType;

constexpr std::uint64_t kDr6Fresh = 0xffff0ff0;  // nothing happened, as PEEKUSER shows it

// DR6 as PEEKUSER shows it after an exception with these "happened" bits.
constexpr std::uint64_t dr6_of(std::uint64_t happened) {
  return x86::dr6::to_hardware(happened);
}
constexpr std::uint64_t kB0 = x86::dr6::trap_bit(0);
constexpr std::uint64_t kB1 = x86::dr6::trap_bit(1);
constexpr std::uint64_t kBs = x86::dr6::kSingleStep;

// DR7 enabling `slot` (local enable bit) as type/len.
constexpr std::uint64_t dr7_slot(int slot, DrType type, DrLen len) {
  return (((static_cast<std::uint64_t>(type) | (static_cast<std::uint64_t>(len) << 2)))
          << x86::dr7::control_shift(slot)) |
         x86::dr7::local_bit(slot);
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_NE(r.error().message().find(field), std::string::npos) << r.error().to_string();
}

Symbol symbol(pid_t pid, const char* name) {
  auto table = SymbolTable::load(pid);
  EXPECT_TRUE(table) << table.error().to_string();
  if (!table) return {};
  auto sym = table->find(name);
  EXPECT_TRUE(sym) << sym.error().to_string();
  return sym ? *sym : Symbol{};
}

// A spawned program under a VirtualTracee; skips when this machine forbids ptrace.
struct Session {
  explicit Session(std::vector<std::string> argv) {
    auto t = VirtualTracee::spawn(argv, {.stdout_fd = out.fd()});
    if (!t && refused(t.error())) {
      skip = skip_reason("ptrace", t.error());
      return;
    }
    EXPECT_TRUE(t) << t.error().to_string();
    if (t) tracee.emplace(std::move(*t));
  }
  std::uint64_t rip() {
    auto regs = tracee->inferior().get_regs(tracee->tid());
    EXPECT_TRUE(regs) << regs.error().to_string();
    return regs ? regs->rip : 0;
  }
  std::uint64_t word(std::uint64_t addr, int size) {
    auto v = tracee->inferior().read_word(addr, size);
    EXPECT_TRUE(v) << v.error().to_string();
    return v ? *v : ~std::uint64_t{0};
  }
  x86::Insn insn_at(std::uint64_t ip) {
    std::uint8_t code[15] = {};
    EXPECT_TRUE(tracee->inferior().read_memory(ip, code));
    auto insn = x86::decode(code, ip);
    EXPECT_TRUE(insn) << insn.error().to_string();
    return insn ? *insn : x86::Insn{};
  }
  // cont, then the next stop (nullopt when the tracee ended: how in `ended`, or the error in
  // `failed`).
  std::optional<Stop> next() {
    if (auto r = tracee->cont(); !r) {
      ADD_FAILURE() << r.error().to_string();
      return std::nullopt;
    }
    return wait();
  }
  std::optional<Stop> wait() {
    auto s = tracee->wait(WaitMode::kBlock);
    if (!s) {
      failed = s.error();
      return std::nullopt;
    }
    EXPECT_TRUE(*s) << "wait(kBlock) returned without a stop";
    if (*s && (*s)->ended()) {
      ended = **s;
      return std::nullopt;
    }
    return *s;
  }

  Capture out;
  std::string skip;
  std::optional<VirtualTracee> tracee;
  std::optional<Stop> ended;
  std::optional<Error> failed;
};

#define SESSION(name, ...)                           \
  Session name(__VA_ARGS__);                         \
  if (!name.skip.empty()) GTEST_SKIP() << name.skip; \
  ASSERT_TRUE(name.tracee)

TEST(VirtualTracee, StartsInAStopWithFreshDebugRegisters) {
  SESSION(s, {program("writer"), "1"});
  Tracee& t = *s.tracee;
  EXPECT_EQ(t.layout(), UserLayout::kX86_64);
  for (auto mode : {WaitMode::kNoHang, WaitMode::kBlock}) {
    auto st = t.wait(mode);
    ASSERT_TRUE(st) << st.error().to_string();
    EXPECT_EQ(*st, (Stop{SIGSTOP, kDr6Fresh}));
  }
  for (int n = 0; n < 8; ++n) {
    auto v = t.peek_debugreg(n);
    ASSERT_TRUE(v) << v.error().to_string();
    EXPECT_EQ(*v, n == 6 ? kDr6Fresh : 0u) << "dr" << n;
  }
  EXPECT_EQ(s.tracee->describe(), "none");
}

TEST(VirtualTracee, WriteWatchStopsRightAfterEveryWrite) {
  constexpr int kN = 5;
  SESSION(s, {program("writer"), std::to_string(kN)});
  const pid_t pid = s.tracee->inferior().pid();
  const Symbol target = symbol(pid, "target");
  const Symbol setter = symbol(pid, "set_target");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, target.address));
  ASSERT_TRUE(t.poke_debugreg(7, dr7_slot(0, DrType::kWrite, DrLen::k4)));
  for (int i = 1; i <= kN; ++i) {
    auto st = s.next();
    ASSERT_TRUE(st) << "stop " << i << ": " << (s.failed ? s.failed->to_string() : "ended");
    EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)})) << std::hex << st->dr6;
    EXPECT_EQ(*t.peek_debugreg(6), dr6_of(kB0));
    EXPECT_EQ(s.word(target.address, 4), static_cast<std::uint64_t>(i));
    // A trap: the store has run, rip is on the next instruction (set_target's ret).
    const std::uint64_t ip = s.rip();
    EXPECT_GT(ip, setter.address);
    EXPECT_LT(ip, setter.address + setter.size);
    EXPECT_EQ(s.insn_at(ip).branch, x86::BranchKind::kReturn) << hex(ip);
    // Until resumed, the same stop.
    EXPECT_EQ(**t.wait(WaitMode::kNoHang), *st);
  }
  // The exit is wait's normal outcome, with the status, once; then the tracee is reaped.
  EXPECT_FALSE(s.next());
  EXPECT_FALSE(s.failed);
  EXPECT_EQ(s.ended, Stop::exited(3));
  expect_error(t.wait(WaitMode::kNoHang), ErrorCode::kSrch, "pid");
  expect_error(t.wait(WaitMode::kBlock), ErrorCode::kSrch, "pid");
  expect_error(t.peek_debugreg(7), ErrorCode::kSrch, "pid");
  expect_error(t.cont(), ErrorCode::kSrch, "pid");
  expect_error(t.step(), ErrorCode::kSrch, "pid");
  EXPECT_EQ(s.out.text(), "sum=" + std::to_string(kN * kN) + "\n");
}

TEST(VirtualTracee, ReadWriteWatchAlsoStopsAfterReads) {
  constexpr int kN = 3;
  SESSION(s, {program("writer"), std::to_string(kN)});
  const pid_t pid = s.tracee->inferior().pid();
  const Symbol target = symbol(pid, "target");
  const Symbol setter = symbol(pid, "set_target");
  const Symbol getter = symbol(pid, "get_target");
  Tracee& t = *s.tracee;
  // Slot 1 this time: DR6 says B1.
  ASSERT_TRUE(t.poke_debugreg(1, target.address));
  ASSERT_TRUE(t.poke_debugreg(7, dr7_slot(1, DrType::kReadWrite, DrLen::k4)));
  std::vector<std::uint64_t> in;  // the function each stop is in: 0 setter, 1 getter
  for (;;) {
    auto st = s.next();
    if (!st) break;
    EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)}));
    const std::uint64_t ip = s.rip();
    if (ip > setter.address && ip < setter.address + setter.size) {
      in.push_back(0);
      EXPECT_EQ(s.word(target.address, 4), in.size());
    } else {
      EXPECT_GT(ip, getter.address);
      EXPECT_LT(ip, getter.address + getter.size);
      in.push_back(1);
    }
  }
  EXPECT_EQ(s.ended, Stop::exited(3));
  EXPECT_EQ(in, (std::vector<std::uint64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(s.out.text(), "sum=9\n");
}

TEST(VirtualTracee, ExecuteBreakpointStopsBeforeTheInstructionOncePerCall) {
  constexpr int kN = 4;
  SESSION(s, {program("calls"), std::to_string(kN)});
  const Symbol work = symbol(s.tracee->inferior().pid(), "work");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, work.address));
  ASSERT_TRUE(t.poke_debugreg(7, dr7_slot(0, DrType::kExecute, DrLen::k1)));
  int stops = 0;
  for (;;) {
    auto st = s.next();
    if (!st) break;
    ++stops;
    EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
    EXPECT_EQ(s.rip(), work.address);  // a fault: before the instruction
    // The argument of this call: the calls are work(0), work(1), ...
    auto regs = s.tracee->inferior().get_regs(s.tracee->tid());
    ASSERT_TRUE(regs);
    EXPECT_EQ(regs->rdi, static_cast<std::uint64_t>(stops - 1));
  }
  EXPECT_EQ(stops, kN);
  EXPECT_EQ(s.ended, Stop::exited(0));
  EXPECT_EQ(s.out.text(), "total=22\n");  // sum of 3i+1 for i < 4
}

TEST(VirtualTracee, StepRunsOneInstructionAndAnExecuteRegisterFaultsFirst) {
  SESSION(s, {program("calls"), "2"});
  const Symbol work = symbol(s.tracee->inferior().pid(), "work");
  Tracee& t = *s.tracee;
  const x86::Insn first = s.insn_at(work.address);
  ASSERT_EQ(first.branch, x86::BranchKind::kNone) << first.text;
  const std::uint64_t second = work.address + first.length;
  ASSERT_TRUE(t.poke_debugreg(0, work.address));
  ASSERT_TRUE(t.poke_debugreg(1, second));
  ASSERT_TRUE(t.poke_debugreg(
      7, dr7_slot(0, DrType::kExecute, DrLen::k1) | dr7_slot(1, DrType::kExecute, DrLen::k1)));
  auto st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
  ASSERT_EQ(s.rip(), work.address);
  // From the hit: the instruction runs (RF), the step lands on DR1's address: BS only.
  ASSERT_TRUE(t.step());
  st = s.wait();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kBs)})) << std::hex << st->dr6;
  EXPECT_EQ(s.rip(), second);
  // Stepping there: DR1's execute breakpoint faults first, nothing runs.
  ASSERT_TRUE(t.step());
  st = s.wait();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)})) << std::hex << st->dr6;
  EXPECT_EQ(s.rip(), second);
  // Again: now it runs (ret), BS.
  ASSERT_TRUE(t.step());
  st = s.wait();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kBs)}));
  EXPECT_NE(s.rip(), second);
  // The second call: work, then its second instruction, by cont.
  st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
  EXPECT_EQ(s.rip(), work.address);
  st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)}));
  EXPECT_EQ(s.rip(), second);
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.ended, Stop::exited(0));
  EXPECT_EQ(s.out.text(), "total=5\n");
}

TEST(VirtualTracee, StepOverAWatchedStoreSetsBsAndTheTrapBit) {
  SESSION(s, {program("writer"), "2"});
  const pid_t pid = s.tracee->inferior().pid();
  const Symbol target = symbol(pid, "target");
  const Symbol setter = symbol(pid, "set_target");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, target.address));
  ASSERT_TRUE(t.poke_debugreg(1, setter.address));
  ASSERT_TRUE(t.poke_debugreg(
      7, dr7_slot(0, DrType::kWrite, DrLen::k4) | dr7_slot(1, DrType::kExecute, DrLen::k1)));
  auto st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)}));
  EXPECT_EQ(s.word(target.address, 4), 0u);
  // Step to the store (an endbr64 may come first), then over it.
  int steps = 0;
  for (; steps < 4; ++steps) {
    ASSERT_TRUE(t.step());
    st = s.wait();
    ASSERT_TRUE(st);
    if ((x86::dr6::from_hardware(st->dr6) & kB0) != 0) break;
    EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kBs)}));
  }
  ASSERT_LT(steps, 4) << "the store was never stepped";
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kBs | kB0)})) << std::hex << st->dr6;
  EXPECT_EQ(s.word(target.address, 4), 1u);
  // DR6 starts afresh at every exception: the next stop shows only its own bit.
  st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)}));
  st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
  EXPECT_EQ(s.word(target.address, 4), 2u);
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.out.text(), "sum=4\n");
}

// The Watchpoint layer over breakpoints() (a debugger's watchpoints, not ptrace's: no stops) gets
// the true values of every access, read from the process before and after it, as over the
// simulated machine.
TEST(VirtualTracee, WatchpointLayerReportsTheTrueOldAndNewValues) {
  constexpr int kN = 4;
  SESSION(s, {program("writer"), std::to_string(kN)});
  const pid_t pid = s.tracee->inferior().pid();
  const Symbol target = symbol(pid, "target");
  const Symbol rec = symbol(pid, "rec");
  ASSERT_EQ(rec.size, 16u);
  breakpoints::HwBreakpoints& api = s.tracee->breakpoints();
  breakpoints::Watchpoints layer(api, api.core().arbiter());
  std::vector<breakpoints::WatchHit> on_target, on_rec;
  breakpoints::WatchSpec spec;
  spec.task = s.tracee->task();
  spec.addr = target.address;
  spec.len = 4;
  spec.type = BpType::kRw;
  ASSERT_TRUE(layer.watch(spec, [&](const breakpoints::WatchHit& h) { on_target.push_back(h); }));
  spec.addr = rec.address;
  spec.len = 16;
  spec.type = BpType::kW;
  auto rec_watch = layer.watch(spec, [&](const breakpoints::WatchHit& h) { on_rec.push_back(h); });
  ASSERT_TRUE(rec_watch) << rec_watch.error().to_string();
  EXPECT_FALSE(s.next());  // not ptrace's registers: the hits never stop the tracee
  EXPECT_EQ(s.ended, Stop::exited(3));

  // set_target(1..kN), then kN reads of kN through get_target.
  ASSERT_EQ(on_target.size(), 2u * kN);
  for (int i = 0; i < 2 * kN; ++i) {
    const breakpoints::WatchHit& h = on_target[static_cast<std::size_t>(i)];
    const bool write = i < kN;
    EXPECT_TRUE(h.has_value) << "hit " << i;
    EXPECT_EQ(h.sample.access, write ? pmu::AccessKind::kWrite : pmu::AccessKind::kRead);
    EXPECT_EQ(h.sample.addr, target.address) << "hit " << i;
    EXPECT_EQ(h.sample.size, 4) << "hit " << i;
    EXPECT_EQ(h.old_value, static_cast<std::uint64_t>(write ? i : kN)) << "hit " << i;
    EXPECT_EQ(h.new_value, static_cast<std::uint64_t>(write ? i + 1 : kN)) << "hit " << i;
  }
  // fill_record(10): four int stores into the 16-byte range; a watchpoint longer than 8 bytes
  // reports the accessed bytes.
  ASSERT_EQ(on_rec.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const breakpoints::WatchHit& h = on_rec[static_cast<std::size_t>(i)];
    EXPECT_TRUE(h.has_value) << "field " << i;
    EXPECT_EQ(h.sample.addr, rec.address + 4u * static_cast<std::uint64_t>(i));
    EXPECT_EQ(h.old_value, 0u) << "field " << i;
    EXPECT_EQ(h.new_value, 10u + static_cast<std::uint64_t>(i)) << "field " << i;
  }
  EXPECT_EQ(s.out.text(), "sum=16\n");
}

TEST(VirtualTracee, ErrorsAreLinuxs) {
  SESSION(s, {program("writer"), "1"});
  Tracee& t = *s.tracee;
  const std::uint64_t good = dr7_slot(0, DrType::kWrite, DrLen::k8);
  ASSERT_TRUE(t.poke_debugreg(0, 0x10000));
  ASSERT_TRUE(t.poke_debugreg(7, good));
  // R/W = 10 (I/O): EINVAL, and DR7 reads the old value.
  expect_error(t.poke_debugreg(7, good | (std::uint64_t{0b10} << x86::dr7::control_shift(1)) |
                                      x86::dr7::local_bit(1)),
               ErrorCode::kInval, "RW1");
  EXPECT_EQ(*t.peek_debugreg(7), good);
  // Execute with LEN != 00.
  expect_error(t.poke_debugreg(7, dr7_slot(0, DrType::kExecute, DrLen::k4)), ErrorCode::kInval,
               "LEN0");
  EXPECT_EQ(*t.peek_debugreg(7), good);
  // A misaligned address for the enabled len, a kernel address.
  expect_error(t.poke_debugreg(0, 0x10004), ErrorCode::kInval, "dr0");
  expect_error(t.poke_debugreg(0, 0xffff800000000000), ErrorCode::kInval, "dr0");
  EXPECT_EQ(*t.peek_debugreg(0), 0x10000u);
  // DR4/DR5 and offsets outside the registers.
  expect_error(t.poke_debugreg(4, 1), ErrorCode::kIo, "dr4");
  EXPECT_EQ(*t.peek_debugreg(4), 0u);
  const auto& area = ptrace_compat::user_area(UserLayout::kX86_64);
  expect_error(t.peek_user(area.debugreg + 1), ErrorCode::kIo, "offset");
  expect_error(t.poke_user(area.size, 0), ErrorCode::kIo, "offset");
  expect_error(t.peek_user(0), ErrorCode::kOpNotSupp, "offset");
  // Five breakpoints: another user of the task holds one slot, the fourth ptrace one is ENOSPC.
  pmu::EventAttr attr = breakpoints::breakpoint_attr(0x20000, 8, pmu::BpType::kW);
  attr.exclude_kernel = true;
  auto other = s.tracee->breakpoints().register_user_hw_breakpoint(attr, {}, s.tracee->task());
  ASSERT_TRUE(other) << other.error().to_string();
  ASSERT_TRUE(t.poke_debugreg(1, 0x30000));
  ASSERT_TRUE(t.poke_debugreg(2, 0x40000));
  expect_error(t.poke_debugreg(3, 0x50000), ErrorCode::kNoSpc, "dr3");
  EXPECT_EQ(*t.peek_debugreg(3), 0u);
  s.tracee->breakpoints().unregister_hw_breakpoint(*other);
  EXPECT_TRUE(t.poke_debugreg(3, 0x50000));
  EXPECT_EQ(*t.peek_debugreg(3), 0x50000u);
}

TEST(VirtualTracee, RunningTraceeRefusesEverythingButWait) {
  SESSION(s, {program("spin")});
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.cont());
  auto st = t.wait(WaitMode::kNoHang);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_FALSE(*st);
  expect_error(t.peek_debugreg(7), ErrorCode::kSrch, "pid");
  expect_error(t.poke_debugreg(7, 0), ErrorCode::kSrch, "pid");
  expect_error(t.cont(), ErrorCode::kSrch, "pid");
  expect_error(t.step(), ErrorCode::kSrch, "pid");
  ASSERT_TRUE(send_signal(s.tracee->inferior().pid(), SIGKILL));
  auto end = t.wait(WaitMode::kBlock);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_EQ(*end, Stop::killed(SIGKILL));
  // Reported once: the tracee is reaped, so it is no such tracee from now on.
  expect_error(t.wait(WaitMode::kBlock), ErrorCode::kSrch, "killed by signal 9");
  expect_error(t.wait(WaitMode::kNoHang), ErrorCode::kSrch, "pid");
}

TEST(VirtualTracee, AnUnmappedAddressIsAcceptedAndNeverHits) {
  SESSION(s, {program("writer"), "3"});
  const Symbol target = symbol(s.tracee->inferior().pid(), "target");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, 0x10000));
  ASSERT_TRUE(t.poke_debugreg(1, target.address));
  ASSERT_TRUE(t.poke_debugreg(
      7, dr7_slot(0, DrType::kWrite, DrLen::k4) | dr7_slot(1, DrType::kWrite, DrLen::k4)));
  int stops = 0;
  while (auto st = s.next()) {
    ++stops;
    EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB1)}));
    EXPECT_EQ(*t.peek_debugreg(0), 0x10000u);
    // Armed from the mmap that would map it, as a debug register waits for any access there.
    EXPECT_NE(s.tracee->describe().find("1 more once mapped"), std::string::npos)
        << s.tracee->describe();
  }
  EXPECT_EQ(stops, 3);
}

TEST(VirtualTracee, AStackVariableIsWatchedBySingleStepping) {
  SESSION(s, {program("stackvar")});
  const Symbol store = symbol(s.tracee->inferior().pid(), "store");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, store.address));
  ASSERT_TRUE(t.poke_debugreg(7, dr7_slot(0, DrType::kExecute, DrLen::k1)));
  auto st = s.next();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
  auto regs = s.tracee->inferior().get_regs(s.tracee->tid());
  ASSERT_TRUE(regs);
  const std::uint64_t local = regs->rdi;  // store(&local, v)
  ASSERT_TRUE(t.poke_debugreg(1, local));
  ASSERT_TRUE(t.poke_debugreg(
      7, dr7_slot(0, DrType::kExecute, DrLen::k1) | dr7_slot(1, DrType::kWrite, DrLen::k4)));
  std::vector<std::uint64_t> seen;  // B1: the value written; B0: 0
  while (seen.size() < 9 && (st = s.next())) {
    if (st->dr6 == dr6_of(kB1)) {
      seen.push_back(s.word(local, 4));
    } else {
      EXPECT_EQ(*st, (Stop{SIGTRAP, dr6_of(kB0)}));
      EXPECT_EQ(s.rip(), store.address);
      seen.push_back(0);
    }
    EXPECT_EQ(s.tracee->describe(), "single-step");
  }
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1, 0, 2, 0, 3, 0, 4, 0, 5}));
  // Once main has returned, exit's frames reuse the stack slot: stop watching it.
  ASSERT_TRUE(t.poke_debugreg(7, 0));
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.tracee->describe(), "none");
  EXPECT_EQ(s.ended, Stop::exited(0));
}

TEST(VirtualTracee, DebugRegistersArePerThread) {
  // The main thread is traced; the workers write slots[0] and slots[1] 20 times each.
  SESSION(s, {program("threads"), "2", "20"});
  const Symbol slots = symbol(s.tracee->inferior().pid(), "slots");
  Tracee& t = *s.tracee;
  ASSERT_TRUE(t.poke_debugreg(0, slots.address));
  ASSERT_TRUE(t.poke_debugreg(7, dr7_slot(0, DrType::kReadWrite, DrLen::k8)));
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.ended, Stop::exited(0));
  EXPECT_EQ(s.out.text(), "done\n");
}

// One PEEKUSER/POKEUSER and its answer: the value, or the error code.
struct Op {
  bool poke = false;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;
};

std::string answer(const Result<std::uint64_t>& r) {
  return r ? hex(*r) : errno_name(r.error().code());
}

std::string apply(Tracee& t, const Op& op) {
  if (!op.poke) return answer(t.peek_user(op.offset));
  auto r = t.poke_user(op.offset, op.value);
  return r ? "ok" : errno_name(r.error().code());
}

std::string op_text(const Op& op) {
  return std::string(op.poke ? "poke " : "peek ") + std::to_string(op.offset) +
         (op.poke ? " = " + hex(op.value) : "");
}

// The kernel's ptrace on a StoppedChild and a VirtualTracee give the same answers.
class VirtualTraceeDifferential : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = StoppedChild::spawn();
    if (!c && refused(c.error())) GTEST_SKIP() << skip_reason("ptrace", c.error());
    ASSERT_TRUE(c) << c.error().to_string();
    child_pid_ = c->pid();
    auto k = LinuxTracee::create(std::move(*c));
    ASSERT_TRUE(k) << k.error().to_string();
    kernel_.emplace(std::move(*k));
    auto v = VirtualTracee::spawn({program("spin")}, {.stdout_fd = out_.fd()});
    ASSERT_TRUE(v) << v.error().to_string();
    virt_.emplace(std::move(*v));
  }

  static std::uint64_t dr(int n) {
    return ptrace_compat::debugreg_offset(ptrace_compat::user_area(UserLayout::kX86_64), n);
  }
  static Op peek(int n) { return Op{false, dr(n), 0}; }
  static Op poke(int n, std::uint64_t v) { return Op{true, dr(n), v}; }

  // Runs `ops` on both, then reads DR0–DR7 of both; every answer must agree.
  void compare(const std::vector<Op>& ops) {
    std::vector<Op> all = ops;
    for (int n = 0; n < 8; ++n) all.push_back(peek(n));
    int errors = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::string k = apply(*kernel_, all[i]);
      const std::string v = apply(*virt_, all[i]);
      EXPECT_EQ(k, v) << "op " << i << ": " << op_text(all[i]);
      if (k.starts_with("E")) ++errors;
    }
    last_errors_ = errors;
  }

  Capture out_;
  pid_t child_pid_ = -1;
  std::optional<LinuxTracee> kernel_;
  std::optional<VirtualTracee> virt_;
  int last_errors_ = 0;
};

TEST_F(VirtualTraceeDifferential, PeeksAndPokesIncludingErrors) {
  const auto& area = ptrace_compat::user_area(UserLayout::kX86_64);
  const std::uint64_t w4 = dr7_slot(0, DrType::kWrite, DrLen::k4);
  std::vector<Op> ops = {
      peek(0),
      peek(6),
      peek(7),
      poke(0, 0x10000),
      peek(0),
      poke(7, w4),
      peek(7),
      poke(7, w4 | x86::dr7::kReserved | x86::dr7::kGlobalExact),
      peek(7),
      poke(7, w4 | (std::uint64_t{0b10} << x86::dr7::control_shift(1)) | x86::dr7::local_bit(1)),
      peek(7),
      poke(7, dr7_slot(0, DrType::kExecute, DrLen::k2)),
      peek(7),
      poke(0, 0x10002),
      peek(0),
      poke(0, 0xffff800000000000),
      poke(0, 0x00007ffffffff000),
      poke(0, 0x00007fffffffeffc),
      peek(0),
      poke(1, 0x00007fffffffefff),
      peek(1),
      poke(7, w4 | dr7_slot(1, DrType::kReadWrite, DrLen::k2)),
      peek(7),
      peek(1),
      poke(7, w4 | dr7_slot(1, DrType::kReadWrite, DrLen::k1) | x86::dr7::global_bit(1)),
      peek(7),
      poke(2, 0x20000),
      poke(3, 0x30001),
      poke(7, 0x55 | (std::uint64_t{0xd} << x86::dr7::control_shift(3))),
      poke(7, 0xff | (std::uint64_t{0b1001} << x86::dr7::control_shift(3))),
      peek(7),
      poke(7, dr7_slot(2, DrType::kWrite, DrLen::k8) | dr7_slot(3, DrType::kExecute, DrLen::k1)),
      poke(4, 1),
      poke(5, 1),
      peek(4),
      peek(5),
      poke(6, 0x1234),
      peek(6),
      poke(6, 0),
      peek(6),
      poke(6, kDr6Fresh),
      Op{false, dr(0) + 1, 0},
      Op{true, dr(7) + 4, 0},
      Op{false, area.size, 0},
      Op{true, area.size, 0},
      Op{false, area.size - 8, 0},
      Op{true, area.size - 8, 0},
      Op{false, area.debugreg - 8, 0},
      Op{true, area.debugreg - 8, 0},
      poke(7, 0),
      peek(7),
      poke(0, 0),
      poke(1, 0),
  };
  compare(ops);
  EXPECT_GE(last_errors_, 10);  // the sequence really exercises the errors
}

TEST_F(VirtualTraceeDifferential, SlotsRunOutAtTheSameRegister) {
  // Another user of the thread holds one slot: the kernel's perf event, our breakpoints() user.
  auto fd = perf_breakpoint_open(child_pid_, 0x60000, 8, pmu::BpType::kW);
  if (!fd && refused(fd.error())) GTEST_SKIP() << skip_reason("perf_event_open", fd.error());
  ASSERT_TRUE(fd) << fd.error().to_string();
  pmu::EventAttr attr = breakpoints::breakpoint_attr(0x60000, 8, pmu::BpType::kW);
  attr.exclude_kernel = true;
  auto other = virt_->breakpoints().register_user_hw_breakpoint(attr, {}, virt_->task());
  ASSERT_TRUE(other) << other.error().to_string();
  compare(
      {poke(0, 0x10000), poke(1, 0x10008), poke(2, 0x10010), poke(3, 0x10018),
       poke(7, dr7_slot(0, DrType::kWrite, DrLen::k8) | dr7_slot(2, DrType::kWrite, DrLen::k8))});
  EXPECT_EQ(last_errors_, 1);  // DR3's ENOSPC
  *fd = Fd();
  virt_->breakpoints().unregister_hw_breakpoint(*other);
  compare({poke(3, 0x10018), poke(7, dr7_slot(3, DrType::kReadWrite, DrLen::k8))});
  EXPECT_EQ(last_errors_, 0);
}

TEST_F(VirtualTraceeDifferential, SingleStepShowsTheSameDr6) {
  compare({poke(6, 0x1234)});
  // The kernel's stop first (the VirtualTracee's Inferior waits for any child).
  ASSERT_TRUE(kernel_->step());
  auto k = kernel_->wait(WaitMode::kBlock);
  ASSERT_TRUE(k) << k.error().to_string();
  ASSERT_TRUE(*k);
  ASSERT_TRUE(virt_->step());
  auto v = virt_->wait(WaitMode::kNoHang);
  ASSERT_TRUE(v) << v.error().to_string();
  ASSERT_TRUE(*v);
  EXPECT_EQ(**v, **k) << std::hex << (*v)->dr6 << " vs " << (*k)->dr6;
  EXPECT_EQ((*v)->dr6, dr6_of(kBs));
}

// A running program, not traced, that we may attach to: prog_spin, "ready" read from a pipe.
class SpinChild {
 public:
  SpinChild() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const std::string path = program("spin");
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
      ::execv(path.c_str(), argv);
      ::_exit(127);
    }
    ::close(fds[1]);
    char buf[8] = {};
    ready_ = ::read(fds[0], buf, sizeof(buf)) > 0 && std::string_view(buf).starts_with("ready");
    ::close(fds[0]);
  }
  SpinChild(const SpinChild&) = delete;
  SpinChild& operator=(const SpinChild&) = delete;
  ~SpinChild() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
    }
  }
  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

TEST(VirtualTracee, OpenTraceeChoosesByWhetherHitsAreDelivered) {
  SpinChild child;
  ASSERT_TRUE(child.ready());
  {
    auto t = open_tracee(child.pid(), false);
    if (!t && refused(t.error())) GTEST_SKIP() << skip_reason("ptrace attach", t.error());
    ASSERT_TRUE(t) << t.error().to_string();
    auto* v = dynamic_cast<VirtualTracee*>(t->get());
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(**(*t)->wait(), (Stop{SIGSTOP, kDr6Fresh}));
    const Symbol ticks = symbol(child.pid(), "ticks");
    ASSERT_TRUE((*t)->poke_debugreg(3, ticks.address));
    ASSERT_TRUE((*t)->poke_debugreg(7, dr7_slot(3, DrType::kWrite, DrLen::k8)));
    const std::uint64_t before = *v->inferior().read_word(ticks.address, 8);
    ASSERT_TRUE((*t)->cont());
    auto st = (*t)->wait(WaitMode::kBlock);
    ASSERT_TRUE(st) << st.error().to_string();
    EXPECT_EQ(**st, (Stop{SIGTRAP, dr6_of(x86::dr6::trap_bit(3))}));
    EXPECT_EQ(*v->inferior().read_word(ticks.address, 8), before + 1);
    ASSERT_TRUE((*t)->poke_debugreg(7, 0));
  }  // detached: the program runs on, unwatched
  auto t = open_tracee(child.pid(), true);
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_NE(dynamic_cast<LinuxTracee*>(t->get()), nullptr);
  EXPECT_EQ(**(*t)->wait(), (Stop{SIGSTOP, kDr6Fresh}));
  ASSERT_TRUE((*t)->poke_debugreg(0, 0x10000));
  EXPECT_EQ(*(*t)->peek_debugreg(0), 0x10000u);
  ASSERT_TRUE((*t)->poke_debugreg(0, 0));
}

}  // namespace
}  // namespace hwarb::native

// Property tests of guests on the simulated system (hwarb/sim/guest.h, Linux's
// hw_breakpoint_restore): random host breakpoints of every kind (ptrace, perf task, perf task on
// one CPU, perf CPU, wide; pinned and flexible), scheduling, ticks and host accesses, interleaved
// with any number of guest runs that load random guest debug-register images and make random
// guest accesses.
//
// Each script runs on two systems: "with" runs the guest operations, "without" skips them (the
// host operations a guest's CPU cannot do meanwhile are skipped in both, so the two see the same
// host operations). Then:
//  1. every host observation — registration and ptrace results, the trap bits of every host
//     access and which perf handlers it called — is the same in both runs;
//  2. after every operation, every CPU that is not in a guest has the same DR0-DR3/DR7 in both;
//  3. every guest access raises exactly the trap bits that a model of the guest's DR0-DR3/DR7
//     (written here from the SDM: enabled = Ln or Gn, R/W 01 writes, 11 reads and writes, 00
//     execute at exactly DRn, LEN 00/01/11/10 = 1/2/4/8 bytes aligned down) predicts, and the
//     guest's DR6 at exit is their union.
// The same harness with GuestRestore::kTifDebugOnly (the v3 patch) is shown wrong: a generated
// perf or wide breakpoint misses its hit after a guest run without breakpoints of its own,
// compared with the run without guests.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/base/format.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using breakpoints::breakpoint_attr;
using pmu::BpType;

constexpr int kCpus = 2;
constexpr int kTasks = 3;
constexpr std::uint64_t kWindow = 0x1000;
constexpr std::uint64_t kSpan = 0x18;  // breakpoints and accesses crowd in, so that hits are
                                       // frequent

enum class BpKind : std::uint8_t { kPtrace, kPerfTask, kPerfTaskCpu, kPerfCpu, kWide };
enum class OpKind : std::uint8_t {
  kAdd,
  kDel,
  kSwitch,
  kIdle,
  kTick,
  kAccess,
  kGuestEnter,
  kGuestAccess,
  kGuestExit,
};

struct Op {
  OpKind kind = OpKind::kTick;
  int cpu = 0;
  int task = 0;
  int bp = 0;  // kDel: index into the breakpoints added so far (mod their count)
  BpKind bp_kind = BpKind::kPerfTask;
  BpType type = BpType::kW;
  std::uint64_t addr = 0;
  int len = 1;
  bool flexible = false;
  AccessKind access = AccessKind::kRead;
  DebugRegisters guest;
};

std::ostream& operator<<(std::ostream& os, const Op& op) {
  os << "op" << static_cast<int>(op.kind) << " cpu=" << op.cpu << " task=" << op.task
     << " bp=" << op.bp << " kind=" << static_cast<int>(op.bp_kind)
     << " type=" << static_cast<int>(op.type) << " addr=" << hex(op.addr) << " len=" << op.len
     << (op.flexible ? " flexible" : "") << " access=" << static_cast<int>(op.access) << " guest=["
     << hex(op.guest.dr[0]) << " " << hex(op.guest.dr[1]) << " " << hex(op.guest.dr[2]) << " "
     << hex(op.guest.dr[3]) << " dr7=" << hex(op.guest.dr7) << "]";
  return os;
}

// --- the model of the guest's registers --------------------------------------------------------

std::uint64_t model_guest_bits(const DebugRegisters& g, AccessKind kind, std::uint64_t addr,
                               int size) {
  std::uint64_t bits = 0;
  for (int slot = 0; slot < 4; ++slot) {
    if (((g.dr7 >> (2 * slot)) & 3) == 0) continue;
    const unsigned rw = (g.dr7 >> (16 + 4 * slot)) & 3;
    const unsigned lenbits = (g.dr7 >> (18 + 4 * slot)) & 3;
    if (kind == AccessKind::kExec) {
      if (rw == 0 && g.dr[slot] == addr) bits |= 1u << slot;
      continue;
    }
    const bool matches = rw == 3 || (rw == 1 && kind == AccessKind::kWrite);
    if (!matches) continue;
    const std::uint64_t n = lenbits == 0 ? 1 : lenbits == 1 ? 2 : lenbits == 3 ? 4 : 8;
    const std::uint64_t lo = g.dr[slot] & ~(n - 1);
    if (addr < lo + n && lo < addr + static_cast<std::uint64_t>(size)) bits |= 1u << slot;
  }
  return bits;
}

// --- generators --------------------------------------------------------------------------------

int gen_len(BpType type) {
  if (type == BpType::kX) return 8;
  return *rc::gen::element(1, 2, 4, 8);
}

rc::Gen<DebugRegisters> gen_guest() {
  return rc::gen::exec([] {
    DebugRegisters g;
    for (auto& dr : g.dr) dr = kWindow + *rc::gen::inRange<std::uint64_t>(0, kSpan);
    for (int slot = 0; slot < 4; ++slot) {
      const int mode = *rc::gen::inRange(0, 4);  // off, L, G, both
      if (mode == 0) continue;
      const int rw = *rc::gen::element(0, 1, 3);
      const int len = rw == 0 ? 0 : *rc::gen::element(0, 1, 2, 3);
      g.dr7 |= static_cast<std::uint64_t>(mode) << (2 * slot);
      g.dr7 |= static_cast<std::uint64_t>(rw | (len << 2)) << (16 + 4 * slot);
    }
    return g;
  });
}

rc::Gen<Op> gen_op() {
  return rc::gen::exec([] {
    Op op;
    op.kind = *rc::gen::weightedElement<OpKind>({{3, OpKind::kAdd},
                                                 {1, OpKind::kDel},
                                                 {3, OpKind::kSwitch},
                                                 {1, OpKind::kIdle},
                                                 {1, OpKind::kTick},
                                                 {8, OpKind::kAccess},
                                                 {3, OpKind::kGuestEnter},
                                                 {4, OpKind::kGuestAccess},
                                                 {3, OpKind::kGuestExit}});
    op.cpu = *rc::gen::inRange(0, kCpus);
    op.task = *rc::gen::inRange(0, kTasks);
    op.bp = *rc::gen::inRange(0, 64);
    op.bp_kind = *rc::gen::element(BpKind::kPtrace, BpKind::kPerfTask, BpKind::kPerfTaskCpu,
                                   BpKind::kPerfCpu, BpKind::kWide);
    op.type = *rc::gen::element(BpType::kW, BpType::kRw, BpType::kX);
    op.len = gen_len(op.type);
    op.addr = (kWindow + *rc::gen::inRange<std::uint64_t>(0, kSpan)) &
              ~static_cast<std::uint64_t>(op.len - 1);
    op.flexible = *rc::gen::inRange(0, 4) == 0;
    op.access = *rc::gen::element(AccessKind::kRead, AccessKind::kWrite, AccessKind::kExec);
    if (op.kind == OpKind::kAccess || op.kind == OpKind::kGuestAccess) {
      op.len = *rc::gen::element(1, 2, 4, 8);
      op.addr = kWindow - 4 + *rc::gen::inRange<std::uint64_t>(0, kSpan + 8);
      // Instructions mostly where execute breakpoints may sit (len 8: aligned to 8).
      if (op.access == AccessKind::kExec && *rc::gen::inRange(0, 4) != 0) op.addr &= ~7ull;
    }
    op.guest = *gen_guest();
    return op;
  });
}

// --- one run -----------------------------------------------------------------------------------

class World {
 public:
  World(bool guests, GuestRestore restore) : guests_(guests), restore_(restore) {
    auto s =
        System::create({kCpus, breakpoints::Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
    RC_ASSERT(s.has_value());
    sys_ = std::move(*s);
    for (int i = 0; i < kTasks; ++i) tasks_.push_back(*sys_->machine().create_task());
    guest_.resize(kCpus);
    guest_dr6_.resize(kCpus);
  }

  Machine& m() { return sys_->machine(); }
  const std::vector<std::string>& log() const { return log_; }
  bool in_guest(int cpu) const { return guest_[static_cast<std::size_t>(cpu)].has_value(); }

  void apply(const Op& op) {
    const CpuId cpu(op.cpu);
    const std::optional<TaskId> current = *m().current(cpu);
    switch (op.kind) {
      case OpKind::kAdd:
        add(op);
        break;
      case OpKind::kDel:
        if (!bps_.empty()) {
          Bp& bp = bps_[static_cast<std::size_t>(op.bp) % bps_.size()];
          bp.handle.reset();
          bp.wide.reset();
          if (bp.ptrace_slot) {
            const TaskId t = tasks_[static_cast<std::size_t>(bp.task)];
            const std::uint64_t dr7 = *sys_->ptrace().get_debugreg(t, 7);
            auto r = sys_->ptrace().set_debugreg(t, 7, x86::dr7::uninstall(dr7, *bp.ptrace_slot));
            log_.push_back("ptrace del -> " + result_text(r));
            bp.ptrace_slot.reset();
          }
        }
        break;
      case OpKind::kSwitch:
      case OpKind::kIdle: {
        if (in_guest(op.cpu)) break;  // the vCPU thread does not leave a running guest
        const TaskId t = tasks_[static_cast<std::size_t>(op.task)];
        if (op.kind == OpKind::kIdle) {
          RC_ASSERT(m().switch_to_idle(cpu).has_value());
        } else if (*m().running_on(t) == std::nullopt || *m().running_on(t) == cpu) {
          RC_ASSERT(m().switch_to(cpu, t).has_value());
        }
        break;
      }
      case OpKind::kTick:
        RC_ASSERT(m().tick(cpu).has_value());
        break;
      case OpKind::kAccess: {
        if (in_guest(op.cpu) || !current) break;
        fired_.clear();
        std::string what;
        if (op.access == AccessKind::kExec) {
          auto o = m().exec(cpu, *current, op.addr);
          RC_ASSERT(o.has_value());
          what = "exec " + hex(op.addr) + " dr6=" + hex(o->dr6 & x86::dr6::kTrapMask);
        } else {
          auto o = m().access(cpu, *current, op.access, op.addr, op.len, 0);
          RC_ASSERT(o.has_value());
          what = "access " + hex(op.addr) + "/" + std::to_string(op.len) +
                 " dr6=" + hex(o->dr6 & x86::dr6::kTrapMask);
        }
        for (int i : fired_) what += " perf" + std::to_string(i);
        if (!what.ends_with(" dr6=0x0") && guest_runs_[static_cast<std::size_t>(op.cpu)] > 0) {
          ++hits_after_guest_;
        }
        log_.push_back("cpu" + std::to_string(op.cpu) + " " + what);
        break;
      }
      case OpKind::kGuestEnter:
        if (in_guest(op.cpu) || !current) break;
        guest_[static_cast<std::size_t>(op.cpu)] = op.guest;
        guest_dr6_[static_cast<std::size_t>(op.cpu)] = 0;
        if (guests_) RC_ASSERT(sys_->guest_enter(cpu, op.guest).has_value());
        break;
      case OpKind::kGuestAccess: {
        if (!in_guest(op.cpu) || !guests_) break;
        const std::uint64_t expected =
            model_guest_bits(*guest_[static_cast<std::size_t>(op.cpu)], op.access, op.addr, op.len);
        auto got = m().guest_access(cpu, op.access, op.addr, op.len);
        RC_ASSERT(got.has_value());
        RC_ASSERT(*got == expected);
        guest_dr6_[static_cast<std::size_t>(op.cpu)] |= expected;
        break;
      }
      case OpKind::kGuestExit:
        exit_guest(op.cpu);
        break;
    }
  }

  void exit_guest(int cpu) {
    if (!in_guest(cpu)) return;
    if (guests_) {
      auto left = sys_->guest_exit(CpuId(cpu), restore_);
      RC_ASSERT(left.has_value());
      RC_ASSERT(left->dr7 == guest_[static_cast<std::size_t>(cpu)]->dr7);
      RC_ASSERT(left->dr6 == guest_dr6_[static_cast<std::size_t>(cpu)]);
    }
    guest_[static_cast<std::size_t>(cpu)].reset();
    ++guest_runs_[static_cast<std::size_t>(cpu)];
  }

  // Host accesses that raised trap bits on a CPU after at least one guest run there.
  int hits_after_guest() const { return hits_after_guest_; }

 private:
  struct Bp {
    std::optional<breakpoints::BreakpointHandle> handle;
    std::optional<breakpoints::WideBreakpointHandle> wide;
    std::optional<int> ptrace_slot;
    int task = 0;
  };

  static std::string result_text(const Result<void>& r) {
    return r ? "ok" : std::string(errno_name(r.error().code()));
  }

  void add(const Op& op) {
    const int index = static_cast<int>(bps_.size());
    pmu::EventAttr attr = breakpoint_attr(op.addr, static_cast<std::uint64_t>(op.len), op.type);
    attr.pinned = !op.flexible;
    auto handler = [this, index](pmu::Event&, const pmu::Sample&) { fired_.push_back(index); };
    const TaskId t = tasks_[static_cast<std::size_t>(op.task)];
    Bp bp;
    bp.task = op.task;
    Result<void> r;
    breakpoints::HwBreakpoints& api = sys_->breakpoints();
    switch (op.bp_kind) {
      case BpKind::kPtrace: {
        // The first free ptrace slot of the task: DRn, then DR7 with the slot enabled.
        const breakpoints::PtraceThread* th = api.find_ptrace_thread(t);
        const std::uint64_t dr7 = *sys_->ptrace().get_debugreg(t, 7);
        int slot = 0;
        while (slot < 4 && th != nullptr && x86::dr7::enabled(dr7, slot)) ++slot;
        if (slot == 4) {
          r = make_error(ErrorCode::kNoSpc, "no ptrace slot");
          break;
        }
        r = sys_->ptrace().set_debugreg(t, slot, op.addr);
        if (!r) break;
        const x86::DrType type = op.type == BpType::kX   ? x86::DrType::kExecute
                                 : op.type == BpType::kW ? x86::DrType::kWrite
                                                         : x86::DrType::kReadWrite;
        const x86::DrLen len =
            op.type == BpType::kX ? x86::DrLen::k1 : *x86::len_from_bytes(op.len);
        r = sys_->ptrace().set_debugreg(t, 7, x86::dr7::install(dr7, slot, type, len));
        if (r) bp.ptrace_slot = slot;
        break;
      }
      case BpKind::kPerfTask:
      case BpKind::kPerfTaskCpu: {
        auto h = op.bp_kind == BpKind::kPerfTask
                     ? api.register_user_hw_breakpoint(attr, handler, t)
                     : api.register_user_hw_breakpoint(attr, handler, t, CpuId(op.cpu));
        if (h) bp.handle = std::move(*h);
        r = h ? Result<void>{} : std::unexpected(h.error());
        break;
      }
      case BpKind::kPerfCpu: {
        auto h = api.register_cpu_hw_breakpoint(attr, handler, CpuId(op.cpu));
        if (h) bp.handle = std::move(*h);
        r = h ? Result<void>{} : std::unexpected(h.error());
        break;
      }
      case BpKind::kWide: {
        auto h = api.register_wide_hw_breakpoint(attr, handler);
        if (h) bp.wide = std::move(*h);
        r = h ? Result<void>{} : std::unexpected(h.error());
        break;
      }
    }
    log_.push_back("add " + std::to_string(index) + " -> " + result_text(r));
    bps_.push_back(std::move(bp));
  }

  bool guests_;
  GuestRestore restore_;
  std::unique_ptr<System> sys_;
  std::vector<TaskId> tasks_;
  std::vector<Bp> bps_;  // after sys_: closed before it goes
  std::vector<std::optional<DebugRegisters>> guest_;
  std::vector<std::uint64_t> guest_dr6_;
  std::vector<int> guest_runs_ = std::vector<int>(kCpus);
  int hits_after_guest_ = 0;
  std::vector<int> fired_;
  std::vector<std::string> log_;
};

// Runs `ops` with and without guests, checking rules 2 and 3 on the way; returns the two logs.
// `hits_after_guest`, when given, gets World::hits_after_guest() of the run with guests.
std::pair<std::vector<std::string>, std::vector<std::string>> run_both(
    const std::vector<Op>& ops, GuestRestore restore, int* hits_after_guest = nullptr) {
  World with(true, restore);
  World without(false, restore);
  for (const Op& op : ops) {
    with.apply(op);
    without.apply(op);
    for (int c = 0; c < kCpus; ++c) {
      if (with.in_guest(c)) continue;
      DebugRegisters a = *with.m().debug_registers(CpuId(c));
      DebugRegisters b = *without.m().debug_registers(CpuId(c));
      a.dr6 = b.dr6 = 0;
      if (restore == GuestRestore::kAll) RC_ASSERT(a == b);
    }
  }
  for (int c = 0; c < kCpus; ++c) with.exit_guest(c);
  if (hits_after_guest != nullptr) *hits_after_guest = with.hits_after_guest();
  return {with.log(), without.log()};
}

RC_GTEST_PROP(GuestModel, HostHitsAreThoseOfTheRunWithoutGuests, ()) {
  // Tasks 0 and 1 start on CPUs 0 and 1, so that accesses and guests happen from the start.
  std::vector<Op> ops(2);
  for (int c = 0; c < kCpus; ++c) {
    ops[static_cast<std::size_t>(c)].kind = OpKind::kSwitch;
    ops[static_cast<std::size_t>(c)].cpu = ops[static_cast<std::size_t>(c)].task = c;
  }
  for (const Op& op : *rc::gen::container<std::vector<Op>>(gen_op())) ops.push_back(op);
  int hits_after_guest = 0;
  const auto [with, without] = run_both(ops, GuestRestore::kAll, &hits_after_guest);
  RC_ASSERT(with == without);
  RC_CLASSIFY(hits_after_guest > 0, "host hits after a guest run");
}

// The review of the v3 patch, as a model comparison: a non-ptrace breakpoint of any kind is
// installed on CPU 0 while task 0 (no ptrace breakpoints: no TIF_DEBUG) runs; a guest without
// breakpoints of its own runs there, with any accesses; then the host accesses the breakpoint.
// The full restore gives the hit of the run without guests; the TIF_DEBUG-only one loses it.
RC_GTEST_PROP(GuestModel, TifDebugOnlyRestoreLosesNonPtraceHits, ()) {
  Op add;
  add.kind = OpKind::kAdd;
  add.bp_kind =
      *rc::gen::element(BpKind::kPerfTask, BpKind::kPerfTaskCpu, BpKind::kPerfCpu, BpKind::kWide);
  add.type = *rc::gen::element(BpType::kW, BpType::kRw, BpType::kX);
  add.len = gen_len(add.type);
  add.addr = (kWindow + *rc::gen::inRange<std::uint64_t>(0, kSpan)) &
             ~static_cast<std::uint64_t>(add.len - 1);
  add.flexible = *rc::gen::arbitrary<bool>();
  Op run;
  run.kind = OpKind::kSwitch;
  Op enter;
  enter.kind = OpKind::kGuestEnter;
  enter.guest = *gen_guest();
  enter.guest.dr7 = 0;  // KVM's switch_db_regs is off
  std::vector<Op> ops{add, run, enter};
  for (Op op : *rc::gen::container<std::vector<Op>>(gen_op())) {
    if (op.kind != OpKind::kGuestAccess) continue;
    op.cpu = 0;
    ops.push_back(op);
  }
  Op exit_op;
  exit_op.kind = OpKind::kGuestExit;
  ops.push_back(exit_op);
  Op access;
  access.kind = OpKind::kAccess;
  access.addr = add.addr;
  access.len = add.type == BpType::kX ? 1 : add.len;
  access.access = add.type == BpType::kX ? AccessKind::kExec : AccessKind::kWrite;
  ops.push_back(access);

  const auto [all, all_without] = run_both(ops, GuestRestore::kAll);
  RC_ASSERT(all == all_without);
  RC_ASSERT(all.back().ends_with(" perf0"));
  const auto [v3, v3_without] = run_both(ops, GuestRestore::kTifDebugOnly);
  RC_ASSERT(v3_without == all_without);
  RC_ASSERT(v3.back() != v3_without.back());
  RC_ASSERT(v3.back().find("perf") == std::string::npos);
}

// With a ptrace breakpoint on the task (TIF_DEBUG), the v3 restore happens and is right.
TEST(GuestModel, TifDebugOnlyRestoreIsRightForPtraceTasks) {
  Op add;
  add.kind = OpKind::kAdd;
  add.bp_kind = BpKind::kPtrace;
  add.addr = kWindow;
  add.len = 4;
  Op wide = add;
  wide.bp_kind = BpKind::kWide;
  wide.addr = kWindow + 8;
  Op run;
  run.kind = OpKind::kSwitch;
  Op enter;
  enter.kind = OpKind::kGuestEnter;
  Op exit_op;
  exit_op.kind = OpKind::kGuestExit;
  Op a1;
  a1.kind = OpKind::kAccess;
  a1.access = AccessKind::kWrite;
  a1.addr = kWindow;
  a1.len = 4;
  Op a2 = a1;
  a2.addr = kWindow + 8;
  const std::vector<Op> ops{add, wide, run, enter, exit_op, a1, a2};
  const auto [v3, without] = run_both(ops, GuestRestore::kTifDebugOnly);
  EXPECT_EQ(v3, without);
  EXPECT_TRUE(v3.back().ends_with(" perf1")) << v3.back();
  EXPECT_NE(v3[v3.size() - 2].find("access 0x1000/4 dr6=0x"), std::string::npos);
  EXPECT_EQ(v3[v3.size() - 2].find("dr6=0x0"), std::string::npos) << v3[v3.size() - 2];
}

}  // namespace
}  // namespace hwarb::sim

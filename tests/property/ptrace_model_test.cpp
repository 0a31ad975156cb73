// Property test of the ptrace DR emulation on the simulated machine: random sequences of
// POKEUSER/PEEKUSER, perf users of the same task, accesses and instruction fetches (hits),
// single-steps and continues, against a small model of one task's register file written here from
// docs/architecture.md section 5 and ptrace_compat/debugreg_emulation.h.
//
// The model keeps, for slot 0..3, the breakpoint ptrace registered (address, len, type, enabled)
// or none; the DR7 value last written; the virtual DR6; the perf users' breakpoints; whether the
// task is stopped (and the stops queued behind the current one). Slots: every registered
// breakpoint, enabled or not, and every perf user's holds one of the task's 4. After every step
// it compares: the result code of the operation, all eight registers, the stop (signal and DR6)
// and the DR7 the CPU really has while the task runs (the model's enabled breakpoints must be the
// installed ones). At the end the task exits: flush_ptrace_hw_breakpoint must leave
// is_used() == false once the perf users are closed.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include "hwarb/sim/sim_tracee.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using pmu::BpType;

constexpr std::uint64_t kTsm = 0x00007ffffffff000ULL;
constexpr std::uint64_t kDr6Init = 0xffff0ff0;
constexpr std::uint64_t kBs = 0x4000;
constexpr int kSlots = 4;
const CpuId kCpu(0);

enum class OpKind { kPoke, kPeek, kPerfOpen, kPerfClose, kRead, kWrite, kExec, kStep, kCont };

struct Op {
  OpKind kind = OpKind::kPeek;
  int reg = 0;  // poke/peek: DR number 0..7
  std::uint64_t value = 0;
  std::uint64_t addr = 0;
  int size = 1;
  BpType type = BpType::kW;
  int pick = 0;
};

std::ostream& operator<<(std::ostream& os, const Op& op) {
  const char* names[] = {"poke",  "peek", "perf_open", "perf_close", "read",
                         "write", "exec", "step",      "cont"};
  os << names[static_cast<int>(op.kind)] << std::hex;
  switch (op.kind) {
    case OpKind::kPoke:
      os << " dr" << op.reg << "=0x" << op.value;
      break;
    case OpKind::kPeek:
      os << " dr" << op.reg;
      break;
    case OpKind::kPerfOpen:
      os << " 0x" << op.addr << " len " << op.size << " type " << static_cast<int>(op.type);
      break;
    case OpKind::kPerfClose:
      os << " #" << op.pick;
      break;
    case OpKind::kRead:
    case OpKind::kWrite:
      os << " 0x" << op.addr << " size " << op.size;
      break;
    case OpKind::kExec:
      os << " 0x" << op.addr;
      break;
    default:
      break;
  }
  return os << std::dec;
}

// Addresses near the window the accesses touch, plus the kernel boundary.
rc::Gen<std::uint64_t> gen_addr() {
  return rc::gen::weightedOneOf<std::uint64_t>(
      {{8, rc::gen::map(rc::gen::inRange<std::uint64_t>(0, 8),
                        [](std::uint64_t i) { return 0x1000 + 4 * i; })},
       {4, rc::gen::inRange<std::uint64_t>(0x1000, 0x1020)},
       {1, rc::gen::element<std::uint64_t>(0, kTsm - 1, kTsm - 8, kTsm, kTsm + 8, ~0ULL)}});
}

// A DR7 image: per slot L/G bits, R/W and LEN, sometimes reserved or high bits.
rc::Gen<std::uint64_t> gen_dr7() {
  return rc::gen::exec([] {
    std::uint64_t v = 0;
    for (int i = 0; i < kSlots; ++i) {
      const int en = *rc::gen::weightedElement<int>({{3, 0}, {3, 1}, {1, 2}, {1, 3}});
      const unsigned rw = *rc::gen::weightedElement<unsigned>({{2, 0}, {4, 1}, {1, 2}, {4, 3}});
      const unsigned len = *rc::gen::weightedElement<unsigned>({{4, 0}, {2, 1}, {2, 2}, {3, 3}});
      v |= static_cast<std::uint64_t>(en) << (2 * i);
      v |= std::uint64_t{(len << 2) | rw} << (16 + 4 * i);
    }
    if (*rc::gen::weightedElement<bool>({{6, false}, {1, true}})) {
      v |= *rc::gen::element<std::uint64_t>(0xfc00, 0x2000, 0x300, 0xffff'0000'0000'0000ULL);
    }
    return v;
  });
}

rc::Gen<Op> gen_op() {
  return rc::gen::exec([] {
    Op op;
    op.kind = *rc::gen::weightedElement<OpKind>({{10, OpKind::kPoke},
                                                 {3, OpKind::kPeek},
                                                 {2, OpKind::kPerfOpen},
                                                 {1, OpKind::kPerfClose},
                                                 {4, OpKind::kRead},
                                                 {6, OpKind::kWrite},
                                                 {3, OpKind::kExec},
                                                 {2, OpKind::kStep},
                                                 {4, OpKind::kCont}});
    switch (op.kind) {
      case OpKind::kPoke:
        op.reg = *rc::gen::weightedElement<int>(
            {{3, 0}, {3, 1}, {2, 2}, {2, 3}, {1, 4}, {1, 5}, {2, 6}, {8, 7}});
        op.value = op.reg == 7   ? *gen_dr7()
                   : op.reg == 6 ? *rc::gen::element<std::uint64_t>(0, kDr6Init, 0xffff4ff1, 7)
                                 : *gen_addr();
        break;
      case OpKind::kPeek:
        op.reg = *rc::gen::inRange(0, 8);
        break;
      case OpKind::kPerfOpen:
        op.size = *rc::gen::element(1, 2, 4, 8);
        op.addr = 0x1000 + static_cast<std::uint64_t>(op.size) *
                               *rc::gen::inRange<std::uint64_t>(0, 32 / op.size);
        op.type = *rc::gen::element(BpType::kW, BpType::kRw);
        break;
      case OpKind::kPerfClose:
        op.pick = *rc::gen::inRange(0, 8);
        break;
      case OpKind::kRead:
      case OpKind::kWrite:
        op.size = *rc::gen::element(1, 2, 4, 8);
        op.addr = *rc::gen::inRange<std::uint64_t>(0xffc, 0x1024);
        break;
      case OpKind::kExec:
        op.addr = *rc::gen::element<std::uint64_t>(0, 0x1000, 0x1001, 0x1004, 0x1008);
        break;
      default:
        break;
    }
    return op;
  });
}

// ---------------------------------------------------------------------------------------------
// The model.

struct MBp {
  std::uint64_t addr = 0;
  std::uint64_t len = 1;
  BpType type = BpType::kW;
  bool enabled = false;
};

struct MPerf {
  std::uint64_t addr = 0;
  std::uint64_t len = 4;
  BpType type = BpType::kW;
};

struct Model {
  std::array<std::optional<MBp>, kSlots> bps;
  std::uint64_t dr7 = 0;
  std::uint64_t vdr6 = 0;  // "set means happened"
  std::vector<MPerf> perf;
  std::optional<int> stop = SIGSTOP;
  std::deque<std::uint64_t> queued;  // virtual DR6 of stops behind the current one
  bool stepping = false;

  int used() const {
    int n = static_cast<int>(perf.size());
    for (const auto& b : bps) n += b ? 1 : 0;
    return n;
  }

  // x86 field checks for a breakpoint of ptrace (exclude_kernel): alignment, then kernel space
  // over what the register covers (one byte for execute).
  static ErrorCode check(std::uint64_t addr, std::uint64_t len, BpType type) {
    if (type != BpType::kX && addr % len != 0) return ErrorCode::kInval;
    const std::uint64_t span = type == BpType::kX ? 1 : len;
    if (addr >= kTsm || addr + span - 1 >= kTsm) return ErrorCode::kInval;
    return ErrorCode{};
  }

  // decode_dr7 + arch_bp_generic_fields.
  static std::optional<ErrorCode> decode(std::uint64_t v, int i, std::uint64_t* len, BpType* type) {
    const unsigned rw = (v >> (16 + 4 * i)) & 3;
    const unsigned ln = (v >> (18 + 4 * i)) & 3;
    if (rw == 2) return ErrorCode::kInval;
    if (rw == 0) {
      if (ln != 0) return ErrorCode::kInval;
      *type = BpType::kX;
      *len = 8;
      return std::nullopt;
    }
    *type = rw == 1 ? BpType::kW : BpType::kRw;
    *len = ln == 0 ? 1 : ln == 1 ? 2 : ln == 2 ? 8 : 4;
    return std::nullopt;
  }

  std::uint64_t image() const {
    std::uint64_t v = 0;
    for (int i = 0; i < kSlots; ++i) {
      if (!bps[i] || !bps[i]->enabled) continue;
      const MBp& b = *bps[i];
      const unsigned rw = b.type == BpType::kX ? 0 : b.type == BpType::kW ? 1 : 3;
      const unsigned ln = b.type == BpType::kX ? 0
                          : b.len == 1         ? 0
                          : b.len == 2         ? 1
                          : b.len == 8         ? 2
                                               : 3;
      v |= (std::uint64_t{2} << (2 * i)) | (std::uint64_t{(ln << 2) | rw} << (16 + 4 * i)) | 0x200;
    }
    return v;
  }

  ErrorCode pass(std::uint64_t v) {
    for (int i = 0; i < kSlots; ++i) {
      const bool en = ((v >> (2 * i)) & 3) != 0;
      if (!bps[i] && !en) continue;
      std::uint64_t len = 0;
      BpType type{};
      if (auto e = decode(v, i, &len, &type)) return *e;
      if (!bps[i]) {
        if (used() >= kSlots) return ErrorCode::kNoSpc;
        bps[i] = MBp{0, len, type, true};
        continue;
      }
      if (ErrorCode e = check(bps[i]->addr, len, type); e != ErrorCode{}) return e;
      bps[i]->len = len;
      bps[i]->type = type;
      bps[i]->enabled = en;
    }
    return ErrorCode{};
  }

  ErrorCode poke(int n, std::uint64_t v) {
    if (n < kSlots) {
      if (!bps[n]) {
        if (used() >= kSlots) return ErrorCode::kNoSpc;
        if (ErrorCode e = check(v, 1, BpType::kW); e != ErrorCode{}) return e;
        bps[n] = MBp{v, 1, BpType::kW, false};
        return ErrorCode{};
      }
      if (ErrorCode e = check(v, bps[n]->len, bps[n]->type); e != ErrorCode{}) return e;
      bps[n]->addr = v;
      return ErrorCode{};
    }
    if (n == 4 || n == 5) return ErrorCode::kIo;
    if (n == 6) {
      vdr6 = v ^ kDr6Init;
      return ErrorCode{};
    }
    const std::uint64_t old = image();
    const ErrorCode first = pass(v & ~std::uint64_t{0xfc00});
    if (first == ErrorCode{}) {
      dr7 = v;
      return first;
    }
    pass(old);
    return first;
  }

  std::uint64_t peek(int n) const {
    if (n < kSlots) return bps[n] ? bps[n]->addr : 0;
    if (n == 6) return vdr6 ^ kDr6Init;
    if (n == 7) return dr7;
    return 0;
  }

  static bool overlaps(std::uint64_t bp, std::uint64_t len, std::uint64_t a, int size) {
    const std::uint64_t lo = bp & ~(len - 1);
    return a < lo + len && lo < a + static_cast<std::uint64_t>(size);
  }

  // One debug exception of the running task: `ptrace_bits` from its enabled ptrace breakpoints.
  void exception(std::uint64_t ptrace_bits, bool bs) {
    const std::uint64_t v = ptrace_bits | (bs ? kBs : 0);
    if (stop) {
      queued.push_back(v);
      return;
    }
    vdr6 = v;
    if (v != 0) stop = SIGTRAP;
  }

  void access(bool write, std::uint64_t a, int size) {
    std::uint64_t bits = 0;
    bool any = false;
    for (int i = 0; i < kSlots; ++i) {
      const auto& b = bps[i];
      if (!b || !b->enabled || b->type == BpType::kX) continue;
      if ((write || b->type == BpType::kRw) && overlaps(b->addr, b->len, a, size)) {
        bits |= std::uint64_t{1} << i;
      }
    }
    for (const MPerf& p : perf) {
      if ((write || p.type == BpType::kRw) && overlaps(p.addr, p.len, a, size)) any = true;
    }
    if (bits != 0 || any || stepping) exception(bits, stepping);
  }

  void exec(std::uint64_t ip) {
    std::uint64_t bits = 0;
    for (int i = 0; i < kSlots; ++i) {
      const auto& b = bps[i];
      if (b && b->enabled && b->type == BpType::kX && b->addr == ip) bits |= std::uint64_t{1} << i;
    }
    if (bits != 0) exception(bits, false);
    if (stepping) exception(0, true);
  }

  void resume(bool step) {
    stepping = step;
    stop.reset();
    // cont turns single-step off before the instruction behind a fault runs: its trap is gone.
    if (!step) std::erase(queued, kBs);
    while (!queued.empty() && !stop) {
      const std::uint64_t v = queued.front();
      queued.pop_front();
      vdr6 = v;
      if (v != 0) stop = SIGTRAP;
    }
  }
};

ErrorCode code_of(const Result<void>& r) {
  return r ? ErrorCode{} : r.error().code();
}

RC_GTEST_PROP(PtraceModel, EmulationMatchesTheRegisterFileModel, ()) {
  const auto ops = *rc::gen::scale(3.0, rc::gen::container<std::vector<Op>>(gen_op()));
  auto sys = std::move(*System::create(SystemConfig{}));
  const TaskId task = *sys->machine().create_task();
  RC_ASSERT(sys->machine().switch_to(kCpu, task).has_value());
  auto tracee = SimTracee::attach(*sys, task);
  RC_ASSERT(tracee.has_value());
  Model m;
  std::vector<breakpoints::BreakpointHandle> perf;

  for (std::size_t k = 0; k < ops.size(); ++k) {
    const Op& op = ops[k];
    std::ostringstream where;
    where << "step " << k << ": " << op;
    RC_LOG() << where.str() << "\n";
    const bool stopped = m.stop.has_value();
    switch (op.kind) {
      case OpKind::kPoke: {
        const ErrorCode want = stopped ? m.poke(op.reg, op.value) : ErrorCode::kSrch;
        const ErrorCode got = code_of(tracee->poke_debugreg(op.reg, op.value));
        RC_ASSERT(got == want);
        break;
      }
      case OpKind::kPeek: {
        auto got = tracee->peek_debugreg(op.reg);
        RC_ASSERT(got.has_value() == stopped);
        if (stopped) RC_ASSERT(*got == m.peek(op.reg));
        break;
      }
      case OpKind::kPerfOpen: {
        pmu::EventAttr attr = breakpoints::breakpoint_attr(op.addr, op.size, op.type);
        auto h = sys->breakpoints().register_user_hw_breakpoint(attr, {}, task);
        const ErrorCode want = m.used() >= kSlots ? ErrorCode::kNoSpc : ErrorCode{};
        RC_ASSERT((h ? ErrorCode{} : h.error().code()) == want);
        if (h) {
          perf.push_back(std::move(*h));
          m.perf.push_back(MPerf{op.addr, static_cast<std::uint64_t>(op.size), op.type});
        }
        break;
      }
      case OpKind::kPerfClose:
        if (!perf.empty()) {
          const std::size_t i = static_cast<std::size_t>(op.pick) % perf.size();
          perf.erase(perf.begin() + static_cast<std::ptrdiff_t>(i));
          m.perf.erase(m.perf.begin() + static_cast<std::ptrdiff_t>(i));
        }
        break;
      case OpKind::kRead:
      case OpKind::kWrite: {
        const bool write = op.kind == OpKind::kWrite;
        auto r = sys->machine().access(kCpu, task, write ? AccessKind::kWrite : AccessKind::kRead,
                                       op.addr, op.size, 0xab);
        RC_ASSERT(r.has_value() == !stopped);
        if (!stopped) m.access(write, op.addr, op.size);
        break;
      }
      case OpKind::kExec: {
        auto r = sys->machine().exec(kCpu, task, op.addr);
        RC_ASSERT(r.has_value() == !stopped);
        if (!stopped) m.exec(op.addr);
        break;
      }
      case OpKind::kStep:
      case OpKind::kCont: {
        const bool step = op.kind == OpKind::kStep;
        const ErrorCode got = code_of(step ? tracee->step() : tracee->cont());
        RC_ASSERT(got == (stopped ? ErrorCode{} : ErrorCode::kSrch));
        if (stopped) m.resume(step);
        break;
      }
    }
    // The stop and, read directly (the emulation needs no stop for that), every register.
    auto w = tracee->wait();
    RC_ASSERT(w.has_value());
    RC_ASSERT(w->has_value() == m.stop.has_value());
    if (m.stop) {
      RC_ASSERT((*w)->signal == *m.stop);
      RC_ASSERT((*w)->dr6 == (m.vdr6 ^ kDr6Init));
    }
    for (int n = 0; n < 8; ++n) RC_ASSERT(*sys->ptrace().get_debugreg(task, n) == m.peek(n));
    // The enabled ptrace breakpoints are armed on the CPU at their addresses.
    const auto regs = *sys->machine().debug_registers(kCpu);
    int armed = 0;
    for (int i = 0; i < kSlots; ++i) armed += x86::dr7::enabled(regs.dr7, i) ? 1 : 0;
    int want_armed = static_cast<int>(m.perf.size());
    for (const auto& b : m.bps) want_armed += (b && b->enabled) ? 1 : 0;
    RC_ASSERT(armed == want_armed);
    RC_ASSERT(sys->ptrace().failed_restores() == 0);
  }
  perf.clear();
  RC_ASSERT(sys->machine().exit(task).has_value());
  RC_ASSERT(!sys->breakpoints().is_used());
}

}  // namespace
}  // namespace hwarb::sim

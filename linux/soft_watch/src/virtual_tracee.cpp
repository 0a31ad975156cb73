#include "hwarb/linux/virtual_tracee.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <span>
#include <utility>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/breakpoints/bp_pmu.h"
#include "hwarb/linux/linux_tracee.h"
#include "hwarb/linux/page.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/pmu/core.h"
#include "hwarb/ptrace_compat/debugreg_emulation.h"
#include "hwarb/x86/debugreg.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {
namespace {

using ptrace_compat::Stop;
using ptrace_compat::UserLayout;
using ptrace_compat::WaitMode;

constexpr CpuId kCpu{0};

class SteadyClock final : public pmu::Clock {
 public:
  pmu::Time now() const override {
    return static_cast<pmu::Time>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - start_)
                                      .count());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// One enabled debug register of the virtual CPU, as watched.
struct Active {
  int reg = 0;
  std::uint64_t addr = 0;  // execute: the address; data: the aligned start of the range
  std::uint64_t len = 0;
  unsigned access = 0;  // kWatch* bits
};

bool is_exec(const Active& a) {
  return a.access == kWatchExec;
}

// Does `ref` hit the data register `a` (overlap, and a write for a write-only register)?
bool hits(const Active& a, const x86::MemRef& ref) {
  if (is_exec(a) || ref.size == 0) return false;
  if (!(ref.address < a.addr + a.len && a.addr < ref.address + ref.size)) return false;
  const bool writes =
      (static_cast<unsigned>(ref.access) & static_cast<unsigned>(x86::Access::kWrite)) != 0;
  return (a.access & kWatchRead) != 0 || writes;
}

// The instruction about to run and the data registers it will hit.
struct Prediction {
  std::uint64_t ip = 0;
  std::uint64_t bits = 0;  // B0–B3 of the registers hit
  // The access, for the sample (pmu::Sample's addr/size/old_value/new_value): the bytes of the
  // instruction's operand at the first register hit, at most 8 (the sample's values are one
  // word); undecodable, the first changed register's range. size 0: no value could be read.
  std::uint64_t addr = 0;
  int size = 0;
  std::uint64_t old_value = 0;  // memory there before the instruction
  std::uint64_t new_value = 0;  // and after it (reads: the value read, as old_value)
  pmu::AccessKind access = pmu::AccessKind::kNone;  // how the instruction touches it
  bool decoded = false;
  // Undecodable instruction: the data registers' bytes before it, compared afterwards.
  std::vector<std::pair<Active, std::vector<std::uint8_t>>> before;
};

// Little-endian bytes (at most 8) as one word, as the sample holds them.
std::uint64_t word_of(std::span<const std::uint8_t> bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
    v |= static_cast<std::uint64_t>(bytes[i]) << (i * 8);
  }
  return v;
}

enum class Mode : std::uint8_t {
  kNone,      // no register enabled (or none could be armed)
  kPages,     // a SoftWatch with page protection and int3
  kStepping,  // the traced thread is single-stepped here
};

std::string pid_text(pid_t pid) {
  return "pid " + std::to_string(pid);
}

}  // namespace

struct VirtualTracee::Impl final : breakpoints::DebugRegisterFile {
  // The virtual CPU's registers (written by the breakpoint PMU).
  std::array<std::uint64_t, x86::kSlots> dr{};
  std::uint64_t dr7_value = 0;

  std::uint64_t dr7(CpuId) const override { return dr7_value; }
  void set_dr7(CpuId, std::uint64_t value) override { dr7_value = value; }
  void set_address(CpuId, int slot, std::uint64_t addr) override {
    dr[static_cast<std::size_t>(slot)] = addr;
  }

  Inferior inferior;
  pid_t tid;
  TaskId task;
  SteadyClock clock;
  std::unique_ptr<arbiter::Arbiter> arb;
  std::unique_ptr<breakpoints::BreakpointPmu> bp_pmu;
  std::unique_ptr<pmu::Core> core;
  std::unique_ptr<breakpoints::HwBreakpoints> api;
  std::unique_ptr<ptrace_compat::DebugRegEmulation> emu;

  // The watch.
  Mode mode = Mode::kNone;
  std::optional<SoftWatch> watch;
  std::vector<Active> active;  // registers watched now
  std::vector<int> unarmed;    // enabled registers that could not be armed
  std::optional<std::array<std::uint64_t, x86::kSlots + 1>> armed_for;  // DR0–3, DR7

  // The tracee's state.
  std::optional<int> stop;                  // the signal of the stop it is in
  std::optional<Error> gone;                // why everything is ESRCH now
  std::optional<Stop> ended;                // the end, until wait() has reported it
  std::optional<std::uint64_t> exec_skip;   // an execute hit reported here: run it once
  bool stepping = false;                    // kStepping: a cont() is being stepped
  bool step_signalled = false;              // kStepping: a signal was delivered with the last step
  Prediction pending;                       // kStepping: the instruction being stepped
  std::optional<std::uint64_t> kernel_dr6;  // the kernel's DR6 of the thread when we came

  Impl(Inferior inf, pid_t t) : inferior(std::move(inf)), tid(t), task(TaskId(t)) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  ~Impl() override {
    const bool restore_dr6 = kernel_dr6 && !inferior.spawned();
    if (inferior.alive() && (watch || stepping || restore_dr6)) {
      ignore_error(inferior.stop_all(),
                   "a destructor: a thread that will not stop is left as it is");
      if (watch)
        ignore_error(watch->disarm(), "a destructor: what cannot be restored stays, as before");
      // The kernel's own DR6 got BS from our single-steps: a later tracer sees it as it was.
      if (restore_dr6 && inferior.is_stopped(tid)) {
        ignore_error(ptrace_poke_user(tid, dr6_offset(), *kernel_dr6), "a destructor: best effort");
      }
      // The trap of a step in flight is ours: the program must not receive it.
      std::vector<Event> queued = inferior.discard_queued(tid);
      for (auto it = queued.rbegin(); it != queued.rend(); ++it) {
        if (stepping && it->kind == EventKind::kSignal && it->signal == SIGTRAP &&
            it->code != SI_KERNEL) {
          continue;
        }
        inferior.requeue(*it);
      }
    }
    watch.reset();
    emu.reset();
    api.reset();
    core.reset();
    bp_pmu.reset();
    arb.reset();
  }

  static std::uint64_t dr6_offset() {
    return ptrace_compat::debugreg_offset(ptrace_compat::user_area(UserLayout::kX86_64), 6);
  }

  Result<void> build() {
    auto a = arbiter::Arbiter::create({.profile = arbiter::ArchProfile::x86_64(), .cpus = 1});
    if (!a) return std::unexpected(a.error());
    arb = std::move(*a);
    bp_pmu = std::make_unique<breakpoints::BreakpointPmu>(breakpoints::Arch::kX86_64, 1, this);
    core = std::make_unique<pmu::Core>(*arb, clock);
    if (auto r = core->register_pmu(pmu::EventType::kBreakpoint, *bp_pmu); !r) return r;
    api = std::make_unique<breakpoints::HwBreakpoints>(*core, *bp_pmu);
    emu = std::make_unique<ptrace_compat::DebugRegEmulation>(*api);
    return core->sched_in(kCpu, task);
  }

  // --- state checks -------------------------------------------------------------------------

  Result<void> check_stopped() const {
    if (gone) return std::unexpected(*gone);
    if (!stop) {
      return make_error(ErrorCode::kSrch,
                        "pid: " + pid_text(tid) + " is running (not in a ptrace-stop)");
    }
    return {};
  }

  void end(const Event& ev) {
    // kExited/kKilled/kThreadExit: `signal` is set when a signal ended it.
    const std::string why = ev.signal != 0 ? " was killed by signal " + std::to_string(ev.signal)
                                           : " exited with status " + std::to_string(ev.status);
    gone = Error(ErrorCode::kSrch, "pid: " + pid_text(tid) + why);
    ended = ev.signal != 0 ? Stop::killed(ev.signal) : Stop::exited(ev.status);
    stop.reset();
    watch.reset();
    active.clear();
    mode = Mode::kNone;
    api->flush_ptrace_hw_breakpoint(task);
  }

  // --- the watch ----------------------------------------------------------------------------

  std::vector<Active> enabled_registers() const {
    std::vector<Active> out;
    for (int n = 0; n < x86::kSlots; ++n) {
      if (!x86::dr7::enabled(dr7_value, n)) continue;
      const std::uint64_t addr = dr[static_cast<std::size_t>(n)];
      const auto len = static_cast<std::uint64_t>(x86::len_bytes(x86::dr7::len(dr7_value, n)));
      switch (x86::dr7::type(dr7_value, n)) {
        case x86::DrType::kExecute:
          out.push_back(Active{n, addr, 1, kWatchExec});
          break;
        case x86::DrType::kWrite:
          out.push_back(Active{n, addr & ~(len - 1), len, kWatchWrite});
          break;
        case x86::DrType::kReadWrite:
          out.push_back(Active{n, addr & ~(len - 1), len, kWatchRead | kWatchWrite});
          break;
        case x86::DrType::kIo:
          break;  // never installed: ptrace refuses it
      }
    }
    return out;
  }

  static std::vector<WatchRange> ranges_of(const std::vector<Active>& regs) {
    std::vector<WatchRange> out;
    for (const Active& a : regs) {
      out.push_back(WatchRange{a.addr, a.len, a.access, static_cast<std::size_t>(a.reg)});
    }
    return out;
  }

  void disarm() {
    if (watch) {
      ignore_error(watch->disarm(), "dropped either way; a gone thread has nothing to restore");
      watch.reset();
    }
  }

  // Arms the enabled registers (every thread stopped). Registers whose range cannot be armed
  // are left out; when SoftWatch would single-step, this thread is stepped here instead.
  void arm() {
    disarm();
    active.clear();
    unarmed.clear();
    mode = Mode::kNone;
    const std::vector<Active> wanted = enabled_registers();
    if (wanted.empty()) return;
    std::vector<Active> armed = wanted;
    auto w = SoftWatch::arm(inferior, ranges_of(wanted));
    if (!w) {
      armed.clear();
      for (const Active& a : wanted) {
        auto one = SoftWatch::arm(inferior, ranges_of({a}));
        if (one) {
          ignore_error(one->disarm(), "a trial arm: only whether it armed is asked");
          armed.push_back(a);
        } else {
          unarmed.push_back(a.reg);
        }
      }
      if (armed.empty()) return;
      w = SoftWatch::arm(inferior, ranges_of(armed));
      if (!w) {
        for (const Active& a : armed) unarmed.push_back(a.reg);
        return;
      }
    }
    for (std::size_t i = 0; i < armed.size(); ++i) {
      if (w->method(i) == WatchMethod::kSingleStep) {
        ignore_error(w->disarm(), "single-stepping replaces the page watch either way");
        unarmed.clear();
        active = wanted;
        mode = Mode::kStepping;
        return;
      }
    }
    watch.emplace(std::move(*w));
    active = std::move(armed);
    mode = Mode::kPages;
  }

  Result<std::vector<pid_t>> stop_others() {
    if (inferior.threads().size() <= 1) return std::vector<pid_t>{};
    return inferior.stop_all(tid);
  }

  void resume_others(const std::vector<pid_t>& others) {
    for (pid_t t : others)
      ignore_error(inferior.resume_as_before(t), "a thread that is gone needs no resume");
  }

  // Re-arms when the virtual registers changed since the last arm (the tracee is stopped).
  Result<void> sync() {
    std::array<std::uint64_t, x86::kSlots + 1> now{};
    std::copy(dr.begin(), dr.end(), now.begin());
    now[x86::kSlots] = dr7_value;
    if (armed_for && *armed_for == now) return {};
    auto others = stop_others();
    if (!others) return std::unexpected(others.error());
    arm();
    resume_others(*others);
    armed_for = now;
    return {};
  }

  Resume resume_mode(pid_t t) const {
    if (t == tid && mode == Mode::kStepping && stepping) return Resume::kStep;
    if (watch) return watch->resume_mode();
    return Resume::kCont;
  }

  std::uint64_t exec_bits_at(std::uint64_t ip) const {
    std::uint64_t bits = 0;
    for (const Active& a : active) {
      if (is_exec(a) && a.addr == ip) bits |= x86::dr6::trap_bit(a.reg);
    }
    return bits;
  }

  bool on_watched_page(std::uint64_t addr) const {
    const std::uint64_t page = page_of(addr);
    return std::any_of(active.begin(), active.end(), [&](const Active& a) {
      return !is_exec(a) && page >= page_of(a.addr) && page <= page_of(a.addr + a.len - 1);
    });
  }

  // --- instructions -------------------------------------------------------------------------

  Result<Prediction> predict() {
    auto regs = inferior.get_regs(tid);
    if (!regs) return std::unexpected(regs.error());
    Prediction p;
    p.ip = regs->rip;
    auto insn = inferior.decode_at(regs->rip);
    if (insn) {
      auto refs = x86::effective_addresses(*insn, *regs);
      if (refs) {
        p.decoded = true;
        for (const Active& a : active) {
          auto ref = std::find_if(refs->begin(), refs->end(),
                                  [&](const x86::MemRef& r) { return hits(a, r); });
          if (ref == refs->end()) continue;
          if (p.bits == 0) {
            p.access = ref->access == x86::Access::kRead ? pmu::AccessKind::kRead
                                                         : pmu::AccessKind::kWrite;
            read_before(p, *ref, a);
          }
          p.bits |= x86::dr6::trap_bit(a.reg);
        }
        return p;
      }
    }
    for (const Active& a : active) {
      if (is_exec(a)) continue;
      std::vector<std::uint8_t> bytes(a.len);
      if (inferior.read_memory(a.addr, bytes)) p.before.emplace_back(a, std::move(bytes));
    }
    return p;
  }

  // The access's bytes before the instruction: the operand `ref`, clipped to 8 bytes from where
  // it meets register `a` (a longer operand, a string instruction, does not fit the sample's
  // word; those bytes cover the whole overlap with `a`, which is at most 8 bytes). Unreadable:
  // size stays 0, and the sample says it has no value rather than a made-up one.
  void read_before(Prediction& p, const x86::MemRef& ref, const Active& a) {
    const std::uint64_t from = std::max(ref.address, a.addr);
    const std::uint64_t to = std::min(ref.address + ref.size, from + 8);
    std::vector<std::uint8_t> bytes(to - from);
    p.addr = from;
    if (!inferior.read_memory(from, bytes)) return;
    p.size = static_cast<int>(bytes.size());
    p.old_value = word_of(bytes);
  }

  // The registers the predicted instruction hit, once it ran, and the access's value after it.
  Prediction finish(Prediction p) {
    for (auto& [a, bytes] : p.before) {
      std::vector<std::uint8_t> now(a.len);
      if (inferior.read_memory(a.addr, now) && now != bytes) {
        if (p.bits == 0) {
          // Undecoded: what changed is all there is to tell; the register's whole range.
          p.addr = a.addr;
          p.access = pmu::AccessKind::kWrite;
          p.size = static_cast<int>(a.len);
          p.old_value = word_of(bytes);
          p.new_value = word_of(now);
        }
        p.bits |= x86::dr6::trap_bit(a.reg);
      }
    }
    if (p.decoded && p.size > 0) {
      if (p.access == pmu::AccessKind::kRead) {
        p.new_value = p.old_value;
      } else {
        std::vector<std::uint8_t> now(static_cast<std::size_t>(p.size));
        if (inferior.read_memory(p.addr, now)) {
          p.new_value = word_of(now);
        } else {
          p.size = 0;  // the page went away: no value rather than a wrong one
        }
      }
    }
    return p;
  }

  // The debug exception for `raised` (B0–B3 of the virtual registers, BS): DR6 is set as Linux
  // sets it; true when the tracee stops with SIGTRAP.
  bool raise(std::uint64_t raised, std::uint64_t ip, std::uint64_t addr, pmu::AccessKind access) {
    breakpoints::DebugTrap trap;
    trap.sample.addr = addr;
    trap.sample.access = access;
    return raise_trap(raised, ip, trap);
  }
  // A data hit: the sample carries the access and its values, as the simulated machine's do
  // (the Watchpoint layer reports them).
  bool raise(std::uint64_t raised, const Prediction& hit) {
    breakpoints::DebugTrap trap;
    trap.sample.addr = hit.addr;
    trap.sample.access = hit.access;
    trap.sample.size = hit.size;
    trap.sample.old_value = hit.old_value;
    trap.sample.new_value = hit.new_value;
    return raise_trap(raised, hit.ip, trap);
  }
  bool raise_trap(std::uint64_t raised, std::uint64_t ip, breakpoints::DebugTrap trap) {
    emu->begin_exception(task);
    trap.dr6 = raised;
    trap.sample.ip = ip;
    trap.sample.task = task;
    trap.sample.cpu = kCpu;
    trap.sample.time = clock.now();
    const std::uint64_t consumed = bp_pmu->handle(trap);
    const ptrace_compat::DebugException ex = emu->end_exception(task, raised, consumed);
    emu->set_virtual_dr6(task, ex.virtual_dr6);
    return ex.sigtrap;
  }

  struct StepOutcome {
    bool stepped = false;  // one instruction ran (else `event` ended it: exit, exec)
    Prediction done;       // what it hit
    Event event;
  };

  // Runs one instruction of the stopped traced thread with the watch off (other threads
  // stopped), then re-arms. Program signals met on the way are delivered.
  Result<StepOutcome> step_over() {
    auto others = stop_others();
    if (!others) return std::unexpected(others.error());
    const bool rearm = watch.has_value();
    disarm();
    StepOutcome out;
    auto pred = predict();
    if (!pred) return std::unexpected(pred.error());
    int deliver = 0;
    bool signalled = false;
    for (;;) {
      if (auto r = inferior.resume(tid, Resume::kStep, deliver); !r)
        return std::unexpected(r.error());
      auto ev = inferior.wait_for(tid);
      if (!ev) return std::unexpected(ev.error());
      if (ev->kind == EventKind::kSignal) {
        if (ev->signal == SIGTRAP && ev->code != SI_KERNEL) {
          out.stepped = true;
          // After a delivered signal only a completed step (not a handler's entry) ran it.
          if (!signalled || ev->code == TRAP_TRACE) out.done = finish(std::move(*pred));
          break;
        }
        deliver = ev->signal;
        signalled = true;
        continue;
      }
      if (ev->kind == EventKind::kFork) {
        if (ev->vfork) {
          others->push_back(ev->child);
        } else if (auto r = inferior.release(ev->child); !r) {
          return std::unexpected(r.error());
        }
        continue;
      }
      out.event = *ev;
      break;
    }
    if (rearm && inferior.alive() && (out.stepped || out.event.kind != EventKind::kExec)) arm();
    resume_others(*others);
    return out;
  }

  // --- running --------------------------------------------------------------------------------

  // Resumes the stopped traced thread the way the watch needs (kStepping: the first step).
  Result<void> run() {
    if (mode != Mode::kStepping) return inferior.resume(tid, resume_mode(tid));
    stepping = true;
    return next_step();
  }

  // kStepping: stop at an execute register at rip, else step the instruction there.
  Result<void> next_step() {
    auto regs = inferior.get_regs(tid);
    if (!regs) return std::unexpected(regs.error());
    if (exec_skip != regs->rip) {
      const std::uint64_t bits = exec_bits_at(regs->rip);
      if (bits != 0 && raise(bits, regs->rip, regs->rip, pmu::AccessKind::kExecute)) {
        stepping = false;
        exec_skip = regs->rip;
        stop = SIGTRAP;
        return {};
      }
    }
    exec_skip.reset();
    auto pred = predict();
    if (!pred) return std::unexpected(pred.error());
    pending = std::move(*pred);
    step_signalled = false;
    return inferior.resume(tid, Resume::kStep);
  }

  // kStepping: the traced thread's step trap.
  Result<void> on_step(const Event& ev) {
    Prediction done;
    if (!step_signalled || ev.code == TRAP_TRACE) done = finish(std::move(pending));
    if (done.bits != 0 && raise(done.bits, done)) {
      stepping = false;
      stop = SIGTRAP;
      return {};
    }
    return next_step();
  }

  // A reported execute hit at `ip` (rip already there): stop, or run the instruction on.
  Result<void> exec_hit(std::uint64_t ip) {
    if (raise(exec_bits_at(ip), ip, ip, pmu::AccessKind::kExecute)) {
      exec_skip = ip;
      stop = SIGTRAP;
      return {};
    }
    return step_and_go();
  }

  // Runs one instruction with the watch off; stops when it hit a data register, else resumes.
  Result<void> step_and_go() {
    auto out = step_over();
    if (!out) return std::unexpected(out.error());
    if (!out->stepped) return dispatch(out->event);
    if (out->done.bits != 0 && raise(out->done.bits, out->done)) {
      stop = SIGTRAP;
      return {};
    }
    return run();
  }

  // A data hit (or an undecodable access) of the traced thread: SoftWatch completes the
  // instruction as for any thread (emulated, or stepped with its pages open and the others
  // held), leaving the thread right after it, and the debug exception is raised for the
  // registers it hit. No disarm and re-arm: the other watched pages stay protected.
  Result<void> complete_and_go(const Event& ev, Prediction pred) {
    if (!watch) return step_and_go();
    std::vector<WatchHit> ignored;  // DR6 comes from the prediction, as for a stepped hit
    auto done = watch->complete_fault(ev, ignored);
    if (!done) return std::unexpected(done.error());
    if (!done->stopped) return {};  // the thread ended: its event is queued
    if (done->signal != 0) {
      // The instruction faulted for the program's own reasons: no trap, the signal goes on.
      return inferior.resume(tid, resume_mode(tid), done->signal);
    }
    const Prediction hit = finish(std::move(pred));
    if (hit.bits != 0 && raise(hit.bits, hit)) {
      stop = SIGTRAP;
      return {};
    }
    return run();
  }

  // One event of the Inferior while the tracee runs.
  Result<void> dispatch(const Event& ev) {
    std::vector<WatchHit> ignored;  // kernel accesses, other threads: no stop (see the header)
    switch (ev.kind) {
      case EventKind::kExited:
      case EventKind::kKilled:
        if (watch)
          ignore_error(watch->handle(ev, ignored), "the process ended: nothing is left to watch");
        end(ev);
        return {};
      case EventKind::kThreadExit:
      case EventKind::kLeaderEnded:
        if (watch)
          ignore_error(watch->handle(ev, ignored),
                       "the thread ended: only its bookkeeping is forgotten");
        if (ev.tid == tid) end(ev);
        return {};
      case EventKind::kExec:
        // A new image: Linux flushes the ptrace breakpoints; a tracer sees SIGTRAP.
        if (watch)
          ignore_error(watch->handle(ev, ignored), "a new image: the watch is dropped next");
        watch.reset();
        active.clear();
        mode = Mode::kNone;
        armed_for.reset();
        api->flush_ptrace_hw_breakpoint(task);
        tid = ev.tid;
        exec_skip.reset();
        stepping = false;
        stop = SIGTRAP;
        return {};
      case EventKind::kSignal:
        if (ev.tid == tid && mode == Mode::kStepping && stepping) {
          if (ev.signal == SIGTRAP && ev.code != SI_KERNEL) return on_step(ev);
          step_signalled = true;
          return inferior.resume(tid, Resume::kStep, ev.signal);
        }
        if (ev.tid == tid && mode == Mode::kPages) {
          if (ev.signal == SIGSEGV && ev.code == SEGV_ACCERR && on_watched_page(ev.fault_addr)) {
            auto pred = predict();
            if (!pred) return std::unexpected(pred.error());
            if (!pred->decoded || pred->bits != 0) return complete_and_go(ev, std::move(*pred));
          } else if (ev.signal == SIGTRAP && ev.code == SI_KERNEL) {
            auto regs = inferior.get_regs(tid);
            if (!regs) return std::unexpected(regs.error());
            const std::uint64_t at = regs->rip - 1;
            if (exec_bits_at(at) != 0) {
              regs->rip = at;
              if (auto r = inferior.set_regs(tid, *regs); !r) return r;
              return exec_hit(at);
            }
          }
        }
        break;
      default:
        break;
    }
    if (watch) {
      auto mine = watch->handle(ev, ignored);
      if (!mine) return std::unexpected(mine.error());
      if (*mine) return {};
    }
    switch (ev.kind) {
      case EventKind::kSignal:
        return inferior.resume(ev.tid, resume_mode(ev.tid), ev.signal);
      case EventKind::kFork:
        if (ev.vfork) return inferior.resume(ev.child, resume_mode(ev.child));
        return inferior.release(ev.child);
      case EventKind::kNewThread:
      case EventKind::kSyscallEnter:
      case EventKind::kSyscallExit:
        return inferior.resume(ev.tid, resume_mode(ev.tid));
      default:
        return {};
    }
  }
};

VirtualTracee::VirtualTracee(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VirtualTracee::VirtualTracee(VirtualTracee&&) noexcept = default;
VirtualTracee& VirtualTracee::operator=(VirtualTracee&&) noexcept = default;
VirtualTracee::~VirtualTracee() = default;

Result<VirtualTracee> VirtualTracee::create(Inferior inferior, pid_t tid) {
  if (tid == 0) tid = inferior.pid();
  const std::vector<pid_t> threads = inferior.threads();
  if (std::find(threads.begin(), threads.end(), tid) == threads.end()) {
    return make_error(ErrorCode::kSrch, "tid: " + std::to_string(tid) +
                                            " is not a thread of process " +
                                            std::to_string(inferior.pid()));
  }
  if (!inferior.is_stopped(tid)) {
    return make_error(ErrorCode::kInval, "tid: thread " + std::to_string(tid) + " is not stopped");
  }
  auto impl = std::make_unique<Impl>(std::move(inferior), tid);
  if (auto r = impl->build(); !r) return std::unexpected(r.error());
  if (auto dr6 = ptrace_peek_user(tid, Impl::dr6_offset())) impl->kernel_dr6 = *dr6;
  impl->stop = SIGSTOP;
  return VirtualTracee(std::move(impl));
}

Result<VirtualTracee> VirtualTracee::spawn(const std::vector<std::string>& argv,
                                           const InferiorOptions& options) {
  auto inf = Inferior::spawn(argv, options);
  if (!inf) return std::unexpected(inf.error());
  return create(std::move(*inf));
}

Result<VirtualTracee> VirtualTracee::attach(pid_t pid, const InferiorOptions& options) {
  auto inf = Inferior::attach(pid, options);
  if (!inf) return std::unexpected(inf.error());
  return create(std::move(*inf));
}

pid_t VirtualTracee::tid() const {
  return impl_->tid;
}

TaskId VirtualTracee::task() const {
  return impl_->task;
}

Inferior& VirtualTracee::inferior() {
  return impl_->inferior;
}

breakpoints::HwBreakpoints& VirtualTracee::breakpoints() {
  return *impl_->api;
}

std::string VirtualTracee::describe() const {
  const Impl& s = *impl_;
  std::string out;
  switch (s.mode) {
    case Mode::kNone:
      out = "none";
      break;
    case Mode::kPages:
      out = s.watch->describe();
      break;
    case Mode::kStepping:
      out = "single-step";
      break;
  }
  if (!s.unarmed.empty()) {
    out += " (not armed:";
    for (int n : s.unarmed) out += " dr" + std::to_string(n);
    out += ")";
  }
  return out;
}

Result<std::uint64_t> VirtualTracee::peek_user(std::uint64_t offset) {
  if (auto r = impl_->check_stopped(); !r) return std::unexpected(r.error());
  return impl_->emu->peek_user(impl_->task, UserLayout::kX86_64, offset);
}

Result<void> VirtualTracee::poke_user(std::uint64_t offset, std::uint64_t value) {
  if (auto r = impl_->check_stopped(); !r) return r;
  return impl_->emu->poke_user(impl_->task, UserLayout::kX86_64, offset, value);
}

Result<std::optional<Stop>> VirtualTracee::wait(WaitMode mode) {
  Impl& s = *impl_;
  while (!s.gone && !s.stop && mode == WaitMode::kBlock) {
    auto ev = s.inferior.wait();
    if (!ev) {
      if (ev.error().code() == ErrorCode::kIntr) continue;
      return std::unexpected(ev.error());
    }
    if (auto r = s.dispatch(*ev); !r) return std::unexpected(r.error());
  }
  if (s.ended) return std::exchange(s.ended, std::nullopt);
  if (s.gone) return std::unexpected(*s.gone);
  if (!s.stop) return std::nullopt;
  auto dr6 = s.emu->get_debugreg(s.task, 6);
  if (!dr6) return std::unexpected(dr6.error());
  return Stop{*s.stop, *dr6};
}

Result<void> VirtualTracee::cont() {
  Impl& s = *impl_;
  if (auto r = s.check_stopped(); !r) return r;
  if (auto r = s.sync(); !r) return r;
  s.stop.reset();
  auto regs = s.inferior.get_regs(s.tid);
  if (!regs) return std::unexpected(regs.error());
  if (s.exec_skip == regs->rip && s.exec_bits_at(regs->rip) != 0) {
    // Resume past this execute hit once (x86's RF).
    s.exec_skip.reset();
    return s.step_and_go();
  }
  s.exec_skip.reset();
  return s.run();
}

Result<void> VirtualTracee::step() {
  Impl& s = *impl_;
  if (auto r = s.check_stopped(); !r) return r;
  if (auto r = s.sync(); !r) return r;
  s.stop.reset();
  auto regs = s.inferior.get_regs(s.tid);
  if (!regs) return std::unexpected(regs.error());
  if (s.exec_skip != regs->rip) {
    // An execute register at rip faults before the instruction runs.
    const std::uint64_t bits = s.exec_bits_at(regs->rip);
    if (bits != 0 && s.raise(bits, regs->rip, regs->rip, pmu::AccessKind::kExecute)) {
      s.exec_skip = regs->rip;
      s.stop = SIGTRAP;
      return {};
    }
  }
  s.exec_skip.reset();
  auto out = s.step_over();
  if (!out) return std::unexpected(out.error());
  if (!out->stepped) return s.dispatch(out->event);
  (void)s.raise(x86::dr6::kSingleStep | out->done.bits, out->done);
  s.stop = SIGTRAP;
  return {};
}

Result<std::unique_ptr<ptrace_compat::Tracee>> open_tracee(pid_t pid, bool hits_delivered) {
  if (hits_delivered) {
    auto t = LinuxTracee::attach(pid);
    if (!t) return std::unexpected(t.error());
    return std::make_unique<LinuxTracee>(std::move(*t));
  }
  auto t = VirtualTracee::attach(pid);
  if (!t) return std::unexpected(t.error());
  return std::make_unique<VirtualTracee>(std::move(*t));
}

}  // namespace hwarb::native

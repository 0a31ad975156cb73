// hwarb/linux/hard_watch.h — the hardware watch path on a real process: watch ranges as perf
// breakpoints (PerfWatch), and the two ways their hits are taken.
//
//  1. HardWatchEngine (exact values, an Engine of run_target): the breakpoints are opened with
//     perf's sigtrap, so every hit also stops the hitting thread (ptrace sees SIGTRAP with
//     si_code TRAP_PERF, right after the access). The engine reads the range's new value before
//     the program moves on, finds the accessing instruction with the thread's registers
//     (accessor_before), reports the hit and resumes the thread: one ptrace stop per hit, none
//     otherwise.
//  2. HardCountEngine (stat of writes and executions): perf's counting events (PerfCount), read
//     at the end as `perf stat` does: no sampling, nothing dropped, no stop per hit. The process
//     stays traced only for its new threads (each gets events of its own, so that every thread
//     keeps its count), its forks (a child is counted with its threads) and its exit status.
//  3. count_untraced() (counting writes and executions from samples): the process is detached
//     and runs at full speed; the hits are the samples of the perf rings, polled. No values, no
//     stops.
// x86 has no read-only breakpoint: a read watch uses an rw breakpoint, and the engine keeps the
// hits whose instruction reads the range: a hit is classified by the accessing instruction's
// operands only, never by whether the value changed (a store of the same value is a write).
//
// Contract:
//  - plan_pieces() gives the debug registers the ranges need, in range order: a data range split
//    into aligned 1/2/4/8-byte pieces (breakpoints::split_range; type w for a write-only watch,
//    else rw), an execute watch one piece of length 8 at its address; a thread's own range
//    (WatchRange::thread) gives that thread's own pieces. More pieces on a thread (every thread's
//    and its own) than `slots` (the registers a thread has: x86::kSlots, or what the probe
//    measured) is ENOSPC naming `slots`. Nothing is opened.
//  - hits_need_stops(): whether the hits need the thread stopped (HardWatchEngine) — for their
//    values, or to tell reads from writes; false only for counting writes and executions.
//  - accessor_before() is pure: see its comment.
//  - accessors_before() gives every candidate (longest first); interrupted_string() the REP
//    string instruction at the stop when its last iteration touched the range.
//  - HardWatchEngine takes a PerfWatch opened with sigtrap on the Inferior's process, the ranges
//    (a piece's expr indexes them) and the observer. A hit's ip is the accessing instruction: the
//    one candidate ending at the stop; among several, the one whose start decoding forward from
//    the enclosing function's symbol reaches (else the longest, when all agree on the access);
//    with none, an interrupted REP string instruction at the stop; else the stop's rip, and the
//    access is then both read and write (masked by the watch's). Children are followed as
//    SoftWatch follows them: a forked child inherits no breakpoint (PerfWatch's inherit_thread,
//    so no SIGTRAP of hwarb's ever reaches an untraced process); it is followed
//    (Inferior::follow) and gets breakpoints of its own on the same addresses, its hits reported
//    like this process's (their tid tells them apart), its values read in its own memory (its
//    first old value is what the range held at the fork). A vfork child (which shares the memory
//    until its exec) gets breakpoints of its own and is watched as a thread of its parent; its
//    accesses are hits of its own breakpoints only (the parent sleeps meanwhile). A process (this
//    one, a followed fork, a vfork child: Inferior::follow_execs) that execs the executable
//    watched (/proc/PID/exe at construction) is watched again in its new image (the exec removed
//    the breakpoints), its values read anew; any other exec leaves that process unwatched. A
//    followed process's breakpoints are closed when it ends. It reads every data range when
//    constructed:
//    a range that cannot be read then (not mapped yet) has an unknown old value at its first hit
//    (an empty old_value), never a made-up one. A hit's values are the whole range before and
//    after; a range that cannot be read at a hit gives an unknown new value. handle() takes the
//    SIGTRAP/TRAP_PERF stops only (and resumes the thread); finish() closes the breakpoints and
//    drops the SIGTRAPs of hits still queued or pending for any thread (after the detach they
//    would kill the program); finish_taking_hits() reports those hits instead (see there).
//  - count_untraced() detaches from the process first (all-or-nothing: on a detach error nothing
//    else happens), then polls the rings every 100 ms until the process ends (a spawned one is
//    waited for; an attached one when every covered thread exited), observer.done(), or
//    SIGINT/SIGTERM (a spawned process is then killed and waited for). Every hit is reported as
//    it is read (data hits as writes, ip the instruction after the access), tick() is called
//    after every poll. The breakpoints are closed before it returns; `lost` is what the kernel
//    dropped (the counts are then lower bounds).
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/perf_watch.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/signal_action.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

Result<std::vector<HwPiece>> plan_pieces(const std::vector<WatchRange>& ranges, int slots);

// `values`: the caller wants each hit's values (watch), not only counts (stat).
bool hits_need_stops(const std::vector<WatchRange>& ranges, bool values);

// The instruction that ends at `end` (a data breakpoint traps after the access, so the stop's rip
// is the next instruction) and how it accessed [addr, addr+len), from `code` = the bytes just
// before `end` and the thread's registers at the stop. Decoding backwards is ambiguous: the
// candidates are every start among those bytes whose decoding ends exactly at `end` and has a
// memory operand (implicit stack slots aside) that, computed with `regs` (rip = the candidate),
// touches the range. Exactly one candidate: its address and access (kWatchRead / kWatchWrite,
// both for read-modify-write); none or several: nullopt (the caller then decides by whether the
// value changed). When no candidate touches the range, those that overwrote a register their
// address is computed from (`mov edi, [rdi]`: the address is gone) are the candidates instead,
// with the access their operands name.
struct Accessor {
  std::uint64_t ip = 0;
  unsigned access = 0;
  friend bool operator==(const Accessor&, const Accessor&) = default;
};
std::optional<Accessor> accessor_before(std::span<const std::uint8_t> code, std::uint64_t end,
                                        std::uint64_t addr, std::uint64_t len,
                                        const x86::Regs& regs);
// Every candidate of accessor_before, longest first. A string instruction (movs, stos, ...) is
// tested with its last iteration's registers (rsi/rdi one element back).
std::vector<Accessor> accessors_before(std::span<const std::uint8_t> code, std::uint64_t end,
                                       std::uint64_t addr, std::uint64_t len,
                                       const x86::Regs& regs);
// accessors_before in its two steps: the instructions among `code` (the bytes just before `end`)
// that end exactly at `end`, longest first, which depend on the bytes only (so a caller can keep
// them per stop address); then those of them whose operands touch the range with `regs`.
std::vector<x86::Insn> candidates_before(std::span<const std::uint8_t> code, std::uint64_t end);
std::vector<Accessor> accessors_of(std::span<const x86::Insn> candidates, std::uint64_t addr,
                                   std::uint64_t len, const x86::Regs& regs);
// `insn`, decoded at the stop's rip: a REP string instruction stopped between iterations (rcx
// not 0) whose last iteration touched [addr, addr+len); nullopt otherwise.
std::optional<Accessor> interrupted_string(const x86::Insn& insn, std::uint64_t addr,
                                           std::uint64_t len, const x86::Regs& regs);

// A SIGTRAP with si_code TRAP_BRKPT at the ip after an instruction, in a thread with breakpoints:
// a debug exception whose status (DR6) named nothing, which Linux takes for an INT1. Some
// hypervisors (KVM guests, seen on Intel hosts: about one hit in a few thousand under load) lose
// the status of a breakpoint hit on its way into the guest; the kernel then counts nothing and
// sends the thread a SIGTRAP that would kill it, a signal it never gets unwatched. Classified as:
//   kHit: the instruction before the stop touched data piece `piece` (the lost hit);
//   kInt1: the byte before the stop is INT1 (0xf1): the program's own;
//   kStray: neither (an execution breakpoint's lost status among them: its instruction runs
//   again and traps again).
// nullopt: `ev` is no such trap. `ev`'s thread must be stopped.
struct StatuslessTrap {
  enum class Kind { kHit, kInt1, kStray };
  Kind kind = Kind::kStray;
  std::size_t piece = 0;
};
std::optional<StatuslessTrap> classify_statusless(Inferior& inferior, const Event& ev,
                                                  std::span<const HwPiece> pieces);

// The kernel's answer to a statusless trap (above) is a forced SIGTRAP; forcing a signal that the
// thread blocks (or the process ignores) first resets the process's action for it to the default
// and unblocks it in the thread, and the program runs on with both changed (and killed by the
// next SIGTRAP it gets). The thread stops before it runs again: at the forced signal's delivery,
// or, when a perf SIGTRAP of an earlier hit was already held (the forced one then merges into it),
// at that one's. What such a stop of a thread last seen blocking SIGTRAP, whose process's action
// was then `seen`, says, from the thread's mask `mask` now and the action `now`:
//   kKept: SIGTRAP is still blocked: nothing happened;
//   kProgram: the program changed them itself: the stop ends a system call (`after_syscall`: a
//     mask is changed by rt_sigprocmask, rt_sigreturn, sigsuspend and the like, and a signal it
//     unblocks is delivered as that call returns), or the action is not `seen` with its handler
//     reset (a program's own change);
//   kKernel: the stop ends an exception (a debug trap), SIGTRAP is unblocked, and the action is
//     `seen` with only its handler reset to the default: the kernel's reset, to be undone;
//   kUnknown: as kKernel, but `seen` was the default already: a program that unblocked SIGTRAP
//     itself since, stopped at a later hit, looks the same; left as it is.
enum class TrapReset { kKept, kProgram, kKernel, kUnknown };
TrapReset forced_trap_reset(const KernelSigaction& seen, std::uint64_t mask,
                            const KernelSigaction& now, bool after_syscall);

class HardWatchEngine final : public Engine {
 public:
  HardWatchEngine(Inferior& inferior, PerfWatch perf, std::vector<WatchRange> ranges,
                  WatchObserver& observer);

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return Resume::kCont; }
  Result<void> finish() override;
  bool done() const override { return observer_.done(); }
  // surface_blocked_hits(), its errors ignored (the next tick looks again).
  void tick() override;
  bool wants_wakeups() const override { return true; }
  // The rings' descriptors: readable at each hit (held or not), so a loop that waits on them
  // looks at once.
  std::vector<int> wake_fds() const override;
  // Hits of threads that block SIGTRAP. A hit's SIGTRAP is then queued, not delivered: the
  // thread runs on, and further hits while it stays queued raise nothing (a second SIGTRAP is not
  // queued). The rings still get a sample of each hit; this drains them, and each running thread
  // that wrote one (or every thread, when the rings dropped samples) and holds a perf SIGTRAP
  // blocked is stopped and made to take it (Inferior::surface_blocked): its signal-delivery stop
  // is put at the front of the Inferior's queue, for the caller's next wait to hand to handle()
  // as any hit. Every sample of the thread up to that stop is a hit (handle()): each but the
  // last reported from its sample (its ip the instruction that ends at the sample's ip, its
  // access what that instruction's operands say, no values), the last with the stop's values
  // (its new value the range's at the late stop). A thread stopped at the look is looked at
  // again the next time. A thread that ended with samples no stop of it took (it blocked SIGTRAP
  // to its end, or was killed between an access and its stop) has each reported the same way,
  // with the range's value read then for the first where it changed (handle() of its kThreadExit,
  // or a look that finds it gone). Returns how many stops were queued. Called between events
  // (tick(): at most every 100 ms under run_target, and once as the process ends; a debugger's
  // wait loop likewise) and by finish() and finish_taking_hits() before the rings go.
  Result<std::size_t> surface_blocked_hits();
  // A fork (non-vfork kFork event) of a watched process, for a caller that follows and resumes
  // the child itself (a session whose software path follows it too): the child gets breakpoints
  // of its own and its values are read, as handle() does, but it is neither followed nor resumed.
  Result<void> watch_fork(const Event& event);
  // On: a thread whose stop reported a hit is left stopped right after the access (handle()
  // still returns true); the caller resumes it. Off (the default): it runs on at once.
  void stop_at_hits(bool on) { stop_at_hits_ = on; }
  // finish() for a caller that goes on watching (a WatchSession replacing its set of watches):
  // the SIGTRAP stops of hits still queued or pending for a thread are not dropped but taken as
  // hits (reported to the observer now, while the thread is stopped right after its access) and
  // returned; each such thread is left stopped in its stop, the caller's to resume (without the
  // signal). `queued`: the event was in the Inferior's queue (it is taken out of it); otherwise
  // it was pending and surfaced here, from a thread stopped by an interrupt.
  struct Taken {
    Event event;
    bool queued = false;
  };
  Result<std::vector<Taken>> finish_taking_hits();

 private:
  // What the engine knows of one watched process (this one, a followed fork, a vfork child
  // after its exec).
  struct Process {
    std::vector<std::vector<std::uint8_t>> shadow;  // per range; empty: unknown
    std::optional<SymbolTable> symbols;
    int symbol_loads = 0;
    std::unordered_map<std::uint64_t, std::optional<std::uint64_t>> starts;
    // candidates_before per stop address, with the code bytes they were decoded from: a hit at
    // the same address over the same bytes decodes nothing (a hit in a loop is the common case;
    // code that changed is decoded again).
    struct Tail {
      std::array<std::uint8_t, 15> code{};
      std::vector<x86::Insn> insns;
    };
    std::unordered_map<std::uint64_t, Tail> tails;
  };
  static constexpr std::size_t kMaxTails = 4096;  // tails are forgotten beyond this many

  // candidates_before(code, end), from p.tails when `code` is what they were decoded from.
  // `code` is the 15 bytes before `end`, or empty (none then).
  std::span<const x86::Insn> candidates(Process& p, std::span<const std::uint8_t> code,
                                        std::uint64_t end);

  // `process`'s entry, its values read from its memory now.
  Process& watch_process(pid_t process);
  // Opens breakpoints on `task` (a process and its later threads, or a vfork child). ESRCH when
  // it is gone.
  Result<void> open_on(pid_t task, const char* what);
  Result<bool> on_fork(const Event& event);
  Result<bool> on_exec(pid_t process);
  // A hit's stop: reported, and the thread resumed unless `resume` is false (or it is left
  // stopped at the hit: stop_at_hits).
  Result<bool> on_hit(const Event& event, bool resume = true);
  // A statusless trap (classify_statusless) of a watched process: the perf trap its hit would
  // have raised (kHit), or nullopt, with `drop` set for a stray one (the program never sees it).
  std::optional<Event> recover(const Event& event, bool& drop);
  // handle() of a SIGTRAP that is not a perf trap: a lost hit reported, a stray trap dropped
  // (the thread resumed), anything else the program's (false).
  Result<bool> on_statusless(const Event& event);
  // A surfaced stop of `tid` (it blocks SIGTRAP): it is remembered, with its process's SIGTRAP
  // action (read again when older than kActionAge).
  void seen_blocking(pid_t tid, std::uint64_t time);
  // A stop of `tid` that is not a surfaced one, at `regs`: where it shows the kernel's reset of a
  // thread seen blocking SIGTRAP (forced_trap_reset: kKernel), the action and the mask are put
  // back; otherwise a thread that no longer blocks SIGTRAP is forgotten. Says what it found
  // (nullopt: a thread never seen blocking SIGTRAP, or still blocking it).
  std::optional<TrapReset> repair_forced_trap(pid_t tid, const x86::Regs& regs);
  // finish() and finish_taking_hits(): the breakpoints closed, the hits' stops dropped, or taken
  // (`taken` not null).
  Result<void> close(std::vector<Taken>* taken);
  // Where the instruction that ends at `end` starts, decoding forwards from its function's
  // symbol (cached per end); nullopt without a symbol or when no instruction ends there.
  std::optional<std::uint64_t> start_before(pid_t process, Process& p, std::uint64_t end);
  // A hit known from its ring sample only (late: the registers are no longer the access's): `h`'s
  // ip and access from the instruction that ends at `end` (the sample's ip).
  void place_late(pid_t process, Process& p, std::uint64_t end, bool write_only, WatchHit& h);
  // The rings' samples since the last drain into pending_, but those of stops on_hit took
  // (handled_); the samples the rings dropped so far.
  Result<std::uint64_t> drain_rings();
  // Samples of thread `tid` no stop took, reported as hits (surface_blocked_hits): with
  // `values`, the range read now where it changed since the last report (a thread that ended);
  // without, none (held hits before the one a surfaced stop reports).
  void report_samples(pid_t tid, const std::vector<PerfHit>& samples, bool values);
  // Thread `tid` ended: its kept samples reported (with values) and forgotten.
  void report_ended(pid_t tid);
  std::optional<Accessor> accessor(pid_t process, Process& p, std::span<const std::uint8_t> code,
                                   const x86::Regs& regs, const WatchRange& w);

  Inferior& inferior_;
  std::vector<HwPiece> pieces_;
  std::vector<WatchRange> ranges_;
  WatchObserver& observer_;
  std::chrono::steady_clock::time_point start_;
  std::string image_;  // the executable watched (/proc/PID/exe); empty: unknown
  // The breakpoints, by the task they were opened on: a process (inherited by its later
  // threads) or a vfork child.
  std::map<pid_t, PerfWatch> watches_;
  std::map<pid_t, Process> processes_;  // the watched processes (Inferior::process_of)
  bool stop_at_hits_ = false;
  // surface_blocked_hits: threads to look at again, the rings' drops seen so far, and the
  // sample ip of each surfaced hit (taken by its on_hit); the stops on_hit took since.
  std::set<pid_t> recheck_;
  std::multiset<std::pair<pid_t, std::uint64_t>> handled_;  // (thread, ip) of hits on_hit took
  std::uint64_t lost_seen_ = 0;
  std::set<pid_t> surfaced_;  // threads whose queued stop is a held hit surfaced
  std::map<pid_t, std::vector<PerfHit>> pending_;  // samples no stop took yet, by thread
  // Threads seen blocking SIGTRAP (seen_blocking), each with its process's SIGTRAP action then
  // and when that was read (ns since start_).
  struct Blocking {
    KernelSigaction action;
    std::uint64_t read_ns = 0;
  };
  std::map<pid_t, Blocking> blocking_;
  static constexpr std::uint64_t kActionAge = 100'000'000;
};

// One count of HardCountEngine: range `id`'s hits by thread (or forked process) `tid`.
struct RangeCount {
  std::size_t id = 0;
  pid_t tid = 0;
  unsigned access = 0;  // kWatchWrite or kWatchExec
  std::uint64_t count = 0;
  friend bool operator==(const RangeCount&, const RangeCount&) = default;
};

// Counts writes and executions with PerfCount (opened on the Inferior's process) under
// run_target: new threads get their own events at their first stop, forked and vforked children
// theirs (inherited by their threads) at the fork. Takes no hit itself; finish() leaves the
// events (they never stop or signal anything).
class HardCountEngine final : public Engine {
 public:
  HardCountEngine(Inferior& inferior, PerfCount count, std::vector<WatchRange> ranges);

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return Resume::kCont; }
  Result<void> finish() override { return {}; }
  // The non-zero counts per range and thread, summed over the range's pieces (an access that
  // touches two pieces of one range counts twice), threads in the order they were covered.
  Result<std::vector<RangeCount>> counts() const;
  // The counts so far (as counts()), then every counting event closed: the registers are free
  // and handle() takes no event any more (the caller hands the run to another engine).
  Result<std::vector<RangeCount>> close();
  // The debug registers one thread's events hold (0 once closed).
  [[nodiscard]] int registers() const {
    return closed_ ? 0 : static_cast<int>(count_.pieces().size());
  }

 private:
  // handle() of a signal: a statusless trap (classify_statusless) of a hit counted here (its
  // perf count lost it), a stray one dropped (the thread resumed); anything else the program's.
  Result<bool> on_statusless(const Event& event);

  Inferior& inferior_;
  PerfCount count_;
  std::vector<WatchRange> ranges_;
  // Hits whose count was lost with their debug status, by (piece, counting task).
  std::map<std::pair<std::size_t, pid_t>, std::uint64_t> recovered_;
  bool closed_ = false;
};

struct CountResult {
  RunResult end;
  std::uint64_t lost = 0;
};
Result<CountResult> count_untraced(Inferior& inferior, PerfWatch perf,
                                   const std::vector<WatchRange>& ranges, WatchObserver& observer,
                                   const std::function<void()>& tick = {});

}  // namespace hwarb::native

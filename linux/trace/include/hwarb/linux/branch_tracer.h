// hwarb/linux/branch_tracer.h — BranchTracer, exact branch records (from -> to) of a real
// process without BTS, PT or LBR, and without single-stepping.
//
// Method (software BTS, docs/architecture.md section 7):
//  1. Basic blocks are decoded lazily with Zydis (x86/insn.h) from the ORIGINAL bytes of the
//     text (the bytes the tracer replaced are kept in a shadow and used when decoding). A block
//     is the linear run of instructions from its entry up to and including the first branch
//     (BranchKind other than kNone). An int3 (0xCC) is planted on that terminating branch, once
//     (several blocks may share a terminator).
//  2. At an int3 stop of a planted terminator (SIGTRAP, SI_KERNEL, rip - 1 planted), the tracer
//     EMULATES the branch with the thread's registers (x86::branch_outcome + apply_branch; a
//     call's return address is written to the stack through /proc/PID/mem), records it when
//     taken, makes sure the block at the target is decoded and planted (for calls also the
//     fall-through block, where the return arrives), and resumes the thread. One stop per
//     executed block end; no int3 is ever removed while tracing, so every thread runs through
//     planted code at any time and multi-threaded programs are traced exactly. A branch the
//     emulation cannot decide (xbegin, an unreadable operand) is single-stepped with its
//     original byte back and every other thread stopped; a fault of the branch itself is then
//     delivered to the program as without the tracer.
//  3. Deferred conditional branches (options.defer_conditional): a direct conditional jump J
//     whose two successor blocks end in distinct planted terminators T_taken and T_fall gets no
//     int3. The CPU runs it; the thread's next stop tells which way it went (T_taken: taken,
//     recorded then, before T_taken's own record; T_fall: not taken). This removes the stop of
//     every other conditional branch, like a trace decoder that infers a branch from where the
//     thread is next. The tracer knows each thread's path between stops (the block it resumed
//     at), so this is exact; where a thread arrives from code the tracer did not follow (a
//     signal handler reaching planted blocks, a thread running before start_at was reached) at
//     a T_taken/T_fall, a branch may have gone unrecorded: stats().ambiguous counts those
//     arrivals, and the jumps concerned get their int3 from then on. At a signal of a thread
//     between J's block and its successors' terminators, J is resolved from the thread's rip
//     (or planted, when J has not run yet). Blocks where threads may arrive from untraced code
//     (the entry of `only`, the fall-through of calls) never serve as such successors.
//  4. syscall/sysenter/int 0x80, int n/ud2/hlt and far branches are block boundaries that are
//     not planted (the kernel decides where they go). Threads run with PTRACE_SYSCALL: system
//     calls are counted, and at each syscall-exit stop the block at the thread's rip is planted
//     (this also catches the return of rt_sigreturn into the interrupted code). With `only`,
//     threads run with PTRACE_CONT (no system-call stops, none counted) until a block of the
//     range is found to end at a system call.
//  5. Signals of the program are counted and left to the caller (handle() returns false: pass
//     them through; the caller delivers the signal as it resumes the thread). At the
//     signal-delivery stop the tracer asks the kernel for the signal's handler (an injected
//     rt_sigaction(sig, NULL, &old)): a handler's entry block is planted as an entry (threads
//     arrive there from the kernel) and the thread's path starts there, so the handler is traced
//     from its first instruction; its return to the interrupted code is caught at the
//     rt_sigreturn exit stop. A caller that delivers a different signal, or none, leaves that
//     path wrong until the thread's next planted stop (counted in stats().ambiguous when it
//     matters).
//  6. New threads get the block at their first instruction planted. A forked child (not vfork)
//     gets every planted byte restored in its own copy of the memory and is released (it runs
//     untraced); a vfork child shares the memory and is traced as a thread until it execs. An
//     exec ends tracing (the image with the int3s is gone). munmap (or a MAP_FIXED mmap) of
//     traced code forgets its blocks.
//  7. Options: `only` = [lo, hi) plants int3s only inside that range (a function: its entry
//     block is planted at once, so every call into it is caught); a branch out of the range is
//     recorded, a call out of it comes back at the call's fall-through (planted in advance).
//     `start_at` = one int3 there first (e.g. main); the blocks are planted from there when a
//     thread reaches it.
// Not supported: self-modifying or JIT code (a block is decoded once), programs that read their
// own text (they see 0xCC at block ends, as under any int3 debugger), CET shadow stacks (an
// emulated call does not push on the shadow stack).
//
// Contract:
//  - start() needs every thread stopped; it plants the first int3s (start_at, or the blocks at
//    each stopped thread's rip, plus the entry of `only`). All-or-nothing: on error nothing is
//    left planted. Errors: EINVAL naming `only` for an empty range or one where no block could
//    be planted; EFAULT naming `start_at` when it is not readable; the Inferior's errors.
//  - handle() takes each event of the Inferior: true when it was the tracer's (the thread is
//    then resumed by it, with resume_mode(); a forked child is released by it), false when the
//    caller handles it (signals of the program, a program's own int3, thread and process exits,
//    exec). Records go to the sink in execution order per thread (a deferred jump's record at
//    the thread's next stop, before that stop's own). A block that cannot be read or decoded is
//    counted (stats().undecodable) and not planted; the tracee never crashes because of the
//    tracer: a branch it cannot emulate is single-stepped, a stack write that fails is left to
//    the CPU.
//  - resume_mode() is how the caller must resume threads it handles itself (kSyscall while
//    tracing, kCont before start_at is reached, after the end, and with `only` as said in 4.).
//  - stop() needs every thread stopped (Inferior::stop_all): every planted byte is restored
//    exactly; a thread whose queued SIGTRAP comes from one of the tracer's int3s is moved back
//    onto the restored instruction and that SIGTRAP is discarded; deferred jumps that threads
//    already ran are recorded. The tracee then runs unmodified. Idempotent.
//  - The Inferior must outlive the tracer. Move-only.
// Thread-safety: none (the Inferior's thread only).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

// One taken branch: the branch instruction's address and where it went.
struct BranchRecord {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  x86::BranchKind kind = x86::BranchKind::kNone;
  pid_t tid = -1;
};

struct BranchTracerOptions {
  // Trace only blocks inside [first, second) (see the header comment).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> only;
  // Tracing begins when a thread reaches this address.
  std::optional<std::uint64_t> start_at;
  // Conditional branches resolved by the next stop instead of their own (see 3.).
  bool defer_conditional = true;
};

struct BranchTracerStats {
  // Stops of the tracee the tracer handled: int3 hits (terminators and start_at), system-call
  // entry and exit stops, new threads, and the single-steps of the fallback.
  std::uint64_t stops = 0;
  std::uint64_t taken = 0;      // branches recorded
  std::uint64_t not_taken = 0;  // conditional branches that fell through (not recorded)
  std::uint64_t blocks_decoded = 0;
  std::uint64_t planted = 0;      // int3s planted (distinct terminators)
  std::uint64_t undecodable = 0;  // blocks whose bytes could not be read or decoded
  std::uint64_t stepped = 0;      // branches single-stepped because emulation could not decide
  std::uint64_t deferred = 0;     // conditional jumps left without int3 (see 3.)
  std::uint64_t ambiguous = 0;    // arrivals from untraced code at a deferred jump's successor
  std::uint64_t syscalls = 0;     // system calls made by traced threads (while followed)
  std::uint64_t signals = 0;      // signals of the program seen (passed through by the caller)
  std::uint64_t handlers = 0;     // of those, delivered to a handler traced from its entry
  std::map<x86::BranchKind, std::uint64_t> by_kind;  // taken branches by kind
};

class BranchTracer {
 public:
  using Sink = std::function<void(const BranchRecord&)>;

  static Result<BranchTracer> start(Inferior& inferior, BranchTracerOptions options, Sink sink);

  BranchTracer(BranchTracer&&) noexcept = default;
  BranchTracer& operator=(BranchTracer&&) noexcept = default;
  BranchTracer(const BranchTracer&) = delete;
  BranchTracer& operator=(const BranchTracer&) = delete;
  ~BranchTracer() = default;

  Result<bool> handle(const Event& event);
  Resume resume_mode() const;
  Result<void> stop();

  const BranchTracerStats& stats() const { return stats_; }
  // Whether start_at was reached (always true without start_at).
  bool started() const { return started_; }
  // Tracing is over (exec, exit, or stop()).
  bool ended() const { return ended_; }
  // The addresses holding an int3 of the tracer now (ascending).
  std::vector<std::uint64_t> planted() const;

 private:
  // How a block is wanted: kEntry blocks may be reached from untraced code (their terminator
  // stays planted and never serves as a deferred jump's successor); kSuccessor blocks are
  // decoded to judge a deferral and plant their own terminator.
  enum class Want : std::uint8_t { kNormal, kEntry, kSuccessor };
  struct Deferred {
    x86::Insn insn;
    std::uint64_t taken_entry = 0, taken_term = 0;
    std::uint64_t fall_entry = 0, fall_term = 0;
    bool active = true;  // false once planted after all
  };
  // Where a thread is between stops: it resumed at `entry`; its block ends at the deferred jump
  // `deferred`, or at the planted terminator `expect`; neither known: 0 and 0.
  struct Flow {
    std::uint64_t entry = 0;
    std::uint64_t deferred = 0;
    std::uint64_t expect = 0;
  };

  BranchTracer(Inferior& inferior, BranchTracerOptions options, Sink sink);

  bool in_range(std::uint64_t addr) const;
  // Up to `out.size()` original bytes at addr (the page cache, shadow applied); how many.
  std::size_t fetch(std::uint64_t addr, std::span<std::uint8_t> out);
  const std::vector<std::uint8_t>* page(std::uint64_t page_addr);
  bool plant(std::uint64_t addr, const x86::Insn& insn);
  void ensure_block(std::uint64_t entry, Want want = Want::kNormal);
  bool try_defer(const x86::Insn& insn);
  void undefer(std::uint64_t jump);
  void make_entry(std::uint64_t term);
  bool deferred_active(std::uint64_t addr) const;
  void begin(std::uint64_t rip);
  void set_flow(pid_t tid, std::uint64_t entry);
  // A thread stopped at planted terminator `term`: records the deferred jump it passed.
  void arrive(pid_t tid, std::uint64_t term);
  void unknown_arrival(std::uint64_t term);
  // A thread stopped at `rip` for a signal (or at the end): resolves its deferred jump.
  void settle(pid_t tid, std::uint64_t rip, bool ending);
  Result<bool> on_trap(const Event& event);
  Result<bool> on_start(pid_t tid, x86::Regs& regs);
  Result<bool> on_signal(const Event& event);
  // The handler of `signal` in the thread's process (0: SIG_DFL, 1: SIG_IGN), asked of the
  // kernel with an injected rt_sigaction; scratch memory below the red zone under `rsp`.
  Result<std::uint64_t> signal_handler(pid_t tid, int signal, std::uint64_t rsp);
  Result<bool> step_branch(pid_t tid, const x86::Regs& regs, const x86::Insn& insn);
  void record(pid_t tid, const x86::Insn& insn, std::uint64_t next, bool taken);
  void follow(const x86::Insn& insn, std::uint64_t next);
  void after_branch(pid_t tid, const x86::Insn& insn, std::uint64_t next);
  // Resumes tid with resume_mode(); a thread that is gone (killed meanwhile) is not an error.
  Result<bool> resume(pid_t tid, int signal = 0);
  Result<void> release_child(pid_t child);
  Result<void> restore_all(pid_t process);
  void forget_range(std::uint64_t addr, std::uint64_t len);
  static Result<std::uint64_t> read_word(void* self, std::uint64_t addr, int size);

  Inferior* inferior_;
  BranchTracerOptions options_;
  Sink sink_;
  std::map<std::uint64_t, std::uint8_t> shadow_;             // planted address -> original byte
  std::unordered_map<std::uint64_t, x86::Insn> terms_;       // planted terminators
  std::unordered_map<std::uint64_t, std::uint64_t> blocks_;  // block entry -> terminator (0: none)
  std::unordered_map<std::uint64_t, Deferred> deferred_;     // deferred conditional jumps
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> preds_;  // successor term -> jumps
  std::unordered_set<std::uint64_t> entry_terms_;  // terminators of kEntry blocks
  std::unordered_map<std::uint64_t, std::vector<std::uint8_t>> pages_;  // original text pages
  std::unordered_map<pid_t, Flow> flow_;
  std::unordered_map<pid_t, std::pair<long, std::array<std::uint64_t, 6>>> in_syscall_;
  std::optional<std::uint64_t> start_trap_;  // start_at while its int3 is planted
  std::optional<std::uint64_t> start_done_;  // start_at after its int3 was removed
  bool started_ = false;
  bool ended_ = false;
  bool syscall_seen_ = false;  // a decoded block ends at a system call
  BranchTracerStats stats_;
};

}  // namespace hwarb::native

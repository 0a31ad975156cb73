// hwarb/linux/soft_watch.h — SoftWatch, exact watchpoints on a real process without debug
// registers: page protection for reads and writes, int3 for execution, single-stepping only as
// the last resort.
//
// How an access is found (page-protection method):
//  1. arm() makes every page holding a watched byte read-only (write watches) or inaccessible
//     (read or read-write watches) with an mprotect injected into the tracee. Code that does
//     not touch those pages runs at full speed.
//  2. An access to such a page faults (SIGSEGV, SEGV_ACCERR, never delivered to the program;
//     where the kernel resets the program's SIGSEGV action for it, the action is put back:
//     soft_watch.cpp, "The program's SIGSEGV action"). An instruction that faults on the
//     program's own protection did not happen: no hit, its SIGSEGV is the program's.
//     The faulting instruction is decoded (x86/insn.h) and its memory operands computed from
//     the registers, so the watcher knows exactly whether it touches a watched range, how, and
//     what the old value is.
//  3. A plain MOV load or store is performed by the watcher itself (through /proc/PID/mem,
//     which ignores the protection) and the thread moves past it: one stop per access. Any
//     other instruction (and every one with SoftWatchOptions::cpu_accesses, so that other
//     users' breakpoints on the page see the access) is single-stepped with its pages opened to
//     their original protection, every other thread stopped meanwhile, then the pages are
//     protected again.
//  4. System calls stop the thread at entry (PTRACE_SYSCALL). One whose arguments point into a
//     protected page (or whose known buffer overlaps one: read/write-like calls by their
//     (buffer, length) arguments, readv/writev/preadv/pwritev(2) by their iovec arrays and
//     sendmsg/recvmsg by their msghdr's name, iovecs and control buffer, read from the tracee)
//     runs with those pages open (until the last such call of any thread ends, several
//     threads' futex calls on one page overlapping), so its result is exactly what it would be
//     without hwarb;
//     afterwards kernel writes are reported as hits naming the system call: a read-like call of
//     a known buffer wrote the first bytes of it that its result counts, whatever they held
//     before (one hit per call, as the hardware sees each copy); any other call wrote what
//     changed. Kernel reads of a watched buffer, for write(2)-like calls, are read hits. While
//     such a call runs, other
//     threads' accesses to the opened pages are not seen (stopping them could deadlock the
//     program, e.g. on a futex).
//  5. The program's own mprotect/munmap/mmap/mremap of watched pages are honoured: its new
//     protection becomes the original to restore. A watched page that is unmapped (munmap, or
//     moved away by mremap) is remembered: when a mapping appears at its address again (mmap,
//     fixed or by hint, or mremap), it is protected again and the watch goes on there. A page
//     not mapped when arm() runs (a library not loaded yet, a null pointer's page) is armed the
//     same way, from the mmap that maps it. Each is told as a note (take_notes()).
//  6. A REP string instruction (rep stos, rep movs, repe cmps, ...) that faults is stepped
//     iteration by iteration with its pages open until it ends (or leaves the protected pages,
//     or a signal interrupts it): one hit per instruction and range, whose access is what the
//     iterations did to the range, its old value from before the instruction and its new one
//     after, as the hardware's data breakpoints report it.
// Ranges on a stack (the [stack] mapping or any page holding a thread's stack pointer), on a page
// holding a thread's rseq area (the kernel writes it at each return to the thread; a protected
// page makes that write fail, and the kernel kills the process), or read watches on executable
// pages, cannot be protected without breaking the program: they use the
// single-step method (every instruction of every thread is stepped, decoded and checked), which
// is about 30 000 instructions per second here — describe() says so.
// Execution watches plant int3 (0xCC) on the first byte; the original byte is restored to
// single-step the instruction and planted again (other threads stopped meanwhile).
//
// Contract:
//  - arm() needs every thread stopped and changes nothing on failure (all-or-nothing: pages
//    protected so far are restored).
//  - handle() takes each event of the Inferior; it returns true when the event was the
//    watcher's (the thread is then resumed by it), false when the caller should handle it
//    (signals of the program: pass them through; exits). Hits are appended to `hits`. A thread
//    killed in its stop (ESRCH: the process is ending) makes the event done with, not an error.
//  - complete_fault() is handle() for a thread's fault on a protected page (the event must be
//    one handle() would take as such: SIGSEGV, SEGV_ACCERR, on a watched page) for a caller that
//    stops the thread after a hit (VirtualTracee): the instruction is completed and its hits
//    reported exactly as by handle(), but the thread is left stopped right after it. When the
//    instruction raised a signal of the program instead (it did not complete), the thread is
//    stopped with that signal to deliver; when the thread ended, the event is requeued.
//  - resume_mode() is how the caller must resume threads it handles itself.
//  - take_notes() returns (and forgets) what happened to the watch since the last call that is
//    not a hit: a watched range's memory unmapped, and mapped again (and watched again).
//    A hit's old value after its memory came back is the new mapping's (e.g. zero), not the
//    last value of the old mapping.
//  - A forked child is followed (Inferior::follow): its copies of the protections and int3
//    bytes stay, and its accesses are hits like this process's (their tid tells them apart). A
//    vfork child is watched as a thread until it execs. A process (this one, a followed fork, a
//    vfork child) that execs the executable armed, where every watched page is mapped at the
//    same address (address randomisation off, as for spawned commands), is watched again in its
//    new image: the same protections and int3 bytes are set up there. Any other exec leaves
//    that process unwatched (its events pass through); when no watched process is left, the
//    watch ends.
//  - disarm() needs every thread stopped (Inferior::stop_all) and restores every page's
//    protection and every int3 byte; the tracee then runs unmodified.
// Thread-safety: none (the Inferior's thread only).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/signal_action.h"
#include "hwarb/linux/syscall_buffers.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/linux/watchdog.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

enum class WatchMethod : std::uint8_t { kPageProtect, kSingleStep, kInt3 };
const char* watch_method_name(WatchMethod method);

struct SoftWatchOptions {
  bool force_single_step = false;
  // The stopped thread in which arm() (and later disarm()) run their mprotect calls; 0 or a
  // thread that is not stopped: the first stopped thread. A thread stopped at a fault or trap is
  // the safest place (one in a ptrace interrupt inside a blocking call must restart it after).
  pid_t inject_in = 0;
  // The single-step method leaves a thread stopped right after an instruction that touched a
  // watch (handle() returns true with the hits and the thread stopped, for a debugger to report
  // the stop; it resumes the thread with resume_mode()). Off: the thread steps on at once.
  bool stop_at_hits = false;
  // Every access to a protected page is made by the CPU: the instruction is single-stepped with
  // its pages open (step 3's slow way) instead of being performed by the watcher through
  // /proc/PID/mem. A store the watcher performs is invisible to anyone else's breakpoints on
  // that address (perf's mem: events, another debugger's debug registers); one the CPU makes is
  // seen by them. It costs more stops per access (bench/README.md, "per hit").
  bool cpu_accesses = false;
};

struct SoftWatchStats {
  std::uint64_t faults = 0;         // protection faults taken
  std::uint64_t emulated = 0;       // of them, performed by the watcher (one stop)
  std::uint64_t stepped = 0;        // of them, single-stepped with the page open
  std::uint64_t false_sharing = 0;  // faults on a protected page that touched no watched byte
  std::uint64_t syscalls_opened = 0;
  std::uint64_t steps = 0;  // single-step method: instructions stepped
  std::uint64_t traps = 0;  // int3 hits
};

class SoftWatch {
 public:
  static Result<SoftWatch> arm(Inferior& inferior, std::vector<WatchRange> ranges,
                               const SoftWatchOptions& options = {});

  Result<bool> handle(const Event& event, std::vector<WatchHit>& hits);
  // How complete_fault() left the thread.
  struct Completed {
    bool stopped = false;  // the thread is stopped: after the instruction, or at `signal`
    int signal = 0;        // a signal of the program the instruction raised (not completed)
  };
  Result<Completed> complete_fault(const Event& event, std::vector<WatchHit>& hits);
  // Whether handle() would take `event` as a fault on a protected page (complete_fault's event).
  bool is_fault(const Event& event) const;
  // The single-step method's trap of thread `tid` (stopped right after the instruction this
  // watch stepped it over) taken by a caller that replaces the watch before handling it (a
  // rebuild): that instruction's hits are appended to `hits`, as handle() would, and the thread
  // is left stopped with its step forgotten (the next watch prepares its own). Nothing when the
  // method is not single-step or the thread had no step prepared.
  Result<void> finish_step(pid_t tid, std::vector<WatchHit>& hits);
  Resume resume_mode() const;
  // resume_mode() for thread `tid`: under the single-step method, kSyscall for a thread whose
  // next instruction is a system call the caller catches, and for one inside such a call, so
  // that its entry and exit stop (a step would run the call without either).
  Resume resume_mode(pid_t tid) const;
  Result<void> disarm();
  // The thread disarm() prefers for its mprotect calls (as SoftWatchOptions::inject_in).
  void inject_in(pid_t tid) { inject_in_ = tid; }
  // The threads the caller single-steps itself (a debugger's step): the single-step method's
  // trap of one of them ends the caller's step too, so handle() takes its hits and leaves the
  // thread stopped (true), as after a hit with stop_at_hits, instead of stepping it on. One
  // whose step began at a system-call stop (its entry or exit stop was still to handle) is
  // stepped on from the call's exit stop: it stops after the instruction that follows the call,
  // as a step from inside a call does.
  void set_caller_steps(std::set<pid_t> threads) { caller_steps_ = std::move(threads); }
  // The system calls the caller stops at itself (a debugger's `catch syscall`; an empty set:
  // every call; nullopt: none). The watch's own stop at the entry or the exit of one of them is
  // the caller's too: handle() does what the watch needs and leaves the thread stopped (true),
  // for the caller to report and resume (with resume_mode()).
  void set_caller_syscalls(std::optional<std::set<long>> numbers) {
    caller_syscalls_ = std::move(numbers);
  }

  // The method each range uses (index as given to arm()).
  WatchMethod method(std::size_t range) const { return methods_[range]; }
  // One line: "page protection (2 pages)", "single-step (watching the stack: ~30 000
  // instructions/s)", "int3".
  std::string describe() const;
  bool ended() const { return ended_; }
  // A remark about a range (its WatchRange::id) that is not a hit.
  struct Note {
    std::size_t id = 0;
    std::string text;
  };
  std::vector<Note> take_notes();
  // What undoes the watch's changes in every watched process (a Watchdog's plan), and a number
  // that changes whenever that may have changed (a fork followed, an exec, the program's own
  // mprotect/munmap/mmap/mremap of a watched page, disarm).
  RestorePlan restore_plan() const;
  std::uint64_t plan_generation() const { return generation_; }
  // The parachute (signal_action.h) for an attached program a Watchdog guards: set now in each
  // watched process for SIGSEGV and SIGTRAP where the program's action is the default, and kept
  // from then on: a followed fork has its parent's, an exec of the armed image gets it again,
  // and the program's own rt_sigaction of those signals sees and sets the program's action as
  // without it (up again when the program sets the default). It is taken down for a signal of
  // the program's that is passed through (the default action then runs as without hwarb), and
  // by disarm(); restore_plan() names it for the watchdog. A process whose text lacks the
  // instructions it needs goes without (a note says so). Every thread stopped.
  Result<void> deploy_parachute();
  const SoftWatchStats& stats() const { return stats_; }
  // Whether the CPU makes the accesses (SoftWatchOptions::cpu_accesses, or since the program
  // opened a perf breakpoint).
  bool cpu_accesses() const { return cpu_accesses_; }

 private:
  struct Page {
    int original = 0;    // PROT_* the program gave it
    int protection = 0;  // PROT_* while watched
  };
  struct Trap {
    std::uint8_t original = 0;
    std::vector<std::size_t> ranges;
  };
  // The parachute of one process (deploy_parachute()).
  struct Parachute {
    std::uint64_t signals = 0;  // signal_bit()s of the signals whose action it is now
    KernelSigaction action;     // its action there (handler 0: not looked for yet)
    // Per signal (SIGSEGV, SIGTRAP): the program's own action, what its rt_sigaction sees.
    std::map<int, KernelSigaction> program;
  };
  struct OpenSyscall {
    long nr = -1;
    // rt_sigaction(SIGSEGV, act, ...): the action the program sets, known at exit.
    std::optional<KernelSigaction> segv_action;
    // rt_sigaction(SIGSEGV or SIGTRAP, act, oldact) while the parachute may be up: the signal,
    // the action set (none for a query) and where the old one goes.
    int sigaction_signal = 0;
    std::optional<KernelSigaction> sigaction_set;
    std::uint64_t sigaction_old = 0;
    std::uint64_t ip = 0;
    std::vector<std::uint64_t> pages;
    std::vector<std::vector<std::uint8_t>> before;  // per range (empty when not on an open page)
    std::optional<SyscallBuffers> call;  // its user buffers, for a call that has known ones
    // The program's own mprotect/munmap/mmap/mremap of watched pages, applied at exit.
    long effect_nr = -1;
    std::uint64_t effect_addr = 0, effect_len = 0;
    int effect_prot = 0;
    std::uint64_t effect_new_len = 0;  // mremap's new length
  };
  struct StepCheck {  // single-step method: the instruction about to be stepped
    std::uint64_t ip = 0;
    std::vector<std::pair<std::size_t, unsigned>> ranges;  // range, access
    std::vector<std::vector<std::uint8_t>> before;
    bool syscall = false;
    long call = -1;    // a system call: its number (rax before it)
    bool rep = false;  // a REP string instruction: one iteration per step
    // An XSAVE-family instruction: its area and registers, for what it wrote (x86/xsave.h).
    x86::XsaveForm xsave = x86::XsaveForm::kNone;
    std::uint64_t xsave_base = 0;
    x86::Regs regs{};
  };
  struct RepProgress {  // single-step method: a REP string instruction's iterations so far
    unsigned bits = 0;
    std::vector<std::uint8_t> before;
  };

  SoftWatch(Inferior& inferior, std::vector<WatchRange> ranges);
  Result<void> protect(pid_t tid, std::uint64_t page, int prot, std::uint64_t count = 1);
  // Whether `page` of tid's process is open for another thread's system call (open_): it stays
  // open until the last such call's exit protects it again.
  bool open_for_other_call(pid_t tid, std::uint64_t page) const;
  // The threads a step stopped run on as before (a thread killed meanwhile is skipped).
  Result<void> resume_others(const std::vector<pid_t>& others);
  // handle() but for a thread the process's end took away meanwhile.
  Result<bool> handle_event(const Event& ev, std::vector<WatchHit>& hits);
  Result<bool> on_fault(const Event& ev, std::vector<WatchHit>& hits);
  Result<bool> on_trap(const Event& ev, std::vector<WatchHit>& hits);
  Result<bool> on_syscall_enter(const Event& ev);
  Result<bool> on_syscall_exit(const Event& ev, std::vector<WatchHit>& hits);
  // The end of the watch's work at a system-call stop of call `nr`: the thread resumed with
  // `mode`, or left stopped when the caller catches that call (set_caller_syscalls).
  Result<void> after_syscall_stop(pid_t tid, long nr, Resume mode);
  bool caller_catches(long nr) const;
  // Process `process` exec'd: the watch goes on in it when rearm() can, else it runs unwatched.
  Result<bool> on_exec(pid_t process);
  // Protections and int3 bytes set up again in `process` after its exec: false (nothing done)
  // unless it runs the executable armed and every watched page is mapped there.
  Result<bool> rearm(pid_t process);
  // The accesses watched on `page` (execution watches aside).
  unsigned page_access(std::uint64_t page) const;
  Result<bool> on_step(pid_t tid, std::vector<WatchHit>& hits);
  // The hits of the instruction `tid` was just stepped over (its prepared StepCheck).
  Result<void> step_hits(pid_t tid, std::vector<WatchHit>& hits);
  Result<void> prepare_step(pid_t tid);
  // The parachute in the process of stopped thread `tid`: set for each of SIGSEGV and SIGTRAP
  // whose action is the program's default (deploy), or put back to the program's action for
  // `sig` (lower).
  Result<void> deploy_parachute_in(pid_t tid);
  Result<void> raise_parachute(pid_t tid, int sig, const KernelSigaction& program);
  Result<void> lower_parachute(pid_t tid, int sig);
  // The program's rt_sigaction `st` of SIGSEGV or SIGTRAP succeeded: it saw and set its own
  // action, and the parachute is up again where that is the default.
  Result<void> after_sigaction(pid_t tid, const OpenSyscall& st);
  // The SIGSEGV action of `tid`'s process read at arm (from /proc when it is the default).
  Result<void> learn_segv_action(pid_t tid);
  // After a fault of the watch in `tid`: the SIGSEGV action the kernel reset, put back.
  Result<void> keep_segv_action(pid_t tid);
  // The range's bytes in the process of thread `tid`.
  Result<std::vector<std::uint8_t>> read_range(std::size_t range, pid_t tid);
  std::uint64_t now_ns() const;
  bool page_protected(std::uint64_t addr) const;
  // The program's own mapping call `st` (munmap, mmap, mremap) returned `ret`: watched pages it
  // unmapped are remembered in gone_, watched addresses it mapped are protected again.
  Result<void> follow_mapping(pid_t tid, const OpenSyscall& st, std::int64_t ret);
  // Notes, one per range on `pages`, saying `what`.
  void note_pages(const std::vector<std::uint64_t>& pages, const std::string& what);
  void add_hit(std::vector<WatchHit>& hits, std::size_t range, pid_t tid, std::uint64_t ip,
               std::uint64_t addr, unsigned access, std::vector<std::uint8_t> before,
               std::vector<std::uint8_t> after, std::string syscall);

  Inferior* inferior_;
  std::vector<WatchRange> ranges_;
  std::vector<WatchMethod> methods_;
  std::map<std::uint64_t, Page> pages_;  // page address -> protections
  std::set<std::uint64_t> gone_;         // watched pages not mapped: unmapped, or never mapped yet
  std::vector<Note> notes_;
  std::map<std::uint64_t, Trap> traps_;            // int3 address -> original byte
  std::map<pid_t, OpenSyscall> open_;              // threads inside a system call with pages opened
  std::map<pid_t, StepCheck> step_;                // single-step method, per thread
  std::set<pid_t> caller_steps_;                   // see set_caller_steps()
  std::optional<std::set<long>> caller_syscalls_;  // see set_caller_syscalls()
  // Single-step method: threads inside a system call the caller catches, run from its entry
  // stop to its exit stop (resume_mode(tid)); the exit completes the instruction's step.
  std::set<pid_t> in_caught_call_;
  std::map<pid_t, std::map<std::size_t, RepProgress>> rep_;  // per thread, per range
  std::set<pid_t> trap_steps_;             // threads stepping over an int3's original instruction
  std::set<pid_t> unwatched_;              // processes whose new image could not be watched
  std::map<pid_t, KernelSigaction> segv_;  // per process: its SIGSEGV action as last set
  std::map<pid_t, Parachute> parachutes_;  // per process, once deploy_parachute() ran
  bool parachute_ = false;                 // deploy_parachute() ran
  std::string image_;                      // the executable armed (/proc/PID/exe)
  bool single_step_ = false;
  bool stop_at_hits_ = false;  // SoftWatchOptions::stop_at_hits
  bool cpu_accesses_ = false;  // SoftWatchOptions::cpu_accesses
  bool ended_ = false;
  pid_t inject_in_ = 0;  // SoftWatchOptions::inject_in
  std::uint64_t generation_ = 1;
  SoftWatchStats stats_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hwarb::native

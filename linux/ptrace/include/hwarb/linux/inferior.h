// hwarb/linux/inferior.h — Inferior, a real process under ptrace(2): every thread, its memory,
// its registers, system calls run on its behalf, and one stream of events.
//
// Contract:
//  - spawn() forks and execs argv[0] (PATH searched) with the caller's environment; it returns
//    with the new image stopped at its first instruction (the exec stop), one thread, traced by
//    the calling thread. attach() seizes every thread of a running process (re-reading
//    /proc/PID/task until no thread appears unseized, and once more with every seized thread
//    stopped, so that no thread made meanwhile stays untraced) and interrupts them all; it
//    returns with all threads stopped. A program that makes threads faster than they can be
//    seized for 100000 listings is EAGAIN naming `pid`. Both use PTRACE_SEIZE with TRACECLONE,
//    TRACEFORK, TRACEVFORK, TRACEEXEC and TRACESYSGOOD (plus EXITKILL for spawned processes, so a
//    dying hwarb takes its child with it). An exec stop is left by one single-step (execve's return
//    would overwrite any injected call's registers), so a spawned process and a kExec report stop
//    after the new image's first instruction. Errors: EPERM naming `pid` with the reason
//    (ptrace_scope, another tracer), ENOENT naming `command`, ESRCH naming `pid`.
//  - Threads created later are traced from their first instruction: wait() reports kNewThread
//    with the new thread stopped; the creating thread is resumed by the Inferior as it was last
//    resumed. Forked processes are reported as kFork with the child stopped (its own mm; the
//    caller undoes its changes there with the `process` argument of the memory calls and
//    inject_syscall, then calls release(), or follow()s it: its threads then belong to this
//    Inferior, their events come from wait() like this process's, and process_of() tells them
//    apart); a vfork child shares this process's memory and stays traced, as a thread, until it
//    execs or exits (then it is released and reported as kThreadExit). A followed process that
//    execs is released the same way; its end is kThreadExit of its leader. With follow_execs(),
//    a vfork child or followed process that execs is kept instead: it becomes (or stays) a
//    followed process and its exec is reported as kExec with tid = its leader (process_of tells
//    it from this process's own exec). When this process ends (kExited, kKilled), followed
//    processes and vfork children still running stay traced (threads()): stop_all() and
//    detach() let them go.
//  - Group-stops (SIGSTOP, SIGTSTP, ...) keep their job-control meaning: they are left in
//    PTRACE_LISTEN and not reported. Signals are reported as kSignal; the caller passes them
//    through by resuming with the same signal.
//  - Memory goes through /proc/PID/mem, which ignores page protection (FOLL_FORCE): reads and
//    writes of protected pages and of text work. All-or-nothing per call: a short transfer is
//    EFAULT naming `addr`.
//  - inject_syscall() runs one system call in a stopped thread and restores its registers. In
//    a syscall-entry or syscall-exit stop it re-uses that system call's entry (the rewound
//    `syscall` instruction); in any other stop it single-steps a `syscall` instruction found in
//    the process's text. A signal that arrives meanwhile is kept and delivered on the thread's
//    next resume. The thread is in the same kind of stop afterwards. Any number of calls may be
//    injected in one stop: where the first one applied the restart of an interrupted call (rip
//    rewound onto its `syscall` instruction), the next ones single-step the process's. A vfork's
//    parent held at its vfork stop cannot run a call (resumed, it would sleep until its child
//    execs or ends): a call on the memory (mprotect, mmap, munmap, madvise, mremap) runs in the
//    stopped child, which shares it; any other is EBUSY naming `pid`.
//  - wait() returns the next event of any traced thread (queued events first). EINTR (and
//    nothing lost) when a signal handler of hwarb interrupted the wait. Every wait (wait(),
//    wait_or_poll(), stop_all(), kill(), ...) reads only the statuses of this process's threads
//    and its traced descendants: the other children of the calling process (an IDE's own) keep
//    theirs for its own waitpid. A new thread is known from its clone event (the thread's first
//    stop, reported apart, waits in the kernel until then), a forked child from its fork event.
//    Every wait for a stop first polls (waitpid WNOHANG) for up to a SpinWindow (options.spin_us at
//    most), then sleeps: a stop that comes soon is seen without a cross-CPU wake-up. A signal of
//    install_interrupt_flag taken while polling ends the wait with EINTR as a sleeping one.
//  - The destructor kills a spawned process and detaches from an attached one (after stopping
//    its threads). Undoing changes made to the tracee (breakpoints, protections) is the caller's
//    job, before detach().
//  - Requests must come from the thread that created the Inferior (Linux's ptrace rule).
// Parts: the memory calls are ProcessMemory's (process_memory.h), inject_syscall is
// SyscallInjector's (syscall_injection.h) over this Inferior's waits; wait statuses become events
// in stop_translation.cpp, and are waited for in inferior_wait.cpp.
// Thread-safety: none. Move-only.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/process_memory.h"
#include "hwarb/linux/spin_window.h"
#include "hwarb/linux/syscall_injection.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

enum class EventKind : std::uint8_t {
  kSignal,        // signal-delivery-stop: signal, code, fault_addr
  kSyscallEnter,  // syscall-entry-stop: syscall, args
  kSyscallExit,   // syscall-exit-stop: syscall, ret
  kNewThread,     // tid is a new thread (stopped at its first instruction)
  kThreadExit,    // tid is gone (status/signal as for a process)
  kFork,          // child = the new process (stopped), vfork says whether it shares memory
  kExec,          // the process exec'd: a new image (all breakpoints and protections are gone)
  kVforkDone,     // tid (a vfork parent) is stopped: its child execed or exited (hold_forks only)
  kExited,        // the whole process exited with `status`
  kKilled,        // the whole process was killed by `signal`
  kLeaderEnded,   // tid, a thread-group leader, ended while other threads of its group run on:
                  // it leaves threads(), its process goes on (its end is the group's, later)
};

struct Event {
  EventKind kind = EventKind::kSignal;
  pid_t tid = -1;
  int signal = 0;
  int code = 0;                  // siginfo si_code (kSignal)
  std::uint64_t fault_addr = 0;  // siginfo si_addr (kSignal: SIGSEGV, SIGBUS, SIGTRAP)
  int status = 0;                // exit status (kExited, kThreadExit)
  pid_t child = -1;              // kFork
  bool vfork = false;            // kFork
  long syscall = -1;             // kSyscallEnter/kSyscallExit
  std::array<std::uint64_t, 6> args{};
  std::int64_t ret = 0;  // kSyscallExit
};

enum class Resume : std::uint8_t { kCont, kStep, kSyscall };

// A thread's x87/SSE registers in the FXSAVE layout (user_fpregs_struct: control and status
// words, the abridged tag, st0-st7 in 16-byte slots, xmm0-xmm15, mxcsr).
using Fxsave = std::array<std::uint8_t, 512>;

struct InferiorOptions {
  bool kill_on_exit = true;  // spawn only: PTRACE_O_EXITKILL and the parent-death signal (false:
                             // the program may outlive hwarb, e.g. detached by a debugger)
  int stdout_fd = -1;        // spawn only: the child's standard output (-1: inherited)
  bool disable_aslr = true;  // spawn only: personality(ADDR_NO_RANDOMIZE), as gdb and rr do, so
                             // addresses are the same from run to run
  int spin_us = 100;  // the longest a wait polls for the next stop before it sleeps (adaptive:
                      // spin_window.h); 0, or a machine with one CPU: it always sleeps
  // spawn only: the program's environment, NAME=VALUE each (nullopt: hwarb's own)
  std::optional<std::vector<std::string>> environment = std::nullopt;
  bool own_process_group = false;  // spawn only: a process group of its own (SpawnOptions)
  // spawn only: the directory the program starts in (nullopt: hwarb's own)
  std::optional<std::string> working_directory = std::nullopt;
};

class Inferior {
 public:
  static Result<Inferior> spawn(const std::vector<std::string>& argv,
                                const InferiorOptions& options = {});
  static Result<Inferior> attach(pid_t pid, const InferiorOptions& options = {});

  Inferior(Inferior&&) noexcept;
  Inferior& operator=(Inferior&&) noexcept;
  Inferior(const Inferior&) = delete;
  Inferior& operator=(const Inferior&) = delete;
  ~Inferior();

  pid_t pid() const { return pid_; }
  bool spawned() const { return spawned_; }
  bool alive() const { return pid_ > 0 && !exited_; }
  // Traced threads (ascending), including vfork children that share the memory.
  std::vector<pid_t> threads() const;
  bool is_stopped(pid_t tid) const;

  // Memory of this process, or of `process` (a forked child being released, or followed): see
  // ProcessMemory (process_memory.h), which these calls are.
  Result<void> read_memory(std::uint64_t addr, std::span<std::uint8_t> out, pid_t process = 0) {
    return memory_.read_memory(addr, out, process);
  }
  // Several parts in one system call (read_process_memory's gathered read), all or nothing: an
  // error when any part cannot be read that way (e.g. a PROT_NONE page: read_memory still can).
  Result<void> read_memory(std::span<const RemoteRead> parts, pid_t process = 0) {
    return memory_.read_memory(parts, process);
  }
  Result<void> write_memory(std::uint64_t addr, std::span<const std::uint8_t> data,
                            pid_t process = 0) {
    return memory_.write_memory(addr, data, process);
  }
  Result<std::uint64_t> read_word(std::uint64_t addr, int size, pid_t process = 0) {
    return memory_.read_word(addr, size, process);
  }
  // The address of the first occurrence of `code` in the executable mappings of `process`
  // ([vsyscall] aside); ENOENT naming `text` when there is none.
  Result<std::uint64_t> find_code(pid_t process, std::span<const std::uint8_t> code) {
    return memory_.find_code(process, code);
  }
  // The instruction at `addr` of this process (or `process`), decoded from as many of the 15
  // bytes there as are readable (an instruction may end just before an unmapped page).
  // x86::decode's errors.
  Result<x86::Insn> decode_at(std::uint64_t addr, pid_t process = 0) {
    return memory_.decode_at(addr, process);
  }
  // The process (thread-group id) thread `tid` belongs to: pid() or a followed child.
  pid_t process_of(pid_t tid) const;
  // How many times the set of followed processes has changed (a follow, a followed process's
  // exec or end): a caller that keeps something per process compares it to notice.
  [[nodiscard]] std::uint64_t process_changes() const { return process_changes_; }
  // A forked child (kFork, not vfork; stopped, not released) becomes part of this Inferior: see
  // the contract. ESRCH naming `pid` when it is no such child.
  Result<void> follow(pid_t child);
  // Whether execs of vfork children and followed processes keep them traced (see the contract).
  void follow_execs(bool on) { follow_execs_ = on; }
  // On: a fork or vfork parent stays stopped at its kFork (the caller resumes it), and a vfork
  // parent, once resumed, stops again when its child has execed or exited: kVforkDone (its
  // thread stopped) — as a debugger's fork and vfork events need. Off (the default): the
  // Inferior resumes both by itself.
  void hold_forks(bool on) { hold_forks_ = on; }
  // Whether forks are held (hold_forks): a forked child a watch follows then waits, stopped,
  // for the caller (a debugger that reports the fork) to resume it too.
  bool holds_forks() const { return hold_forks_; }
  // The process `tid` is a thread of as the kernel has it: pid(), a followed process, or a vfork
  // child's own id (process_of() gives a vfork child its parent's, whose memory it shares).
  [[nodiscard]] pid_t group_of(pid_t tid) const;
  // The vfork child thread `tid` sleeps in the kernel for (0: none). Such a thread cannot stop
  // until that child execs or exits; while the child is stopped it runs nothing of its own.
  [[nodiscard]] pid_t vfork_child_of(pid_t tid) const;
  // Detaches process `process` alone (a followed process, a vfork child, or this one), every
  // thread of it stopped, its queued events dropped; the rest stays traced. When it is this
  // process and a followed one remains, the lowest followed process becomes this Inferior's
  // process (pid(), its memory, its threads' process_of); with none left the Inferior is as
  // after detach(). ESRCH when no thread is in `process`.
  Result<void> detach_process(pid_t process);
  // After this process ended (kExited/kKilled), the lowest followed process still traced becomes
  // this Inferior's process, as in detach_process; false when there is none.
  bool adopt_followed();
  // The longest a wait polls before it sleeps: options.spin_us, or 0 on a one-CPU machine. For
  // a caller's own waits (the gdbserver's for its client) to follow the same rule.
  [[nodiscard]] std::chrono::nanoseconds spin_max() const { return spin_.max(); }

  Result<x86::Regs> get_regs(pid_t tid);
  Result<void> set_regs(pid_t tid, const x86::Regs& regs);
  // The restartable-sequences area of stopped thread `tid` (len 0: none registered, or a kernel
  // that cannot tell). The kernel writes it at every return to the thread: a page protection
  // over it makes that write fail, and the kernel kills the thread's process with SIGSEGV.
  Result<RseqArea> rseq_area(pid_t tid);
  // The x87/SSE state of stopped thread `tid` (PTRACE_GETREGSET NT_PRFPREG: the FXSAVE layout).
  Result<Fxsave> get_fxsave(pid_t tid);
  Result<void> set_fxsave(pid_t tid, const Fxsave& area);
  // The whole XSAVE area of stopped thread `tid` (PTRACE_GETREGSET NT_X86_XSTATE, the XSAVE
  // standard format: FXSAVE at 0, the XCR0 it was saved under at 464, the XSAVE header at 512,
  // the components after it), as long as the kernel makes it. ENODEV naming `xstate` where the
  // kernel has no such register set (a CPU without XSAVE); errors naming `pid` as get_regs.
  Result<std::vector<std::uint8_t>> get_xstate(pid_t tid);
  // Writes it back: `area` must be exactly as long as get_xstate's (the kernel's size).
  Result<void> set_xstate(pid_t tid, std::span<const std::uint8_t> area);

  // Runs system call `nr` with `args` in stopped thread `tid`; the kernel's return value (a
  // negative errno on failure). See the contract, and SyscallInjector (syscall_injection.h).
  Result<std::int64_t> inject_syscall(pid_t tid, long nr, std::array<std::uint64_t, 6> args);
  // Told of each injection while its registers are the injection's: first (tid, the registers
  // that put the thread back as if nothing had been injected: for a call injected at a system
  // call's entry, on the `syscall` instruction to run the program's call), then (tid, null)
  // once they are the thread's own again (every return of inject_syscall). A watchdog keeps
  // them, for a thread caught in the middle when hwarb dies. Empty: nobody told.
  using InjectionObserver = SyscallInjector::Observer;
  void set_injection_observer(InjectionObserver observer) {
    injector_.set_observer(std::move(observer));
  }

  // Resumes stopped thread `tid`, delivering `signal` (0: none). From a signal-delivery stop
  // the signal replaces the stop's own; from any other stop (an interrupt, a system call's, an
  // event's) the kernel would ignore it, so it is raised for the thread (tgkill) and, when its
  // signal-delivery stop comes, delivered from there without an event, the thread resumed as
  // asked (a step then stops in the handler, as from a signal-delivery stop).
  Result<void> resume(pid_t tid, Resume how, int signal = 0);
  // resume(tid, kSyscall) for thread `tid` in the syscall-entry stop of rt_sigreturn (kSyscall
  // otherwise), without the call's syscall-exit stop (PTRACE_SYSEMU: the call still runs) when
  // that stop is one spent on nothing: a signal that the thread takes as soon as it is back in
  // user mode is already pending (queued, and not blocked by the mask the call restores), or the
  // handler returns into the program's code rather than onto a restarted system call. A program
  // flooded with signals (e.g. a 100 us timer) spends most of its stops there. Should the
  // thread's next stop be a system call after all, it is still reported from its entry as after
  // kSyscall, at the cost of two stops inside the Inferior.
  Result<void> resume_from_sigreturn(pid_t tid);
  // Resumes every stopped thread with `how` (their kept signals delivered), but those a queued
  // event holds: a thread with an event still to report (stop_all may read a real stop, such as
  // a fork event, in place of its interrupt), and the vfork child of a queued fork event. Whoever
  // handles the event resumes them, as it would have had the event come first.
  Result<void> resume_all(Resume how);
  Result<Event> wait();
  // wait() that also watches `fds` (perf rings) for POLLIN: the next event, or nullopt when one
  // of `fds` is readable or `timeout_ms` passed first (-1: no timeout) — for a consumer that must
  // drain trace buffers while the threads run. The child statuses arrive through a signalfd for
  // SIGCHLD: the first call blocks SIGCHLD in the calling thread for the rest of the process
  // (waitpid does not need it delivered; spawn() unblocks it in the child before exec, so the
  // traced program sees its usual mask). kIntr when a handled signal (SIGINT) interrupts the
  // wait, as for wait(). Events queued by wait_for/stop_all come first.
  Result<std::optional<Event>> wait_or_poll(std::span<const int> fds, int timeout_ms);
  // For a caller that waits for several Inferiors at once (a debugger with several processes):
  // status_fd() is the signalfd wait_or_poll sleeps on (readable when a child's status may have
  // changed; the same for every Inferior of the process), drain_status_fd() empties it, and
  // poll_event() is one turn of wait_or_poll without sleeping and without draining it: the next
  // event, or nullopt when none is ready. Drained first, then each Inferior polled, then a sleep
  // on the fd: a status that arrives after the drain keeps the fd readable, so none is missed.
  static Result<int> status_fd();
  static Result<void> drain_status_fd();
  Result<std::optional<Event>> poll_event();
  // For a caller that runs its own wait loop (a debugger that owns waitpid): take_queued()
  // returns the events the Inferior already holds (queued by stop_all, wait_for, requeue, or
  // statuses its own waits read for other threads), one per call, nullopt when there is none;
  // take them before waiting. take_status() turns a status the caller got from
  // waitpid(-1, __WALL) for traced thread `tid` into the Event wait() would have returned
  // (nullopt when it makes none, e.g. a group-stop kept in PTRACE_LISTEN). Either way the
  // Inferior's records of its threads stay exact, as if wait() had read the status.
  Result<std::optional<Event>> take_queued();
  Result<std::optional<Event>> take_status(pid_t tid, int status);
  // The next event of thread `tid` only (events of other threads stay queued for wait(), among
  // them the new thread that a clone of `tid`'s announces: `tid` runs on to its own next event).
  Result<Event> wait_for(pid_t tid);
  // Interrupts every running thread except `except` and waits until all are stopped; other
  // events that arrive meanwhile are queued for wait(). Returns the threads it stopped with its
  // interrupt (not those that stopped for an event of their own, which are queued). A thread
  // waiting for its vfork child to exec or exit sleeps in the kernel and cannot stop: it is left
  // as it is (is_stopped false; it runs no user code meanwhile).
  Result<std::vector<pid_t>> stop_all(pid_t except = -1);
  // Takes out of threads() each group leader that has ended (pthread_exit) while other threads
  // of its group run on: a zombie that cannot stop, nor have its registers read. stop_all does
  // so for the leaders it waits for, and wait_or_poll before it sleeps (the leader's end then
  // reported as kLeaderEnded); a caller that stops no thread (non-stop mode)
  // asks here. Returns the leaders taken out.
  std::vector<pid_t> drop_ended_leaders();
  // Whether a leader that ended has no thread left: its process's exit status is on its way.
  bool exit_due() const;
  // Signals of `mask` (bit n-1 for signal n) that are pending for stopped thread `tid` and not
  // blocked by it, but not reported yet (a signal raised as the thread stopped for something
  // else, e.g. a perf breakpoint's SIGTRAP racing PTRACE_INTERRUPT): the thread is resumed
  // until it reports each as a signal-delivery stop, and those events are returned (the thread
  // stays in the last one). The caller requeues the ones to deliver; a dropped one is never
  // delivered (detach passes only queued signals). Nothing is done for a thread with a signal
  // event still queued (resuming it would suppress that signal). Reads
  // /proc/PID/task/TID/status; ESRCH when the thread is gone. Other events that arrive meanwhile
  // are queued for wait().
  Result<std::vector<Event>> surface_pending(pid_t tid, std::uint64_t mask);
  // A signal of hwarb's that the program blocks: running thread `tid` has `signal` with si_code
  // `code` in its own queue while its mask blocks it (a perf breakpoint's SIGTRAP raised while
  // the program blocks SIGTRAP: the kernel queues it, and the thread runs on). The thread is
  // interrupted, the signal unblocked for one resume (its mask put back at the next stop, before
  // anything else) and the thread resumed as before: the signal-delivery stop that follows at
  // once is returned, the thread stopped in it. A thread found stopped by an interrupt (stop_all)
  // with no event queued is taken the same way, without the interrupt; it is left in the
  // signal-delivery stop, to be resumed without the signal. nullopt, the thread left as it was,
  // when it is stopped otherwise (its stopper's to resume) or stepping, when
  // /proc/PID/task/TID/status shows
  // no such signal pending and blocked (one file read: the common case), when it stops for an
  // event of its own first (queued for wait()), or when no queued entry is (signal, code) (the
  // program's own: PTRACE_PEEKSIGINFO). ESRCH naming `tid` when it is no thread here.
  Result<std::optional<Event>> surface_blocked(pid_t tid, int signal, int code);
  // Puts an event back at the front of the queue (a caller that read it with wait_for but
  // leaves it to the main loop).
  void requeue(const Event& event) { queued_.push_front(event); }
  // Whether an event of `tid` waits in the queue (it is stopped for it: resuming it before the
  // event is taken would lose a signal).
  bool has_queued(pid_t tid) const;
  // Removes and returns the queued events of `tid`.
  std::vector<Event> discard_queued(pid_t tid);
  // The events held for wait(), oldest first (statuses read but not translated yet excluded).
  [[nodiscard]] const std::deque<Event>& queued_events() const { return queued_; }
  // Resumes stopped thread `tid` the way it was last resumed.
  Result<void> resume_as_before(pid_t tid);

  // A spawned process (kill_on_exit) dies with hwarb: its parent-death signal. Before a
  // detach after which it must run on past hwarb's end (a debugger's detach), this clears that
  // signal in its main thread (an injected prctl; stopped thread; nothing for an attached or
  // ended process). EXITKILL ends with the detach itself.
  Result<void> outlive_tracer();
  // Detaches from a forked child (kFork) after the caller undid its changes there.
  Result<void> release(pid_t child);
  // Stops every thread and detaches from all of them (kept signals delivered). The process
  // runs on untraced.
  Result<void> detach();
  // SIGKILL and reap.
  Result<void> kill();

 private:
  using StopKind = ThreadStop;
  // A traced thread: its stop (StopState: stop, stop_signal, kept_signal) and the rest.
  struct Thread : StopState {
    bool stopped = false;
    int raised_signal = 0;  // raised by resume() for the thread: delivered at its stop, unreported
    Resume last = Resume::kCont;
    // Resumed by resume_from_sigreturn without the exit stop (PTRACE_SYSEMU): a syscall-entry
    // stop before any other is one the kernel will skip (see translate).
    bool sysemu = false;
    std::uint64_t entry_sp = 0;  // the stack pointer at the last syscall-entry stop
    // The system call of the last syscall-entry stop reported, until its exit stop (-1: none):
    // the exit's number without reading the registers.
    long entered = -1;
    bool interrupt_pending = false;  // PTRACE_INTERRUPT sent, its stop not seen yet
    bool vfork_child = false;
    pid_t vfork_wait = 0;  // the vfork child this thread sleeps in the kernel for (it cannot stop)
    pid_t process = 0;     // a followed child's thread: its thread group (0: this process)
    // The signal mask to put back at the next stop: a step that unblocked SIGTRAP for its trap.
    std::optional<std::uint64_t> step_mask;
  };

  // The Inferior as the SyscallInjector's tracer (inferior.cpp).
  class InjectorTracer;

  Inferior(pid_t pid, bool spawned);
  Result<void> open_mem();
  Result<void> leave_exec_stop(pid_t tid);
  // The event a wait status of `tid` makes, the records of the thread updated (nullopt: none,
  // e.g. a stop the Inferior resumes by itself). Dispatches on the kind of status to the
  // functions below it (stop_translation.cpp).
  Result<std::optional<Event>> translate(pid_t tid, int status);
  // A forked child's, not released yet.
  Result<std::optional<Event>> translate_unreleased(pid_t tid, int status);
  // Of a task not in the records: a new thread, an early fork child, a forgotten thread's end.
  // `creator`: the process (0: this one) of the thread whose clone event announced `tid`.
  Result<std::optional<Event>> translate_unknown(pid_t tid, int status,
                                                 std::optional<pid_t> creator);
  // The end of thread `tid` (of the process when it is its leader).
  Result<std::optional<Event>> translate_exit(pid_t tid, int status);
  // A syscall-entry or syscall-exit stop (`emulated`: entered under PTRACE_SYSEMU).
  Result<std::optional<Event>> translate_syscall(pid_t tid, Thread& t, bool emulated);
  Result<std::optional<Event>> translate_clone(pid_t tid, Thread& t);
  Result<std::optional<Event>> translate_fork(pid_t tid, bool vfork);
  Result<std::optional<Event>> translate_vfork_done(pid_t tid, Thread& t);
  Result<std::optional<Event>> translate_exec(pid_t tid);
  // PTRACE_EVENT_STOP: a group-stop (kept in PTRACE_LISTEN) or a stale interrupt (resumed).
  Result<std::optional<Event>> translate_event_stop(pid_t tid, Thread& t, int sig);
  // A signal-delivery stop (one raised by resume() is delivered without an event).
  Result<std::optional<Event>> translate_signal(pid_t tid, Thread& t, int sig);
  // One step of wait(): a queued event, or one waitpid (blocking or not) translated; nullopt
  // when the status made no event, or (idle set) when no status was ready.
  Result<std::optional<Event>> next_event(bool block, bool& idle);
  // `only` not 0: that thread alone (stop_thread).
  Result<std::vector<pid_t>> stop_threads(pid_t except, pid_t only = 0);
  Result<int> wait_stop(pid_t tid);
  // The status of `tid` that a wait for another kept in raw_queue_, taken out (nullopt: none).
  std::optional<int> take_raw(pid_t tid);
  // wait_stop for a thread-group leader (of this process or a followed one), or nullopt when
  // it has ended while other threads of its group live: such a zombie reports nothing until
  // the last of them is reaped, so it is polled (sleeps of 50 us to 2 ms between statuses) and
  // its /proc state read until one or the other is seen.
  Result<std::optional<int>> wait_leader_stop(pid_t tid);
  // PTRACE_DETACH of a thread held stopped; one that died meanwhile (ESRCH) is reaped.
  Result<void> detach_thread(pid_t tid, int sig);
  // The child of a fork event nobody was told of, its parent being detached: let go with it,
  // as gdbserver does (held, it would never run, and die with the tracer).
  void let_go_unreported(const Event& fork);
  // Whether `tid` leads a thread group: this process's or a followed process's.
  bool is_group_leader(pid_t tid) const;
  // Whether a status of `tid` is this Inferior's to read: a thread, a forked child not released,
  // a new thread announced by its clone event, a thread forgotten before its exit was read.
  bool ours(pid_t tid) const;
  // The next status of ours() (or of `also`), without waiting: a waitid peek (WNOWAIT) says
  // which child has one; when it is another's (the embedding program's own child), each of
  // ours is asked with waitpid(tid, WNOHANG). nullopt when none has one; ECHILD when none of
  // them can report anything any more.
  Result<std::optional<std::pair<pid_t, int>>> poll_ours(pid_t also);
  // The next status of ours() (or of `also`), waiting for it: the blocking peek, then the one
  // waitpid; while another's status waits unread, poll_ours with sleeps (50 us to 2 ms).
  // kIntr when a signal handler interrupted it.
  Result<std::pair<pid_t, int>> wait_ours(pid_t also);
  // wait_ours that polls for spin_.window() before it sleeps, and teaches spin_ how long it
  // took: the tracee and its raw status. kIntr when a signal of install_interrupt_flag
  // arrived while polling.
  Result<std::pair<pid_t, int>> wait_any(pid_t also = 0);
  // poll_ours until a status comes or spin_.window() has passed since `begin`: the tracee and
  // its raw status, or nullopt. kIntr as for wait_any.
  Result<std::optional<std::pair<pid_t, int>>> poll_status(
      std::chrono::steady_clock::time_point begin, pid_t also = 0);
  // Threads forgotten without their exit status (the other threads of a process that execs):
  // their statuses are still read (as ours()), and dropped.
  void forget_threads(const std::vector<pid_t>& tids);
  void set_spin(int spin_us);
  // Followed process `process` is no longer: its memory and what injections kept of it go.
  void forget_process(pid_t process);
  // Whether a signal is queued for `tid` (or its process) that the mask rt_sigreturn will
  // restore does not block; `tid` is in rt_sigreturn's syscall-entry stop.
  bool signal_due_after_sigreturn(pid_t tid);
  // Whether rt_sigreturn (`tid` in its syscall-entry stop) returns onto a `syscall` instruction:
  // a call the handler interrupted and that restarts.
  bool returns_to_a_call(pid_t tid);
  // A syscall-entry stop after resume_from_sigreturn's PTRACE_SYSEMU: the kernel skips the
  // call, so it is made to run again, traced as after kSyscall.
  Result<void> rerun_emulated_syscall(pid_t tid);
  Thread* thread(pid_t tid);
  void forget();
  // The vfork child `child` execed or ended: its parent runs again.
  void end_vfork(pid_t child);

  pid_t pid_ = -1;
  bool spawned_ = false;
  bool exited_ = false;
  ProcessMemory memory_;  // this process's and the followed processes'
  std::map<pid_t, Thread> threads_;
  std::deque<Event> queued_;
  std::deque<std::pair<pid_t, int>> raw_queue_;  // wait statuses seen by wait_stop for others
  std::map<pid_t, Thread> children_;             // forked children not yet released
  // New tasks of a clone event whose first stop is not read yet, with the process (0: this one)
  // of the thread that cloned them.
  std::map<pid_t, pid_t> announced_;
  std::set<pid_t> unreaped_;  // threads forgotten before their exit status was read
  // Group leaders that ended (pthread_exit) while other threads of their group live on, out of
  // threads_ as gdbserver drops them: a zombie that cannot stop, read registers or be resumed.
  // The next status of one (the group's exit once its last thread is reaped, or the exec of
  // another thread, which takes the leader's id) puts it back in threads_ first.
  std::map<pid_t, Thread> ended_leaders_;
  SyscallInjector injector_;
  std::uint64_t process_changes_ = 0;  // process_changes()
  bool follow_execs_ = false;
  bool hold_forks_ = false;
  SpinWindow spin_{std::chrono::nanoseconds(0)};
};

}  // namespace hwarb::native

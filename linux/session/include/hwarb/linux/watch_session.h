// hwarb/linux/watch_session.h — WatchSession, the one watch API on a real traced process: insert
// and remove watchpoints (and execute breakpoints) of any address, length and count; each is
// placed on the debug registers or on the software path, per watch, through hwarb's arbiter; hand
// in each stop of the process and learn whether it was the session's, which watch, what values.
//
// What a debugger gets (gdb's x86-dregs and LLDB's watchpoint list have the same shape):
//
//     WatchSession session(inferior, options_from(probe()));    // every thread stopped
//     auto w = session.insert({.addr = a, .len = 8, .access = kWatchWrite});
//     //   w->placement: kHardware or kSoftware, w->why: the reason
//     for (;;) {                                                // the debugger's own loop
//       Event ev = ...;   // Inferior::wait(), or waitpid + Inferior::take_status
//       auto v = session.handle(ev);
//       // v->hits: each with the watch id, thread, instruction, access, old -> new value
//       if (!v->handled) ...;   // the debugger's own handling: pass a signal, release a fork
//       // A change while other threads run: stop them, change, resume exactly those.
//       //   auto stopped = inferior.stop_all(ev.tid);  session.remove(w->id);
//       //   for (pid_t t : *stopped) inferior.resume(t, session.resume_mode());
//     }
//     session.uninstall();   // every thread stopped (else the destructor does it)
//
// Placement (numbered as the rules are applied, for each watch in id order):
//  1. mode kSoftware, or the machine does not deliver hardware hits (options.hardware false):
//     software, `why` says which.
//  2. The watch's pieces (aligned 1/2/4/8-byte debug-register ranges: plan_pieces) are reserved
//     in the arbiter as one pinned request of the process, weight = pieces, in a pool of
//     options.slots registers. Admitted: hardware. Refused: software, `why` is the arbiter's
//     explanation (who holds the registers). The reservation is released on remove(), which
//     lets a later insert have the registers.
//  3. A hardware data watch on a page that the software path protects (a software data watch
//     shares the page) is moved to software: the software path performs the accesses it
//     decodes on that page itself, which a debug register never sees.
//  4. When the software path single-steps every instruction (a software watch on a stack),
//     every watch is software: the single-step sees every access anyway, and a breakpoint's
//     trap would end a step.
//  5. The kernel refuses the breakpoints (perf_event_open: another debugger holds registers):
//     the watches that were to be hardware go software, `why` is the kernel's error.
// A watch of mode kHardware that rules 1-5 would make software is refused instead (the
// reason's error: ENODEV for 1, ENOSPC for 2, EBUSY for 3 and 4, the kernel's for 5).
//
// Contract:
//  - insert() and remove() need every thread of the process stopped (Inferior::stop_all, or a
//    stop of each): EBUSY naming `threads` otherwise. Each is all-or-nothing: on any error the
//    watches, their placements and the tracee are as they were. They rebuild the hardware and
//    software paths for the new set (every breakpoint closed and reopened, every protection
//    restored and set again): a watch's old value at its next hit is read at the rebuild. A
//    forked process that was being followed is not watched after a rebuild (its changes are
//    undone, it stays traced and runs on). A stop of the session's own that waits in the
//    Inferior's queue (a hit or a fault that stop_all queued for a thread, which stop_all does
//    not count as one it stopped) stays queued, its thread stopped in it: the caller hands it to
//    handle() as any queued event, which reports its hits of watches still there, or of a watch
//    inserted since on the bytes a hit touched, with its access, in the removed one's place (a
//    debugger that takes its watches out and puts them back, as gdb does at each resume; a
//    hardware hit's values are read at the rebuild, right after the access) and resumes the
//    thread (or
//    leaves it stopped at them: stop_at_hits); a software fault or int3 trap is run again under
//    the watches as they are now. A hardware hit whose SIGTRAP was still pending behind
//    stop_all's interrupt is reported by the next handle(). So a caller stops the threads, makes
//    its changes, resumes exactly the threads stop_all returned, and loses no hit and no thread.
//  - insert() checks the watch: 1 <= len <= 1 GiB; access one of r, w, rw or x alone; the range
//    does not wrap (EINVAL naming the field); `thread` 0 or a thread of the process (ESRCH
//    naming `thread`). An execute watch has len 1.
//  - A thread's own watch (spec.thread, e.g. a thread-local variable's copy) sees that thread's
//    accesses only. On the hardware path it holds debug registers of that thread alone: each
//    thread has options.slots registers for every thread's watches and its own (rule 2 counts
//    them so, per thread: five threads' own one-register watches fit where five watches of every
//    thread do not). On the software path its pages are protected for the whole process and the
//    other threads' accesses are no hits (dropped, never reported or stopped at). A thread that
//    ends leaves its watches covering nothing until they are removed.
//  - handle() takes every event of the process: the hardware path's SIGTRAP stops (TRAP_PERF),
//    the software path's faults, int3 and single-step traps, system-call stops, and the
//    life-cycle events (new threads, forks, execs, exits) that both paths follow. handled: the
//    session did all the event needs (the threads it stopped are resumed, a fork followed or
//    released): the caller does nothing more. ours: besides, the stop was the session's own (a
//    hit, a fault, a trap, a system-call stop): not the program's, nothing to report to a user
//    but the hits. An event not handled is the caller's, exactly as without the session: a
//    signal is passed through by resuming with it (resume_mode()), a fork released or followed,
//    a new thread resumed. Hits come in the order they happened, each once, their id the
//    WatchId; notes tell what happened to a watch's memory (unmapped, mapped again).
//  - resume_mode() is how the caller must resume the threads it resumes (the software path needs
//    system-call stops).
//  - uninstall() (every thread stopped) removes every watch: the tracee then runs unmodified.
//    Stops of the session's own that uninstall() finds queued (see insert()) are dropped:
//    nothing is left to report, and passed on (a detach delivers queued signals) they would
//    kill the program. Their threads stay stopped like every other (stop_all did not count
//    them): a caller that goes on without detaching resumes every stopped thread
//    (Inferior::resume_all), not only those stop_all returned.
//  - The session borrows the Inferior: it must outlive the session (declare the session after
//    it) and stay where it is. The destructor (and a move assignment over a session) undoes what
//    uninstall() undoes, when the session still has watches in a tracee that is still there:
//    running threads are stopped for it and resumed after (with those of the dropped stops: the
//    threads are left running as they were); errors are ignored; then the watchdog is released.
//    A moved-from session has nothing to undo.
//  - The watchdog (watchdog.h): an attached process outlives hwarb, so a session guards it by
//    itself (options.guard kAuto; kOn guards a spawned one too, kOff none). The session starts
//    its Watchdog at construction and owns it; the restore plan (the software path's changes,
//    the processes with breakpoints, and the caller's own: set_caller_plan) is published at
//    every change, and withdrawn while there is nothing to undo (after a successful
//    uninstall(), only the caller's changes are left). The watchdog is released at the first
//    change after the process is gone or detached (an exit handled, set_caller_plan), and by the
//    destructor. A thread in an injected call is told to the watchdog
//    (Inferior::set_injection_observer), and the software path raises its parachute
//    (SoftWatch::deploy_parachute), the hardware path alone its SIGTRAP one (trap_parachute.h). A
//    watchdog that cannot start is no error: the session runs unguarded and guard_error() says why;
//    a publish that fails stops the publishing (the watchdog keeps the last plan it got) and
//    watchdog_error() says why.
// Thread-safety: none; the Inferior's thread only (Linux's ptrace rule). Move-only (see the
// destructor above).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/linux/watchdog.h"

namespace hwarb::native {

// A watch of a session; its value is the id in every hit (WatchHit::id) and note.
enum class WatchId : std::size_t {};

enum class WatchMode : std::uint8_t {
  kAuto,      // hardware where the arbiter and the kernel admit it, else software
  kHardware,  // hardware or an error
  kSoftware,  // software always
};

enum class Placement : std::uint8_t { kHardware, kSoftware };
const char* placement_name(Placement placement);

struct WatchSpec {
  std::uint64_t addr = 0;
  std::uint64_t len = 1;
  unsigned access = kWatchWrite;  // kWatchRead / kWatchWrite (or both), or kWatchExec alone
  WatchMode mode = WatchMode::kAuto;
  pid_t thread = 0;  // 0: every thread's watch; else that thread's own (see the contract)
};

struct WatchInfo {
  WatchId id{};
  WatchSpec spec;
  Placement placement = Placement::kSoftware;
  std::string why;    // why this placement, one line
  int registers = 0;  // debug registers held (hardware)
};

// Whether a session guards its process with a Watchdog (the contract above).
enum class Guard : std::uint8_t {
  kAuto,  // an attached process (it outlives hwarb), not a spawned one (it dies with hwarb)
  kOn,    // any process
  kOff,   // none
};

struct WatchSessionOptions {
  bool hardware = true;     // the machine delivers breakpoint hits (ProbeReport::hits_delivered)
  std::string no_hardware;  // why not, when !hardware (rule 1's reason)
  int slots = 4;            // debug registers a thread gets (ProbeReport::breakpoint_slots)
  // A debugger's stop at a hit: the thread that made a hardware hit, or a software data hit
  // (a fault on a protected page), is left stopped right after the access (StopVerdict::stopped)
  // for the caller to resume. Off: it runs on at once. Software execute watches (int3) and
  // kernel accesses seen at a system call's exit are reported without stopping either way.
  bool stop_at_hits = false;
  // The software path lets the CPU make every access to a watched page (stepped with the page
  // open, SoftWatchOptions::cpu_accesses) from the start, so that another user's breakpoints on
  // those pages see each access; `cpu_accesses_why` says why, for the caller's mode line. The
  // software path turns it on by itself when the program opens a perf breakpoint.
  bool cpu_accesses = false;
  std::string cpu_accesses_why = {};
  Guard guard = Guard::kAuto;
};
// The options a probe report gives: hardware when hits are delivered, its slot count; the CPU
// makes the software path's accesses when another user holds breakpoint slots.
WatchSessionOptions session_options(const ProbeReport& report);

// Where a session of `options` places its watches, one line: "debug registers while they last,
// then software", or "software (why)" (rule 1).
std::string placement_policy(const WatchSessionOptions& options);
// How `watches` are placed: "hardware", "software" or "mixed".
const char* placement_mode(const std::vector<WatchInfo>& watches);
// Why the software watches of `watches` are software: their one reason when they share it and
// the first watch is one of them, else "NAME: reason" for each, joined by "; ". `name` names a
// watch (its reason, and the reasons that name it as "watch #N"); empty: "watch #N".
std::string software_reasons(const std::vector<WatchInfo>& watches,
                             const std::function<std::string(WatchId)>& name = {});

// What handle() made of one event.
struct StopVerdict {
  bool ours = false;
  bool handled = false;
  // stop_at_hits: the thread (event.tid) is stopped after its access; the caller resumes it
  // with resume_mode() and `signal` (a signal of the program the instruction raised, or 0).
  bool stopped = false;
  int signal = 0;
  // handled, and the event is the caller's as well (a system call it catches:
  // set_caller_syscalls): the thread is left stopped, for the caller to handle the event as its
  // own.
  bool caller = false;
  std::vector<WatchHit> hits;
  struct Note {
    WatchId id{};
    std::string text;
  };
  std::vector<Note> notes;
};

class WatchSession {
 public:
  WatchSession(Inferior& inferior, WatchSessionOptions options);
  WatchSession(WatchSession&&) noexcept;
  WatchSession& operator=(WatchSession&&) noexcept;
  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;
  ~WatchSession();

  Result<WatchInfo> insert(const WatchSpec& spec);
  // Several at once, placed in order, with one rebuild; all or none.
  Result<std::vector<WatchInfo>> insert_all(const std::vector<WatchSpec>& specs);
  Result<void> remove(WatchId id);
  // The watches, in id order, with their placements as they are now.
  std::vector<WatchInfo> watches() const;
  std::optional<WatchInfo> find(WatchId id) const;

  Result<StopVerdict> handle(const Event& event);
  Resume resume_mode() const;
  // resume_mode() for thread `tid` (SoftWatch::resume_mode(tid): a system call the caller
  // catches, under the single-step method, runs from its entry stop to its exit stop).
  Resume resume_mode(pid_t tid) const;
  // The caller single-steps thread `tid` (0: none; set before each resume). A fault of the
  // software path that the stepped instruction takes then ends the step there: the thread stays
  // stopped after the instruction (StopVerdict::stopped, with no hits when the instruction
  // touched no watched byte) instead of running on (stop_at_hits only). A stop of it that
  // insert() or remove() kept (a fault or an int3 before its instruction ran) resumes it with a
  // step, as the caller did. The set: several threads stepped at once (a debugger's non-stop
  // mode), each as above.
  void set_stepping(pid_t tid);
  void set_stepping(std::set<pid_t> threads);
  // The system calls the caller catches (an empty set: all; nullopt: none): at a system-call
  // stop of one of them that the software path takes for itself, the thread is left stopped
  // and the verdict says `caller` (the caller reports the stop as it would without a watch).
  void set_caller_syscalls(std::optional<std::set<long>> numbers);
  Result<void> uninstall();
  // The session's own stops kept for the threads of `process` (its hits, faults and traps that
  // stop_all or a change queued for them, and hits pending a report) are dropped, from the
  // session and from the Inferior's queue: a process about to be detached (or killed) would be
  // delivered their signals. Every other event stays queued, in its order.
  void drop_own_stops(pid_t process);

  // Hits of threads that block SIGTRAP, which the hardware path's breakpoints cannot stop
  // (HardWatchEngine::surface_blocked_hits): each such thread is stopped and its hit's stop put
  // at the front of the Inferior's queue, for the caller's next wait to hand to handle(). A
  // caller calls it between events while threads run, at most every 100 ms or so
  // (has_hardware_watches(): only then is there anything to look for). How many were queued.
  Result<std::size_t> surface_blocked_hits();
  [[nodiscard]] bool has_hardware_watches() const;
  // Descriptors readable at each hardware hit (the perf rings): a caller that waits on them too
  // looks for held hits at once rather than at its next 100 ms.
  [[nodiscard]] std::vector<int> wake_fds() const;

  // "2 debug registers" / "page protection (1 page)" / "2 debug registers + int3": how the
  // watches are taken now; empty without watches.
  std::string describe() const;
  // The options the session runs with (with what it learnt since: cpu_accesses).
  const WatchSessionOptions& options() const;
  // Breakpoint events open (hardware path) and the software path's statistics (faults).
  std::size_t perf_events() const;
  std::uint64_t software_faults() const;
  // The bytes the software path changed in the process (int3 of execute watches), with their
  // originals: a debugger shows memory through them.
  std::vector<RestoreByte> planted_bytes() const;

  // Debug registers held by hardware watches that may move to software (mode kAuto).
  [[nodiscard]] int yieldable_registers() const;
  // Gives the registers of the last such watch up to `who` (register_yield.h): it goes on in
  // software, its `why` naming `who`, and the registers stay reserved for the program in the
  // arbiter, so no later watch takes them back; a watch sharing a page with it follows it (rule
  // 3). Every thread stopped (EBUSY naming `threads`); all or nothing. The watch moved, nullopt
  // when there was none.
  Result<std::optional<WatchInfo>> yield_registers(const std::string& who);
  // Debug registers held by hardware watches, movable or not.
  [[nodiscard]] int held_registers() const;
  // Debug registers given up so far.
  [[nodiscard]] int registers_given_up() const;

  // placement_policy() of the session's options.
  std::string describe_placement() const;

  // The watchdog that guards the process now, or null: options.guard kOff, a spawned process
  // under kAuto, a watchdog that could not start (guard_error()), or one released since (the
  // process gone or detached). For tests and diagnostics (Watchdog::published_plan).
  const Watchdog* watchdog() const;
  // Why the watchdog could not start (the session runs unguarded).
  const std::optional<Error>& guard_error() const;
  // Why a publish failed (the watchdog holds the last plan it got and gets no more).
  const std::optional<Error>& watchdog_error() const;
  // Changes of the caller's own to the program that the watchdog undoes with the session's: the
  // processes to stop and restore even without a watch, the bytes it planted (a debugger's int3
  // breakpoints, with their originals). Published with the session's plan at once when it
  // differs from the last one set, and with every change of the session's; set it again after
  // each change of the caller's. Setting it while there is no watchdog only keeps it.
  void set_caller_plan(RestorePlan plan);
  // What the watchdog undoes now: the session's changes and the caller's.
  [[nodiscard]] RestorePlan restore_plan() const;

  // Hits and notes go to `observer` as they are found instead of into StopVerdict (a hardware
  // hit while its thread is still stopped, so that the observer may read the process then);
  // nullptr: back into StopVerdict. The observer must outlive its use.
  void report_to(WatchObserver* observer);

  struct State;  // in watch_session.cpp

 private:
  std::unique_ptr<State> state_;
};

// A WatchSession as an Engine of run_target: hits and notes go to the observer as they are
// found (report_to; note ids are WatchIds), finish() uninstalls, done() is the observer's.
class WatchSessionEngine final : public Engine {
 public:
  WatchSessionEngine(WatchSession& session, WatchObserver& observer)
      : session_(session), observer_(observer) {
    session_.report_to(&observer_);
  }
  ~WatchSessionEngine() override { session_.report_to(nullptr); }
  WatchSessionEngine(const WatchSessionEngine&) = delete;
  WatchSessionEngine& operator=(const WatchSessionEngine&) = delete;

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return session_.resume_mode(); }
  Result<void> finish() override { return session_.uninstall(); }
  bool done() const override { return observer_.done(); }
  void tick() override {
    ignore_error(session_.surface_blocked_hits(), "the next tick looks again");
  }
  bool wants_wakeups() const override { return session_.has_hardware_watches(); }
  std::vector<int> wake_fds() const override { return session_.wake_fds(); }
  int yieldable_registers() const override { return session_.yieldable_registers(); }
  int held_registers() const override { return session_.held_registers(); }
  // session.yield_registers(who), the moved watch's new placement told as a note of its own.
  Result<int> yield_registers(const std::string& who) override;

 private:
  WatchSession& session_;
  WatchObserver& observer_;
};

}  // namespace hwarb::native

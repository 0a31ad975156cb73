// hwarb/linux/gdb_server.h — `hwarb gdbserver`: the GDB remote-protocol server (gdb::Server,
// hwarb/gdb/server.h) over a real process: GdbTarget, the gdb::Target of an Inferior and a
// WatchSession, and GdbConnection, the client's file descriptors. GdbServer puts the three
// together. gdb, lldb and the IDEs built on them debug a real process through it, with
// watchpoints of any address, length and count placed by the session (debug registers while the
// arbiter admits them and this machine delivers their hits, the exact software path otherwise).
//
// What GdbTarget does (the protocol is gdb::Server's; what it serves is listed in server.h):
//  1. Memory: the program's real bytes — an int3 planted by the target or by the software watch
//     is shown as the byte it replaced, and a write over one keeps the int3 in place.
//  2. Breakpoints: Z0 an int3; Z1 a debug register through the session where the machine
//     delivers hits and one is free, else an int3 reported as hwbreak; Z2/Z3/Z4 a watch of the
//     session (any address and length). Conditions (agent expressions) are evaluated at each
//     hit while the session has no watch: a breakpoint none of whose conditions holds is
//     stepped over without a stop (the other threads stopped meanwhile). A Z1 with conditions
//     is an int3. With watches, or where a condition cannot be evaluated, the stop is reported
//     and gdb evaluates the condition itself.
//  3. Execution: a signal of the program is reported and delivered when the client resumes
//     with it. A thread's int3 trap queued by a stop (stop_all) has its pc set back onto the
//     breakpoint (rewound), and is dropped if the breakpoint is gone when it is taken; the
//     breakpoint stop reported is drawn among the threads at breakpoints (no thread starves
//     another); a resume's threads that hold an event run once it is handled (deferred); the
//     trap of a step asked before the client resumed the thread otherwise is dropped.
//  4. Processes, when the client announced them (multiprocess+, fork-events+, vfork-events+):
//     a fork or vfork stops the parent with the child traced as a process of its own until the
//     client detaches or kills it: its int3s are its own (a copy of its parent's at the fork);
//     watches (Z2-Z4) are the first process's only. When the first process ends or is detached,
//     a remaining child takes its place. Without these features a child is freed of the int3s
//     and let go at once. An exec drops the old image's int3s; `catch syscall` stops at the
//     system calls asked for (an execve's return reported before anything runs again).
//  5. Leaving: every int3, protection and register of the session is undone first; a detached
//     program runs on unmodified. Extended mode's processes (GdbLaunch): each vRun or vAttach
//     makes an Inferior with a WatchSession of its own, owned by the target.
//  6. Killed without its cleanup (SIGKILL): an attached process is guarded by its session's
//     watchdog (WatchSession, options.guard), to which the target adds the process and its
//     int3 bytes (WatchSession::set_caller_plan) after every packet and event: the watchdog
//     stops the program, takes out the int3s and the software watch's changes, and lets it run.
//  7. Non-stop mode (gdb::Target's contract): a stop leaves its thread alone stopped; a new
//     thread is reported stopped; vCont;t, a watch's change, and leaving one process stop every
//     running thread for the moment and resume exactly those (the software path's and a false
//     condition's steps over do the same); a watch's removal is applied at once; every thread
//     stepped for the client is the session's (WatchSession::set_stepping).
//
// Contract:
//  - The Inferior is stopped (every thread) when serve() starts, as spawn() and attach() leave
//    it; the session has no watch yet.
//  - A server made without a process (the second constructor) has none until a vRun or vAttach.
//  - serve() returns as gdb::Server::serve() says; the process is then killed when spawned,
//    detached when attached (after the cleanup), or, when the client detached, runs on (a
//    spawned process outlives the server: Inferior::outlive_tracer).
//  - Reads from in_fd, writes to out_fd (the same socket, or a pipe pair for --stdio). While
//    the process is stopped, the wait for the client's next packet polls in_fd for a
//    SpinWindow (adaptive, up to the Inferior's spin_max()) before it sleeps: gdb
//    answers each reply within tens of microseconds, and a wake-up across CPUs costs ~40 us here.
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/gdb/agent_expr.h"
#include "hwarb/gdb/server.h"
#include "hwarb/gdb/target.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/register_yield.h"
#include "hwarb/linux/spin_window.h"
#include "hwarb/linux/watch_session.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

using GdbServerEnd = gdb::ServerEnd;

// What extended mode's vRun and vAttach make: each new process is an Inferior (spawned with
// `inferior`, or attached) with a WatchSession of `watches`, owned by the server.
struct GdbLaunch {
  std::vector<std::string> program;  // the command line's PROG ARGS: a vRun without PROG's
  std::vector<std::string> wrapper;  // gdbserver's --wrapper: each program runs through it
  InferiorOptions inferior;          // a vRun's spawn (QDisableRandomization sets disable_aslr)
  // gdbserver's startup-with-shell (its --[no-]startup-with-shell, gdb's QStartupWithShell): the
  // program runs as `SHELL -c 'exec [WRAPPER...] PROG ARGS'` (startup_shell()), each word escaped.
  bool startup_with_shell = true;
  WatchSessionOptions watches;
  bool multi = false;  // gdbserver's --multi: a disconnect leaves the server serving
  bool once = false;   // gdbserver's --once: a disconnect ends the server even so
  // gdbserver's --disable-packet (gdb::ServerOptions::disabled_packets).
  std::set<std::string> disabled_packets;
  // gdbserver's --debug, --remote-debug, --debug-format=timestamp (gdb::ServerOptions).
  bool debug = false;
  bool remote_debug = false;
  bool debug_timestamps = false;
};

// gdbserver's way of starting a program: `wrapper` (none: the program itself) with `argv`
// after it, spawned (Inferior::spawn), then run until the wrapper execs the program, which is
// then stopped at its first instruction; signals on the way are delivered. With `shell` (a path;
// empty: none) the shell runs first, as `SHELL -c 'exec WORDS'` (shell_command), and execs the
// wrapper or the program itself. Inferior::spawn's errors; ESRCH naming the wrapper when it ends
// before an exec; ECHILD "during startup program exited with code N" when the shell (or the
// wrapper) exits first, as gdbserver says it (a shell that finds no program exits 127).
Result<Inferior> spawn_program(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& argv, const InferiorOptions& options,
                               const std::string& shell = {});
// The shell gdbserver starts programs with: $SHELL, or /bin/sh when it is unset or empty.
std::string startup_shell();
// `exec WORD...` for `SHELL -c`, each word as gdbserver escapes a program's arguments for its
// shell: a backslash before each character special to a Unix shell, a newline quoted, an empty
// word as ''. The shell then runs exactly these words: no expansion, no redirection.
std::string shell_command(const std::vector<std::string>& words);

// The client's connection over file descriptors (a socket, or a pipe pair).
class GdbConnection final : public gdb::Connection {
 public:
  GdbConnection(int in_fd, int out_fd, std::chrono::nanoseconds spin_max)
      : in_fd_(in_fd), out_fd_(out_fd), client_spin_(spin_max) {}
  // A new client (the lost mark cleared).
  void reset(int in_fd, int out_fd);
  // The longest poll for the client's next packet (the process's Inferior::spin_max()).
  void set_spin_max(std::chrono::nanoseconds max) { client_spin_ = SpinWindow(max); }

  Result<Read> read(bool block, std::string& out) override;
  Result<void> write(std::string_view bytes) override;
  bool lost() const override { return client_lost_; }
  bool interrupt_requested() const override;
  int poll_fd() const override { return in_fd_; }
  // The server's log lines (`monitor set debug 1`): to standard error, or to `fd` once given
  // one (gdbserver's --debug-file; the connection owns it then).
  void log(const std::string& line) override;
  void log_to(Fd fd) { log_fd_ = std::move(fd); }
  // While a blocking read waits for the client, `serve` runs whenever one of the descriptors
  // `fds` returns has input (the program's breakpoint requests, GdbTarget::request_fd).
  void serve_meanwhile(std::function<std::vector<int>()> fds, std::function<void()> serve) {
    meanwhile_fds_ = std::move(fds);
    meanwhile_ = std::move(serve);
  }
  // Where the server's own output goes (an agent-style dprintf's text): standard output, as
  // gdbserver's, or standard error when standard output is the connection (stdio).
  int output_fd() const;

 private:
  int in_fd_;
  int out_fd_;
  SpinWindow client_spin_;
  bool client_lost_ = false;                         // a read or write of the connection failed
  Fd log_fd_;                                        // none: standard error
  std::function<std::vector<int>()> meanwhile_fds_;  // see serve_meanwhile
  std::function<void()> meanwhile_;
};

// gdb::Target over an Inferior and a WatchSession (the caller's, or its own once a start or an
// attach made them).
class GdbTarget final : public gdb::Target {
 public:
  GdbTarget(Inferior& inferior, WatchSession& session, GdbConnection& connection);
  explicit GdbTarget(GdbConnection& connection);
  ~GdbTarget() override;

  void launch_with(GdbLaunch launch) { launch_ = std::move(launch); }
  // The first publish to a session's watchdog that failed (WatchSession::watchdog_error).
  const std::optional<Error>& watchdog_error() const { return watchdog_error_; }

  bool has_process() const override { return inferior_ != nullptr; }
  gdb::Tid pid() const override { return inferior_->pid(); }
  bool spawned() const override { return inferior_->spawned(); }
  // Every traced thread but a vfork's child whose parent's vfork event is not reported yet:
  // gdbserver hides it so (gdb would take it for a new thread of the process, and a wildcard
  // resume would run it).
  std::vector<gdb::Tid> threads() const override;
  gdb::Tid group_of(gdb::Tid tid) const override { return inferior_->group_of(tid); }
  gdb::Tid process_of(gdb::Tid tid) const override { return inferior_->process_of(tid); }
  bool is_stopped(gdb::Tid tid) const override { return inferior_->is_stopped(tid); }
  bool end_due() const override {
    return inferior_ != nullptr && !exited_ && inferior_->exit_due();
  }
  void set_features(const gdb::ClientFeatures& features, bool announced) override;
  void set_catch_syscalls(std::optional<std::set<long>> numbers) override;
  void set_program_signals(std::set<int> signals) override {
    program_signals_ = std::move(signals);
  }
  void set_event_log(std::function<void(const std::string&)> log) override {
    log_ = std::move(log);
  }
  Result<x86::Regs> general_registers(gdb::Tid tid) override { return inferior_->get_regs(tid); }
  Result<gdb::Registers> read_registers(gdb::Tid tid, bool ext) override;
  Result<void> write_registers(gdb::Tid tid, const gdb::Registers& now,
                               const gdb::Registers& before) override;
  Result<std::vector<std::uint8_t>> read_memory(gdb::Tid process, std::uint64_t addr,
                                                std::uint64_t len) override;
  Result<void> write_memory(gdb::Tid process, std::uint64_t addr,
                            const std::vector<std::uint8_t>& bytes) override;
  Result<void> insert_point(gdb::Tid process, gdb::PointType type, std::uint64_t addr,
                            std::uint64_t len, gdb::PointAgent agent) override;
  Result<void> remove_point(gdb::Tid process, gdb::PointType type, std::uint64_t addr,
                            std::uint64_t len) override;
  Result<std::optional<gdb::StopEvent>> resume(
      const std::vector<gdb::ResumeAction>& actions) override;
  Result<gdb::Waited> wait(int client_fd) override;
  // One turn of wait() without sleeping (for GdbInferiors, which sleeps for several targets):
  // a stop, or none (nothing ready, or events that made no stop). Between two events that made
  // no stop it returns as soon as `client_fd` (-1: none) has input, as wait() does.
  Result<gdb::Waited> poll_events(int client_fd = -1);
  // All-stop mode: every thread stopped, nothing reported (another process's stop is being
  // reported: gdbserver stops every process then). Events that come meanwhile stay queued.
  Result<void> halt();
  // Whether `tid` is a thread of this target's processes; whether `process` is one of them.
  bool owns_thread(gdb::Tid tid) const;
  bool owns_process(gdb::Tid process) const;
  // The process ended and its end was reported (W/X): the target only waits to be dropped.
  bool ended() const { return inferior_ != nullptr && exited_; }
  // While threads run, a wait looks every kBlockedHitLookMs for hits held by threads that block
  // SIGTRAP (WatchSession::surface_blocked_hits) when this is true (hardware watches are in).
  static constexpr int kBlockedHitLookMs = 10;
  bool looks_for_blocked_hits() const {
    return session_ != nullptr && session_->has_hardware_watches();
  }
  // No process left to serve: none yet, its end reported, or detached or killed whole (an end
  // read but not reported yet, still queued, is still to serve).
  bool gone() const {
    return inferior_ == nullptr || exited_ ||
           (!inferior_->alive() && inferior_->queued_events().empty() && held_.empty());
  }
  // The program's own requests for debug registers (register_yield.h): a spawned process is
  // armed as the first watch takes a register (its perf_event_open and ptrace writes of debug
  // registers are then held until served, so that hwarb gives a watch's registers up to it and
  // no access is missed while the program's breakpoint is installed). The listener to poll (-1:
  // not armed), and the service of every request pending now (between events, or while the
  // server waits for the client: a thread of a process the client let go asks too).
  int request_fd() const { return requests_ ? requests_->listener() : -1; }
  Result<void> serve_requests();
  // A thread of it runs (resumed, not stopped yet).
  bool runs() const { return inferior_ != nullptr && !exited_ && !running_threads().empty(); }
  const std::optional<GdbLaunch>& launch() const { return launch_; }
  const std::vector<std::string>& last_program() const { return last_program_; }
  Result<gdb::StopEvent> interrupt() override;
  Result<void> set_non_stop(bool on) override;
  Result<void> interrupt_process() override;
  Result<gdb::ServerEnd> finish(gdb::ServerEnd::How how) override;
  Result<void> detach_process(gdb::Tid process) override;
  Result<void> kill_process(gdb::Tid process) override;
  Result<gdb::ServerEnd> drop_process(gdb::ServerEnd::How how) override;
  bool can_start() const override { return launch_.has_value(); }
  Result<gdb::Tid> start(std::vector<std::string> argv) override;
  Result<void> restart() override;
  Result<gdb::Tid> attach(gdb::Tid pid) override;
  std::optional<gdb::StopEvent> attach_signal(gdb::Tid process) override;
  void set_disable_randomization(bool on) override { launch_->inferior.disable_aslr = on; }
  void set_startup_with_shell(bool on) override { launch_->startup_with_shell = on; }
  // A leading ~ is the server's $HOME, as gdbserver expands it.
  void set_working_directory(const std::string& dir) override;
  void reset_environment() override { launch_->inferior.environment.reset(); }
  void set_environment(const std::string& name_value) override;
  void unset_environment(const std::string& name) override;
  Result<std::string> auxv(gdb::Tid process) override;
  Result<std::string> libraries_svr4(gdb::Tid process, bool without_main_lm) override;
  Result<std::string> exec_file(gdb::Tid process) override;
  Result<std::string> siginfo(gdb::Tid tid) override;
  Result<std::size_t> write_siginfo(gdb::Tid tid, std::uint64_t offset,
                                    std::string_view data) override;
  std::string thread_name(gdb::Tid tid) override;
  Result<gdb::OsData> os_data(const std::string& name) override;
  Result<gdb::MemoryRegion> memory_region(std::uint64_t addr) override;
  Result<std::uint64_t> tls_address(gdb::Tid tid, std::uint64_t offset, std::uint64_t lm) override;
  std::string describe_watches() override;
  std::string describe_slots() override;
  Result<int> open_file(const std::string& path, unsigned flags, unsigned mode) override;
  bool has_file(int fd) const override { return files_.contains(fd); }
  Result<void> close_file(int fd) override;
  Result<std::size_t> pread_file(int fd, std::uint64_t offset,
                                 std::vector<std::uint8_t>& out) override;
  Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::string_view data) override;
  Result<gdb::FileStatus> stat_file(int fd) override;
  Result<void> unlink_file(const std::string& path) override;
  Result<std::string> read_link(const std::string& path) override;
  void close_files() override { files_.clear(); }
  void served() override;

 private:
  struct Breakpoint {
    std::uint8_t original = 0;
    bool software = false;  // Z0
    bool hardware = false;  // Z1 taken as an int3
    // The conditions and commands of each (ConditionalBreakpoints, BreakpointCommands): where
    // one condition holds (or there is none) the commands run, and it stops unless it has
    // commands.
    gdb::PointAgent software_agent;
    gdb::PointAgent hardware_agent;
  };
  using Int3Map = std::map<std::uint64_t, Breakpoint>;
  struct WatchKey {
    char type = '2';  // Z type: '1' (hardware execute), '2' write, '3' read, '4' access
    std::uint64_t addr = 0;
    std::uint64_t len = 0;
    auto operator<=>(const WatchKey&) const = default;
  };
  // What an int3 trap is: not one of ours (the program's own), or ours, with the stop to report
  // (none: the trap was handled, the thread runs on).
  struct Trap {
    bool ours = true;
    std::optional<gdb::StopEvent> stop;
  };

  Result<void> flush_removed();
  // unplanted_ after a system call that may have mapped or unmapped memory (`nr`, at its exit
  // stop, in `process`): each address now mapped gets its int3; each planted hardware-only int3
  // whose memory is gone goes back to unplanted_.
  Result<void> follow_mappings(pid_t process, long nr);
  // Non-stop mode: resume() of explicit threads, and the stop of a thread the client asked to
  // stop (vCont;t) once it is stopped (nullopt: none yet).
  Result<std::optional<gdb::StopEvent>> resume_each(const std::vector<gdb::ResumeAction>& list);
  Result<std::optional<gdb::StopEvent>> requested_stop();
  // Non-stop mode: `threads` stop (those running), every other thread runs on as it ran (a
  // thread whose own event stopped it first keeps it queued).
  Result<void> stop_only(const std::set<pid_t>& threads);
  // The threads running now (before a stop_all: those to resume after it).
  std::set<pid_t> running_threads() const;
  // Whether thread `tid` is stepped for the client (all-stop: the one stepping_).
  bool stepping(pid_t tid) const;
  // Runs `change` with every thread stopped (the session's insert and remove need it): in
  // non-stop mode the threads it stopped run on after it, as the session's watches now ask.
  Result<void> with_all_stopped(const std::function<Result<void>()>& change);
  // A thread stopped meanwhile (a stop_all) runs on as the target runs it: a step of the
  // client's as a step, else in run_mode; one whose own event came stays stopped with it queued.
  Result<void> run_on(pid_t tid);
  // detach_process and kill_process with every thread stopped.
  Result<void> detach_stopped(gdb::Tid process);
  Result<void> kill_stopped(gdb::Tid process);
  Result<std::optional<gdb::StopEvent>> on_event(const Event& event);
  // The int3 trap of a thread that stopped at a breakpoint of ours (SIGTRAP, SI_KERNEL, the pc
  // one past it) (see rewound_).
  Result<Trap> on_breakpoint_trap(const Event& event);
  // Stops every thread but `tid` (the thread whose stop is reported; -1: none).
  Result<void> stop_others(pid_t tid);
  // After thread `tid` stopped at the breakpoint `at` of ours and the others were stopped: the
  // thread whose breakpoint stop is reported, drawn among `tid` and the threads stopped at a
  // breakpoint of ours too (their traps queued), as gdbserver draws among its threads with
  // events so that no thread starves another. The others' traps stay held (rewound_).
  pid_t pick_reported(pid_t tid, std::uint64_t at);
  // Whether the breakpoint `tid` stopped at is to be reported: as Z0 or as Z1 it has no
  // commands and either no condition, one of its conditions holds for `tid`, or one cannot be
  // evaluated (gdb evaluates it again). `run`: the commands of each whose condition holds run
  // (their printf text to the connection's output_fd); false: the decision only, nothing printed.
  bool breakpoint_stops(pid_t tid, const Breakpoint& bp, bool run);
  // Whether the client catches system call `nr`.
  bool catches(long nr) const { return caught_ && (caught_->empty() || caught_->contains(nr)); }
  static constexpr std::size_t kAgentStringMax = 64 * 1024;  // printf's %s reads at most
  // A breakpoint whose conditions are all false: thread `tid` (stopped on it, pc at `at`) runs
  // its instruction with the int3 out while every other thread is stopped, then runs on as the
  // client asked. An event of the step other than its trap (a signal, an exit, a fork, an exec)
  // is queued for the main loop, the int3 back in place first (but for an exec).
  Result<void> step_over(pid_t tid, std::uint64_t at);
  // The process's own exec (thread `tid` now the leader): its stop. `running`: the session
  // resumed the thread already.
  Result<gdb::StopEvent> exec_stop(pid_t tid, bool running);
  // A fork or vfork the client takes as an event: the child traced as a process, its stop.
  Result<gdb::StopEvent> fork_stop(const Event& event);
  // Range stepping (vCont;r): the range of a resumed thread's action `a` (of thread `tid`, or
  // a.tid when 0), kept while the thread steps through it; any other action drops it.
  void set_step_range(const gdb::ResumeAction& a, pid_t tid = 0);
  // At the end of one step of `tid`: true when the thread is still in its range, at no
  // breakpoint of the client's, and was made to step once more (nothing to report).
  Result<bool> steps_on_in_range(pid_t tid);
  // After a stop_all: a SIGTRAP raised in a thread as the interrupt stopped it (an int3 hit an
  // instant before) is still pending, not reported; left so, it would be delivered once the
  // client resumed the thread, after the int3 had gone, with the pc one byte into the restored
  // instruction (SIGILL, or a wrong instruction run). Each thread `stopped` reports it now: the
  // event is queued, for rewind_queued_traps.
  Result<void> surface_traps(const std::vector<pid_t>& stopped);
  // After a stop_all: the queued int3 traps of other threads get their pc set back onto the
  // breakpoint now (rewound_), so that every stopped thread shows where it is.
  Result<void> rewind_queued_traps();
  // The queued int3 traps of rewound_ threads are dropped (the int3s are being taken out).
  void drop_rewound_traps();
  // The queued trap of each stepped_ thread of `process` (0: every one) is dropped: the step was
  // the server's, its trap no signal of the program (a detach would deliver it: SIGTRAP).
  void drop_own_step_traps(gdb::Tid process);
  // Takes out of thread `tid`'s queued events those `which` selects (at most `limit`), the
  // others queued again in their order: the ones taken, oldest first.
  std::vector<Event> take_queued(pid_t tid, const std::function<bool(const Event&)>& which,
                                 std::size_t limit = SIZE_MAX);
  // Runs a thread whose held event was dropped as the last resume asked (deferred_).
  Result<void> run_as_asked(pid_t tid);
  // Records the memory operands of the instruction `tid` is about to step (stepped_watch).
  void begin_step(pid_t tid);
  // The hardware-placed watch the instruction just stepped touched: its stop, if any.
  std::optional<gdb::StopEvent> stepped_watch(pid_t tid) const;
  // The signal events a resume held for the threads it left stopped, queued again.
  void requeue_held();
  // Before a detach (of `process`, 0: every one): each signal a stop reported and no resume
  // delivered yet, when the client passes it (QProgramSignals), queued for the detach to deliver.
  void requeue_program_signals(gdb::Tid process);
  Result<gdb::ServerEnd> finish_once(gdb::ServerEnd::How how);
  // Every watch of the session rebuilt (one taken out and put back): a followed fork is left
  // unwatched, its pages and bytes as the program made them (WatchSession's contract).
  Result<gdb::Waited> wait_events(int client_fd, bool block);
  std::chrono::steady_clock::time_point last_look_{};  // wait_events' last look for held hits
  Result<void> rebuild_watches();
  // `infos` (removed from the session) inserted again, the client's watches renumbered to them.
  Result<void> insert_again(const std::vector<WatchInfo>& infos);
  // The client's watch `from` is the session's `to` now.
  void renumber(WatchId from, WatchId to);
  // How thread `tid` runs on when the client does not step it: the session's way for it,
  // through system-call stops while `catch syscall` is on.
  Resume run_mode(pid_t tid) const;
  void take_process(Inferior&& inferior);
  // The Inferior's fork handling as the client's events want it: the parents held at their
  // fork (and a vfork's end), and followed children kept traced across their execs.
  void follow_children();
  // The process and its int3 bytes to the session's watchdog (WatchSession::set_caller_plan).
  void publish_plan();
  // Arms requests_ once the session holds a register in a spawned process (every thread
  // stopped); a failure is kept in requests_error_ (told by `monitor slots`), not retried.
  void arm_requests();
  // Hands requests_ over to its continuer (the first process let go), never armed again.
  void release_requests();
  class YieldEngine;

  GdbConnection& connection_;
  // The process served (nullptr: none, in extended mode) and its session: the caller's, or
  // own_inferior_ and own_session_ once a start or an attach made them.
  Inferior* inferior_ = nullptr;
  WatchSession* session_ = nullptr;
  std::unique_ptr<Inferior> own_inferior_;
  std::unique_ptr<WatchSession> own_session_;
  std::optional<RegisterYield> requests_;  // see request_fd()
  std::optional<Error> requests_error_;    // why the process could not be armed
  std::optional<GdbLaunch> launch_;
  // The program and arguments of the last vRun (gdbserver's program_path and program_args).
  std::vector<std::string> last_program_;
  std::function<void(const std::string&)> log_;  // events (`monitor set debug`)
  bool multiprocess_ = false;
  bool fork_events_ = false;
  bool vfork_events_ = false;
  bool no_resumed_ = false;  // the client takes N (gdbserver's no-resumed stop reply)
  std::set<pid_t> resumed_;  // all-stop: the threads the client's last resume let run
  pid_t stepping_ = 0;       // the thread of a step in progress (non-stop mode: the last one)
  bool non_stop_ = false;
  std::set<pid_t> steps_;           // non-stop mode: threads in a step for the client
  std::set<pid_t> stop_requested_;  // non-stop mode: vCont;t asked, its stop not reported yet
  // The process whose threads the last resume ran by default (a vCont action without a thread:
  // 0 every process), nullopt when it ran only threads it named: a new thread runs only then.
  std::optional<pid_t> wildcard_process_;
  std::map<pid_t, std::vector<x86::MemRef>> step_accesses_;  // a step's memory operands
  bool exited_ = false;                                      // the process ended
  gdb::ServerEnd end_;                                       // how it ended
  // Threads single-stepped for the client whose step's trap has not been reported: a trap that
  // comes after the client resumed such a thread otherwise (another thread's stop held it) is
  // dropped, as gdbserver drops a single-step stop of a thread resumed with `c`.
  std::set<pid_t> stepped_;
  std::uint64_t pick_state_ = 0x9e3779b97f4a7c15ULL;  // pick_reported's generator
  std::set<std::uint64_t> lifted_;  // addresses of int3s of ours taken out (on_breakpoint_trap)
  // An int3 of ours at `at` taken out since a thread hit it (lifted_, and the text there is no
  // int3 any more: one of the program's own would be): that trap is no stop.
  bool lifted_int3(std::uint64_t at);
  std::map<pid_t, int> pending_signal_;  // reported to the client, delivered if it resumes with it
  // Threads a resume asked to run that held an event first (queued by a stop_all), with what
  // the resume asked: each runs once its event is handled, if the event did not resume it or
  // stop the process.
  struct Asked {
    bool step = false;
    int signal = 0;
  };
  std::map<pid_t, Asked> deferred_;
  // Signals (and fork events the client takes) held for threads the last resume left stopped:
  // queued again, in their order, when its stop is reported (gdb stepping one thread over a
  // breakpoint must hear from that thread only).
  std::vector<Event> held_;
  // Threads whose queued int3 trap had its pc set back at a stop_all: the breakpoint's address.
  // When the trap is taken, it is reported if that breakpoint is still there and the pc still
  // on it; otherwise (gdb deleted the breakpoint or moved the thread meanwhile) it is dropped
  // and the thread runs as asked, executing the instruction for real — as gdbserver discards
  // a pending breakpoint stop whose breakpoint is gone.
  std::map<pid_t, std::uint64_t> rewound_;
  // Threads range stepping (vCont;r): [start, end) each.
  std::map<pid_t, std::pair<std::uint64_t, std::uint64_t>> step_ranges_;
  std::set<pid_t> forked_;  // child processes reported by fork/vfork stops, still traced
  // `catch syscall` (QCatchSyscalls): nullopt off; the system calls to report (empty: all).
  std::optional<std::set<long>> caught_;
  std::optional<std::set<int>> program_signals_;  // QProgramSignals (nullopt: not told)
  // The thread of the last exec stop, while it has not run since (0: none): its execve's return
  // is still to report to a client that catches it.
  pid_t execve_return_ = 0;
  // The int3s planted, per process (thread group; a vfork child writes its parent's memory).
  std::map<pid_t, Int3Map> int3_;
  // Hardware breakpoints taken as int3s on addresses no mapping holds yet (a library not loaded,
  // gdb's `hbreak *0`), per process, with their conditions: a debug register takes any address,
  // so the Z1 is accepted and its int3 planted at the mmap or mremap that maps the address. A
  // munmap of a planted one takes it back here. While there are any, the process's threads run
  // with system-call stops (run_mode), for those calls' exits.
  std::map<pid_t, std::map<std::uint64_t, gdb::PointAgent>> unplanted_;
  std::map<WatchKey, WatchId> watches_;
  std::set<WatchKey> removed_;  // z packets not applied yet (flush_removed)
  std::map<WatchId, char> watch_type_;
  std::map<int, Fd> files_;  // vFile descriptors
  std::optional<Error> watchdog_error_;
};

// gdb::Target over several processes at once (gdb's inferiors on one extended-remote
// connection): a GdbTarget per process the client started or attached (each with its Inferior
// and WatchSession, its forked children among them). The first target stays for the life of the
// server (it holds the launch settings and the host files); a vRun or vAttach while a process
// lives (multiprocess+) adds a target beside it, which goes once its process has ended and that
// end was reported, or once it is detached or killed.
//  1. A call naming a thread or a process goes to the target that has it; one naming neither
//     (host files, os data, the launch settings) to the first.
//  2. All-stop mode: a resume's actions go to the targets they name (a wildcard to every one,
//     pPID.-1 to PID's); a target named by none stays stopped. A stop of one target stops the
//     others (GdbTarget::halt), as gdbserver stops every process; an interrupt is reported by
//     the first target with a running thread.
//  3. The wait: with one target, its own wait. With more, Inferior::status_fd() is drained,
//     each target polled once (GdbTarget::poll_events), then the server sleeps on that fd and
//     the client's: no status is missed (see Inferior::poll_event). All-stop: only the targets
//     the last resume named are polled. A target whose threads keep making events that stop
//     nothing (false conditions) yields to the client as soon as it speaks.
//  4. A process's end is reported with the others remaining (StopEvent::remains); a no-resumed
//     stop (N) only once no target has a thread running.
// Thread-safety: none, as GdbTarget.
class GdbInferiors final : public gdb::Target {
 public:
  GdbInferiors(Inferior& inferior, WatchSession& session, GdbConnection& connection);
  explicit GdbInferiors(GdbConnection& connection);
  ~GdbInferiors() override;

  void launch_with(GdbLaunch launch) { first().launch_with(std::move(launch)); }
  const std::optional<Error>& watchdog_error() const;
  // Every target's program requests (GdbTarget::request_fd, serve_requests).
  std::vector<int> request_fds() const;
  Result<void> serve_requests();

  bool has_process() const override;
  gdb::Tid pid() const override { return live().pid(); }
  bool spawned() const override { return live().spawned(); }
  std::vector<gdb::Tid> threads() const override;
  gdb::Tid group_of(gdb::Tid tid) const override { return of_thread(tid).group_of(tid); }
  gdb::Tid process_of(gdb::Tid tid) const override { return of_thread(tid).process_of(tid); }
  bool is_stopped(gdb::Tid tid) const override { return of_thread(tid).is_stopped(tid); }
  bool end_due() const override;
  void set_features(const gdb::ClientFeatures& features, bool announced) override;
  void set_catch_syscalls(std::optional<std::set<long>> numbers) override;
  void set_program_signals(std::set<int> signals) override;
  void set_event_log(std::function<void(const std::string&)> log) override;
  Result<x86::Regs> general_registers(gdb::Tid tid) override {
    return of_thread(tid).general_registers(tid);
  }
  Result<gdb::Registers> read_registers(gdb::Tid tid, bool ext) override {
    return of_thread(tid).read_registers(tid, ext);
  }
  Result<void> write_registers(gdb::Tid tid, const gdb::Registers& now,
                               const gdb::Registers& before) override {
    return of_thread(tid).write_registers(tid, now, before);
  }
  Result<std::vector<std::uint8_t>> read_memory(gdb::Tid process, std::uint64_t addr,
                                                std::uint64_t len) override {
    return of_process(process).read_memory(process, addr, len);
  }
  Result<void> write_memory(gdb::Tid process, std::uint64_t addr,
                            const std::vector<std::uint8_t>& bytes) override {
    return of_process(process).write_memory(process, addr, bytes);
  }
  Result<void> insert_point(gdb::Tid process, gdb::PointType type, std::uint64_t addr,
                            std::uint64_t len, gdb::PointAgent agent) override {
    return of_process(process).insert_point(process, type, addr, len, std::move(agent));
  }
  Result<void> remove_point(gdb::Tid process, gdb::PointType type, std::uint64_t addr,
                            std::uint64_t len) override {
    return of_process(process).remove_point(process, type, addr, len);
  }
  Result<std::optional<gdb::StopEvent>> resume(
      const std::vector<gdb::ResumeAction>& actions) override;
  Result<gdb::Waited> wait(int client_fd) override;
  Result<gdb::StopEvent> interrupt() override;
  bool owe_interrupt() override;
  Result<void> set_non_stop(bool on) override;
  Result<void> interrupt_process() override;
  Result<gdb::ServerEnd> finish(gdb::ServerEnd::How how) override;
  Result<void> detach_process(gdb::Tid process) override;
  Result<void> kill_process(gdb::Tid process) override;
  Result<gdb::ServerEnd> drop_process(gdb::ServerEnd::How how) override;
  bool can_start() const override { return targets_.front()->can_start(); }
  Result<gdb::Tid> start(std::vector<std::string> argv) override;
  Result<void> restart() override;
  Result<gdb::Tid> attach(gdb::Tid pid) override;
  std::optional<gdb::StopEvent> attach_signal(gdb::Tid process) override {
    return of_process(process).attach_signal(process);
  }
  void set_disable_randomization(bool on) override { first().set_disable_randomization(on); }
  void set_startup_with_shell(bool on) override { first().set_startup_with_shell(on); }
  void set_working_directory(const std::string& dir) override {
    first().set_working_directory(dir);
  }
  void reset_environment() override { first().reset_environment(); }
  void set_environment(const std::string& name_value) override {
    first().set_environment(name_value);
  }
  void unset_environment(const std::string& name) override { first().unset_environment(name); }
  Result<std::string> auxv(gdb::Tid process) override { return of_process(process).auxv(process); }
  Result<std::string> libraries_svr4(gdb::Tid process, bool without_main_lm) override {
    return of_process(process).libraries_svr4(process, without_main_lm);
  }
  Result<std::string> exec_file(gdb::Tid process) override {
    return of_process(process).exec_file(process);
  }
  Result<std::string> siginfo(gdb::Tid tid) override { return of_thread(tid).siginfo(tid); }
  Result<std::size_t> write_siginfo(gdb::Tid tid, std::uint64_t offset,
                                    std::string_view data) override {
    return of_thread(tid).write_siginfo(tid, offset, data);
  }
  std::string thread_name(gdb::Tid tid) override { return of_thread(tid).thread_name(tid); }
  Result<gdb::OsData> os_data(const std::string& name) override { return first().os_data(name); }
  Result<gdb::MemoryRegion> memory_region(std::uint64_t addr) override {
    return live().memory_region(addr);
  }
  Result<std::uint64_t> tls_address(gdb::Tid tid, std::uint64_t offset, std::uint64_t lm) override {
    return of_thread(tid).tls_address(tid, offset, lm);
  }
  std::string describe_watches() override;
  std::string describe_slots() override { return live().describe_slots(); }
  Result<int> open_file(const std::string& path, unsigned flags, unsigned mode) override {
    return first().open_file(path, flags, mode);
  }
  bool has_file(int fd) const override { return targets_.front()->has_file(fd); }
  Result<void> close_file(int fd) override { return first().close_file(fd); }
  Result<std::size_t> pread_file(int fd, std::uint64_t offset,
                                 std::vector<std::uint8_t>& out) override {
    return first().pread_file(fd, offset, out);
  }
  Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::string_view data) override {
    return first().pwrite_file(fd, offset, data);
  }
  Result<gdb::FileStatus> stat_file(int fd) override { return first().stat_file(fd); }
  Result<void> unlink_file(const std::string& path) override { return first().unlink_file(path); }
  Result<std::string> read_link(const std::string& path) override {
    return first().read_link(path);
  }
  void close_files() override { first().close_files(); }
  void served() override;

 private:
  GdbTarget& first() { return *targets_.front(); }
  // The target with a live process that comes first (the first target when none has one).
  GdbTarget& live() const;
  GdbTarget& of_thread(gdb::Tid tid) const;
  GdbTarget& of_process(gdb::Tid process) const;
  // A new target for another process, set up as the first (features, catch syscall, log, mode).
  std::unique_ptr<GdbTarget> another();
  // Whether a process lives beside the first target's (or the first has none).
  bool several() const { return targets_.size() > 1; }
  // All-stop: every target but `except` stopped (a stop of `except` is reported).
  Result<void> halt_others(const GdbTarget* except);
  // The targets (not the first) whose process ended and was reported, or was let go: dropped.
  void drop_ended();
  // A stop of `from` as the server gets it: an end with other processes left says so; a
  // no-resumed stop while another target runs is none.
  Result<std::optional<gdb::StopEvent>> reported(GdbTarget& from, gdb::StopEvent stop);
  Result<gdb::Waited> wait_several(int client_fd);
  // finish or drop_process: `end_one` of every target, the others first; the first's end.
  // The target whose process was last started or attached (signalled_) when `which` holds for
  // it, else the first for which it holds; null when none (gdbserver's signal_pid first).
  GdbTarget* signalled_first(const std::function<bool(const GdbTarget&)>& which);
  Result<gdb::ServerEnd> end_each(const std::function<Result<gdb::ServerEnd>(GdbTarget&)>& end_one);

  GdbConnection& connection_;
  std::vector<std::unique_ptr<GdbTarget>> targets_;
  // The target whose process was last started (vRun) or attached (vAttach): an all-stop
  // interrupt stops it first (interrupt()). Null before either, or once that target is dropped.
  const GdbTarget* signalled_ = nullptr;
  // signalled_ when a Ctrl-C came while no resume ran it (owe_interrupt): its next resume stops
  // it at once with that SIGINT.
  GdbTarget* interrupt_owed_ = nullptr;
  gdb::ClientFeatures features_;
  bool announced_ = false;
  std::optional<std::set<long>> caught_;
  std::optional<std::set<int>> program_signals_;
  std::function<void(const std::string&)> log_;
  bool non_stop_ = false;
  // All-stop: the targets the last resume named. Only they are waited for: a target left
  // stopped keeps its queued events (a breakpoint hit the halt found) until it is resumed, as a
  // thread left stopped keeps its own (gdb stepping one thread over a breakpoint must hear from
  // that thread alone).
  std::set<const GdbTarget*> resumed_;
  bool resumed(const GdbTarget& t) const { return non_stop_ || resumed_.contains(&t); }
};

class GdbServer {
 public:
  GdbServer(Inferior& inferior, WatchSession& session, int in_fd, int out_fd);
  // No process yet (gdbserver --multi without a program): vRun or vAttach makes one.
  GdbServer(int in_fd, int out_fd);
  ~GdbServer();

  // Extended mode's vRun and vAttach (without this they answer E NN).
  void launch_with(GdbLaunch launch);
  // gdbserver's --debug-file: the log lines go to `fd` (GdbConnection::log_to).
  void log_to(Fd fd) { connection_->log_to(std::move(fd)); }
  // A new client on in_fd/out_fd after serve() returned with end.serving: the connection's
  // state (acknowledgments, the features of qSupported) starts afresh, the process stays.
  void connect(int in_fd, int out_fd);

  Result<GdbServerEnd> serve() { return server_->serve(); }

  // GdbTarget::watchdog_error (the first of the targets').
  const std::optional<Error>& watchdog_error() const { return target_->watchdog_error(); }

 private:
  // The program's breakpoint requests served while the server waits for the client too.
  void serve_requests_meanwhile();

  std::unique_ptr<GdbConnection> connection_;
  std::unique_ptr<GdbInferiors> target_;
  std::unique_ptr<gdb::Server> server_;
};

}  // namespace hwarb::native

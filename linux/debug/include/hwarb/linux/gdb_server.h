// hwarb/linux/gdb_server.h — GdbServer, a GDB Remote Serial Protocol stub over an Inferior and a
// WatchSession: gdb, lldb and the IDEs built on them debug a real process through it, with
// watchpoints of any address, length and count placed by the session (debug registers while the
// arbiter admits them and this machine delivers their hits, the exact software path otherwise).
//
// What it serves (all-stop mode, x86-64 Linux, every thread of the process):
//  1. Handshake and queries: qSupported, QStartNoAckMode, ?, qC, qAttached, qfThreadInfo /
//     qsThreadInfo, T, Hg/Hc, qXfer (features target.xml, auxv, exec-file, threads),
//     vCont?, and lldb's qHostInfo, qProcessInfo, qWatchpointSupportInfo,
//     QThreadSuffixSupported, QListThreadsInStopReply, qMemoryRegionInfo.
//  2. Registers g/G/p/P (core, x87/SSE, orig_rax, fs_base, gs_base: gdb_regs.h).
//  3. Memory m/M/x/X: the program's real bytes — an int3 planted by the server or by the software
//     watch is shown as the byte it replaced, and a write over one keeps the int3 in place.
//  4. Execution: vCont with c/C/s/S/t per thread, c, s, C; a signal of the program is reported
//     (T with its number: gdb's numbering, gdb_signals.h, or Linux's once the client asked
//     qHostInfo, as lldb does) and delivered when the client resumes with it; Ctrl-C (0x03) stops
//     the process (T02). Stop replies carry thread:, and watch:/rwatch:/awatch:ADDR, swbreak: or
//     hwbreak:; W/X when the process ends.
//  5. Breakpoints: Z0 an int3; Z1 a debug register through the session where the machine
//     delivers hits and one is free, else an int3 reported as hwbreak; Z2/Z3/Z4 a watch of the
//     session (any address and length). A Z that cannot be honoured answers E NN (with the
//     message, E.text, when the client announced error-message support).
//     ConditionalBreakpoints+: a Z0/Z1 may carry conditions (gdb's agent expressions:
//     agent_expr.h), evaluated here at each hit while the session has no watch: a breakpoint
//     none of whose conditions holds is stepped over without a stop (the other threads stopped
//     meanwhile), so a false condition costs no round trip to the client. A Z1 with conditions
//     is an int3. With watches, or where a condition cannot be evaluated, the stop is reported
//     and gdb evaluates the condition itself, as it does after every reported stop.
//  6. Host I/O (vFile setfs/open/pread/pwrite/fstat/close/unlink/readlink): gdb's default
//     sysroot reads the executable and libraries through it; `remote put`, `remote get` and
//     `remote delete` copy and delete files on the target, as with gdbserver.
//  7. D (detach) and k/vKill: every int3, protection and register of the session is undone
//     first; a detached program runs on unmodified. `monitor exit` (qRcmd) ends the server at
//     once, as a client that goes away would; gdbserver's `monitor set debug`, `set
//     remote-debug` and `set debug-format` turn the server's log on stderr on and off (events;
//     packets; timestamps); an unknown command gets the list and E01, as from gdbserver.
//  8. Processes, when the client announced them in qSupported (gdb does): multiprocess+ (thread
//     ids pPID.TID everywhere, vCont actions per process, D;PID and vKill;PID for one process,
//     W/X with ;process:PID), fork-events+ and vfork-events+ (a fork or vfork stops the parent
//     with fork:/vfork:pPID.TID of the child, and a vfork parent's wait for its child ends with
//     vforkdone:), exec-events+ (exec:PATH). A forked child is then traced as a process of its
//     own until the client detaches or kills it: its int3s are its own (a copy of its parent's
//     at the fork, as gdbserver clones them); watches (Z2-Z4) are the first process's only.
//     When the first process ends or is detached, a remaining child takes its place. Without
//     these features a child is freed of the int3s and let go at once, as before.
//  9. Extended mode (gdb's `target extended-remote`), as Debian's gdbserver 13.1 serves it:
//     '!' turns it on (OK). vRun;PROG;ARG... (hex) starts PROG (empty: the last program run, or
//     GdbLaunch::program) with those arguments, stopped at its first instruction (the stop
//     reply); vAttach;PID attaches to PID (T05); R restarts the last program (no reply). One
//     process at a time: vRun and vAttach answer E NN while one runs. Programs run through
//     GdbLaunch::wrapper when there is one (spawn_program). QDisableRandomization:0|1 sets the next
//     vRun's randomisation. In extended mode k, vKill and D leave the process as without it but
//     keep the server serving with no process: then '?' answers W00, qfThreadInfo an empty list,
//     and packets that need a process E01, until the next vRun or vAttach. Each process has a
//     session of its own (GdbLaunch::watches): the int3s and watches of a killed, detached or ended
//     process are gone with it, and gdb's Z packets after a vRun plant them afresh in the new one.
// Bad input (a malformed packet, a bad checksum, an unknown packet) gets the protocol's answer:
// '-' (resend), an empty reply, or E NN; it never changes the process.
//
// Contract:
//  - The Inferior is stopped (every thread) when serve() starts, as spawn() and attach() leave
//    it; the session has no watch yet.
//  - A server made without a process (the second constructor) has none until a vRun or vAttach.
//  - serve() returns when the client detached (the process runs on), killed the process, or
//    went away (end of input, a reset connection, a failed write), or a signal of
//    install_interrupt_flag() (terminal.h) arrived: then the process is killed when spawned,
//    detached when attached, after the same cleanup. That cleanup also runs when serving fails
//    (the error is returned after it). A detached spawned process outlives the server
//    (Inferior::outlive_tracer). The process's own end (W/X) is reported, and serve() returns at
//    the client's next k, D or disconnect.
//  - A disconnect returns end.serving when the server stays (GdbLaunch::multi or '!' seen, not
//    GdbLaunch::once, not interrupted: gdbserver's rule). The process is left as a disconnect
//    leaves it (killed when spawned, detached when attached; gdbserver would keep it for the
//    next client) and the server has none; connect() then serve() serves the next client.
//  - Reads from in_fd, writes to out_fd (the same socket, or a pipe pair for --stdio). While
//    the process is stopped, the wait for the client's next packet polls in_fd for a
//    SpinWindow (adaptive, up to the Inferior's spin_max()) before it sleeps: gdb
//    answers each reply within tens of microseconds, and a wake-up across CPUs costs ~40 us here.
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/gdb/rsp.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/spin_window.h"
#include "hwarb/linux/watch_session.h"
#include "hwarb/linux/watchdog.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

using gdb::AgentExpr;
using gdb::FpRegs;
using gdb::RspReader;

struct GdbServerEnd {
  // kInterrupted: a signal the embedder's install_interrupt_flag() handles (SIGINT, SIGTERM,
  // SIGHUP) asked the server to end; the process is left as a disconnect leaves it.
  enum class How : std::uint8_t { kDetached, kKilled, kDisconnected, kInterrupted };
  How how = How::kDisconnected;
  bool exited = false;   // the process ended by itself (status or signal)
  bool serving = false;  // the server stays for the next client (connect(), serve())
  int status = 0;
  int signal = 0;
};

// What extended mode's vRun and vAttach make: each new process is an Inferior (spawned with
// `inferior`, or attached) with a WatchSession of `watches`, owned by the server.
struct GdbLaunch {
  std::vector<std::string> program;  // the command line's PROG ARGS: a vRun without PROG's
  std::vector<std::string> wrapper;  // gdbserver's --wrapper: each program runs through it
  InferiorOptions inferior;          // a vRun's spawn (QDisableRandomization sets disable_aslr)
  WatchSessionOptions watches;
  bool multi = false;  // gdbserver's --multi: a disconnect leaves the server serving
  bool once = false;   // gdbserver's --once: a disconnect ends the server even so
  // gdbserver's --disable-packet (for gdb's testsuite): "vCont" (vCont packets unknown), "T"
  // (stop replies S, not T), "Tthread" (no thread: in them), "qC", "qfThreadInfo" (unknown).
  std::set<std::string> disabled_packets;
};

// gdbserver's way of starting a program: `wrapper` (none: the program itself) with `argv`
// after it, spawned (Inferior::spawn), then run until the wrapper execs the program, which is
// then stopped at its first instruction; signals on the way are delivered. Inferior::spawn's
// errors; ESRCH naming the wrapper when it ends before an exec.
Result<Inferior> spawn_program(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& argv,
                               const InferiorOptions& options);

class GdbServer {
 public:
  GdbServer(Inferior& inferior, WatchSession& session, int in_fd, int out_fd);
  // No process yet (gdbserver --multi without a program): vRun or vAttach makes one.
  GdbServer(int in_fd, int out_fd);
  ~GdbServer();

  // Extended mode's vRun and vAttach (without this they answer E NN).
  void launch_with(GdbLaunch launch);
  // A new client on in_fd/out_fd after serve() returned with end.serving: the connection's
  // state (acknowledgments, the features of qSupported) starts afresh, the process stays.
  void connect(int in_fd, int out_fd);

  Result<GdbServerEnd> serve();

  // A Watchdog (for an attached process) that holds what must be undone if the server dies
  // without its cleanup (SIGKILL): the session's restore plan and the server's own int3 bytes,
  // published now and after every change. Call before serve(); `watchdog` outlives the server.
  // A publish that fails later drops the watchdog (watchdog_error() says why).
  Result<void> guard(Watchdog& watchdog);
  const std::optional<Error>& watchdog_error() const { return watchdog_error_; }

 private:
  struct Breakpoint {
    std::uint8_t original = 0;
    bool software = false;  // Z0
    bool hardware = false;  // Z1 taken as an int3
    // The conditions of each (ConditionalBreakpoints): it stops when one holds; none: always.
    std::vector<AgentExpr> software_conditions;
    std::vector<AgentExpr> hardware_conditions;
  };
  using Int3Map = std::map<std::uint64_t, Breakpoint>;
  struct WatchKey {
    char type = '2';  // Z type: '1' (hardware execute), '2' write, '3' read, '4' access
    std::uint64_t addr = 0;
    std::uint64_t len = 0;
    auto operator<=>(const WatchKey&) const = default;
  };

  // Connection.
  Result<void> send(std::string_view payload);
  // Reads what the client sent (blocking when `block`); false at end of input.
  Result<bool> receive(bool block);
  Result<void> reply(std::string_view payload) { return send(payload); }
  // One line of the server's debug output (monitor set debug / remote-debug) on stderr.
  void debug_line(const std::string& text) const;
  // Bytes to the client as they are; a failed write marks the client lost.
  Result<void> write_raw(std::string_view bytes);
  Result<GdbServerEnd> serve_packets();

  // One packet while the process is stopped; nullopt: keep serving, else the end.
  Result<std::optional<GdbServerEnd>> on_packet(const std::string& packet);
  Result<std::string> query(const std::string& packet);
  Result<std::string> change_environment(std::string_view packet);
  // qRcmd (gdb's `monitor`): "exit" ends the server as gdbserver's does; others get the list.
  Result<std::optional<GdbServerEnd>> monitor(std::string_view hex_command);
  std::string file_request(std::string_view request);
  Result<std::string> xfer(std::string_view object, std::string_view annex, std::uint64_t offset,
                           std::uint64_t length);
  // A thread's registers as gdb sees them: general and FXSAVE, and with `ext` its AVX, AVX-512
  // and PKU registers (ExtRegs; features 0 without, or where the kernel has no XSAVE area).
  Result<std::pair<x86::Regs, FpRegs>> read_registers(pid_t tid, bool ext = false);
  // Writes back the parts of `regs` that differ from `before` (what read_registers gave); "OK".
  Result<std::string> write_registers(pid_t tid, const std::pair<x86::Regs, FpRegs>& regs,
                                      const std::pair<x86::Regs, FpRegs>& before);
  Result<std::string> read_memory(std::uint64_t addr, std::uint64_t len);
  Result<void> write_memory(std::uint64_t addr, const std::vector<std::uint8_t>& bytes);
  Result<std::string> insert_point(char type, std::uint64_t addr, std::uint64_t len,
                                   std::vector<AgentExpr> conditions = {});
  Result<std::string> remove_point(char type, std::uint64_t addr, std::uint64_t len);
  // Applies the watch removals gdb asked for since the last resume (see remove_point).
  Result<void> flush_removed();

  // Resumes as the vCont actions say, then waits until the process stops again; the stop reply.
  Result<std::string> resume(const std::string& actions);
  Result<std::optional<std::string>> on_event(const Event& event);
  // The int3 trap of a thread that stopped at a breakpoint of ours (SIGTRAP, SI_KERNEL, the pc
  // one past it): the stop reply, or nullopt when the trap is dropped (see rewound_).
  Result<std::optional<std::string>> on_breakpoint_trap(const Event& event);
  Result<std::string> stop_others(pid_t tid, const std::string& reply);
  // After thread `tid` stopped at the breakpoint `at` of ours and the others were stopped: the
  // thread whose breakpoint stop is reported, drawn among `tid` and the threads stopped at a
  // breakpoint of ours too (their traps queued), as gdbserver draws among its threads with
  // events so that no thread starves another. The others' traps stay held (rewound_).
  pid_t pick_reported(pid_t tid, std::uint64_t at);
  // Whether the breakpoint `tid` stopped at is to be reported: it has no condition, one of its
  // conditions holds for `tid`, or one cannot be evaluated (gdb evaluates it again).
  bool condition_holds(pid_t tid, const Breakpoint& bp);
  // A breakpoint whose conditions are all false: thread `tid` (stopped on it, pc at `at`) runs
  // its instruction with the int3 out while every other thread is stopped, then runs on as the
  // client asked; nullopt. An event of the step other than its trap (a signal, an exit, a fork,
  // an exec) is queued for the main loop, the int3 back in place first (but for an exec).
  Result<std::optional<std::string>> step_over(pid_t tid, std::uint64_t at);
  // The process's own exec (thread `tid` now the leader): the stop reply, with exec:PATH when
  // the client takes exec events. `running`: the session resumed the thread already.
  Result<std::optional<std::string>> exec_stop(pid_t tid, bool running);
  // After a stop_all: the queued int3 traps of other threads get their pc set back onto the
  // breakpoint now (rewound_), so that every stopped thread shows where it is.
  Result<void> rewind_queued_traps();
  // The queued int3 traps of rewound_ threads are dropped (the int3s are being taken out).
  void drop_rewound_traps();
  // Runs a thread whose held event was dropped as the last resume asked (deferred_).
  Result<void> run_as_asked(pid_t tid);
  // Records the memory operands of the instruction `tid` is about to step (stepped_watch).
  void begin_step(pid_t tid);
  // "watch:ADDR;" when the instruction just stepped touched a hardware-placed watch, else "".
  std::string stepped_watch() const;
  // Leaves the process as `how` says (once: later calls return the first end).
  Result<std::optional<GdbServerEnd>> finish(GdbServerEnd::How how);
  Result<std::optional<GdbServerEnd>> finish_once(GdbServerEnd::How how);
  // The client went away (or a signal asked the server to end): the process is left as
  // finish() leaves it, and end.serving says whether the server stays for another client.
  Result<GdbServerEnd> client_gone();
  // Whether a disconnect leaves the server serving (gdbserver: unless --once, in extended mode).
  bool stays() const;
  // Extended mode: the process is left as `how` says (finish_once) and dropped with its session
  // and every per-process state; the server then has no process.
  Result<void> drop_process(GdbServerEnd::How how);
  // vRun's and vAttach's new process becomes the one served; the stop reply.
  std::string take_process(Inferior&& inferior);
  Result<std::string> run_program(std::string_view args);
  Result<std::string> attach_process(std::string_view pid);
  // A packet while there is no process (extended mode); nullopt: served as with one.
  std::optional<Result<std::string>> without_process(const std::string& packet);
  bool running() const { return inferior_ != nullptr && !exited_; }
  // Whether GdbLaunch::disabled_packets has `name`.
  bool disabled(const std::string& name) const;

  pid_t thread_for(pid_t selected) const;
  // A thread as the client names it: pPID.TID with multiprocess+, else TID (hex).
  std::string thread_id(pid_t tid) const;
  // The process whose memory the Hg thread sees (a vfork child's is its parent's).
  pid_t general_process() const;
  // Whether a traced thread is in a process other than `process`.
  bool others_than(pid_t process) const;
  // A fork or vfork the client takes as an event: the child traced as a process, the stop reply.
  Result<std::optional<std::string>> fork_stop(const Event& event);
  // D;PID and vKill;PID while another process stays traced: that process alone ("OK").
  Result<std::string> detach_process(pid_t process);
  Result<std::string> kill_process(pid_t process);
  // Every watch of the session rebuilt (one taken out and put back): a followed fork is left
  // unwatched, its pages and bytes as the program made them (WatchSession's contract).
  Result<void> rebuild_watches();
  // `monitor watches` and `monitor slots`: the text gdb shows.
  std::string monitor_watches() const;
  std::string monitor_slots() const;
  // How a thread runs on when the client does not step it: the session's way, through system
  // call stops while `catch syscall` is on.
  Resume run_mode() const;
  std::string stop_reply(int signal, pid_t tid, const std::string& reason) const;
  // A Linux signal number as the client numbers signals (gdb_signals.h), and back (nullopt: no
  // signal of this target).
  int wire_signal(int signal) const;
  std::optional<int> host_signal(std::uint64_t wire) const;

  // The process served (nullptr: none, in extended mode) and its session: the caller's, or
  // own_inferior_ and own_session_ once a vRun or vAttach made them.
  Inferior* inferior_ = nullptr;
  WatchSession* session_ = nullptr;
  std::unique_ptr<Inferior> own_inferior_;
  std::unique_ptr<WatchSession> own_session_;
  std::optional<GdbLaunch> launch_;
  bool extended_ = false;  // '!' received
  // The program and arguments of the last vRun (gdbserver's program_path and program_args).
  std::vector<std::string> last_program_;
  int in_fd_;
  int out_fd_;
  RspReader reader_;
  SpinWindow client_spin_;
  bool ack_ = true;
  bool error_messages_ = false;    // the client announced error-message+
  bool thread_suffix_ = false;     // lldb's QThreadSuffixSupported
  bool list_threads_ = false;      // lldb's QListThreadsInStopReply
  bool native_signals_ = false;    // Linux's signal numbers (lldb), not gdb's
  bool debug_ = false;             // `monitor set debug 1`: events on stderr
  bool remote_debug_ = false;      // `monitor set remote-debug 1`: packets on stderr
  bool debug_timestamps_ = false;  // `monitor set debug-format all|timestamp`
  std::string last_sent_;          // for a '-' from the client
  bool interrupt_ = false;         // 0x03 seen while running
  std::string last_stop_;          // the reply to '?'
  pid_t last_thread_ = 0;          // the thread of the last stop
  pid_t g_thread_ = 0;             // Hg (0: the last stop's)
  pid_t c_thread_ = 0;             // Hc
  pid_t stepping_ = 0;             // the thread of a step in progress
  // The process whose threads the last resume ran by default (a vCont action without a thread:
  // 0 every process), nullopt when it ran only threads it named: a new thread runs only then.
  std::optional<pid_t> wildcard_process_;
  std::vector<x86::MemRef> step_accesses_;  // its instruction's memory operands
  bool exited_ = false;                     // the process ended (W/X sent)
  // Threads single-stepped for the client whose step's trap has not been reported: a trap that
  // comes after the client resumed such a thread otherwise (another thread's stop held it) is
  // dropped, as gdbserver drops a single-step stop of a thread resumed with `c`.
  std::set<pid_t> stepped_;
  std::uint64_t pick_state_ = 0x9e3779b97f4a7c15ULL;  // pick_reported's generator
  std::set<std::uint64_t> lifted_;  // addresses of int3s of ours taken out (on_breakpoint_trap)
  GdbServerEnd end_;
  std::optional<GdbServerEnd> gone_;      // the client went away while the process ran
  std::optional<GdbServerEnd> finished_;  // finish() has left the process so
  bool client_lost_ = false;              // a read or write of the connection failed
  bool interrupted_ = false;              // interrupt_requested() ended the serving
  std::map<pid_t, int> pending_signal_;   // reported to the client, delivered if it resumes with it
  // Threads a resume asked to run that held an event first (queued by a stop_all), with what
  // the resume asked: each runs once its event is handled, if the event did not resume it or
  // stop the process.
  struct Asked {
    bool step = false;
    int signal = 0;
  };
  std::map<pid_t, Asked> deferred_;
  // Threads whose queued int3 trap had its pc set back at a stop_all: the breakpoint's address.
  // When the trap is taken, it is reported if that breakpoint is still there and the pc still
  // on it; otherwise (gdb deleted the breakpoint or moved the thread meanwhile) it is dropped
  // and the thread runs as asked, executing the instruction for real — as gdbserver discards
  // a pending breakpoint stop whose breakpoint is gone.
  std::map<pid_t, std::uint64_t> rewound_;
  bool exec_events_ = false;   // the client announced exec-events+ (gdb)
  bool multiprocess_ = false;  // the client announced multiprocess+
  bool fork_events_ = false;   // fork-events+ (with multiprocess+)
  bool vfork_events_ = false;  // vfork-events+ (with multiprocess+)
  std::set<pid_t> forked_;     // child processes reported by fork/vfork stops, still traced
  // QCatchSyscalls (`catch syscall`): on, and the system calls to report (none listed: all).
  bool catch_syscalls_ = false;
  std::set<long> caught_syscalls_;
  // The thread of the last exec stop, while it has not run since (0: none): its execve's return
  // is still to report to a client that catches it.
  pid_t execve_return_ = 0;
  // The int3s planted, per process (thread group; a vfork child writes its parent's memory).
  std::map<pid_t, Int3Map> int3_;
  std::map<WatchKey, WatchId> watches_;
  std::set<WatchKey> removed_;  // z packets not applied yet (flush_removed)
  std::map<WatchId, char> watch_type_;
  std::map<int, Fd> files_;  // vFile descriptors
  Watchdog* watchdog_ = nullptr;
  RestorePlan published_;  // the last plan given to watchdog_
  std::optional<Error> watchdog_error_;
  // The session's plan with the int3 bytes, to watchdog_ when it changed.
  Result<void> publish_plan();
  RestorePlan restore_plan() const;
};

}  // namespace hwarb::native

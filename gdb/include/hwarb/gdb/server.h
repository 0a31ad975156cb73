// hwarb/gdb/server.h — Server, the GDB Remote Serial Protocol over a Target (target.h): it
// reads packets from a Connection, parses each into a typed Request (request.h), serves it with
// one handler per kind of request, asking the target, and formats the target's answer (or its
// error, E NN) as the protocol's reply; gdb, lldb and the IDEs built on them debug the target's
// process through it. The Linux target (hwarb/linux/gdb_server.h) is what `hwarb gdbserver`
// serves; tests serve a fake one.
//
// What it serves (all-stop and non-stop modes, x86-64, every thread of the process):
//  1. Handshake and queries: qSupported, QStartNoAckMode, ?, qC, qAttached, qfThreadInfo /
//     qsThreadInfo, T, Hg/Hc, qXfer (features target.xml, auxv, exec-file, threads,
//     libraries-svr4, siginfo), vCont?, and lldb's qHostInfo, qProcessInfo,
//     qWatchpointSupportInfo, QThreadSuffixSupported, QListThreadsInStopReply, qMemoryRegionInfo;
//     qGetTLSAddr (the target's address, else an E reply, never the empty one).
//  2. Registers g/G/p/P (gdb_regs.h); memory m/M/x/X (the program's bytes, target.h).
//  3. Execution: vCont with c/C/s/S/t per thread, c, s, C, S; a stop is reported as T (signal
//     in gdb's numbering, gdb_signals.h, or Linux's once the client asked qHostInfo, as lldb
//     does) with thread:, watch:/rwatch:/awatch:ADDR, swbreak:, hwbreak:, fork:/vfork:,
//     vforkdone:, exec:, syscall_entry:/syscall_return:; W/X when the process ends. Ctrl-C
//     (0x03) while it runs stops it (the target's interrupt()); one that crossed a stop reply
//     interrupts the next resume. QProgramSignals (the signals a detach delivers, target.h).
//  4. Z0-Z4/z0-z4 (Z0/Z1 with ConditionalBreakpoints+ conditions: agent_expr.h); an error of
//     the target answers E NN (E.text with error-message+).
//  5. Host I/O (vFile setfs/open/pread/pwrite/fstat/close/unlink/readlink).
//  6. D and k/vKill (D;PID and vKill;PID for one process of several with multiprocess+);
//     qRcmd (`monitor exit`, `watches`, `slots`, `set debug`, `set remote-debug`,
//     `set debug-format`, `help`).
//  7. Extended mode: '!', vRun, vAttach, R, vKill/k/D that leave the server with no process
//     ('?' W00, qfThreadInfo empty, packets that need a process E01), QDisableRandomization,
//     QEnvironment*. With multiprocess+, a vRun or vAttach while a process lives adds one beside
//     it (gdb's add-inferior); without, it answers E16 (EBUSY).
//  8. Non-stop mode (QNonStop:1, announced as QNonStop+): vCont's actions act per thread (c/s
//     resume a stopped thread, a running one runs on; t stops a running one, reported with
//     signal 0) and are answered OK; each stop is queued and the first one sent as a %Stop
//     notification, the next ones as the replies to vStopped (OK when none is left); '?' queues
//     the stop of every stopped thread and replies with the first; QThreadEvents:1 adds thread
//     starts (create:, the new thread stopped until resumed) and exits (w); vCtrlC (or 0x03)
//     sends the process SIGINT. Packets are served while threads
//     run.
// Bad input (a malformed packet, a bad checksum, an unknown packet) gets the protocol's answer:
// '-' (resend), an empty reply, or E NN; it never asks the target to change anything.
//
// Contract:
//  - The target's process (if any) is stopped when serve() starts.
//  - serve() returns when the client detached (the process runs on), killed the process, or
//    went away (end of input, a broken connection), or the connection's interrupt_requested()
//    was seen; then the process is left as the target's finish() leaves it (kDisconnected or
//    kInterrupted). That also happens when serving fails (the error is returned after it). The
//    process's own end (W/X) is reported, and serve() returns at the client's next k, D or
//    disconnect.
//  - A disconnect returns end.serving when the server stays (ServerOptions::multi or '!' seen,
//    not ServerOptions::once, not interrupted, the target can start processes): the process is
//    dropped (the target's drop_process) and connect() then serve() serves the next client.
//    Without extended mode, a client that closes the connection while the process is stopped
//    (all-stop, not ServerOptions::once, not interrupted) also returns end.serving, as
//    gdbserver "reopens the connection": the process stays stopped as it is, and the next
//    client's '?' gets its last stop. A client gone while the process runs, or a connection
//    that broke (reset: the client died, Connection::lost), ends the serving as before.
// Thread-safety: none.
#pragma once

#include <csignal>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/gdb/request.h"
#include "hwarb/gdb/rsp.h"
#include "hwarb/gdb/target.h"

namespace hwarb::gdb {

struct ServerOptions {
  bool multi = false;  // gdbserver's --multi: a disconnect leaves the server serving
  bool once = false;   // gdbserver's --once: a disconnect ends the server even so
  // gdbserver's --disable-packet (for gdb's testsuite): "vCont" (vCont packets unknown), "T"
  // (stop replies S, not T), "Tthread" (no thread: in them), "qC", "qfThreadInfo" (unknown).
  std::set<std::string> disabled_packets;
  // gdbserver's --debug, --remote-debug and --debug-format=timestamp: what `monitor set debug
  // 1`, `monitor set remote-debug 1` and `monitor set debug-format timestamp` turn on, from the
  // start (Connection::log takes the lines).
  bool debug = false;
  bool remote_debug = false;
  bool debug_timestamps = false;
};

class Server {
 public:
  Server(Target& target, Connection& connection);

  void set_options(ServerOptions options);
  // A new client on the connection after serve() returned with end.serving: the connection's
  // state (acknowledgments, the features of qSupported) starts afresh, the process stays.
  void connect();

  Result<ServerEnd> serve();

 private:
  Result<void> send(std::string_view payload);
  Result<void> reply(std::string_view payload) { return send(payload); }
  // Reads what the client sent into reader_ (blocking when `block`); false at end of input.
  Result<bool> receive(bool block);
  void debug_line(const std::string& text);
  void set_debug(bool on);
  Result<void> write_raw(std::string_view bytes);
  Result<ServerEnd> serve_packets();

  // One packet while the process is stopped; nullopt: keep serving, else the end.
  using Served = Result<std::optional<ServerEnd>>;
  Served on_packet(const std::string& packet);
  // What the server answers a packet before it is parsed (a disabled packet, one that needs a
  // process when there is none or it ended, a start where the target starts none); nullopt:
  // parse and serve it.
  std::optional<Result<std::string>> refused(const std::string& packet);
  std::optional<Result<std::string>> without_process(const std::string& packet);
  // The reply: the text, or the error as E NN (E.text with error-message+). done: OK or E NN.
  Served answer(Result<std::string> r);
  Served done(Result<void> r);
  // The reply to a resume, unless the client went away meanwhile; the stopped thread becomes
  // the general one.
  Served resumed(Result<std::string> stop);
  // Non-stop mode: OK to a resume (or its error), then the stop due at once, notified.
  Served resumed_each(const std::vector<ResumeAction>& list);

  // One handler per request (request.h), each sending its reply (if any).
  Served on(const Supported& s);
  Served on(const StartNoAckMode&);
  Served on(const StopReason&);
  Served on(const ExtendedMode&);
  Served on(const CurrentThread&);
  Served on(const Attached&);
  Served on(const ThreadInfo& info);
  Served on(const Xfer& x);
  Served on(const XferWrite& w);
  Served on(const Monitor& m);
  Served on(const HostInfo&);
  Served on(const ProcessInfo&);
  Served on(const WatchpointSupportInfo&);
  Served on(const MemoryRegionInfo& info);
  Served on(const TlsAddress& t);
  Served on(const Symbol&);
  Served on(const CatchSyscalls& c);
  Served on(const ProgramSignals& p);
  Served on(const ThreadSuffixSupported&);
  Served on(const ListThreadsInStopReply&);
  Served on(const DisableRandomization& d);
  Served on(const StartupWithShell& s);
  Served on(const SetWorkingDir& s);
  Served on(const EnvironmentReset&);
  Served on(const EnvironmentSet& e);
  Served on(const EnvironmentUnset& e);
  Served on(const SelectThread& h);
  Served on(const ThreadAlive& t);
  Served on(const ReadRegisters&);
  Served on(const WriteRegisters& w);
  Served on(const ReadRegister& r);
  Served on(const WriteRegister& w);
  Served on(const ReadMemory& m);
  Served on(const WriteMemory& w);
  Served on(const Point& z);
  Served on(const Continue& c);
  Served on(const VCont& v);
  Served on(const VContQuery&);
  Served on(const NonStop& n);
  Served on(const ThreadEvents& t);
  Served on(const Stopped&);
  Served on(const CtrlC&);
  Served on(const Run& run);
  Served on(const Attach& a);
  Served on(const VKill& k);
  Served on(const Detach& d);
  Served on(const Kill&);
  Served on(const Restart&);
  Served on(const HostFile& f);
  Served on(const Unsupported&);

  Served monitor(const std::string& command);
  std::string file_request(const HostFile& f);
  Result<std::string> xfer(const Xfer& x);
  // A resume action in the target's signal numbers (EINVAL for a signal it does not have).
  Result<ResumeAction> resume_action(char kind, std::uint64_t signal, Tid process, Tid tid) const;
  // Resumes, waits for the stop; its reply.
  Result<std::string> resume(const std::vector<ResumeAction>& actions);
  // Non-stop mode: whether a thread runs (the server waits for the target then, not only for
  // the client); one wait of the target: a stop notified, or the client's input read (false:
  // the client went away or a signal ended the serving: gone_ says how it ended).
  bool threads_running() const;
  Result<bool> wait_running();
  // vCont in non-stop mode: the actions per thread, as the threads stand; a stop due at once.
  Result<std::optional<StopEvent>> resume_each(const std::vector<ResumeAction>& actions);
  // A stop (or a thread's exit) into the queue of notifications: sent as %Stop when it is the
  // first.
  Result<void> notify(const StopEvent& stop);
  // D;PID / vKill;PID with multiprocess+ of one process of several; nullopt: not that case.
  std::optional<Result<std::string>> leave_one(std::optional<Tid> process, bool kill);
  // The reply of a stop, and what it changes here (the last thread, an ended process);
  // stop_reason: the reason fields of a thread's stop (swbreak:, watch:ADDR, ...), its thread
  // the last one.
  std::string on_stop(const StopEvent& stop);
  std::string stop_reason(const StopEvent& stop);
  // Non-stop mode: every thread is stopped (a start, an attach, QNonStop:1), or every thread of
  // `process` (one added beside the others).
  void all_stopped(Tid process = 0);
  Result<std::optional<ServerEnd>> finish(ServerEnd::How how);
  // `running`: the client went away while the process ran.
  Result<ServerEnd> client_gone(bool running);
  bool stays() const;
  static bool thread_db_in(const std::string& path);
  // A plain (not extended) server keeps its stopped process for the next client.
  bool reopens() const;
  Result<void> drop_process(ServerEnd::How how);
  // The protocol's state of a process, as with none.
  void forget_process();
  // After the target started (`spawned`) or attached `process`: its stop reply. `added`: beside
  // processes that live on (their state is kept).
  std::string took_process(Tid process, bool spawned, bool added);
  // The reply to a start or an attach (vRun, vAttach): the error, or the new process's stop,
  // whose thread becomes the general one (non-stop mode: OK to an attach).
  Served taken(Result<Tid> r, bool attached, bool added);
  bool running() const { return target_.has_process() && !exited_; }
  bool disabled(const std::string& name) const;

  Tid thread_for(Tid selected) const;
  std::string thread_id(Tid tid) const;
  Tid general_process() const;
  bool others_than(Tid process) const;
  std::string stop_reply(int signal, Tid tid, const std::string& reason) const;
  int wire_signal(int signal) const;
  std::optional<int> host_signal(std::uint64_t wire) const;

  Target& target_;
  Connection& connection_;
  ServerOptions options_;
  bool extended_ = false;  // '!' received
  RspReader reader_;
  bool ack_ = true;
  bool error_messages_ = false;    // the client announced error-message+
  bool thread_suffix_ = false;     // lldb's QThreadSuffixSupported
  bool list_threads_ = false;      // lldb's QListThreadsInStopReply
  bool native_signals_ = false;    // Linux's signal numbers (lldb), not gdb's
  bool debug_ = false;             // `monitor set debug 1`: events
  bool remote_debug_ = false;      // `monitor set remote-debug 1`: packets
  bool debug_timestamps_ = false;  // `monitor set debug-format all|timestamp`
  // `monitor set libthread-db-search-path PATH` (gdbserver's): false when no directory of PATH
  // has a libthread_db, so that thread-local addresses fail as gdbserver's then do.
  bool thread_db_found_ = true;
  bool exec_events_ = false;   // exec-events+
  bool multiprocess_ = false;  // multiprocess+
  bool fork_events_ = false;   // fork-events+ (with multiprocess+)
  bool vfork_events_ = false;  // vfork-events+ (with multiprocess+)
  std::string last_sent_;      // for a '-' from the client
  bool interrupt_ = false;     // 0x03 seen while running (or crossing a stop reply: pending)
  std::string last_stop_;      // the reply to '?'
  std::string osdata_name_;    // the table of osdata_, the qXfer:osdata document being read
  std::string osdata_;
  Tid last_thread_ = 0;        // the thread of the last stop
  int last_signal_ = SIGTRAP;  // the last stop's signal and reason, for '?' again
  std::string last_reason_;
  Tid g_thread_ = 0;     // Hg (0: the last stop's)
  Tid g_process_ = 0;    // the process of the Hg thread (0: none named), for memory once it is gone
  Tid c_thread_ = 0;     // Hc
  bool exited_ = false;  // the process ended (W/X sent)
  std::optional<ServerEnd> gone_;      // the client went away while the process ran
  std::optional<ServerEnd> finished_;  // finish() has left the process so
  bool interrupted_ = false;           // interrupt_requested() ended the serving
  bool non_stop_ = false;              // QNonStop:1
  bool thread_events_ = false;         // QThreadEvents:1
  // Non-stop mode: the stops not taken by the client yet (the first one notified; its thread:
  // the one it stops, 0 for a process's end; a wildcard resumes neither it nor a fork's child
  // in it), and the threads stopped, each with its stop's signal and reason ('?'); any other
  // thread runs.
  struct Notification {
    Tid tid = 0;
    Tid child = 0;  // a fork's child, which the client does not know yet
    std::string text;
  };
  std::deque<Notification> notifications_;
  // Queues a %Stop notification (sent now when none is waiting for vStopped).
  Result<void> send_notification(Notification n);
  struct ThreadStop {
    int signal = 0;
    std::string reason;
  };
  std::map<Tid, ThreadStop> stopped_;
  // Stopped threads whose stop the client has not heard of: a non-stop attach's (its vAttach
  // answered OK), told at '?' or at a vCont;t naming them, as gdbserver tells them.
  std::set<Tid> untold_;
  // Whether '?' tells them (a vAttach's), or leaves them to vCont;t (a command-line attach's).
  bool status_tells_untold_ = true;
  std::vector<Notification> told_;  // resume_each's, sent after the vCont's OK
};

}  // namespace hwarb::gdb

// hwarb/gdb/target.h — what the GDB remote-protocol server (server.h) asks of the process it
// debugs: a Target, and the Connection it talks to the client over. The server parses each
// packet, asks the target, and formats the reply; the target knows the process (threads,
// registers, memory, breakpoints and watches, execution control), not the protocol.
//
// Contract of a Target (every call from the server's thread; none is reentrant):
//  - Thread and process ids are the system's (Linux: TIDs, and a process's id is its leader's
//    TID). A process that the target traces besides the first (a forked child the client takes as
//    an event) is a process of its own: group_of() gives it; process_of() gives the process whose
//    memory a thread sees (a vfork child sees its parent's).
//  - Between resume() and the StopEvent that wait() (or interrupt()) returns, the process runs;
//    every other call is made only while it is stopped (every thread), as the target leaves it
//    after a StopEvent, a start or an attach. Calls on a target with no process (has_process()
//    false) are made only where this header says so.
//  - Memory reads and writes are the program's bytes: an int3 the target planted (insert_point,
//    or its own software watches) reads as the byte it replaced, and a write over one changes
//    that byte while the int3 stays. A read may be short (from the first unreadable page on);
//    EFAULT when nothing is readable.
//  - insert_point/remove_point are all-or-nothing: an error leaves every breakpoint and watch as
//    it was. Removing what is not there succeeds (gdb removes what it never got). A watch's
//    removal may be applied at the next resume (the target's choice; re-inserting it before
//    undoes the removal).
//  - resume() either returns an error with nothing resumed, or runs what the actions say; it
//    may instead return a stop at once (nothing run: a stop that was due before anything runs).
//    Signals in ResumeAction and StopEvent are the system's numbers (the server translates).
//  - wait() returns the next stop to report: every thread stopped then. The target handles the
//    events it reports no stop for (its own int3 traps under false conditions, the steps over
//    them, watch bookkeeping) and keeps the process running meanwhile.
//  - Non-stop mode (set_non_stop(true), asked while every thread is stopped): threads run and
//    stop one by one, and the contract above holds per thread. resume() names each thread it
//    acts on (tid > 0): 'c'/'C'/'s'/'S' for a thread whose stop was reported, 't' for a running
//    one (its stop, signal 0 unless another event of it comes first, is returned by wait()).
//    wait() returns the next stop of one thread, which alone stops (the others run on),
//    kThreadCreated as threads start (stopped until resumed), and kThreadExited as they end. Memory
//    and the points may be changed while threads run; registers are asked of stopped threads only.
//    What the target stops by itself (a step over a breakpoint, a watch's change, a software
//    watch's step) it resumes before it returns or waits again: the client never sees it.
//  - finish() undoes everything the target did to the process (int3s, watches, registers) and
//    leaves it as asked; drop_process() does the same and forgets the process, leaving the
//    target with none (extended mode). start()/attach() give the target its process again.
//  - The target owns the process it started or attached, the host files opened for vFile, and
//    its breakpoints and watches; the server owns the protocol's state (acknowledgments, the
//    client's features, the selected threads, the last stop reply).
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/gdb/agent_expr.h"
#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/x86/insn.h"

namespace hwarb::gdb {

using Tid = int;  // a thread's (or a process's leader's) id, as the system numbers it

// What a Z/z packet places: its type digit.
enum class PointType : char {
  kSoftware = '0',  // Z0: an int3
  kHardware = '1',  // Z1: a hardware breakpoint (or an int3 reported as one)
  kWrite = '2',     // Z2..Z4: a watch of any address and length
  kRead = '3',
  kAccess = '4',
};

// A thread's registers as gdb sees them (gdb_regs.h): general, FXSAVE and (ext) XSAVE parts.
struct Registers {
  x86::Regs regs;
  FpRegs fp;
  friend bool operator==(const Registers&, const Registers&) = default;
};

// One action of a vCont (or of c/s/C/S): kind 'c', 'C', 's', 'S' or 't'; tid -1 or 0: every
// thread no earlier action named (of `process` when > 0).
struct ResumeAction {
  char kind = 'c';  // c, C, s, S, t, and r: steps while the pc is in the range (range
                    // stepping), reported as a step's stop once it leaves the range, at a
                    // breakpoint of the client's, or at any other stop
  int signal = 0;   // the system's number (C, S)
  Tid tid = -1;
  Tid process = 0;
  std::uint64_t range_start = 0;  // r: [range_start, range_end)
  std::uint64_t range_end = 0;
};

// A stop the server reports to the client. `tid` is the thread it is reported for (and the
// thread the client then looks at); every kind but kExited/kKilled is a stop of that thread.
struct StopEvent {
  enum class Kind : std::uint8_t {
    kSignal,         // signal: the program's (delivered if the client resumes with it), SIGTRAP
                     // at the end of a step, SIGINT for an interrupt
    kWatch,          // a watch's hit: point kWrite/kRead/kAccess at addr, or kHardware
                     // (a hardware breakpoint placed as a watch)
    kBreakpoint,     // an int3 of insert_point: point kSoftware or kHardware
    kFork,           // tid forked (or vforked) child_process, whose thread is child
    kVforkDone,      // tid's vfork child execed or exited
    kExec,           // tid execed exec_path (empty: unknown)
    kSyscallEntry,   // catch syscall: tid enters / returns from syscall
    kSyscallReturn,  //
    kThreadCreated,  // non-stop mode: thread tid is new, stopped at its first instruction
    kThreadExited,   // non-stop mode: thread tid ended (status), its process goes on
    kExited,         // process ended with status (kExited) or signal (kKilled); remains: a
    kKilled,         // traced process is left: tid is then the leader of a new first process
                     // (the client's selected threads are forgotten), or 0
    kNoResumed,      // all-stop: every thread the client resumed has ended (tid the last),
                     // and none is left to report a stop (the client took no-resumed+)
  };
  Kind kind = Kind::kSignal;
  Tid tid = 0;
  int signal = 5;  // SIGTRAP
  PointType point = PointType::kSoftware;
  std::uint64_t addr = 0;
  Tid child = 0;
  bool vfork = false;
  std::string exec_path;
  long syscall = -1;
  Tid process = 0;
  int status = 0;
  bool remains = false;
};

// How the server ends its serving of a process (finish()) and what it says to its embedder.
struct ServerEnd {
  // kInterrupted: a signal the embedder handles (Connection::interrupt_requested) asked the
  // server to end; the process is left as a disconnect leaves it.
  enum class How : std::uint8_t { kDetached, kKilled, kDisconnected, kInterrupted };
  How how = How::kDisconnected;
  bool exited = false;   // the process ended by itself (status or signal)
  bool serving = false;  // the server stays for the next client
  int status = 0;
  int signal = 0;
};

// What the client announced in qSupported that changes how the process is run.
struct ClientFeatures {
  bool multiprocess = false;
  bool fork_events = false;   // with multiprocess
  bool vfork_events = false;  // with multiprocess
  bool no_resumed = false;    // the N stop reply is understood
};

// A mapping of the address space around an address (qMemoryRegionInfo): `mapped` false for the
// gap [start, start+size) up to the next mapping.
struct MemoryRegion {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  bool mapped = false;
  bool read = false, write = false, exec = false;
  std::string path;
};

// A host file's status (vFile:fstat), as gdb's struct fio_stat has it.
struct FileStatus {
  std::uint64_t dev = 0, ino = 0, mode = 0, nlink = 0, uid = 0, gid = 0, rdev = 0, size = 0,
                blksize = 0, blocks = 0;
  std::int64_t atime = 0, mtime = 0, ctime = 0;
};

// gdb's File-I/O open flags (vFile:open), as the protocol carries them.
inline constexpr unsigned kFileWriteOnly = 1, kFileReadWrite = 2, kFileAppend = 0x8,
                          kFileCreate = 0x200, kFileTruncate = 0x400, kFileExclusive = 0x800;

// One of the machine's tables as `info os` shows them (qXfer:osdata): its name, column titles
// and rows (a cell per column).
struct OsData {
  std::string type;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

// What wait() saw: a stop, or input from the client while the process runs.
struct Waited {
  std::optional<StopEvent> stop;  // nullopt: the client's connection has input
};

class Target {
 public:
  virtual ~Target() = default;

  // The process. With none (has_process() false) the server calls only has_process, can_start,
  // start, restart, attach, finish (nothing to leave then), the set_* calls, the environment
  // and randomization setters, the host files, close_files and served.
  virtual bool has_process() const = 0;
  virtual Tid pid() const = 0;                   // the first process
  virtual bool spawned() const = 0;              // started (true) or attached (false)
  virtual std::vector<Tid> threads() const = 0;  // of every traced process
  virtual Tid group_of(Tid tid) const = 0;
  virtual Tid process_of(Tid tid) const = 0;
  virtual bool is_stopped(Tid tid) const = 0;
  // A process whose threads are all gone from threads() has yet to report its end (its leader
  // ended while other threads were still exiting): a non-stop wait must go on for it.
  virtual bool end_due() const { return false; }

  // The client's features: at its qSupported (announced: a process's forks are then held for
  // their events, as the features say) and at a new connection (none yet, forks as they were).
  virtual void set_features(const ClientFeatures& features, bool announced) = 0;
  // `catch syscall` (nullopt: off; empty: every call).
  virtual void set_catch_syscalls(std::optional<std::set<long>> numbers) = 0;
  // QProgramSignals: the signals (the system's numbers) the client passes to the program. A
  // detach delivers such a signal that a thread's stop reported and no resume delivered yet, as
  // gdbserver does; before the client says, every signal but SIGTRAP and SIGINT (gdb's default).
  virtual void set_program_signals(std::set<int> signals) = 0;
  // Where the target's event log goes (`monitor set debug`); empty: nowhere.
  virtual void set_event_log(std::function<void(const std::string&)> log) = 0;

  // Registers: ext reads the XSAVE components too. write_registers writes back the parts of
  // `now` that differ from `before` (what read_registers gave).
  virtual Result<x86::Regs> general_registers(Tid tid) = 0;
  virtual Result<Registers> read_registers(Tid tid, bool ext) = 0;
  virtual Result<void> write_registers(Tid tid, const Registers& now, const Registers& before) = 0;

  // Memory of `process` (process_of of a thread), the program's bytes (see the contract).
  virtual Result<std::vector<std::uint8_t>> read_memory(Tid process, std::uint64_t addr,
                                                        std::uint64_t len) = 0;
  virtual Result<void> write_memory(Tid process, std::uint64_t addr,
                                    const std::vector<std::uint8_t>& bytes) = 0;

  // Z/z in `process`: conditions and commands only for kSoftware/kHardware. Where a condition
  // holds (or there is none) the commands run (their printf text is the server's output), and
  // a breakpoint with commands is no stop: gdb's agent-style dprintf.
  virtual Result<void> insert_point(Tid process, PointType type, std::uint64_t addr,
                                    std::uint64_t len, PointAgent agent) = 0;
  virtual Result<void> remove_point(Tid process, PointType type, std::uint64_t addr,
                                    std::uint64_t len) = 0;

  // Execution (see the contract). wait() also watches client_fd (-1: nothing) for input; EINTR
  // when a signal interrupted it. interrupt() stops the process (the client's Ctrl-C) and gives
  // the stop to report (SIGINT).
  virtual Result<std::optional<StopEvent>> resume(const std::vector<ResumeAction>& actions) = 0;
  virtual Result<Waited> wait(int client_fd) = 0;
  virtual Result<StopEvent> interrupt() = 0;
  // All-stop Ctrl-C with several processes: true when the interrupt is owed to a process that
  // the current resume leaves stopped — gdbserver's SIGINT, sent to the process it last started
  // or attached, waits in that process until it runs. The target then reports that process's
  // SIGINT stop as soon as a resume runs it, and the server waits on for this resume's stops.
  // False (the default): the server calls interrupt() now.
  virtual bool owe_interrupt() { return false; }
  // Non-stop mode on or off (see the contract); EOPNOTSUPP where the target has none.
  virtual Result<void> set_non_stop(bool on) = 0;
  // vCtrlC (non-stop mode): the process gets SIGINT, as from its terminal; the stop of the
  // thread that takes it comes from wait().
  virtual Result<void> interrupt_process() = 0;

  // Leaving the process: finish() as `how` says (once the process ended: nothing to undo);
  // detach_process/kill_process one process of several (D;PID, vKill;PID); drop_process as
  // finish, then no process.
  virtual Result<ServerEnd> finish(ServerEnd::How how) = 0;
  virtual Result<void> detach_process(Tid process) = 0;
  virtual Result<void> kill_process(Tid process) = 0;
  // drop_process gives the process's end as it was before (exited, status, signal).
  virtual Result<ServerEnd> drop_process(ServerEnd::How how) = 0;

  // Extended mode: can_start() false: start/attach answer EOPNOTSUPP before anything else.
  // start(argv): argv[0] empty runs the last program started (or the embedder's); restart()
  // runs the last program again with its arguments (nothing when there is none). Both give the
  // new process's id. Called while a process is there (gdb's second inferior, multiprocess+
  // only), they add the new process beside it: threads() then lists every process's threads,
  // and each call naming a thread or a process is that process's.
  virtual bool can_start() const = 0;
  virtual Result<Tid> start(std::vector<std::string> argv) = 0;
  virtual Result<void> restart() = 0;
  virtual Result<Tid> attach(Tid pid) = 0;
  // All-stop: the stop an attach found `process` in, when its main thread was taking a signal of
  // its own then (the program's, not the attach's stop): the attach's stop is reported as that
  // signal, as gdbserver reports it, and the signal is delivered if the client resumes with it.
  // nullopt: the usual attach stop (no signal).
  virtual std::optional<StopEvent> attach_signal(Tid process) = 0;
  virtual void set_disable_randomization(bool on) = 0;
  virtual void set_startup_with_shell(bool on) = 0;  // through $SHELL -c 'exec ...', or not
  // The directory the next program starts in ("": the server's own), as `set cwd` in gdb.
  virtual void set_working_directory(const std::string& dir) = 0;
  virtual void reset_environment() = 0;
  virtual void set_environment(const std::string& name_value) = 0;  // NAME=VALUE
  virtual void unset_environment(const std::string& name) = 0;

  // qXfer objects and queries.
  virtual Result<std::string> auxv(Tid process) = 0;
  // The libraries-svr4 document of `process` (its link map: a forked child's own after its
  // dlopen); without_main_lm: main-lm left out (lldb follows it otherwise).
  virtual Result<std::string> libraries_svr4(Tid process, bool without_main_lm) = 0;
  virtual Result<std::string> exec_file(Tid process) = 0;
  virtual Result<std::string> siginfo(Tid tid) = 0;  // its 128 bytes
  // Writes `data` at `offset` of the siginfo of thread `tid`'s stop (what the thread gets when
  // it is resumed with its signal); the bytes written (the part within the 128).
  virtual Result<std::size_t> write_siginfo(Tid tid, std::uint64_t offset,
                                            std::string_view data) = 0;
  virtual std::string thread_name(Tid tid) = 0;  // "" when unknown
  virtual Result<MemoryRegion> memory_region(std::uint64_t addr) = 0;
  // The table `info os NAME` shows ("": the list of tables); kNoEnt for a name with none. Served
  // with or without a process: it is the machine's.
  virtual Result<OsData> os_data(const std::string& name) = 0;
  // qGetTLSAddr: where byte `offset` of the thread-local block of the module whose link_map
  // entry is at `lm` (0: the executable's) is in thread `tid` (a stopped thread).
  virtual Result<std::uint64_t> tls_address(Tid tid, std::uint64_t offset, std::uint64_t lm) = 0;
  // `monitor watches` and `monitor slots`: the text gdb shows (a process is there).
  virtual std::string describe_watches() = 0;
  virtual std::string describe_slots() = 0;

  // Host files (vFile): descriptors are the target's; close_files() closes every one.
  virtual Result<int> open_file(const std::string& path, unsigned flags, unsigned mode) = 0;
  virtual bool has_file(int fd) const = 0;
  virtual Result<void> close_file(int fd) = 0;
  virtual Result<std::size_t> pread_file(int fd, std::uint64_t offset,
                                         std::vector<std::uint8_t>& out) = 0;
  virtual Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::string_view data) = 0;
  virtual Result<FileStatus> stat_file(int fd) = 0;
  virtual Result<void> unlink_file(const std::string& path) = 0;
  virtual Result<std::string> read_link(const std::string& path) = 0;
  virtual void close_files() = 0;

  // After each packet is served (the target may publish its state, e.g. to a watchdog).
  virtual void served() {}
};

// The client's connection, as bytes.
class Connection {
 public:
  virtual ~Connection() = default;
  // Appends what the client sent to `out` (nothing, without `block`, when none is there):
  // kEnd at end of input or when the connection broke (lost() then true); with `block`,
  // kInterrupted when interrupt_requested() while waiting.
  enum class Read : std::uint8_t { kData, kEnd, kInterrupted };
  virtual Result<Read> read(bool block, std::string& out) = 0;
  // Bytes to the client as they are; a failed write marks the connection lost.
  virtual Result<void> write(std::string_view bytes) = 0;
  virtual bool lost() const = 0;
  // Whether the embedder asked the server to end (a signal).
  virtual bool interrupt_requested() const = 0;
  // The descriptor a wait for the process also watches (-1: none).
  virtual int poll_fd() const = 0;
  // One line of the server's log (`monitor set debug`, `set remote-debug`).
  virtual void log(const std::string& line) = 0;
};

}  // namespace hwarb::gdb

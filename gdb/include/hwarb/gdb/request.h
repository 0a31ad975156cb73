// hwarb/gdb/request.h — a packet of the GDB Remote Serial Protocol (its payload, as RspReader
// gives it) as a typed Request: one struct per kind of request, with its fields parsed (numbers,
// thread ids, hex and escaped data, agent expressions). The server (server.h) decides what each
// request does and what its reply is; this parser knows no server state and no target.
//
// Contract:
//  - parse_request is pure and total: every payload gives a Request or an error. A packet the
//    server does not serve (an unknown name, an unsupported Z type, a malformed qXfer name,
//    qOffsets, qTStatus, vMustReplyEmpty, ...) is Unsupported (its reply is empty).
//  - An error is a malformed packet of a served kind (bad hex, a missing field, a register number
//    out of range (but a P without a value: see WriteRegister), an M/X length that is not the
//    data's, an unknown vCont action): EINVAL, the message naming what is wrong, as the server
//    replies it (E16, or E.text with error-message+). Whatever depends on the server's state (is
//    there a process, may the target start one, which signal numbers the client uses, which threads
//    exist) is not checked here: signals are the client's numbers, thread ids as written.
//  - vFile errors are the File-I/O protocol's (F-1,errno), not E NN: a malformed vFile packet is
//    a HostFile with its error set (and its descriptor when that parsed: the server checks the
//    descriptor first).
//  - Thread ids: 0 any, -1 all; with multiprocess+ "pPID.TID" (process, thread) or "pPID" (every
//    thread of PID: thread -1).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/gdb/agent_expr.h"
#include "hwarb/gdb/target.h"

namespace hwarb::gdb {

// Handshake and queries.
struct Supported {  // qSupported: the features the client announced
  bool error_message = false;
  bool exec_events = false;
  bool multiprocess = false;
  bool fork_events = false;  // as written (the server takes it with multiprocess only)
  bool vfork_events = false;
  bool no_resumed = false;  // the client takes the N stop reply (no resumed thread left)
};
struct StartNoAckMode {};  // QStartNoAckMode
struct StopReason {};      // ?
struct ExtendedMode {};    // !
struct CurrentThread {};   // qC
struct Attached {};        // qAttached
struct ThreadInfo {        // qfThreadInfo (first) / qsThreadInfo
  bool first = true;
};
struct Xfer {  // qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH
  std::string object;
  std::string annex;
  std::optional<Tid> annex_process;  // the annex as a process id (> 0), when it is one
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};
struct XferWrite {  // qXfer:OBJECT:write:ANNEX:OFFSET:DATA (DATA binary, escaped)
  std::string object;
  std::string annex;
  std::uint64_t offset = 0;
  std::string data;
};
struct Monitor {  // qRcmd,HEX: the command ("" when the hex is malformed)
  std::string command;
};
struct HostInfo {};               // qHostInfo (lldb)
struct ProcessInfo {};            // qProcessInfo (lldb)
struct WatchpointSupportInfo {};  // qWatchpointSupportInfo[:] (lldb)
struct MemoryRegionInfo {         // qMemoryRegionInfo:ADDR (lldb)
  std::uint64_t addr = 0;
};
struct Symbol {};    // qSymbol...: no symbols wanted
struct TlsAddress {  // qGetTLSAddr:THREAD,OFFSET,LM
  Tid process = 0;   // as written (0 without multiprocess)
  Tid tid = 0;
  std::uint64_t offset = 0;  // in the module's thread-local block
  std::uint64_t lm = 0;      // the module's link_map entry (0: the executable)
};

// Settings (Q...).
struct CatchSyscalls {  // QCatchSyscalls:0 (nullopt) | :1[;NR]... (empty: every call)
  std::optional<std::set<long>> numbers;
};
struct ProgramSignals {  // QProgramSignals:[SIG[;SIG]...] (gdb's signal numbers, hex)
  std::set<int> signals;
};
struct ThreadSuffixSupported {};   // QThreadSuffixSupported (lldb)
struct ListThreadsInStopReply {};  // QListThreadsInStopReply (lldb)
struct DisableRandomization {      // QDisableRandomization:0|1
  bool on = false;
};
struct StartupWithShell {  // QStartupWithShell:0|1
  bool on = true;
};
struct SetWorkingDir {  // QSetWorkingDir:HEX of DIR (empty: the server's own)
  std::string dir;
};
struct EnvironmentReset {};  // QEnvironmentReset
struct EnvironmentSet {      // QEnvironmentHexEncoded:HEX of NAME=VALUE
  std::string name_value;
};
struct EnvironmentUnset {  // QEnvironmentUnset:HEX of NAME
  std::string name;
};

// Threads.
struct SelectThread {  // Hg / Hc (any other letter: as Hc)
  bool general = true;
  Tid process = 0;
  Tid tid = 0;
};
struct ThreadAlive {  // T
  Tid tid = 0;
};

// Registers (gdb's numbering, gdb_regs.h).
struct ReadRegisters {};  // g
struct WriteRegisters {   // G: the hex of every register
  std::string hex;
};
struct ReadRegister {  // p REGNO[;thread:TID;]
  int regno = 0;
  std::optional<Tid> thread;  // lldb's thread suffix (nullopt: the general thread)
};
struct WriteRegister {  // P REGNO=HEX[;thread:TID;]
  int regno = 0;
  std::optional<Tid> thread;
  // nullopt: no '=' (EINVAL, which the server replies after reading the thread's registers, as
  // gdbserver does)
  std::optional<std::string> hex;
};

// Memory.
struct ReadMemory {  // m ADDR,LENGTH (hex reply) / x ADDR,LENGTH (binary)
  std::uint64_t addr = 0;
  std::uint64_t length = 0;  // as asked: the server bounds it
  bool binary = false;
};
struct WriteMemory {  // M ADDR,LENGTH:HEX / X ADDR,LENGTH:BINARY
  std::uint64_t addr = 0;
  std::vector<std::uint8_t> bytes;  // exactly LENGTH
};

// Breakpoints and watches.
struct Point {  // Z/z TYPE,ADDR,KIND[;X len,expr]...[;cmds:...]
  bool insert = true;
  PointType type = PointType::kSoftware;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  PointAgent agent;  // Z0/Z1 only: conditions and commands
};

// Execution: signals in the client's numbering.
struct Continue {  // c, s, C SIG, S SIG: the Hc thread steps (s, S), or everything continues
  char kind = 'c';
  std::uint64_t signal = 0;  // C, S
};
struct VContAction {
  char kind = 'c';  // c, C, s, S, t, r
  std::uint64_t signal = 0;
  Tid process = 0;
  Tid tid = -1;
  std::uint64_t range_start = 0;  // r: step while the pc is in [range_start, range_end)
  std::uint64_t range_end = 0;
};
struct VCont {  // vCont;ACTION[:TID]... (at least one)
  std::vector<VContAction> actions;
};
struct VContQuery {};  // vCont?
struct NonStop {       // QNonStop:0 | QNonStop:1
  bool on = false;
};
struct ThreadEvents {  // QThreadEvents:0 | QThreadEvents:1
  bool on = false;
};
struct Stopped {};  // vStopped: the client took the stop notified last
struct CtrlC {};    // vCtrlC: non-stop mode's interrupt

// Processes.
struct Run {  // vRun;PROG[;ARG]... (hex; PROG empty: the last program)
  std::vector<std::string> argv;
};
struct Attach {  // vAttach;PID
  Tid pid = 0;
};
struct VKill {                 // vKill[;PID]
  std::optional<Tid> process;  // a process id > 0
};
struct Detach {  // D[;PID]
  std::optional<Tid> process;
};
struct Kill {};     // k
struct Restart {};  // R

// Host I/O: vFile:OP:ARG,...
struct HostFile {
  enum class Op : std::uint8_t {
    kSetFs,
    kOpen,
    kClose,
    kPread,
    kPwrite,
    kFstat,
    kUnlink,
    kReadlink,
    kOther,  // an unknown OP on a descriptor
  };
  Op op = Op::kOther;
  std::string path;                     // open, unlink, readlink
  unsigned flags = 0, mode = 0;         // open (mode: its permission bits)
  std::optional<int> fd;                // close, pread, pwrite, fstat, kOther
  std::uint64_t count = 0, offset = 0;  // pread (count), pread and pwrite (offset)
  std::string data;                     // pwrite, unescaped
  std::optional<Error> error;           // malformed (the server replies F-1,errno)
};

struct Unsupported {};  // the empty reply

using Request = std::variant<
    Supported, StartNoAckMode, StopReason, ExtendedMode, CurrentThread, Attached, ThreadInfo, Xfer,
    XferWrite, Monitor, HostInfo, ProcessInfo, WatchpointSupportInfo, MemoryRegionInfo, Symbol,
    TlsAddress, CatchSyscalls, ProgramSignals, ThreadSuffixSupported, ListThreadsInStopReply,
    DisableRandomization, StartupWithShell, SetWorkingDir, EnvironmentReset, EnvironmentSet,
    EnvironmentUnset, SelectThread, ThreadAlive, ReadRegisters, WriteRegisters, ReadRegister,
    WriteRegister, ReadMemory, WriteMemory, Point, Continue, VCont, VContQuery, NonStop,
    ThreadEvents, Stopped, CtrlC, Run, Attach, VKill, Detach, Kill, Restart, HostFile, Unsupported>;

Result<Request> parse_request(std::string_view packet);

}  // namespace hwarb::gdb

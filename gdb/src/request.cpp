#include "hwarb/gdb/request.h"

#include <utility>

#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/gdb/rsp.h"

namespace hwarb::gdb {
namespace {

// "addr,len" (or "addr,kind").
Result<std::pair<std::uint64_t, std::uint64_t>> addr_len(std::string_view text) {
  const std::size_t comma = text.find(',');
  if (comma == std::string_view::npos) {
    return make_error(ErrorCode::kInval, "packet: '" + std::string(text) + "' lacks ADDR,LENGTH");
  }
  auto addr = parse_hex_u64(text.substr(0, comma));
  if (!addr) return std::unexpected(addr.error());
  auto len = parse_hex_u64(text.substr(comma + 1));
  if (!len) return std::unexpected(len.error());
  return std::pair{*addr, *len};
}

// One part of a thread id: hex, -1 (all) or 0 (any).
Result<Tid> parse_id(std::string_view text) {
  if (text == "-1") return -1;
  auto v = parse_hex_u64(text);
  if (!v) return std::unexpected(v.error());
  if (*v > 0x7fffffff) {
    return make_error(ErrorCode::kInval, "thread: " + std::string(text) + " is not a thread id");
  }
  return static_cast<Tid>(*v);
}

// A process id > 0, or nullopt.
std::optional<Tid> positive_id(std::string_view text) {
  auto id = parse_id(text);
  if (!id || *id <= 0) return std::nullopt;
  return *id;
}

// A thread id of the protocol: TID, or pPID.TID / pPID (every thread of PID) with
// multiprocess+. {process (0: any, -1: all), thread (0: any, -1: all)}.
Result<std::pair<Tid, Tid>> parse_ptid(std::string_view text) {
  if (!text.starts_with("p")) {
    auto tid = parse_id(text);
    if (!tid) return std::unexpected(tid.error());
    return std::pair<Tid, Tid>{0, *tid};
  }
  const std::size_t dot = text.find('.');
  auto process = parse_id(text.substr(1, dot == std::string_view::npos ? dot : dot - 1));
  if (!process) return std::unexpected(process.error());
  if (dot == std::string_view::npos) return std::pair<Tid, Tid>{*process, -1};
  auto tid = parse_id(text.substr(dot + 1));
  if (!tid) return std::unexpected(tid.error());
  return std::pair<Tid, Tid>{*process, *tid};
}

Result<Tid> parse_thread(std::string_view text) {
  auto id = parse_ptid(text);
  if (!id) return std::unexpected(id.error());
  return id->second;
}

std::string text_of(const std::vector<std::uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

Result<Request> parse_supported(std::string_view p) {
  Supported s;
  s.error_message = p.find("error-message+") != std::string_view::npos;
  s.exec_events = p.find("exec-events+") != std::string_view::npos;
  s.multiprocess = p.find("multiprocess+") != std::string_view::npos;
  s.fork_events = p.find(";fork-events+") != std::string_view::npos;
  s.vfork_events = p.find("vfork-events+") != std::string_view::npos;
  s.no_resumed = p.find("no-resumed+") != std::string_view::npos;
  return s;
}

// qXfer:OBJECT:write:ANNEX:OFFSET:DATA, after "write:".
Result<Request> parse_xfer_write(std::string object, std::string_view rest) {
  XferWrite w;
  w.object = std::move(object);
  const std::size_t c1 = rest.find(':');
  if (c1 == std::string_view::npos) return make_error(ErrorCode::kInval, "qXfer: no annex");
  w.annex = rest.substr(0, c1);
  rest = rest.substr(c1 + 1);
  const std::size_t c2 = rest.find(':');
  if (c2 == std::string_view::npos) return make_error(ErrorCode::kInval, "qXfer: no data");
  auto offset = parse_hex_u64(rest.substr(0, c2));
  if (!offset) return make_error(ErrorCode::kInval, "qXfer: offset: not a hex number");
  w.offset = *offset;
  w.data = rsp_unescape(rest.substr(c2 + 1));
  return w;
}

// qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH and qXfer:OBJECT:write:ANNEX:OFFSET:DATA; another form
// is not served.
Result<Request> parse_xfer(std::string_view rest) {
  const std::size_t c1 = rest.find(':');
  if (c1 == std::string_view::npos) return Unsupported{};
  Xfer x;
  x.object = rest.substr(0, c1);
  rest = rest.substr(c1 + 1);
  if (rest.starts_with("write:")) return parse_xfer_write(std::move(x.object), rest.substr(6));
  if (!rest.starts_with("read:")) return Unsupported{};
  rest = rest.substr(5);
  const std::size_t c2 = rest.find(':');
  if (c2 == std::string_view::npos) return Unsupported{};
  x.annex = rest.substr(0, c2);
  if (!x.annex.empty()) x.annex_process = positive_id(x.annex);
  auto al = addr_len(rest.substr(c2 + 1));
  if (!al) return std::unexpected(al.error());
  x.offset = al->first;
  x.length = al->second;
  return x;
}

// QCatchSyscalls:0 | QCatchSyscalls:1[;NR]... (hex numbers; none: every call).
Result<Request> parse_catch_syscalls(std::string_view rest) {
  if (rest == "0") return CatchSyscalls{};
  if (!rest.starts_with("1")) return make_error(ErrorCode::kInval, "QCatchSyscalls: 0 or 1");
  rest = rest.substr(1);
  std::set<long> numbers;
  while (!rest.empty()) {
    if (rest[0] != ';') return make_error(ErrorCode::kInval, "QCatchSyscalls: ';' expected");
    rest = rest.substr(1);
    const std::size_t end = rest.find(';');
    auto nr = parse_hex_u64(rest.substr(0, end));
    if (!nr) return std::unexpected(nr.error());
    numbers.insert(static_cast<long>(*nr));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  return CatchSyscalls{std::move(numbers)};
}

// QProgramSignals:[SIG[;SIG]...] (gdb's numbers, hex; none: no signal is passed).
Result<Request> parse_program_signals(std::string_view rest) {
  ProgramSignals out;
  while (!rest.empty()) {
    const std::size_t end = rest.find(';');
    auto sig = parse_hex_u64(rest.substr(0, end));
    if (!sig || *sig > 1000) {
      return make_error(ErrorCode::kInval, "QProgramSignals: a signal number in hex expected");
    }
    out.signals.insert(static_cast<int>(*sig));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  return out;
}

// QEnvironmentReset, QEnvironmentHexEncoded:HEX (NAME=VALUE), QEnvironmentUnset:HEX (NAME).
Result<Request> parse_environment(std::string_view p) {
  if (p == "QEnvironmentReset") return EnvironmentReset{};
  const bool set = p.starts_with("QEnvironmentHexEncoded:");
  if (!set && !p.starts_with("QEnvironmentUnset:")) return Unsupported{};
  auto bytes = from_hex(p.substr(p.find(':') + 1));
  if (!bytes) return std::unexpected(bytes.error().with_context("environment"));
  std::string text = text_of(*bytes);
  const std::size_t eq = text.find('=');
  if ((set && (eq == std::string::npos || eq == 0)) || (!set && text.empty())) {
    return make_error(ErrorCode::kInval,
                      "environment: '" + text + "' is not " + (set ? "NAME=VALUE" : "a NAME"));
  }
  if (set) return EnvironmentSet{std::move(text)};
  return EnvironmentUnset{std::move(text)};
}

// qGetTLSAddr:THREAD,OFFSET,LM.
Result<Request> parse_tls_address(std::string_view rest) {
  const std::size_t first = rest.find(',');
  const std::size_t second = first == std::string_view::npos ? first : rest.find(',', first + 1);
  if (second == std::string_view::npos) {
    return make_error(ErrorCode::kInval, "packet: qGetTLSAddr needs THREAD,OFFSET,LM");
  }
  auto id = parse_ptid(rest.substr(0, first));
  if (!id) return std::unexpected(id.error());
  auto offset = parse_hex_u64(rest.substr(first + 1, second - first - 1));
  if (!offset) return std::unexpected(offset.error());
  auto lm = parse_hex_u64(rest.substr(second + 1));
  if (!lm) return std::unexpected(lm.error());
  return TlsAddress{id->first, id->second, *offset, *lm};
}

Result<Request> parse_query(std::string_view p) {
  if (p.starts_with("qRcmd,")) {
    auto bytes = from_hex(p.substr(6));
    return Monitor{bytes ? text_of(*bytes) : std::string()};
  }
  if (p.starts_with("qSupported")) return parse_supported(p);
  if (p == "QStartNoAckMode") return StartNoAckMode{};
  if (p == "qC") return CurrentThread{};
  if (p.starts_with("qAttached")) return Attached{};
  if (p == "qfThreadInfo") return ThreadInfo{true};
  if (p == "qsThreadInfo") return ThreadInfo{false};
  if (p.starts_with("qXfer:")) return parse_xfer(p.substr(6));
  if (p.starts_with("QCatchSyscalls:")) return parse_catch_syscalls(p.substr(15));
  if (p.starts_with("QProgramSignals:")) return parse_program_signals(p.substr(16));
  if (p == "QThreadSuffixSupported") return ThreadSuffixSupported{};
  if (p.starts_with("QNonStop:") || p.starts_with("QThreadEvents:")) {
    const std::string_view mode = p.substr(p.find(':') + 1);
    if (mode != "0" && mode != "1") {
      return make_error(ErrorCode::kInval, std::string(p.substr(0, p.find(':'))) + ": 0 or 1");
    }
    if (p[1] == 'N') return NonStop{mode == "1"};
    return ThreadEvents{mode == "1"};
  }
  if (p == "QListThreadsInStopReply") return ListThreadsInStopReply{};
  if (p == "qHostInfo") return HostInfo{};
  if (p == "qProcessInfo") return ProcessInfo{};
  if (p == "qWatchpointSupportInfo" || p == "qWatchpointSupportInfo:") {
    return WatchpointSupportInfo{};
  }
  if (p.starts_with("qMemoryRegionInfo:")) {
    auto addr = parse_hex_u64(p.substr(18));
    if (!addr) return std::unexpected(addr.error());
    return MemoryRegionInfo{*addr};
  }
  if (p.starts_with("qSymbol")) return Symbol{};
  if (p.starts_with("qGetTLSAddr:")) return parse_tls_address(p.substr(12));
  if (p.starts_with("QDisableRandomization:")) return DisableRandomization{p.ends_with(":1")};
  if (p.starts_with("QStartupWithShell:")) return StartupWithShell{p.ends_with(":1")};
  if (p.starts_with("QSetWorkingDir:")) {
    auto dir = from_hex(p.substr(15));
    if (!dir)
      return make_error(ErrorCode::kInval, "packet: QSetWorkingDir: " + dir.error().message());
    return SetWorkingDir{std::string(dir->begin(), dir->end())};
  }
  if (p.starts_with("QEnvironment")) return parse_environment(p);
  return Unsupported{};  // qTStatus, qOffsets, ...: not served
}

// H OP THREAD.
Result<Request> parse_select(std::string_view rest) {
  if (rest.empty()) return make_error(ErrorCode::kInval, "packet: H without a thread");
  auto id = parse_ptid(rest.substr(1));
  if (!id) return std::unexpected(id.error());
  return SelectThread{rest[0] == 'g', id->first, id->second};
}

// p REGNO / P REGNO=HEX, each with lldb's ";thread:TID;" suffix maybe.
Result<Request> parse_register(bool write, std::string_view spec) {
  std::optional<Tid> thread;
  if (const std::size_t semi = spec.find(";thread:"); semi != std::string_view::npos) {
    auto t = parse_thread(spec.substr(semi + 8, spec.find(';', semi + 1) - semi - 8));
    if (t) thread = *t;
    spec = spec.substr(0, semi);
  }
  const std::size_t eq = spec.find('=');
  auto regno = parse_hex_u64(spec.substr(0, eq));
  if (!regno) return std::unexpected(regno.error());
  if (*regno >= static_cast<std::uint64_t>(kGdbRegisterCount)) {
    return make_error(ErrorCode::kInval, "regno: " + hex_u64(*regno) + " is not a register (0-" +
                                             hex_u64(kGdbRegisterCount - 1) + ")");
  }
  const int n = static_cast<int>(*regno);
  if (!write) return ReadRegister{n, thread};
  if (eq == std::string_view::npos) return WriteRegister{n, thread, std::nullopt};
  return WriteRegister{n, thread, std::string(spec.substr(eq + 1))};
}

// M ADDR,LENGTH:HEX / X ADDR,LENGTH:BINARY (escaped).
Result<Request> parse_write_memory(bool binary, std::string_view rest) {
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos) {
    return make_error(ErrorCode::kInval, "packet: M/X without ':'");
  }
  auto al = addr_len(rest.substr(0, colon));
  if (!al) return std::unexpected(al.error());
  WriteMemory w{al->first, {}};
  if (!binary) {
    auto h = from_hex(rest.substr(colon + 1));
    if (!h) return std::unexpected(h.error());
    w.bytes = std::move(*h);
  } else {
    const std::string raw = rsp_unescape(rest.substr(colon + 1));
    w.bytes.assign(raw.begin(), raw.end());
  }
  if (w.bytes.size() != al->second) {
    return make_error(ErrorCode::kInval, "packet: length " + std::to_string(al->second) + " but " +
                                             std::to_string(w.bytes.size()) + " bytes");
  }
  return w;
}

// Z/z TYPE,ADDR,KIND[;X len,expr]...[;cmds:PERSIST,X len,expr...]
Result<Request> parse_point(bool insert, std::string_view rest) {
  if (rest.size() < 2 || rest[1] != ',') return Unsupported{};
  const char type = rest[0];
  if (type < '0' || type > '4') return Unsupported{};
  std::string_view spec = rest.substr(2);
  const std::size_t semi = spec.find(';');
  Point point{insert, static_cast<PointType>(type), 0, 0, {}};
  if (semi != std::string_view::npos && insert && (type == '0' || type == '1')) {
    auto parsed = parse_point_agent(spec.substr(semi));
    if (!parsed) return std::unexpected(parsed.error());
    point.agent = std::move(*parsed);
  }
  auto al = addr_len(spec.substr(0, semi));
  if (!al) return std::unexpected(al.error());
  point.addr = al->first;
  point.length = al->second;
  return point;
}

// c, s, C SIG, S SIG; resuming at another address (c ADDR, C SIG;ADDR) is not served: gdb never
// asks for it.
Result<Request> parse_continue(char kind, std::string_view rest) {
  std::string_view tail = rest;
  std::string_view sig;
  const bool with_signal = kind == 'C' || kind == 'S';
  if (with_signal) {
    const std::size_t semi = tail.find(';');
    sig = tail.substr(0, semi);
    tail = semi == std::string_view::npos ? std::string_view() : tail.substr(semi + 1);
  }
  if (!tail.empty() || (!with_signal && !rest.empty())) {
    return make_error(ErrorCode::kInval, "packet: resuming at an address is not served");
  }
  Continue c{kind, 0};
  if (with_signal) {
    auto signal = parse_hex_u64(sig);
    if (!signal) return std::unexpected(signal.error());
    c.signal = *signal;
  }
  return c;
}

// vCont;ACTION[:THREAD];...: each applies to its thread, or (without one) to every thread no
// earlier action named.
Result<Request> parse_vcont(std::string_view rest) {
  VCont v;
  while (!rest.empty()) {
    const std::size_t semi = rest.find(';');
    const std::string_view one = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    if (one.empty()) continue;
    VContAction a;
    a.kind = one[0];
    const std::string_view arg = one.substr(1);
    const std::size_t colon = arg.find(':');
    if (a.kind == 'C' || a.kind == 'S') {
      auto sig = parse_hex_u64(arg.substr(0, colon));
      if (!sig) return std::unexpected(sig.error());
      a.signal = *sig;
    } else if (a.kind == 'r') {
      // rSTART,END: range stepping.
      auto range = addr_len(arg.substr(0, colon));
      if (!range) {
        return make_error(ErrorCode::kInval,
                          "vCont: range '" + std::string(one) + "' is not START,END");
      }
      a.range_start = range->first;
      a.range_end = range->second;
    } else if (colon != 0 && !arg.empty()) {
      return make_error(ErrorCode::kInval, "vCont: action '" + std::string(one) + "' is malformed");
    }
    if (colon != std::string_view::npos) {
      auto t = parse_ptid(arg.substr(colon + 1));
      if (!t) return std::unexpected(t.error());
      a.process = t->first;
      a.tid = t->second;
    }
    if (a.kind != 'c' && a.kind != 'C' && a.kind != 's' && a.kind != 'S' && a.kind != 't' &&
        a.kind != 'r') {
      return make_error(ErrorCode::kInval, "vCont: unknown action '" + std::string(one) + "'");
    }
    v.actions.push_back(a);
  }
  if (v.actions.empty()) return make_error(ErrorCode::kInval, "vCont: no action");
  return v;
}

// PROG;ARG;... each hex-encoded.
Result<Request> parse_run(std::string_view args) {
  Run run;
  for (;;) {
    const std::size_t semi = args.find(';');
    auto bytes = from_hex(args.substr(0, semi));
    if (!bytes) return std::unexpected(bytes.error().with_context("vRun"));
    run.argv.push_back(text_of(*bytes));
    if (semi == std::string_view::npos) break;
    args = args.substr(semi + 1);
  }
  return run;
}

Result<Request> parse_attach(std::string_view text) {
  auto pid = parse_id(text);
  if (!pid) return std::unexpected(pid.error());
  if (*pid <= 0) return make_error(ErrorCode::kInval, "vAttach: " + std::string(text));
  return Attach{*pid};
}

// vFile:OP:ARG,ARG,...
HostFile parse_host_file(std::string_view request) {
  using Op = HostFile::Op;
  HostFile f;
  const std::size_t colon = request.find(':');
  const std::string_view op = request.substr(0, colon);
  std::vector<std::string_view> args;
  if (colon != std::string_view::npos) {
    std::string_view rest = request.substr(colon + 1);
    for (;;) {
      const std::size_t comma = rest.find(',');
      args.push_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  const auto number = [&](std::size_t i) -> Result<std::uint64_t> {
    if (i >= args.size()) return make_error(ErrorCode::kInval, "vFile: missing argument");
    return parse_hex_u64(args[i]);
  };
  // The first error (in argument order) is the one reported.
  const auto take = [&](const auto& result) {
    if (!result && !f.error) f.error = result.error();
    return result.value_or(typename std::decay_t<decltype(result)>::value_type{});
  };
  if (op == "setfs") {
    f.op = Op::kSetFs;
    return f;
  }
  if (op == "readlink" || op == "unlink" || op == "open") {
    f.op = op == "readlink" ? Op::kReadlink : op == "unlink" ? Op::kUnlink : Op::kOpen;
    f.path = text_of(take(from_hex(args.empty() ? std::string_view() : args[0])));
    if (f.op == Op::kOpen) {
      f.flags = static_cast<unsigned>(take(number(1)));
      f.mode = static_cast<unsigned>(take(args.size() > 2 ? number(2) : Result<std::uint64_t>(0)) &
                                     07777);
    }
    return f;
  }
  f.op = op == "close"    ? Op::kClose
         : op == "pread"  ? Op::kPread
         : op == "pwrite" ? Op::kPwrite
         : op == "fstat"  ? Op::kFstat
                          : Op::kOther;
  auto fd = number(0);
  if (!fd) {
    f.error = fd.error();
    return f;
  }
  f.fd = static_cast<int>(*fd);
  if (f.op == Op::kPread) {
    f.count = take(number(1));
    f.offset = take(number(2));
  } else if (f.op == Op::kPwrite) {
    // vFile:pwrite:FD,OFFSET,DATA: the data binary, escaped as in X packets.
    f.offset = take(number(1));
    const std::size_t second = request.find(',', request.find(',') + 1);
    if (!f.error && second == std::string_view::npos) {
      f.error = Error(ErrorCode::kInval, "vFile: pwrite without data");
    }
    if (!f.error) f.data = rsp_unescape(request.substr(second + 1));
  }
  return f;
}

}  // namespace

Result<Request> parse_request(std::string_view p) {
  if (p.empty()) return Unsupported{};
  const char c = p[0];
  const std::string_view rest = p.substr(1);
  switch (c) {
    case '?':
      return StopReason{};
    case '!':
      return ExtendedMode{};
    case 'q':
    case 'Q':
      return parse_query(p);
    case 'H':
      return parse_select(rest);
    case 'T': {
      auto t = parse_thread(rest);
      if (!t) return std::unexpected(t.error());
      return ThreadAlive{*t};
    }
    case 'g':
      return ReadRegisters{};
    case 'G':
      return WriteRegisters{std::string(rest)};
    case 'p':
    case 'P':
      return parse_register(c == 'P', rest);
    case 'm':
    case 'x': {
      auto al = addr_len(rest);
      if (!al) return std::unexpected(al.error());
      return ReadMemory{al->first, al->second, c == 'x'};
    }
    case 'M':
    case 'X':
      return parse_write_memory(c == 'X', rest);
    case 'Z':
    case 'z':
      return parse_point(c == 'Z', rest);
    case 'c':
    case 's':
    case 'C':
    case 'S':
      return parse_continue(c, rest);
    case 'v':
      if (p == "vCont?") return VContQuery{};
      if (p.starts_with("vCont;")) return parse_vcont(p.substr(6));
      if (p == "vStopped") return Stopped{};
      if (p == "vCtrlC") return CtrlC{};
      if (p.starts_with("vKill")) {
        return VKill{p.starts_with("vKill;") ? positive_id(p.substr(6)) : std::nullopt};
      }
      if (p.starts_with("vFile:")) return parse_host_file(p.substr(6));
      if (p.starts_with("vRun;")) return parse_run(p.substr(5));
      if (p.starts_with("vAttach;")) return parse_attach(p.substr(8));
      return Unsupported{};  // vMustReplyEmpty, ...
    case 'D':
      return Detach{rest.starts_with(";") ? positive_id(rest.substr(1)) : std::nullopt};
    case 'R':
      return Restart{};
    case 'k':
      return Kill{};
    default:
      return Unsupported{};
  }
}

}  // namespace hwarb::gdb

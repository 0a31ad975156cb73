#include "hwarb/gdb/server.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <span>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/gdb/gdb_signals.h"

namespace hwarb::gdb {
namespace {

constexpr std::size_t kPacketSize = 0x4000;  // what we announce (PacketSize)
constexpr long kSysExecve = 59;              // x86-64's execve

// "E22" for an error: its errno, as gdbserver answers.
std::string error_reply(const Error& e, bool messages) {
  if (messages) return "E." + e.to_string();
  char buf[8];
  std::snprintf(buf, sizeof buf, "E%02x", static_cast<int>(e.code()) & 0xff);
  return buf;
}

std::string hex_byte(int v) {
  char buf[4];
  std::snprintf(buf, sizeof buf, "%02x", v & 0xff);
  return buf;
}

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

// The slice [offset, offset+length) of a qXfer object: "m" + data when more follows, "l" + data
// at the end.
std::string xfer_slice(std::string_view whole, std::uint64_t offset, std::uint64_t length) {
  if (offset >= whole.size()) return "l";
  const std::string_view part = whole.substr(offset, length);
  const bool last = offset + part.size() >= whole.size();
  return (last ? "l" : "m") + std::string(part);  // rsp_frame escapes the binary data
}

std::string hex_text(std::string_view text) {
  return to_hex(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace

Server::Server(Target& target, Connection& connection) : target_(target), connection_(connection) {
  if (target_.has_process()) {
    last_thread_ = target_.pid();
    last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
  } else {
    last_stop_ = "W00";
  }
}

void Server::connect() {
  reader_ = RspReader();
  ack_ = true;
  error_messages_ = false;
  thread_suffix_ = false;
  list_threads_ = false;
  native_signals_ = false;
  exec_events_ = false;
  multiprocess_ = false;
  fork_events_ = false;
  vfork_events_ = false;
  target_.set_features(ClientFeatures{}, false);
  last_sent_.clear();
  interrupt_ = false;
  gone_.reset();
  target_.close_files();
}

bool Server::disabled(const std::string& name) const {
  return options_.disabled_packets.contains(name);
}

bool Server::stays() const {
  return !interrupted_ && target_.can_start() && !options_.once && (options_.multi || extended_);
}

Result<ServerEnd> Server::client_gone() {
  const ServerEnd::How how =
      interrupted_ ? ServerEnd::How::kInterrupted : ServerEnd::How::kDisconnected;
  if (!stays()) {
    auto end = finish(how);
    if (!end) return std::unexpected(end.error());
    return **end;
  }
  const bool exited = exited_;
  ServerEnd end;
  if (target_.has_process()) {
    auto dropped = target_.drop_process(how);
    forget_process();
    if (!dropped) return std::unexpected(dropped.error());
    end = *dropped;
  }
  end.how = how;
  end.exited = exited;
  end.serving = true;
  return end;
}

void Server::forget_process() {
  last_stop_ = "W00";
  last_thread_ = 0;
  g_thread_ = 0;
  c_thread_ = 0;
  exited_ = false;
}

Result<void> Server::drop_process(ServerEnd::How how) {
  if (!target_.has_process()) return {};
  auto dropped = target_.drop_process(how);
  forget_process();
  if (!dropped) return std::unexpected(dropped.error());
  return {};
}

std::string Server::took_process() {
  forget_process();
  last_thread_ = target_.pid();
  last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
  return last_stop_;
}

Result<std::string> Server::run_program(std::string_view args) {
  if (!target_.can_start()) {
    return make_error(ErrorCode::kOpNotSupp, "vRun: this server starts no programs");
  }
  if (running()) return make_error(ErrorCode::kBusy, "vRun: already debugging a process");
  // PROG;ARG;... each hex-encoded; an empty PROG: the last program run (the target's choice).
  std::vector<std::string> argv;
  for (;;) {
    const std::size_t semi = args.find(';');
    auto bytes = from_hex(args.substr(0, semi));
    if (!bytes) return std::unexpected(bytes.error().with_context("vRun"));
    argv.emplace_back(bytes->begin(), bytes->end());
    if (semi == std::string_view::npos) break;
    args = args.substr(semi + 1);
  }
  auto started = target_.start(std::move(argv));
  if (!started) {
    if (!target_.has_process()) forget_process();
    return std::unexpected(started.error());
  }
  return took_process();
}

Result<std::string> Server::attach_process(std::string_view pid_text) {
  if (!target_.can_start()) {
    return make_error(ErrorCode::kOpNotSupp, "vAttach: this server attaches nothing");
  }
  if (running()) return make_error(ErrorCode::kBusy, "vAttach: already debugging a process");
  auto pid = parse_id(pid_text);
  if (!pid) return std::unexpected(pid.error());
  if (*pid <= 0) return make_error(ErrorCode::kInval, "vAttach: " + std::string(pid_text));
  auto attached = target_.attach(*pid);
  if (!attached) {
    if (!target_.has_process()) forget_process();
    return std::unexpected(attached.error());
  }
  return took_process();
}

std::optional<Result<std::string>> Server::without_process(const std::string& p) {
  if (p == "?") return std::string("W00");
  if (p == "qfThreadInfo" || p == "qsThreadInfo") return std::string("l");
  const bool needs = p == "qC" || p.starts_with("qAttached") || p.starts_with("qProcessInfo") ||
                     p.starts_with("qMemoryRegionInfo") || p.starts_with("qGetTLSAddr") ||
                     (p.starts_with("qXfer:") && !p.starts_with("qXfer:features:")) ||
                     (p[0] != 'q' && p[0] != 'Q' && p[0] != '!' && p[0] != 'R' && p != "vCont?" &&
                      p != "vMustReplyEmpty" && !p.starts_with("vFile:") &&
                      !p.starts_with("vRun;") && !p.starts_with("vAttach;"));
  if (needs) return make_error(ErrorCode::kSrch, "process: there is none (vRun or vAttach first)");
  return std::nullopt;
}

Result<void> Server::send(std::string_view payload) {
  if (remote_debug_) debug_line("remote: sending " + std::string(payload.substr(0, 200)));
  last_sent_ = rsp_frame(payload);
  return write_raw(last_sent_);
}

void Server::debug_line(const std::string& text) {
  std::string line;
  if (debug_timestamps_) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    line =
        std::to_string(us / 1000000) + "." + std::to_string(1000000 + us % 1000000).substr(1) + " ";
  }
  line += "hwarb gdbserver: " + text + "\n";
  connection_.log(line);
}

Result<void> Server::write_raw(std::string_view bytes) {
  return connection_.write(bytes);
}

Result<bool> Server::receive(bool block) {
  std::string got;
  auto r = connection_.read(block, got);
  if (!r) return std::unexpected(r.error());
  if (*r == Connection::Read::kInterrupted) {
    interrupted_ = true;
    return false;
  }
  if (*r == Connection::Read::kEnd) return false;
  reader_.feed(got);
  return true;
}

int Server::wire_signal(int signal) const {
  return native_signals_ ? signal : gdb_signal_from_linux(signal);
}

std::optional<int> Server::host_signal(std::uint64_t wire) const {
  if (native_signals_) {
    if (wire > 64) return std::nullopt;
    return static_cast<int>(wire);
  }
  if (wire > 1000) return std::nullopt;
  return linux_signal_from_gdb(static_cast<int>(wire));
}

std::string Server::stop_reply(int signal, Tid tid, const std::string& reason) const {
  // gdbserver --disable-packet=T: an S reply, nothing more; =Tthread: no thread: field.
  if (disabled("T")) return "S" + hex_byte(wire_signal(signal));
  std::string out = "T" + hex_byte(wire_signal(signal)) +
                    (disabled("Tthread") ? std::string() : "thread:" + thread_id(tid) + ";") +
                    reason;
  // rbp, rsp and rip (gdb's 6, 7, 16): gdb then needs no 'g' to show where the thread is.
  if (auto regs = target_.general_registers(tid)) {
    out += "06:" + hex_le(regs->rbp, 8) + ";07:" + hex_le(regs->rsp, 8) +
           ";10:" + hex_le(regs->rip, 8) + ";";
  }
  if (list_threads_) {
    out += "threads:";
    bool first = true;
    for (Tid t : target_.threads()) {
      out += (first ? "" : ",") + hex_u64(static_cast<std::uint64_t>(t));
      first = false;
    }
    out += ";";
  }
  return out;
}

std::string Server::on_stop(const StopEvent& ev) {
  using Kind = StopEvent::Kind;
  if (ev.kind == Kind::kExited || ev.kind == Kind::kKilled) {
    std::string out = ev.kind == Kind::kExited ? "W" + hex_byte(ev.status)
                                               : "X" + hex_byte(wire_signal(ev.signal));
    if (multiprocess_ || ev.remains) {
      out += ";process:" + hex_u64(static_cast<std::uint64_t>(ev.process));
    }
    if (!ev.remains) {
      exited_ = true;
    } else if (ev.tid != 0) {
      // A forked child the client keeps is the first process now.
      g_thread_ = c_thread_ = 0;
      last_thread_ = ev.tid;
    } else {
      last_thread_ = -1;  // none: the first thread there is
      last_thread_ = thread_for(0);
    }
    return out;
  }
  last_thread_ = ev.tid;
  std::string reason;
  switch (ev.kind) {
    case Kind::kWatch:
      if (ev.point == PointType::kHardware) {
        reason = "hwbreak:;";
      } else {
        reason = std::string(ev.point == PointType::kRead     ? "rwatch"
                             : ev.point == PointType::kAccess ? "awatch"
                                                              : "watch") +
                 ":" + hex_u64(ev.addr) + ";";
      }
      break;
    case Kind::kBreakpoint:
      reason = ev.point == PointType::kSoftware ? "swbreak:;" : "hwbreak:;";
      break;
    case Kind::kFork:
      reason = std::string(ev.vfork ? "vfork:" : "fork:") + thread_id(ev.child) + ";";
      break;
    case Kind::kVforkDone:
      reason = "vforkdone:;";
      break;
    case Kind::kExec:
      if (!ev.exec_path.empty() && exec_events_) {
        reason = "exec:" + hex_text(ev.exec_path) + ";";
      } else if (native_signals_) {
        reason = "reason:exec;";
      }
      break;
    case Kind::kSyscallEntry:
    case Kind::kSyscallReturn:
      reason = std::string(ev.kind == Kind::kSyscallEntry ? "syscall_entry:" : "syscall_return:") +
               hex_u64(static_cast<std::uint64_t>(ev.syscall)) + ";";
      break;
    default:
      break;
  }
  return stop_reply(ev.signal, last_thread_, reason);
}

std::string Server::thread_id(Tid tid) const {
  const std::string id = hex_u64(static_cast<std::uint64_t>(tid));
  if (!multiprocess_) return id;
  return "p" + hex_u64(static_cast<std::uint64_t>(target_.group_of(tid))) + "." + id;
}

Tid Server::general_process() const {
  return target_.process_of(thread_for(g_thread_));
}

bool Server::others_than(Tid process) const {
  for (Tid t : target_.threads()) {
    if (target_.group_of(t) != process) return true;
  }
  return false;
}

Tid Server::thread_for(Tid selected) const {
  const std::vector<Tid> threads = target_.threads();
  if (selected > 0 && std::find(threads.begin(), threads.end(), selected) != threads.end()) {
    return selected;
  }
  if (std::find(threads.begin(), threads.end(), last_thread_) != threads.end()) return last_thread_;
  return threads.empty() ? target_.pid() : threads.front();
}

Result<ServerEnd> Server::serve() {
  auto end = serve_packets();
  if (end) return end;
  // Whatever broke off the serving (a write to a client that is gone, a failed request), the
  // process is left as a disconnect leaves it: nothing of ours in it.
  if (connection_.lost()) {
    if (auto gone = client_gone(); gone) return gone;
  }
  ignore_error(finish(interrupted_ ? ServerEnd::How::kInterrupted : ServerEnd::How::kDisconnected),
               "the connection's error is the one reported");
  return std::unexpected(end.error());
}

Result<ServerEnd> Server::serve_packets() {
  for (;;) {
    while (auto item = reader_.next()) {
      switch (item->kind) {
        case RspItem::Kind::kAck:
          break;
        case RspItem::Kind::kNack:
          if (!last_sent_.empty()) {
            if (auto r = write_raw(last_sent_); !r) return std::unexpected(r.error());
          }
          break;
        case RspItem::Kind::kInterrupt:
          break;  // the process is stopped already
        case RspItem::Kind::kBadChecksum:
          // With acknowledgments: a resend is asked for. Without (a reliable transport, as
          // gdbserver takes it), the packet is served as it came.
          if (ack_) {
            if (auto r = write_raw("-"); !r) return std::unexpected(r.error());
            break;
          }
          [[fallthrough]];
        case RspItem::Kind::kPacket: {
          if (ack_) {
            if (auto r = write_raw("+"); !r) return std::unexpected(r.error());
          }
          if (remote_debug_) debug_line("remote: received " + item->payload.substr(0, 200));
          auto end = on_packet(item->payload);
          target_.served();
          if (!end) return std::unexpected(end.error());
          if (*end) return **end;
          break;
        }
      }
    }
    auto more = receive(true);
    if (!more) return std::unexpected(more.error());
    if (!*more) return client_gone();
  }
}

Result<std::optional<ServerEnd>> Server::finish(ServerEnd::How how) {
  if (finished_) return finished_;
  auto end = target_.finish(how);
  if (!end) return std::unexpected(end.error());
  finished_ = *end;
  return std::optional<ServerEnd>(*end);
}

Result<std::optional<ServerEnd>> Server::monitor(std::string_view hex_command) {
  auto bytes = from_hex(hex_command);
  const std::string command = bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
  if (command == "exit") {
    // gdbserver's `monitor exit`: OK, then the server ends at once, leaving the process as a
    // client that goes away leaves it.
    if (auto r = reply("OK"); !r) return std::unexpected(r.error());
    auto end = finish(ServerEnd::How::kDisconnected);
    if (!end) return std::unexpected(end.error());
    return *end;
  }
  // The text gdb shows (O packets, hex), then OK; an unknown command's text, then E01 (gdb
  // says "Protocol error with Rcmd"), as gdbserver answers.
  const std::string help =
      "The following monitor commands are supported:\n"
      "  exit                    end the server (the program as at a disconnect)\n"
      "  watches                 each watchpoint: hardware or software, and why\n"
      "  slots                   the debug registers: how many, how many the watches hold,"
      " who else may\n"
      "  set debug <0|1>         log the server's events on its standard error\n"
      "  set remote-debug <0|1>  log the packets received and sent\n"
      "  set debug-format <all|none|timestamp>  prefix each log line with the time\n"
      "  help                    this list\n";
  std::string text;
  bool known = true;
  if ((command == "watches" || command == "slots") && !target_.has_process()) {
    text = "no process\n";
  } else if (command == "watches") {
    text = target_.describe_watches();
  } else if (command == "slots") {
    text = target_.describe_slots();
  } else if (command == "help") {
    text = help;
  } else if (command == "set debug 1" || command == "set debug 0") {
    debug_ = command.back() == '1';
    if (debug_) {
      target_.set_event_log([this](const std::string& line) { debug_line(line); });
    } else {
      target_.set_event_log(nullptr);
    }
    text = debug_ ? "Debug output enabled.\n" : "Debug output disabled.\n";
  } else if (command == "set remote-debug 1" || command == "set remote-debug 0") {
    remote_debug_ = command.back() == '1';
    text = remote_debug_ ? "Protocol debug output enabled.\n" : "Protocol debug output disabled.\n";
  } else if (command == "set debug-format all" || command == "set debug-format timestamp") {
    debug_timestamps_ = true;
    text = command.ends_with("all") ? "All extra debug format options enabled.\n"
                                    : "Timestamps will be added to debug output.\n";
  } else if (command == "set debug-format none") {
    debug_timestamps_ = false;
    text = "All extra debug format options disabled.\n";
  } else {
    known = false;
    text = "Unknown monitor command.\n\n" + help;
  }
  if (auto r = reply("O" + hex_text(text)); !r) return std::unexpected(r.error());
  if (auto r = reply(known ? "OK" : "E01"); !r) return std::unexpected(r.error());
  return std::optional<ServerEnd>();
}

Result<std::optional<ServerEnd>> Server::on_packet(const std::string& p) {
  const auto answer = [&](Result<std::string> r) -> Result<std::optional<ServerEnd>> {
    auto sent = reply(r ? *r : error_reply(r.error(), error_messages_));
    if (!sent) return std::unexpected(sent.error());
    return std::optional<ServerEnd>();
  };
  const auto done = [&](Result<void> r) -> Result<std::optional<ServerEnd>> {
    if (!r) return answer(std::unexpected(r.error()));
    return answer(std::string("OK"));
  };
  if (p.empty()) return answer(std::string());
  if ((p.starts_with("vCont") && disabled("vCont")) || (p == "qC" && disabled("qC")) ||
      ((p == "qfThreadInfo" || p == "qsThreadInfo") && disabled("qfThreadInfo"))) {
    return answer(std::string());  // as a packet gdbserver does not know
  }
  const char c = p[0];
  const std::string_view rest = std::string_view(p).substr(1);
  if (!target_.has_process()) {
    if (c == 'k') return std::optional<ServerEnd>();  // nothing to kill; no reply to k
    if (auto r = without_process(p)) return answer(std::move(*r));
  }
  if (exited_ && c != 'k' && c != 'D' && !p.starts_with("vKill") && c != 'q' && c != '?' &&
      !p.starts_with("Q") && c != '!' && c != 'R' && !p.starts_with("vRun;") &&
      !p.starts_with("vAttach;")) {
    return answer(make_error(ErrorCode::kSrch, "process: it has ended"));
  }
  if (p == "QStartNoAckMode") {
    // The OK itself is still acknowledged; nothing after it.
    if (auto r = reply("OK"); !r) return std::unexpected(r.error());
    ack_ = false;
    return std::optional<ServerEnd>();
  }
  // A resume that ended because the client went away ends the session.
  const auto resumed = [&](Result<std::string> stop) -> Result<std::optional<ServerEnd>> {
    if (gone_) return gone_;
    // gdb takes the stopped thread as the general one after a stop (record_currthread) and
    // sends no Hg for it: so does the server.
    if (stop) g_thread_ = last_thread_;
    return answer(std::move(stop));
  };
  switch (c) {
    case '?':
      return answer(last_stop_);
    case '!':
      extended_ = true;
      return answer(std::string("OK"));
    case 'q':
    case 'Q':
      if (p.starts_with("qRcmd,")) return monitor(std::string_view(p).substr(6));
      return answer(query(p));
    case 'H': {
      if (rest.empty()) return answer(make_error(ErrorCode::kInval, "packet: H without a thread"));
      auto id = parse_ptid(rest.substr(1));
      if (!id) return answer(std::unexpected(id.error()));
      const auto threads = target_.threads();
      Tid t = id->second;
      if (id->first > 0 && t <= 0) {
        // pPID.0 / pPID.-1: a thread of that process.
        const auto in = std::find_if(threads.begin(), threads.end(),
                                     [&](Tid x) { return target_.group_of(x) == id->first; });
        if (in == threads.end()) {
          return answer(make_error(ErrorCode::kSrch, "thread: no such process"));
        }
        t = *in;
      }
      if (t > 0 && std::find(threads.begin(), threads.end(), t) == threads.end()) {
        return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
      }
      (rest[0] == 'g' ? g_thread_ : c_thread_) = t;
      return answer(std::string("OK"));
    }
    case 'T': {
      auto t = parse_thread(rest);
      if (!t) return answer(std::unexpected(t.error()));
      const auto threads = target_.threads();
      if (std::find(threads.begin(), threads.end(), *t) == threads.end()) {
        return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
      }
      return answer(std::string("OK"));
    }
    case 'g': {
      auto regs = target_.read_registers(thread_for(g_thread_), false);
      if (!regs) return answer(std::unexpected(regs.error()));
      return answer(gdb_encode_registers(regs->regs, regs->fp));
    }
    case 'G': {
      const Tid tid = thread_for(g_thread_);
      auto regs = target_.read_registers(tid, false);
      if (!regs) return answer(std::unexpected(regs.error()));
      const Registers before = *regs;
      if (auto r = gdb_decode_registers(rest, regs->regs, regs->fp); !r) {
        return answer(std::unexpected(r.error()));
      }
      return done(target_.write_registers(tid, *regs, before));
    }
    case 'p':
    case 'P': {
      std::string_view spec = rest;
      Tid tid = thread_for(g_thread_);
      if (const std::size_t semi = spec.find(";thread:"); semi != std::string_view::npos) {
        auto t = parse_thread(spec.substr(semi + 8, spec.find(';', semi + 1) - semi - 8));
        if (t) tid = thread_for(*t);
        spec = spec.substr(0, semi);
      }
      const std::size_t eq = spec.find('=');
      auto regno = parse_hex_u64(spec.substr(0, eq));
      if (!regno) return answer(std::unexpected(regno.error()));
      if (*regno >= static_cast<std::uint64_t>(kGdbRegisterCount)) {
        return answer(make_error(ErrorCode::kInval, "regno: " + hex_u64(*regno) +
                                                        " is not a register (0-" +
                                                        hex_u64(kGdbRegisterCount - 1) + ")"));
      }
      auto regs = target_.read_registers(tid, *regno >= kGdbCoreRegisterCount);
      if (!regs) return answer(std::unexpected(regs.error()));
      const Registers before = *regs;
      if (c == 'p') {
        return answer(gdb_read_register(static_cast<int>(*regno), regs->regs, regs->fp));
      }
      if (eq == std::string_view::npos) {
        return answer(make_error(ErrorCode::kInval, "packet: P without a value"));
      }
      if (auto r = gdb_write_register(static_cast<int>(*regno), spec.substr(eq + 1), regs->regs,
                                      regs->fp);
          !r) {
        return answer(std::unexpected(r.error()));
      }
      return done(target_.write_registers(tid, *regs, before));
    }
    case 'm':
    case 'x': {
      auto al = addr_len(rest);
      if (!al) return answer(std::unexpected(al.error()));
      auto bytes = read_memory(al->first, std::min<std::uint64_t>(al->second, kPacketSize / 2));
      if (!bytes) return answer(std::unexpected(bytes.error()));
      if (c == 'x') return answer("b" + *bytes);  // escaped by rsp_frame
      return answer(
          to_hex(std::span(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size())));
    }
    case 'M':
    case 'X': {
      const std::size_t colon = rest.find(':');
      if (colon == std::string_view::npos) {
        return answer(make_error(ErrorCode::kInval, "packet: M/X without ':'"));
      }
      auto al = addr_len(rest.substr(0, colon));
      if (!al) return answer(std::unexpected(al.error()));
      std::vector<std::uint8_t> data;
      if (c == 'M') {
        auto h = from_hex(rest.substr(colon + 1));
        if (!h) return answer(std::unexpected(h.error()));
        data = std::move(*h);
      } else {
        const std::string raw = rsp_unescape(rest.substr(colon + 1));
        data.assign(raw.begin(), raw.end());
      }
      if (data.size() != al->second) {
        return answer(make_error(ErrorCode::kInval, "packet: length " + std::to_string(al->second) +
                                                        " but " + std::to_string(data.size()) +
                                                        " bytes"));
      }
      if (data.empty()) return answer(std::string("OK"));
      return done(target_.write_memory(general_process(), al->first, data));
    }
    case 'Z':
    case 'z': {
      if (rest.size() < 2 || rest[1] != ',') return answer(std::string());
      const char type = rest[0];
      if (type < '0' || type > '4') return answer(std::string());
      std::string_view spec = rest.substr(2);
      const std::size_t semi = spec.find(';');
      std::vector<AgentExpr> conditions;
      if (semi != std::string_view::npos && c == 'Z' && (type == '0' || type == '1')) {
        auto parsed = parse_agent_conditions(spec.substr(semi));
        if (!parsed) return answer(std::unexpected(parsed.error()));
        conditions = std::move(*parsed);
      }
      spec = spec.substr(0, semi);  // commands (cmds:) are gdb's to run
      auto al = addr_len(spec);
      if (!al) return answer(std::unexpected(al.error()));
      const auto point = static_cast<PointType>(type);
      return done(c == 'Z' ? target_.insert_point(general_process(), point, al->first, al->second,
                                                  std::move(conditions))
                           : target_.remove_point(general_process(), point, al->first, al->second));
    }
    case 'c':
    case 's':
    case 'C':
    case 'S': {
      // The old forms: the Hc thread (or all) continues; 's' steps it.
      std::string actions;
      std::string_view tail = rest;
      std::string sig;
      if (c == 'C' || c == 'S') {
        sig = std::string(tail.substr(0, tail.find(';')));
        tail = tail.find(';') == std::string_view::npos ? std::string_view()
                                                        : tail.substr(tail.find(';') + 1);
      }
      // Resuming at another address (c ADDR, Csig;ADDR) is not served: gdb never asks for it.
      if (!tail.empty() || ((c == 'c' || c == 's') && !rest.empty())) {
        return answer(
            make_error(ErrorCode::kInval, "packet: resuming at an address is not served"));
      }
      const Tid tid = thread_for(c_thread_);
      if (c == 's' || c == 'S') {
        actions = std::string(1, c == 's' ? 's' : 'S') + sig + ":" +
                  hex_u64(static_cast<std::uint64_t>(tid));
      } else {
        actions = std::string(1, c) + sig;
      }
      return resumed(resume(actions));
    }
    case 'v': {
      if (p == "vCont?") return answer(std::string("vCont;c;C;s;S;t"));
      if (p.starts_with("vCont;")) return resumed(resume(p.substr(6)));
      if (p.starts_with("vKill;") && multiprocess_) {
        if (auto process = parse_id(std::string_view(p).substr(6));
            process && *process > 0 && others_than(*process)) {
          if (auto r = target_.kill_process(*process); !r) {
            return answer(std::unexpected(r.error()));
          }
          last_thread_ = thread_for(last_thread_);
          g_thread_ = c_thread_ = 0;
          return answer(std::string("OK"));
        }
      }
      if (p.starts_with("vKill") && extended_) {
        // Extended mode: the server stays, with no process.
        if (auto r = drop_process(ServerEnd::How::kKilled); !r) {
          return answer(std::unexpected(r.error()));
        }
        return answer(std::string("OK"));
      }
      if (p.starts_with("vKill")) {
        auto end = finish(ServerEnd::How::kKilled);
        if (!end) return std::unexpected(end.error());
        if (auto r = reply("OK"); !r) return std::unexpected(r.error());
        return end;
      }
      if (p == "vMustReplyEmpty") return answer(std::string());
      if (p.starts_with("vFile:")) return answer(file_request(std::string_view(p).substr(6)));
      if (p.starts_with("vRun;")) {
        auto stop = run_program(std::string_view(p).substr(5));
        if (stop) g_thread_ = last_thread_;
        return answer(std::move(stop));
      }
      if (p.starts_with("vAttach;")) {
        auto stop = attach_process(std::string_view(p).substr(8));
        if (stop) g_thread_ = last_thread_;
        return answer(std::move(stop));
      }
      return answer(std::string());
    }
    case 'D': {
      if (rest.starts_with(";") && multiprocess_) {
        if (auto process = parse_id(rest.substr(1));
            process && *process > 0 && others_than(*process)) {
          if (auto r = target_.detach_process(*process); !r) {
            return answer(std::unexpected(r.error()));
          }
          last_thread_ = thread_for(last_thread_);
          g_thread_ = c_thread_ = 0;
          return answer(std::string("OK"));
        }
      }
      if (extended_) {
        // Extended mode: the process runs on; the server stays, with no process.
        auto left = drop_process(ServerEnd::How::kDetached);
        if (!left) return answer(std::unexpected(left.error()));
        return answer(std::string("OK"));
      }
      auto end = finish(ServerEnd::How::kDetached);
      if (!end) {
        ignore_error(reply(error_reply(end.error(), error_messages_)), "end's error is returned");
        return std::unexpected(end.error());
      }
      if (auto r = reply("OK"); !r) return std::unexpected(r.error());
      return end;
    }
    case 'R': {
      // Extended mode's restart (gdb without vRun): the last program again, with no reply.
      if (!extended_ || !target_.can_start()) return answer(std::string());
      if (auto r = drop_process(ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
      // R has no reply: the client's next '?' says whether a program runs.
      if (target_.restart() && target_.has_process()) took_process();
      return std::optional<ServerEnd>();
    }
    case 'k': {
      if (extended_) {
        // Extended mode: no reply, and the server waits with no process (gdbserver).
        if (auto r = drop_process(ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
        return std::optional<ServerEnd>();
      }
      auto end = finish(ServerEnd::How::kKilled);
      if (!end) return std::unexpected(end.error());
      return end;  // no reply to k
    }
    default:
      return answer(std::string());  // unknown: the empty reply
  }
}

// Host I/O (vFile): gdb reads the executable and libraries through the server (its default
// sysroot "target:"), and `remote put`, `get` and `delete` copy and delete files there.
// Replies "F<result>" or "F-1,<errno>" with gdb's File-I/O errno values.
std::string Server::file_request(std::string_view request) {
  const auto fail = [](const Error& e) {
    // gdb's File-I/O errno values: those of Linux for the codes here, else EUNKNOWN.
    int code = 9999;
    switch (e.code()) {
      case ErrorCode::kPerm:
      case ErrorCode::kNoEnt:
      case ErrorCode::kIntr:
      case ErrorCode::kAcces:
      case ErrorCode::kFault:
      case ErrorCode::kBusy:
      case ErrorCode::kExist:
      case ErrorCode::kNoDev:
      case ErrorCode::kInval:
      case ErrorCode::kNoSpc:
        code = static_cast<int>(e.code());
        break;
      default:
        break;
    }
    return "F-1," + hex_u64(static_cast<std::uint64_t>(code));
  };
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
  if (op == "setfs") return "F0";  // one process: its file system is ours
  if (op == "readlink") {
    // `info proc` reads /proc/PID/cwd and exe this way.
    auto path = from_hex(args.empty() ? std::string_view() : args[0]);
    if (!path) return fail(path.error());
    auto target = target_.read_link(std::string(path->begin(), path->end()));
    if (!target) return fail(target.error());
    return "F" + hex_u64(target->size()) + ";" + *target;
  }
  if (op == "unlink") {
    auto path = from_hex(args.empty() ? std::string_view() : args[0]);
    if (!path) return fail(path.error());
    if (auto r = target_.unlink_file(std::string(path->begin(), path->end())); !r) {
      return fail(r.error());
    }
    return "F0";
  }
  if (op == "open") {
    auto path = from_hex(args.empty() ? std::string_view() : args[0]);
    auto flags = number(1);
    auto mode = args.size() > 2 ? number(2) : Result<std::uint64_t>(0);
    if (!path || !flags || !mode) {
      return fail(!path ? path.error() : !flags ? flags.error() : mode.error());
    }
    auto fd =
        target_.open_file(std::string(path->begin(), path->end()), static_cast<unsigned>(*flags),
                          static_cast<unsigned>(*mode & 07777));
    if (!fd) return fail(fd.error());
    return "F" + hex_u64(static_cast<std::uint64_t>(*fd));
  }
  auto fd = number(0);
  if (!fd) return fail(fd.error());
  const int file = static_cast<int>(*fd);
  if (!target_.has_file(file)) return "F-1," + hex_u64(9);  // EBADF
  if (op == "close") {
    ignore_error(target_.close_file(file), "the descriptor is gone either way");
    return "F0";
  }
  if (op == "pread") {
    auto count = number(1);
    auto offset = number(2);
    if (!count || !offset) return fail(count ? offset.error() : count.error());
    std::vector<std::uint8_t> data(std::min<std::uint64_t>(*count, kPacketSize / 2));
    auto n = target_.pread_file(file, *offset, data);
    if (!n) return fail(n.error());
    return "F" + hex_u64(*n) + ";" + std::string(data.begin(), data.begin() + *n);
  }
  if (op == "fstat") {
    auto st = target_.stat_file(file);
    if (!st) return fail(st.error());
    // gdb's struct fio_stat: big-endian 32-bit fields, 64-bit size/blksize/blocks.
    std::string out;
    const auto be = [&](std::uint64_t v, int bytes) {
      for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
    };
    be(st->dev, 4);
    be(st->ino, 4);
    be(st->mode, 4);
    be(st->nlink, 4);
    be(st->uid, 4);
    be(st->gid, 4);
    be(st->rdev, 4);
    be(st->size, 8);
    be(st->blksize, 8);
    be(st->blocks, 8);
    be(static_cast<std::uint64_t>(st->atime), 4);
    be(static_cast<std::uint64_t>(st->mtime), 4);
    be(static_cast<std::uint64_t>(st->ctime), 4);
    return "F" + hex_u64(out.size()) + ";" + out;
  }
  if (op == "pwrite") {
    // vFile:pwrite:FD,OFFSET,DATA: the data binary, escaped as in X packets.
    auto offset = number(1);
    if (!offset) return fail(offset.error());
    const std::size_t second = request.find(',', request.find(',') + 1);
    if (second == std::string_view::npos) {
      return fail(Error(ErrorCode::kInval, "vFile: pwrite without data"));
    }
    const std::string data = rsp_unescape(request.substr(second + 1));
    auto n = target_.pwrite_file(file, *offset, data);
    if (!n) return fail(n.error());
    return "F" + hex_u64(*n);
  }
  return std::string();
}

Result<std::string> Server::query(const std::string& p) {
  if (p.starts_with("qSupported")) {
    error_messages_ = p.find("error-message+") != std::string::npos;
    exec_events_ = p.find("exec-events+") != std::string::npos;
    multiprocess_ = p.find("multiprocess+") != std::string::npos;
    fork_events_ = multiprocess_ && p.find(";fork-events+") != std::string::npos;
    vfork_events_ = multiprocess_ && p.find("vfork-events+") != std::string::npos;
    // The parent of a fork stays stopped for its event (a vfork's also at its end).
    target_.set_features(ClientFeatures{.multiprocess = multiprocess_,
                                        .fork_events = fork_events_,
                                        .vfork_events = vfork_events_},
                         true);
    // The thread id in the client's form (a stop not reported yet, or a W).
    if (target_.has_process() && !exited_ &&
        (last_stop_.starts_with("T") || last_stop_.starts_with("S"))) {
      last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
    }
    return "PacketSize=" + hex_u64(kPacketSize) +
           ";qXfer:features:read+;qXfer:auxv:read+;qXfer:exec-file:read+;qXfer:threads:read+"
           ";qXfer:libraries-svr4:read+;qXfer:siginfo:read+"
           ";QStartNoAckMode+;swbreak+;hwbreak+;vContSupported+;QCatchSyscalls+"
           ";ConditionalBreakpoints+" +
           std::string(target_.can_start() ? ";QDisableRandomization+;QEnvironmentHexEncoded+"
                                             ";QEnvironmentUnset+;QEnvironmentReset+"
                                           : "") +
           std::string(error_messages_ ? ";error-message+" : "") +
           std::string(exec_events_ ? ";exec-events+" : "") +
           std::string(multiprocess_ ? ";multiprocess+" : "") +
           std::string(fork_events_ ? ";fork-events+" : "") +
           std::string(vfork_events_ ? ";vfork-events+" : "");
  }
  if (p == "qC") return "QC" + thread_id(thread_for(last_thread_));
  if (p.starts_with("qAttached")) return std::string(target_.spawned() ? "0" : "1");
  if (p == "qfThreadInfo") {
    std::string out = "m";
    bool first = true;
    for (Tid t : target_.threads()) {
      out += (first ? "" : ",") + thread_id(t);
      first = false;
    }
    return exited_ ? std::string("l") : out;
  }
  if (p == "qsThreadInfo") return std::string("l");
  if (p.starts_with("qXfer:")) {
    // qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH
    std::string_view rest = std::string_view(p).substr(6);
    const std::size_t c1 = rest.find(':');
    if (c1 == std::string_view::npos) return std::string();
    const std::string_view object = rest.substr(0, c1);
    rest = rest.substr(c1 + 1);
    if (!rest.starts_with("read:")) return std::string();
    rest = rest.substr(5);
    const std::size_t c2 = rest.find(':');
    if (c2 == std::string_view::npos) return std::string();
    const std::string_view annex = rest.substr(0, c2);
    auto al = addr_len(rest.substr(c2 + 1));
    if (!al) return std::unexpected(al.error());
    return xfer(object, annex, al->first, al->second);
  }
  if (p.starts_with("QCatchSyscalls:")) {
    // QCatchSyscalls:0 | QCatchSyscalls:1[;NR]... (hex numbers; none: every call).
    std::string_view rest = std::string_view(p).substr(15);
    if (rest == "0") {
      target_.set_catch_syscalls(std::nullopt);
      return std::string("OK");
    }
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
    target_.set_catch_syscalls(std::move(numbers));
    return std::string("OK");
  }
  if (p == "QThreadSuffixSupported") {
    thread_suffix_ = true;
    return std::string("OK");
  }
  if (p == "QListThreadsInStopReply") {
    list_threads_ = true;
    return std::string("OK");
  }
  if (p == "qHostInfo") {
    // lldb: it takes the target's own signal numbers once it knows the target is Linux.
    native_signals_ = true;
    return "triple:" + hex_text("x86_64-pc-linux-gnu") +
           ";ptrsize:8;endian:little;ostype:linux;vendor:pc;watchpoint_exceptions_received:after;";
  }
  if (p == "qProcessInfo") {
    return "pid:" + hex_u64(static_cast<std::uint64_t>(target_.pid())) +
           ";triple:" + hex_text("x86_64-pc-linux-gnu") +
           ";ostype:linux;vendor:pc;endian:little;ptrsize:8;";
  }
  if (p == "qWatchpointSupportInfo" || p == "qWatchpointSupportInfo:") {
    // Any number: beyond the registers the software path takes them.
    return std::string("num:1024;");
  }
  if (p.starts_with("qMemoryRegionInfo:")) {
    auto addr = parse_hex_u64(std::string_view(p).substr(18));
    if (!addr) return std::unexpected(addr.error());
    auto region = target_.memory_region(*addr);
    if (!region) return std::unexpected(region.error());
    if (!region->mapped) {
      return "start:" + hex_u64(region->start) + ";size:" + hex_u64(region->size) + ";";
    }
    std::string perms;
    if (region->read) perms += 'r';
    if (region->write) perms += 'w';
    if (region->exec) perms += 'x';
    std::string out = "start:" + hex_u64(region->start) + ";size:" + hex_u64(region->size) +
                      ";permissions:" + perms + ";";
    if (!region->path.empty()) out += "name:" + hex_text(region->path) + ";";
    return out;
  }
  if (p.starts_with("qSymbol")) return std::string("OK");
  if (p.starts_with("QDisableRandomization:") && target_.can_start()) {
    // The next vRun's personality (gdb's `set disable-randomization`).
    target_.set_disable_randomization(p.ends_with(":1"));
    return std::string("OK");
  }
  if (target_.can_start() && p.starts_with("QEnvironment")) return change_environment(p);
  return std::string();  // qTStatus, qOffsets, ...: not served
}

// gdb's `set environment` / `unset environment` for the programs vRun starts, as gdbserver keeps
// them: QEnvironmentReset gives back the server's own environment; QEnvironmentHexEncoded:HEX
// (NAME=VALUE) sets NAME; QEnvironmentUnset:HEX (NAME) removes it.
Result<std::string> Server::change_environment(std::string_view p) {
  if (p == "QEnvironmentReset") {
    target_.reset_environment();
    return std::string("OK");
  }
  const bool set = p.starts_with("QEnvironmentHexEncoded:");
  if (!set && !p.starts_with("QEnvironmentUnset:")) return std::string();  // not served
  auto bytes = from_hex(p.substr(p.find(':') + 1));
  if (!bytes) return std::unexpected(bytes.error().with_context("environment"));
  const std::string text(bytes->begin(), bytes->end());
  const std::size_t eq = text.find('=');
  if ((set && (eq == std::string::npos || eq == 0)) || (!set && text.empty())) {
    return make_error(ErrorCode::kInval,
                      "environment: '" + text + "' is not " + (set ? "NAME=VALUE" : "a NAME"));
  }
  if (set) {
    target_.set_environment(text);
  } else {
    target_.unset_environment(text);
  }
  return std::string("OK");
}

Result<std::string> Server::xfer(std::string_view object, std::string_view annex,
                                 std::uint64_t offset, std::uint64_t length) {
  if (object == "features") {
    if (annex != "target.xml") return make_error(ErrorCode::kNoEnt, "annex: no such feature file");
    // The registers of the thread gdb looks at: its XSAVE components (XCR0, the same for every
    // thread of the machine).
    std::uint64_t features = 0;
    if (target_.has_process()) {
      if (auto regs = target_.read_registers(thread_for(g_thread_), true)) {
        features = regs->fp.ext.features;
      }
    }
    return xfer_slice(gdb_target_xml(features), offset, length);
  }
  if (object == "auxv") {
    auto auxv = target_.auxv(general_process());
    if (!auxv) return std::unexpected(auxv.error());
    return xfer_slice(*auxv, offset, length);
  }
  if (object == "libraries-svr4") {
    // The whole list at every offset 0 (no augmented-libraries-svr4-read: the annex is empty).
    // lldb (it asked qHostInfo) takes main-lm as where to follow the rendezvous from, and then
    // misses the libraries loaded at start-up: the list without it, as lldb-server sends it.
    auto xml = target_.libraries_svr4(native_signals_);
    if (!xml) return std::unexpected(xml.error());
    return xfer_slice(*xml, offset, length);
  }
  if (object == "exec-file") {
    Tid process = target_.pid();
    if (auto annex_pid = parse_id(annex); !annex.empty() && annex_pid && *annex_pid > 0) {
      process = *annex_pid;
    }
    auto path = target_.exec_file(process);
    if (!path) return std::unexpected(path.error());
    return xfer_slice(*path, offset, length);
  }
  if (object == "siginfo") {
    // The siginfo of the general thread's stop (x86-64 Linux layout, 128 bytes).
    const Tid tid = thread_for(g_thread_);
    if (!target_.is_stopped(tid)) {
      return make_error(ErrorCode::kSrch, "thread: " + std::to_string(tid) + " is not stopped");
    }
    auto info = target_.siginfo(tid);
    if (!info) return std::unexpected(info.error());
    return xfer_slice(*info, offset, length);
  }
  if (object == "threads") {
    std::string xml = "<?xml version=\"1.0\"?>\n<threads>\n";
    for (Tid t : target_.threads()) {
      // The thread's name, as gdbserver gives it.
      const std::string name = target_.thread_name(t);
      xml += "<thread id=\"" + thread_id(t) + "\"" +
             (name.empty() ? std::string() : " name=\"" + xml_escape(name) + "\"") + "/>\n";
    }
    xml += "</threads>\n";
    return xfer_slice(xml, offset, length);
  }
  return std::string();
}

Result<std::string> Server::read_memory(std::uint64_t addr, std::uint64_t len) {
  auto bytes = target_.read_memory(general_process(), addr, len);
  if (!bytes) return std::unexpected(bytes.error());
  return std::string(bytes->begin(), bytes->end());
}

Result<std::string> Server::resume(const std::string& text) {
  // Each action applies to its thread, or (without one) to every thread no earlier action named.
  std::vector<ResumeAction> list;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t semi = rest.find(';');
    std::string_view one = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    if (one.empty()) continue;
    ResumeAction a;
    a.kind = one[0];
    std::string_view arg = one.substr(1);
    const std::size_t colon = arg.find(':');
    if (a.kind == 'C' || a.kind == 'S') {
      auto sig = parse_hex_u64(arg.substr(0, colon));
      if (!sig) return std::unexpected(sig.error());
      auto host = host_signal(*sig);
      if (!host) {
        return make_error(ErrorCode::kInval,
                          "vCont: signal " + hex_u64(*sig) + " is not a signal of this target");
      }
      a.signal = *host;
    } else if (colon != 0 && !arg.empty()) {
      return make_error(ErrorCode::kInval, "vCont: action '" + std::string(one) + "' is malformed");
    }
    if (colon != std::string_view::npos) {
      auto t = parse_ptid(arg.substr(colon + 1));
      if (!t) return std::unexpected(t.error());
      a.process = t->first;
      a.tid = t->second;
    }
    if (a.kind != 'c' && a.kind != 'C' && a.kind != 's' && a.kind != 'S' && a.kind != 't') {
      return make_error(ErrorCode::kInval, "vCont: unknown action '" + std::string(one) + "'");
    }
    list.push_back(a);
  }
  if (list.empty()) return make_error(ErrorCode::kInval, "vCont: no action");
  interrupt_ = false;
  auto at_once = target_.resume(list);
  if (!at_once) return std::unexpected(at_once.error());
  if (*at_once) return on_stop(**at_once);  // not the '?' reply: nothing ran
  for (;;) {
    auto got = target_.wait(connection_.poll_fd());
    if (!got && got.error().code() == ErrorCode::kIntr && connection_.interrupt_requested()) {
      // A signal asked the server to end (SIGINT, SIGTERM, SIGHUP): as if the client went away.
      interrupted_ = true;
      auto end = finish(ServerEnd::How::kInterrupted);
      if (!end) return std::unexpected(end.error());
      gone_ = *end;
      return std::string();
    }
    if (!got) {
      if (got.error().code() == ErrorCode::kIntr) continue;
      return std::unexpected(got.error());
    }
    if (got->stop) {
      last_stop_ = on_stop(*got->stop);
      return last_stop_;
    }
    // The client spoke while the process runs: Ctrl-C (0x03), or it went away.
    auto more = receive(true);
    if (!more) return std::unexpected(more.error());
    if (!*more) {
      auto end = client_gone();
      if (!end) return std::unexpected(end.error());
      gone_ = *end;
      return std::string();
    }
    for (;;) {
      auto item = reader_.next();
      if (!item) break;
      if (item->kind == RspItem::Kind::kInterrupt) interrupt_ = true;
    }
    if (interrupt_) {
      interrupt_ = false;
      auto stop = target_.interrupt();
      if (!stop) return std::unexpected(stop.error());
      stop->tid = thread_for(stop->tid);
      last_stop_ = on_stop(*stop);
      return last_stop_;
    }
  }
}

}  // namespace hwarb::gdb

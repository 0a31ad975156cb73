#include "hwarb/gdb/server.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <span>
#include <utility>
#include <variant>

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

// The slice [offset, offset+length) of a qXfer object: "m" + data when more follows, "l" + data
// at the end.
std::string xfer_slice(std::string_view whole, std::uint64_t offset, std::uint64_t length) {
  if (offset >= whole.size()) return "l";
  const std::string_view part = whole.substr(offset, length);
  const bool last = offset + part.size() >= whole.size();
  return (last ? "l" : "m") + std::string(part);  // rsp_frame escapes the binary data
}

// An osdata document: an <item> per row, a <column name="TITLE">CELL</column> per cell.
std::string osdata_xml(const OsData& table) {
  std::string xml = "<?xml version=\"1.0\"?>\n<osdata type=\"" + xml_escape(table.type) + "\">\n";
  for (const auto& row : table.rows) {
    xml += "<item>";
    for (std::size_t i = 0; i < row.size() && i < table.columns.size(); ++i) {
      xml += "<column name=\"" + xml_escape(table.columns[i]) + "\">" + xml_escape(row[i]) +
             "</column>";
    }
    xml += "</item>\n";
  }
  return xml + "</osdata>\n";
}

std::string hex_text(std::string_view text) {
  return to_hex(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace

Server::Server(Target& target, Connection& connection) : target_(target), connection_(connection) {
  if (target_.has_process()) {
    last_thread_ = target_.pid();
    if (!target_.spawned()) {
      // Attached from the command line (--attach): its stop is no signal (gdbserver's T00), and
      // in non-stop mode '?' tells the main thread's alone; the others' stops are told at the
      // vCont;t that names them, as gdbserver tells them (gdb stops each one so).
      last_signal_ = 0;
      for (Tid t : target_.threads()) {
        if (t != last_thread_) untold_.insert(t);
      }
      status_tells_untold_ = false;
      if (auto taking = target_.attach_signal(last_thread_)) last_signal_ = taking->signal;
    }
    last_stop_ = stop_reply(last_signal_, last_thread_, last_reason_);
  } else {
    last_stop_ = "W00";
  }
}

void Server::set_options(ServerOptions options) {
  options_ = std::move(options);
  remote_debug_ = options_.remote_debug;
  debug_timestamps_ = options_.debug_timestamps;
  if (options_.debug != debug_) set_debug(options_.debug);
}

void Server::set_debug(bool on) {
  debug_ = on;
  if (debug_) {
    target_.set_event_log([this](const std::string& line) { debug_line(line); });
  } else {
    target_.set_event_log(nullptr);
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
  thread_events_ = false;
  notifications_.clear();
  target_.close_files();
}

bool Server::disabled(const std::string& name) const {
  return options_.disabled_packets.contains(name);
}

bool Server::stays() const {
  return !interrupted_ && target_.can_start() && !options_.once && (options_.multi || extended_);
}

bool Server::reopens() const {
  return !interrupted_ && !options_.once && !non_stop_ && !connection_.lost() &&
         target_.has_process() && !exited_;
}

Result<ServerEnd> Server::client_gone(bool running) {
  const ServerEnd::How how =
      interrupted_ ? ServerEnd::How::kInterrupted : ServerEnd::How::kDisconnected;
  if (!running && reopens()) {
    // As gdbserver without --once (extended mode too): the process stays as the client left it
    // (stopped) for the next client, whose '?' gets its last stop.
    ServerEnd end;
    end.how = how;
    end.serving = true;
    return end;
  }
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
  notifications_.clear();
  stopped_.clear();
  untold_.clear();
  status_tells_untold_ = true;
  last_stop_ = "W00";
  last_thread_ = 0;
  g_thread_ = 0;
  g_process_ = 0;
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

std::string Server::took_process(Tid process, bool spawned, bool added) {
  // Added beside a process that lives (gdb's next inferior): what is known of the others stays.
  if (!added) forget_process();
  last_thread_ = process;
  // A started program's first stop is its exec's trap; an attached one's, no signal (gdbserver's
  // T00: gdb takes it as the attach's stop, not a SIGTRAP of the program's).
  last_signal_ = spawned ? SIGTRAP : 0;
  if (!spawned && !non_stop_) {
    if (auto taking = target_.attach_signal(process)) last_signal_ = taking->signal;
  }
  last_reason_.clear();
  last_stop_ = stop_reply(last_signal_, last_thread_, last_reason_);
  if (non_stop_) all_stopped(added ? process : 0);
  return last_stop_;
}

std::optional<Result<std::string>> Server::without_process(const std::string& p) {
  // Non-stop mode: no stopped thread to tell of, OK (as an empty vStopped queue); a W00 there
  // would stay queued in gdb as a stop of no process and fail its next wait.
  if (p == "?") return std::string(non_stop_ ? "OK" : "W00");
  if (p == "qfThreadInfo" || p == "qsThreadInfo") return std::string("l");
  const bool needs = p == "qC" || p.starts_with("qAttached") || p.starts_with("qProcessInfo") ||
                     p.starts_with("qMemoryRegionInfo") || p.starts_with("qGetTLSAddr") ||
                     (p.starts_with("qXfer:") && !p.starts_with("qXfer:osdata:")) ||
                     (p[0] != 'q' && p[0] != 'Q' && p[0] != '!' && p[0] != 'R' && p != "vCont?" &&
                      p != "vMustReplyEmpty" && p != "vStopped" && !p.starts_with("vFile:") &&
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
  if (ev.kind == Kind::kNoResumed) return "N";
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
      g_process_ = 0;
      last_thread_ = ev.tid;
    } else {
      last_thread_ = -1;  // none: the first thread there is
      last_thread_ = thread_for(0);
    }
    return out;
  }
  last_reason_ = stop_reason(ev);
  last_signal_ = ev.signal;
  return stop_reply(last_signal_, ev.tid, last_reason_);
}

void Server::all_stopped(Tid process) {
  // The last stop's thread with its signal (a start's trap, an attach's none), the others as if
  // stopped by vCont;t.
  for (Tid t : target_.threads()) {
    if (process != 0 && target_.process_of(t) != process) continue;
    stopped_[t] = ThreadStop{.signal = t == last_thread_ ? last_signal_ : 0, .reason = ""};
  }
}

std::string Server::stop_reason(const StopEvent& ev) {
  using Kind = StopEvent::Kind;
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
    case Kind::kThreadCreated:
      reason = "create:;";
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
  return reason;
}

std::string Server::thread_id(Tid tid) const {
  const std::string id = hex_u64(static_cast<std::uint64_t>(tid));
  if (!multiprocess_) return id;
  return "p" + hex_u64(static_cast<std::uint64_t>(target_.group_of(tid))) + "." + id;
}

Tid Server::general_process() const {
  const Tid t = thread_for(g_thread_);
  if (g_process_ > 0 && target_.group_of(t) != g_process_) {
    // The Hg thread ended since (gdb names a process for memory as pPID.0, and the thread the
    // server took for it may exit before the access): memory is still that process's.
    for (Tid other : target_.threads()) {
      if (target_.group_of(other) == g_process_) return target_.process_of(other);
    }
  }
  return target_.process_of(t);
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
    if (auto gone = client_gone(false); gone) return gone;
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
          if (remote_debug_) debug_line("remote: received Ctrl-C");
          // Non-stop mode: as vCtrlC, without its reply. All-stop: the process is stopped; the
          // client sent it before our stop reply reached it (a stop it resumes from at once,
          // such as a breakpoint whose condition gdb finds false): the next resume is
          // interrupted, as gdbserver's SIGINT to the process is delivered then.
          if (threads_running()) {
            if (auto r = target_.interrupt_process(); !r) return std::unexpected(r.error());
          } else if (!non_stop_ && running()) {
            interrupt_ = true;
          }
          break;
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
    if (threads_running()) {
      auto waited = wait_running();
      if (!waited) return std::unexpected(waited.error());
      if (!*waited) return *gone_;
      continue;
    }
    if (debug_ && non_stop_ && running()) {
      std::string line = "non-stop: no thread runs; threads:";
      for (Tid t : target_.threads()) {
        line += " " + std::to_string(t) + (stopped_.contains(t) ? "(stopped)" : "");
      }
      debug_line(line);
    }
    auto more = receive(true);
    if (!more) return std::unexpected(more.error());
    if (!*more) return client_gone(false);
  }
}

bool Server::threads_running() const {
  if (!non_stop_ || !running()) return false;
  if (target_.end_due()) return true;  // its end is still to come: waited for
  for (Tid t : target_.threads()) {
    if (!stopped_.contains(t)) return true;
  }
  return false;
}

Result<bool> Server::wait_running() {
  auto got = target_.wait(connection_.poll_fd());
  if (!got && got.error().code() == ErrorCode::kIntr) {
    if (!connection_.interrupt_requested()) return true;
    // A signal asked the server to end: as if the client went away.
    interrupted_ = true;
    auto end = finish(ServerEnd::How::kInterrupted);
    if (!end) return std::unexpected(end.error());
    gone_ = *end;
    return false;
  }
  if (!got) return std::unexpected(got.error());
  if (got->stop) {
    if (auto r = notify(*got->stop); !r) return std::unexpected(r.error());
    return true;
  }
  auto more = receive(true);
  if (!more) return std::unexpected(more.error());
  if (*more) return true;
  auto end = client_gone(true);
  if (!end) return std::unexpected(end.error());
  gone_ = *end;
  return false;
}

Result<void> Server::notify(const StopEvent& stop) {
  std::string text;
  const bool ended = stop.kind == StopEvent::Kind::kExited || stop.kind == StopEvent::Kind::kKilled;
  if (stop.kind == StopEvent::Kind::kThreadCreated && !thread_events_) {
    // Not asked for: the new thread runs at once, as any thread the client has not stopped.
    auto r = target_.resume({ResumeAction{.kind = 'c', .signal = 0, .tid = stop.tid}});
    if (!r) return std::unexpected(r.error());
    return *r ? notify(**r) : Result<void>();
  }
  if (stop.kind == StopEvent::Kind::kThreadExited) {
    stopped_.erase(stop.tid);
    if (!thread_events_) return {};
    // gdbserver's form: the status in hex, then the thread.
    text = "w" + hex_u64(static_cast<std::uint64_t>(stop.status)) + ";" + thread_id(stop.tid);
  } else if (ended) {
    text = on_stop(stop);
    // The threads that are no more are forgotten (a thread runs only while it is listed).
    const std::vector<Tid> threads = target_.threads();
    std::erase_if(stopped_, [&](const auto& t) {
      return std::find(threads.begin(), threads.end(), t.first) == threads.end();
    });
  } else {
    // Kept as its parts: '?' makes the reply again with the registers as they are then.
    ThreadStop& kept = stopped_[stop.tid];
    kept = ThreadStop{.signal = stop.signal, .reason = stop_reason(stop)};
    text = stop_reply(kept.signal, stop.tid, kept.reason);
    last_signal_ = kept.signal;
    last_reason_ = kept.reason;
    // A fork's child is held stopped until the client resumes or detaches it.
    if (stop.kind == StopEvent::Kind::kFork) stopped_[stop.child] = ThreadStop{};
  }
  last_stop_ = text;
  untold_.erase(stop.tid);
  return send_notification(
      Notification{.tid = ended ? 0 : stop.tid,
                   .child = stop.kind == StopEvent::Kind::kFork ? stop.child : 0,
                   .text = text});
}

Result<void> Server::send_notification(Notification n) {
  const std::string text = n.text;
  notifications_.push_back(std::move(n));
  if (notifications_.size() > 1) return {};  // sent as the reply to a vStopped
  if (remote_debug_) debug_line("remote: notifying Stop:" + text.substr(0, 200));
  const std::string framed = rsp_frame("Stop:" + text);
  return write_raw("%" + framed.substr(1));
}

Result<std::optional<ServerEnd>> Server::finish(ServerEnd::How how) {
  if (finished_) return finished_;
  auto end = target_.finish(how);
  if (!end) return std::unexpected(end.error());
  finished_ = *end;
  return std::optional<ServerEnd>(*end);
}

Server::Served Server::monitor(const std::string& command) {
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
      "  set libthread-db-search-path [PATH]  where libthread_db is looked for (thread-local\n"
      "                          addresses): $pdir and $sdir are the system's; empty, the default\n"
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
    set_debug(command.back() == '1');
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
  } else if (const std::string_view key = "set libthread-db-search-path";
             command == key || command.starts_with(std::string(key) + " ")) {
    std::string path = command.size() > key.size() ? command.substr(key.size() + 1) : "";
    if (path.empty()) path = "$pdir:$sdir";
    thread_db_found_ = thread_db_in(path);
    text = "libthread-db-search-path set to `" + path + "'\n";
  } else {
    known = false;
    text = "Unknown monitor command.\n\n" + help;
  }
  if (auto r = reply("O" + hex_text(text)); !r) return std::unexpected(r.error());
  if (auto r = reply(known ? "OK" : "E01"); !r) return std::unexpected(r.error());
  return std::optional<ServerEnd>();
}

// Whether a directory of the colon-separated `path` has a libthread_db: $pdir (the thread
// library's own directory) and $sdir (the system's) have glibc's.
bool Server::thread_db_in(const std::string& path) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    if (dir == "$pdir" || dir == "$sdir") return true;
    std::error_code ec;
    if (!dir.empty() && std::filesystem::exists(dir + "/libthread_db.so.1", ec)) return true;
    if (end == path.size()) return false;
    start = end + 1;
  }
}

Server::Served Server::answer(Result<std::string> r) {
  auto sent = reply(r ? *r : error_reply(r.error(), error_messages_));
  if (!sent) return std::unexpected(sent.error());
  return std::optional<ServerEnd>();
}

Server::Served Server::done(Result<void> r) {
  if (!r) return answer(std::unexpected(r.error()));
  return answer(std::string("OK"));
}

Server::Served Server::resumed(Result<std::string> stop) {
  // A resume that ended because the client went away ends the session.
  if (gone_) return gone_;
  // gdb takes the stopped thread as the general one after a stop (record_currthread) and
  // sends no Hg for it: so does the server.
  if (stop) {
    g_thread_ = last_thread_;
    g_process_ = 0;
  }
  if (!stop && debug_) debug_line("resume: " + stop.error().to_string());
  return answer(std::move(stop));
}

std::optional<Result<std::string>> Server::refused(const std::string& p) {
  if ((p.starts_with("vCont") && disabled("vCont")) || (p == "qC" && disabled("qC")) ||
      ((p == "qfThreadInfo" || p == "qsThreadInfo") && disabled("qfThreadInfo"))) {
    return std::string();  // as a packet gdbserver does not know
  }
  if (!target_.has_process()) {
    if (auto r = without_process(p)) return r;
  }
  if (exited_ && p[0] != 'k' && p[0] != 'D' && !p.starts_with("vKill") && p != "vStopped" &&
      p[0] != 'q' && p[0] != '?' && !p.starts_with("Q") && p[0] != '!' && p[0] != 'R' &&
      !p.starts_with("vRun;") && !p.starts_with("vAttach;")) {
    return make_error(ErrorCode::kSrch, "process: it has ended");
  }
  // The launch settings and process starts, only where the target starts processes.
  if (!target_.can_start() &&
      (p.starts_with("QDisableRandomization:") || p.starts_with("QStartupWithShell:") ||
       p.starts_with("QSetWorkingDir:") || p.starts_with("QEnvironment"))) {
    return std::string();
  }
  const bool run = p.starts_with("vRun;");
  if (run || p.starts_with("vAttach;")) {
    if (!target_.can_start()) {
      return make_error(ErrorCode::kOpNotSupp, run ? "vRun: this server starts no programs"
                                                   : "vAttach: this server attaches nothing");
    }
    // Another process beside those there: only for a client that tells processes apart.
    if (running() && !multiprocess_) {
      return make_error(ErrorCode::kBusy,
                        std::string(run ? "vRun" : "vAttach") + ": already debugging a process");
    }
  }
  return std::nullopt;
}

Server::Served Server::on_packet(const std::string& p) {
  if (p.empty()) return answer(std::string());
  if (!target_.has_process() && p[0] == 'k') {
    return std::optional<ServerEnd>();  // nothing to kill; no reply to k
  }
  if (auto r = refused(p)) return answer(std::move(*r));
  auto request = parse_request(p);
  if (!request) return answer(std::unexpected(request.error()));
  return std::visit([this](const auto& r) { return on(r); }, *request);
}

// Handshake and queries.

Server::Served Server::on(const Supported& s) {
  error_messages_ = s.error_message;
  exec_events_ = s.exec_events;
  multiprocess_ = s.multiprocess;
  fork_events_ = multiprocess_ && s.fork_events;
  vfork_events_ = multiprocess_ && s.vfork_events;
  // The parent of a fork stays stopped for its event (a vfork's also at its end).
  target_.set_features(ClientFeatures{.multiprocess = multiprocess_,
                                      .fork_events = fork_events_,
                                      .vfork_events = vfork_events_,
                                      .no_resumed = s.no_resumed},
                       true);
  // The thread id in the client's form (a stop not reported yet, or a W); the stop's signal and
  // reason kept (a client reconnecting to a program stopped by a signal delivers it).
  if (target_.has_process() && !exited_ &&
      (last_stop_.starts_with("T") || last_stop_.starts_with("S"))) {
    last_stop_ = stop_reply(last_signal_, last_thread_, last_reason_);
  }
  return answer(
      "PacketSize=" + hex_u64(kPacketSize) +
      ";qXfer:features:read+;qXfer:auxv:read+;qXfer:exec-file:read+;qXfer:threads:read+"
      ";qXfer:libraries-svr4:read+;qXfer:siginfo:read+;qXfer:siginfo:write+"
      ";qXfer:osdata:read+"
      ";QStartNoAckMode+;swbreak+;hwbreak+;vContSupported+;QCatchSyscalls+;QProgramSignals+"
      ";ConditionalBreakpoints+;BreakpointCommands+" +
      std::string(target_.can_start() ? ";QDisableRandomization+;QEnvironmentHexEncoded+"
                                        ";QEnvironmentUnset+;QEnvironmentReset+"
                                        ";QStartupWithShell+;QSetWorkingDir+"
                                      : "") +
      std::string(error_messages_ ? ";error-message+" : "") +
      std::string(exec_events_ ? ";exec-events+" : "") +
      std::string(multiprocess_ ? ";multiprocess+" : "") +
      std::string(fork_events_ ? ";fork-events+" : "") +
      std::string(vfork_events_ ? ";vfork-events+" : "") + ";QNonStop+;QThreadEvents+");
}

Server::Served Server::on(const StartNoAckMode&) {
  // The OK itself is still acknowledged; nothing after it.
  if (auto r = reply("OK"); !r) return std::unexpected(r.error());
  ack_ = false;
  return std::optional<ServerEnd>();
}

Server::Served Server::on(const StopReason&) {
  if (!non_stop_ || !running()) return answer(last_stop_);
  if (status_tells_untold_) untold_.clear();
  // Every stopped thread's stop, queued after those not taken yet; the first is the reply, the
  // others the replies to vStopped.
  for (Tid t : target_.threads()) {
    auto it = stopped_.find(t);
    if (it == stopped_.end() || untold_.contains(t)) continue;
    notifications_.push_back(
        Notification{.tid = t, .text = stop_reply(it->second.signal, t, it->second.reason)});
  }
  return answer(notifications_.empty() ? std::string("OK") : notifications_.front().text);
}

Server::Served Server::on(const ExtendedMode&) {
  extended_ = true;
  return answer(std::string("OK"));
}

Server::Served Server::on(const CurrentThread&) {
  return answer("QC" + thread_id(thread_for(last_thread_)));
}

Server::Served Server::on(const Attached&) {
  return answer(std::string(target_.spawned() ? "0" : "1"));
}

Server::Served Server::on(const ThreadInfo& info) {
  if (!info.first || exited_) return answer(std::string("l"));
  std::string out = "m";
  bool first = true;
  for (Tid t : target_.threads()) {
    out += (first ? "" : ",") + thread_id(t);
    first = false;
  }
  return answer(out);
}

Server::Served Server::on(const Xfer& x) {
  return answer(xfer(x));
}

Server::Served Server::on(const XferWrite& w) {
  if (w.object != "siginfo") return answer(std::string());  // no other object is written
  // The siginfo the general thread gets when it is resumed with its signal.
  const Tid tid = thread_for(g_thread_);
  if (!target_.has_process() || !target_.is_stopped(tid)) {
    return answer(Result<std::string>(
        make_error(ErrorCode::kSrch, "thread: " + std::to_string(tid) + " is not stopped")));
  }
  auto n = target_.write_siginfo(tid, w.offset, w.data);
  if (!n) return answer(Result<std::string>(std::unexpected(n.error())));
  return answer(hex_u64(*n));
}

Server::Served Server::on(const Monitor& m) {
  return monitor(m.command);
}

Server::Served Server::on(const HostInfo&) {
  // lldb: it takes the target's own signal numbers once it knows the target is Linux.
  native_signals_ = true;
  return answer(
      "triple:" + hex_text("x86_64-pc-linux-gnu") +
      ";ptrsize:8;endian:little;ostype:linux;vendor:pc;watchpoint_exceptions_received:after;");
}

Server::Served Server::on(const ProcessInfo&) {
  return answer("pid:" + hex_u64(static_cast<std::uint64_t>(target_.pid())) +
                ";triple:" + hex_text("x86_64-pc-linux-gnu") +
                ";ostype:linux;vendor:pc;endian:little;ptrsize:8;");
}

Server::Served Server::on(const WatchpointSupportInfo&) {
  // Any number: beyond the registers the software path takes them.
  return answer(std::string("num:1024;"));
}

Server::Served Server::on(const MemoryRegionInfo& info) {
  auto region = target_.memory_region(info.addr);
  if (!region) return answer(std::unexpected(region.error()));
  std::string out = "start:" + hex_u64(region->start) + ";size:" + hex_u64(region->size) + ";";
  if (!region->mapped) return answer(out);
  out += "permissions:";
  if (region->read) out += 'r';
  if (region->write) out += 'w';
  if (region->exec) out += 'x';
  out += ";";
  if (!region->path.empty()) out += "name:" + hex_text(region->path) + ";";
  return answer(out);
}

// gdbserver's reply: the address in hex, or an error for a thread that does not exist (or is not
// of that process) and for any the target gives (the thread has no block there yet, no thread
// library). Never the empty reply: gdb would take it as no support and ask no more.
Server::Served Server::on(const TlsAddress& t) {
  const auto threads = target_.threads();
  const Tid tid = t.tid > 0 ? t.tid : thread_for(g_thread_);
  if (std::find(threads.begin(), threads.end(), tid) == threads.end() ||
      (t.process > 0 && target_.group_of(tid) != t.process)) {
    return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
  }
  if (!thread_db_found_) {
    return answer(make_error(ErrorCode::kNoEnt,
                             "libthread-db-search-path: no libthread_db there (monitor set "
                             "libthread-db-search-path)"));
  }
  auto addr = target_.tls_address(tid, t.offset, t.lm);
  if (!addr) return answer(std::unexpected(addr.error()));
  return answer(hex_u64(*addr));
}

Server::Served Server::on(const Symbol&) {
  return answer(std::string("OK"));
}

// Settings.

Server::Served Server::on(const CatchSyscalls& c) {
  target_.set_catch_syscalls(c.numbers);
  return answer(std::string("OK"));
}

Server::Served Server::on(const ProgramSignals& p) {
  std::set<int> host;
  for (int sig : p.signals) {
    if (auto h = host_signal(static_cast<std::uint64_t>(sig)); h && *h > 0) host.insert(*h);
  }
  target_.set_program_signals(std::move(host));
  return answer(std::string("OK"));
}

Server::Served Server::on(const ThreadSuffixSupported&) {
  thread_suffix_ = true;
  return answer(std::string("OK"));
}

Server::Served Server::on(const ListThreadsInStopReply&) {
  list_threads_ = true;
  return answer(std::string("OK"));
}

Server::Served Server::on(const DisableRandomization& d) {
  // The next vRun's personality (gdb's `set disable-randomization`).
  target_.set_disable_randomization(d.on);
  return answer(std::string("OK"));
}

Server::Served Server::on(const StartupWithShell& s) {
  // How the next vRun starts its program (gdb's `set startup-with-shell`).
  target_.set_startup_with_shell(s.on);
  return answer(std::string("OK"));
}

Server::Served Server::on(const SetWorkingDir& s) {
  // Where the next vRun starts its program (gdb's `set cwd`); checked when it starts.
  target_.set_working_directory(s.dir);
  return answer(std::string("OK"));
}

// gdb's `set environment` / `unset environment` for the programs vRun starts, as gdbserver keeps
// them: a reset gives back the server's own environment.
Server::Served Server::on(const EnvironmentReset&) {
  target_.reset_environment();
  return answer(std::string("OK"));
}

Server::Served Server::on(const EnvironmentSet& e) {
  target_.set_environment(e.name_value);
  return answer(std::string("OK"));
}

Server::Served Server::on(const EnvironmentUnset& e) {
  target_.unset_environment(e.name);
  return answer(std::string("OK"));
}

// Threads.

Server::Served Server::on(const SelectThread& h) {
  const auto threads = target_.threads();
  Tid t = h.tid;
  if (h.process > 0 && t <= 0) {
    // pPID.0 / pPID.-1: a thread of that process.
    const auto in = std::find_if(threads.begin(), threads.end(),
                                 [&](Tid x) { return target_.group_of(x) == h.process; });
    if (in == threads.end()) return answer(make_error(ErrorCode::kSrch, "thread: no such process"));
    t = *in;
  }
  if (t > 0 && std::find(threads.begin(), threads.end(), t) == threads.end()) {
    // A leader that ended while its threads run on (main's pthread_exit) is no thread here any
    // more, but gdbserver still lists it, and gdb selects it for its process's memory: another
    // thread of the process stands for it.
    const auto in = std::find_if(threads.begin(), threads.end(), [&](Tid x) {
      return h.process > 0 && t == h.process && target_.group_of(x) == h.process;
    });
    if (in == threads.end()) return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
    t = *in;
  }
  (h.general ? g_thread_ : c_thread_) = t;
  if (h.general) g_process_ = t > 0 ? target_.group_of(t) : 0;
  return answer(std::string("OK"));
}

Server::Served Server::on(const ThreadAlive& t) {
  const auto threads = target_.threads();
  if (std::find(threads.begin(), threads.end(), t.tid) == threads.end()) {
    return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
  }
  return answer(std::string("OK"));
}

// Registers.

Server::Served Server::on(const ReadRegisters&) {
  auto regs = target_.read_registers(thread_for(g_thread_), false);
  if (!regs) return answer(std::unexpected(regs.error()));
  return answer(gdb_encode_registers(regs->regs, regs->fp));
}

Server::Served Server::on(const WriteRegisters& w) {
  const Tid tid = thread_for(g_thread_);
  auto regs = target_.read_registers(tid, false);
  if (!regs) return answer(std::unexpected(regs.error()));
  const Registers before = *regs;
  if (auto r = gdb_decode_registers(w.hex, regs->regs, regs->fp); !r) {
    return answer(std::unexpected(r.error()));
  }
  return done(target_.write_registers(tid, *regs, before));
}

Server::Served Server::on(const ReadRegister& r) {
  const Tid tid = thread_for(r.thread.value_or(g_thread_));
  auto regs = target_.read_registers(tid, r.regno >= kGdbCoreRegisterCount);
  if (!regs) return answer(std::unexpected(regs.error()));
  return answer(gdb_read_register(r.regno, regs->regs, regs->fp));
}

Server::Served Server::on(const WriteRegister& w) {
  const Tid tid = thread_for(w.thread.value_or(g_thread_));
  auto regs = target_.read_registers(tid, w.regno >= kGdbCoreRegisterCount);
  if (!regs) return answer(std::unexpected(regs.error()));
  const Registers before = *regs;
  if (!w.hex) return answer(make_error(ErrorCode::kInval, "packet: P without a value"));
  if (auto r = gdb_write_register(w.regno, *w.hex, regs->regs, regs->fp); !r) {
    return answer(std::unexpected(r.error()));
  }
  return done(target_.write_registers(tid, *regs, before));
}

// Memory.

Server::Served Server::on(const ReadMemory& m) {
  auto bytes = target_.read_memory(general_process(), m.addr,
                                   std::min<std::uint64_t>(m.length, kPacketSize / 2));
  if (!bytes) return answer(std::unexpected(bytes.error()));
  if (m.binary)
    return answer("b" + std::string(bytes->begin(), bytes->end()));  // rsp_frame escapes
  return answer(to_hex(*bytes));
}

Server::Served Server::on(const WriteMemory& w) {
  if (w.bytes.empty()) return answer(std::string("OK"));
  return done(target_.write_memory(general_process(), w.addr, w.bytes));
}

Server::Served Server::on(const Point& z) {
  if (z.insert) {
    return done(target_.insert_point(general_process(), z.type, z.addr, z.length, z.agent));
  }
  return done(target_.remove_point(general_process(), z.type, z.addr, z.length));
}

// Execution.

Result<ResumeAction> Server::resume_action(char kind, std::uint64_t signal, Tid process,
                                           Tid tid) const {
  ResumeAction a{.kind = kind, .signal = 0, .tid = tid, .process = process};
  if (kind == 'C' || kind == 'S') {
    auto host = host_signal(signal);
    if (!host) {
      return make_error(ErrorCode::kInval,
                        "vCont: signal " + hex_u64(signal) + " is not a signal of this target");
    }
    a.signal = *host;
  }
  return a;
}

Server::Served Server::on(const NonStop& n) {
  if (auto r = target_.set_non_stop(n.on); !r) return answer(std::unexpected(r.error()));
  non_stop_ = n.on;
  notifications_.clear();
  stopped_.clear();
  if (non_stop_ && running()) all_stopped();
  return answer(std::string("OK"));
}

Server::Served Server::on(const ThreadEvents& t) {
  thread_events_ = t.on;
  return answer(std::string("OK"));
}

Server::Served Server::on(const Stopped&) {
  if (!notifications_.empty()) notifications_.pop_front();
  return answer(notifications_.empty() ? std::string("OK") : notifications_.front().text);
}

Server::Served Server::on(const CtrlC&) {
  if (!non_stop_) return answer(std::string());  // all-stop: 0x03 interrupts
  return done(target_.interrupt_process());
}

Result<std::optional<StopEvent>> Server::resume_each(const std::vector<ResumeAction>& list) {
  // As gdbserver: a running thread ignores c/s; t stops a running thread only; a thread whose
  // stop is still queued for the client is not resumed by an action that does not name it.
  std::vector<ResumeAction> each;
  for (Tid t : target_.threads()) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const ResumeAction& a) {
      return a.tid == t ||
             ((a.tid == -1 || a.tid == 0) && (a.process <= 0 || a.process == target_.group_of(t)));
    });
    if (it == list.end()) continue;
    const auto stopped = stopped_.find(t);
    if (it->kind == 't' && stopped != stopped_.end() && untold_.erase(t) != 0) {
      // Stopped, its stop not told yet (a non-stop attach's): told now, as the 't' it asked for.
      told_.push_back(Notification{
          .tid = t, .text = stop_reply(stopped->second.signal, t, stopped->second.reason)});
      continue;
    }
    if ((it->kind == 't') == (stopped != stopped_.end())) continue;
    if (it->kind != 't' && it->tid != t &&
        std::any_of(notifications_.begin(), notifications_.end(),
                    [&](const Notification& n) { return n.tid == t || n.child == t; })) {
      continue;
    }
    ResumeAction a = *it;
    a.tid = t;
    a.process = 0;
    each.push_back(a);
  }
  if (each.empty()) return std::optional<StopEvent>();
  auto at_once = target_.resume(each);
  if (!at_once) return std::unexpected(at_once.error());
  for (const ResumeAction& a : each) {
    if (a.kind != 't') stopped_.erase(a.tid);
    untold_.erase(a.tid);
  }
  return at_once;
}

Server::Served Server::on(const Continue& c) {
  // The old forms: the Hc thread (or all) continues; 's' steps it.
  const bool step = c.kind == 's' || c.kind == 'S';
  auto action = resume_action(c.kind, c.signal, 0, step ? thread_for(c_thread_) : -1);
  if (!action) return resumed(std::unexpected(action.error()));
  if (non_stop_) return resumed_each({*action});
  return resumed(resume({*action}));
}

Server::Served Server::on(const VCont& v) {
  std::vector<ResumeAction> list;
  for (const VContAction& a : v.actions) {
    auto action = resume_action(a.kind, a.signal, a.process, a.tid);
    if (!action) return resumed(std::unexpected(action.error()));
    action->range_start = a.range_start;
    action->range_end = a.range_end;
    list.push_back(*action);
  }
  if (non_stop_) return resumed_each(list);
  return resumed(resume(list));
}

Server::Served Server::resumed_each(const std::vector<ResumeAction>& list) {
  told_.clear();
  auto at_once = resume_each(list);
  if (!at_once) return answer(std::unexpected(at_once.error()));
  if (auto r = reply("OK"); !r) return std::unexpected(r.error());
  // The stops a 't' asked to be told, after its OK, as gdbserver sends them.
  for (Notification& n : std::exchange(told_, {})) {
    if (auto r = send_notification(std::move(n)); !r) return std::unexpected(r.error());
  }
  if (*at_once) {
    if (auto r = notify(**at_once); !r) return std::unexpected(r.error());
  }
  return std::optional<ServerEnd>();
}

Server::Served Server::on(const VContQuery&) {
  return answer(std::string("vCont;c;C;s;S;t;r"));
}

// Processes.

Server::Served Server::taken(Result<Tid> r, bool attached, bool added) {
  if (!r) {
    if (!target_.has_process()) forget_process();
    return answer(std::unexpected(r.error()));
  }
  const std::string stop = took_process(*r, !attached, added);
  g_thread_ = last_thread_;
  g_process_ = 0;
  // Non-stop mode: an attach's stops are the client's to ask for ('?' or vCont;t), as gdbserver
  // answers.
  if (attached && non_stop_) {
    for (Tid t : target_.threads()) {
      if (target_.process_of(t) == *r) untold_.insert(t);
    }
    return answer(std::string("OK"));
  }
  return answer(stop);
}

Server::Served Server::on(const Run& run) {
  const bool added = running();
  return taken(target_.start(run.argv), false, added);
}

Server::Served Server::on(const Attach& a) {
  const bool added = running();
  return taken(target_.attach(a.pid), true, added);
}

// D;PID and vKill;PID with multiprocess+: one process of several.
std::optional<Result<std::string>> Server::leave_one(std::optional<Tid> process, bool kill) {
  if (!multiprocess_ || !process || !others_than(*process)) return std::nullopt;
  auto r = kill ? target_.kill_process(*process) : target_.detach_process(*process);
  if (!r) return std::unexpected(r.error());
  last_thread_ = thread_for(last_thread_);
  g_thread_ = c_thread_ = 0;
  g_process_ = 0;
  return std::string("OK");
}

Server::Served Server::on(const VKill& k) {
  if (auto one = leave_one(k.process, true)) return answer(std::move(*one));
  if (extended_) {
    // Extended mode: the server stays, with no process.
    return done(drop_process(ServerEnd::How::kKilled));
  }
  auto end = finish(ServerEnd::How::kKilled);
  if (!end) return std::unexpected(end.error());
  if (auto r = reply("OK"); !r) return std::unexpected(r.error());
  return end;
}

Server::Served Server::on(const Detach& d) {
  if (auto one = leave_one(d.process, false)) return answer(std::move(*one));
  if (extended_) {
    // Extended mode: the process runs on; the server stays, with no process.
    return done(drop_process(ServerEnd::How::kDetached));
  }
  auto end = finish(ServerEnd::How::kDetached);
  if (!end) {
    ignore_error(reply(error_reply(end.error(), error_messages_)), "end's error is returned");
    return std::unexpected(end.error());
  }
  if (auto r = reply("OK"); !r) return std::unexpected(r.error());
  return end;
}

Server::Served Server::on(const Kill&) {
  if (extended_) {
    // Extended mode: no reply, and the server waits with no process (gdbserver).
    if (auto r = drop_process(ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
    return std::optional<ServerEnd>();
  }
  auto end = finish(ServerEnd::How::kKilled);
  if (!end) return std::unexpected(end.error());
  return end;  // no reply to k
}

Server::Served Server::on(const Restart&) {
  // Extended mode's restart (gdb without vRun): the last program again, with no reply.
  if (!extended_ || !target_.can_start()) return answer(std::string());
  if (auto r = drop_process(ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  // R has no reply: the client's next '?' says whether a program runs.
  if (target_.restart() && target_.has_process()) took_process(target_.pid(), true, false);
  return std::optional<ServerEnd>();
}

Server::Served Server::on(const HostFile& f) {
  return answer(file_request(f));
}

Server::Served Server::on(const Unsupported&) {
  return answer(std::string());  // unknown: the empty reply
}

// Host I/O (vFile): gdb reads the executable and libraries through the server (its default
// sysroot "target:"), and `remote put`, `get` and `delete` copy and delete files there.
// Replies "F<result>" or "F-1,<errno>" with gdb's File-I/O errno values.
std::string Server::file_request(const HostFile& f) {
  using Op = HostFile::Op;
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
  if (f.op == Op::kSetFs) return "F0";  // one process: its file system is ours
  if (!f.fd) {
    if (f.error) return fail(*f.error);
  } else {
    if (!target_.has_file(*f.fd)) return "F-1," + hex_u64(9);  // EBADF
    if (f.error) return fail(*f.error);
  }
  switch (f.op) {
    case Op::kReadlink: {
      // `info proc` reads /proc/PID/cwd and exe this way.
      auto target = target_.read_link(f.path);
      if (!target) return fail(target.error());
      return "F" + hex_u64(target->size()) + ";" + *target;
    }
    case Op::kUnlink:
      if (auto r = target_.unlink_file(f.path); !r) return fail(r.error());
      return "F0";
    case Op::kOpen: {
      auto fd = target_.open_file(f.path, f.flags, f.mode);
      if (!fd) return fail(fd.error());
      return "F" + hex_u64(static_cast<std::uint64_t>(*fd));
    }
    case Op::kClose:
      ignore_error(target_.close_file(*f.fd), "the descriptor is gone either way");
      return "F0";
    case Op::kPread: {
      std::vector<std::uint8_t> data(std::min<std::uint64_t>(f.count, kPacketSize / 2));
      auto n = target_.pread_file(*f.fd, f.offset, data);
      if (!n) return fail(n.error());
      return "F" + hex_u64(*n) + ";" + std::string(data.begin(), data.begin() + *n);
    }
    case Op::kFstat: {
      auto st = target_.stat_file(*f.fd);
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
    case Op::kPwrite: {
      auto n = target_.pwrite_file(*f.fd, f.offset, f.data);
      if (!n) return fail(n.error());
      return "F" + hex_u64(*n);
    }
    default:
      return std::string();
  }
}

Result<std::string> Server::xfer(const Xfer& x) {
  const std::string_view object = x.object;
  const std::uint64_t offset = x.offset;
  const std::uint64_t length = x.length;
  if (object == "features") {
    if (x.annex != "target.xml")
      return make_error(ErrorCode::kNoEnt, "annex: no such feature file");
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
    auto xml = target_.libraries_svr4(general_process(), native_signals_);
    if (!xml) return std::unexpected(xml.error());
    return xfer_slice(*xml, offset, length);
  }
  if (object == "exec-file") {
    auto path = target_.exec_file(x.annex_process.value_or(target_.pid()));
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
  if (object == "osdata") {
    // Made at offset 0 and kept for the reads of the rest, so that the pieces of one document
    // are of one snapshot. A name with no table is an empty document, as gdbserver sends it.
    if (offset == 0 || x.annex != osdata_name_) {
      osdata_name_ = x.annex;
      auto table = target_.os_data(x.annex);
      if (!table && table.error().code() != ErrorCode::kNoEnt)
        return std::unexpected(table.error());
      osdata_ = table ? osdata_xml(*table) : std::string();
    }
    return xfer_slice(osdata_, offset, length);
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

Result<std::string> Server::resume(const std::vector<ResumeAction>& list) {
  auto at_once = target_.resume(list);
  if (!at_once) return std::unexpected(at_once.error());
  if (*at_once) return on_stop(**at_once);  // not the '?' reply: nothing ran
  const auto interrupted = [&]() -> Result<std::string> {
    interrupt_ = false;
    auto stop = target_.interrupt();
    if (!stop) {
      if (debug_) debug_line("interrupt: " + stop.error().to_string());
      return std::unexpected(stop.error());
    }
    stop->tid = thread_for(stop->tid);
    last_stop_ = on_stop(*stop);
    return last_stop_;
  };
  // A Ctrl-C the client sent right after the resume may have come in the same read as the resume
  // packet: it is not in the connection any more, for the wait to see.
  if (reader_.take_interrupts()) {
    if (remote_debug_) debug_line("remote: received Ctrl-C");
    interrupt_ = true;
  }
  // A Ctrl-C the target owes a process this resume leaves stopped waits for that process.
  const auto owed = [&] {
    if (!interrupt_ || !target_.owe_interrupt()) return;
    if (debug_) debug_line("interrupt: owed to a process the resume left stopped");
    interrupt_ = false;
  };
  owed();
  if (interrupt_) return interrupted();
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
      auto end = client_gone(true);
      if (!end) return std::unexpected(end.error());
      gone_ = *end;
      return std::string();
    }
    for (;;) {
      auto item = reader_.next();
      if (!item) break;
      if (item->kind == RspItem::Kind::kInterrupt) {
        if (remote_debug_) debug_line("remote: received Ctrl-C");
        interrupt_ = true;
      }
    }
    owed();
    if (interrupt_) return interrupted();
  }
}

}  // namespace hwarb::gdb

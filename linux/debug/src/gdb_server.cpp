#include "hwarb/linux/gdb_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <utility>

#include "hwarb/gdb/agent_expr.h"
#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/gdb/gdb_signals.h"
#include "hwarb/gdb/rsp.h"
#include "hwarb/linux/link_map.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/socket.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::native {
// The protocol's framing, registers, signals and agent expressions (gdb/).
using namespace hwarb::gdb;  // NOLINT(google-build-using-namespace)
namespace {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kSignal:
      return "signal";
    case EventKind::kSyscallEnter:
      return "syscall-entry";
    case EventKind::kSyscallExit:
      return "syscall-exit";
    case EventKind::kNewThread:
      return "new-thread";
    case EventKind::kThreadExit:
      return "thread-exit";
    case EventKind::kFork:
      return "fork";
    case EventKind::kExec:
      return "exec";
    case EventKind::kVforkDone:
      return "vfork-done";
    case EventKind::kExited:
      return "exited";
    case EventKind::kKilled:
      return "killed";
  }
  return "?";
}

constexpr int kSiKernel = 0x80;              // SI_KERNEL: the SIGTRAP of an int3
constexpr std::size_t kPacketSize = 0x4000;  // what we announce (PacketSize)
constexpr std::uint8_t kInt3 = 0xCC;
constexpr int kSignalCheckMs = 100;  // how often a wait for the client looks at the signal flag

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
Result<pid_t> parse_id(std::string_view text) {
  if (text == "-1") return -1;
  auto v = parse_hex_u64(text);
  if (!v) return std::unexpected(v.error());
  if (*v > 0x7fffffff) {
    return make_error(ErrorCode::kInval, "thread: " + std::string(text) + " is not a thread id");
  }
  return static_cast<pid_t>(*v);
}

// A thread id of the protocol: TID, or pPID.TID / pPID (every thread of PID) with
// multiprocess+. {process (0: any, -1: all), thread (0: any, -1: all)}.
Result<std::pair<pid_t, pid_t>> parse_ptid(std::string_view text) {
  if (!text.starts_with("p")) {
    auto tid = parse_id(text);
    if (!tid) return std::unexpected(tid.error());
    return std::pair<pid_t, pid_t>{0, *tid};
  }
  const std::size_t dot = text.find('.');
  auto process = parse_id(text.substr(1, dot == std::string_view::npos ? dot : dot - 1));
  if (!process) return std::unexpected(process.error());
  if (dot == std::string_view::npos) return std::pair<pid_t, pid_t>{*process, -1};
  auto tid = parse_id(text.substr(dot + 1));
  if (!tid) return std::unexpected(tid.error());
  return std::pair<pid_t, pid_t>{*process, *tid};
}

Result<pid_t> parse_thread(std::string_view text) {
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

Result<Inferior> spawn_program(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& argv,
                               const InferiorOptions& options) {
  std::vector<std::string> command = wrapper;
  command.insert(command.end(), argv.begin(), argv.end());
  auto inferior = Inferior::spawn(command, options);
  if (!inferior || wrapper.empty()) return inferior;
  // The wrapper runs until it execs the program, as under gdbserver's --wrapper.
  pid_t tid = inferior->pid();
  int signal = 0;
  for (;;) {
    if (auto r = inferior->resume(tid, Resume::kCont, signal); !r)
      return std::unexpected(r.error());
    auto ev = inferior->wait();
    if (!ev) return std::unexpected(ev.error());
    tid = ev->tid;
    signal = ev->kind == EventKind::kSignal ? ev->signal : 0;
    if (ev->kind == EventKind::kExec) return inferior;
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      return make_error(ErrorCode::kSrch,
                        "wrapper: '" + wrapper[0] + "' ended before it ran the program");
    }
  }
}

GdbServer::GdbServer(Inferior& inferior, WatchSession& session, int in_fd, int out_fd)
    : inferior_(&inferior),
      session_(&session),
      in_fd_(in_fd),
      out_fd_(out_fd),
      client_spin_(inferior.spin_max()) {
  last_thread_ = inferior.pid();
  last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
}

GdbServer::GdbServer(int in_fd, int out_fd)
    : in_fd_(in_fd), out_fd_(out_fd), client_spin_(std::chrono::nanoseconds(0)) {
  last_stop_ = "W00";
}

GdbServer::~GdbServer() = default;

void GdbServer::launch_with(GdbLaunch launch) {
  launch_ = std::move(launch);
}

void GdbServer::connect(int in_fd, int out_fd) {
  in_fd_ = in_fd;
  out_fd_ = out_fd;
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
  last_sent_.clear();
  interrupt_ = false;
  client_lost_ = false;
  gone_.reset();
  files_.clear();
}

bool GdbServer::disabled(const std::string& name) const {
  return launch_ && launch_->disabled_packets.contains(name);
}

bool GdbServer::stays() const {
  return !interrupted_ && launch_ && !launch_->once && (launch_->multi || extended_);
}

Result<GdbServerEnd> GdbServer::client_gone() {
  const GdbServerEnd::How how =
      interrupted_ ? GdbServerEnd::How::kInterrupted : GdbServerEnd::How::kDisconnected;
  if (!stays()) {
    auto end = finish(how);
    if (!end) return std::unexpected(end.error());
    return **end;
  }
  GdbServerEnd end = end_;
  end.how = how;
  end.exited = exited_;
  end.serving = true;
  if (auto r = drop_process(how); !r) return std::unexpected(r.error());
  return end;
}

Result<void> GdbServer::drop_process(GdbServerEnd::How how) {
  if (inferior_ == nullptr) return {};
  auto left = finish_once(how);
  // The watchdog guards the process given on the command line only.
  if (watchdog_ != nullptr) {
    watchdog_->release();
    watchdog_ = nullptr;
    published_ = RestorePlan();
  }
  session_ = nullptr;
  inferior_ = nullptr;
  own_session_.reset();
  own_inferior_.reset();
  last_stop_ = "W00";
  last_thread_ = 0;
  g_thread_ = 0;
  c_thread_ = 0;
  stepping_ = 0;
  wildcard_process_.reset();
  step_accesses_.clear();
  exited_ = false;
  stepped_.clear();
  lifted_.clear();
  end_ = GdbServerEnd();
  pending_signal_.clear();
  deferred_.clear();
  rewound_.clear();
  forked_.clear();
  execve_return_ = 0;
  int3_.clear();
  watches_.clear();
  removed_.clear();
  watch_type_.clear();
  if (!left) return std::unexpected(left.error());
  return {};
}

std::string GdbServer::take_process(Inferior&& inferior) {
  own_inferior_ = std::make_unique<Inferior>(std::move(inferior));
  own_session_ = std::make_unique<WatchSession>(*own_inferior_, launch_->watches);
  inferior_ = own_inferior_.get();
  session_ = own_session_.get();
  client_spin_ = SpinWindow(inferior_->spin_max());
  inferior_->hold_forks(fork_events_ || vfork_events_);
  last_thread_ = inferior_->pid();
  g_thread_ = 0;
  last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
  return last_stop_;
}

Result<std::string> GdbServer::run_program(std::string_view args) {
  if (!launch_) return make_error(ErrorCode::kOpNotSupp, "vRun: this server starts no programs");
  if (running()) return make_error(ErrorCode::kBusy, "vRun: already debugging a process");
  // PROG;ARG;... each hex-encoded; an empty PROG: the last program run (or the command line's),
  // with the arguments given now, as gdbserver's handle_v_run.
  std::vector<std::string> argv;
  for (;;) {
    const std::size_t semi = args.find(';');
    auto bytes = from_hex(args.substr(0, semi));
    if (!bytes) return std::unexpected(bytes.error().with_context("vRun"));
    argv.emplace_back(bytes->begin(), bytes->end());
    if (semi == std::string_view::npos) break;
    args = args.substr(semi + 1);
  }
  if (argv[0].empty()) {
    const std::vector<std::string>& last = last_program_.empty() ? launch_->program : last_program_;
    if (last.empty()) {
      return make_error(ErrorCode::kInval, "vRun: no program given, and none was run before");
    }
    argv[0] = last[0];
  } else if (auto here = in_working_directory(argv[0])) {
    argv[0] = *here;
  }
  if (auto r = drop_process(GdbServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  last_program_ = argv;
  auto spawned = spawn_program(launch_->wrapper, argv, launch_->inferior);
  if (!spawned) return std::unexpected(spawned.error());
  ignore_error(write_all(STDERR_FILENO, "hwarb gdbserver: process " + argv[0] + " created; pid = " +
                                            std::to_string(spawned->pid()) + "\n"),
               "a closed standard error loses the line, the session goes on");
  return take_process(std::move(*spawned));
}

Result<std::string> GdbServer::attach_process(std::string_view pid_text) {
  if (!launch_) return make_error(ErrorCode::kOpNotSupp, "vAttach: this server attaches nothing");
  if (running()) return make_error(ErrorCode::kBusy, "vAttach: already debugging a process");
  auto pid = parse_id(pid_text);
  if (!pid) return std::unexpected(pid.error());
  if (*pid <= 0) return make_error(ErrorCode::kInval, "vAttach: " + std::string(pid_text));
  if (auto r = drop_process(GdbServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  auto attached = Inferior::attach(*pid, launch_->inferior);
  if (!attached) return std::unexpected(attached.error());
  ignore_error(write_all(STDERR_FILENO,
                         "hwarb gdbserver: attached to process " + std::to_string(*pid) + "\n"),
               "a closed standard error loses the line, the session goes on");
  return take_process(std::move(*attached));
}

std::optional<Result<std::string>> GdbServer::without_process(const std::string& p) {
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

RestorePlan GdbServer::restore_plan() const {
  RestorePlan plan = session_->restore_plan();
  if (std::find(plan.processes.begin(), plan.processes.end(), inferior_->pid()) ==
      plan.processes.end()) {
    plan.processes.push_back(inferior_->pid());
  }
  if (auto it = int3_.find(inferior_->pid()); it != int3_.end()) {
    for (const auto& [addr, bp] : it->second) {
      plan.bytes.push_back(RestoreByte{.addr = addr, .original = bp.original});
    }
  }
  return plan;
}

Result<void> GdbServer::guard(Watchdog& watchdog) {
  RestorePlan plan = restore_plan();
  if (auto r = watchdog.publish(plan); !r) return r;
  watchdog_ = &watchdog;
  published_ = std::move(plan);
  return {};
}

Result<void> GdbServer::publish_plan() {
  if (watchdog_ == nullptr) return {};
  RestorePlan plan = restore_plan();
  if (plan == published_) return {};
  if (auto r = watchdog_->publish(plan); !r) {
    watchdog_error_ = r.error();
    watchdog_ = nullptr;
    return r;
  }
  published_ = std::move(plan);
  return {};
}

Result<void> GdbServer::send(std::string_view payload) {
  if (remote_debug_) debug_line("remote: sending " + std::string(payload.substr(0, 200)));
  last_sent_ = rsp_frame(payload);
  return write_raw(last_sent_);
}

void GdbServer::debug_line(const std::string& text) const {
  std::string line;
  if (debug_timestamps_) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    line =
        std::to_string(us / 1000000) + "." + std::to_string(1000000 + us % 1000000).substr(1) + " ";
  }
  line += "hwarb gdbserver: " + text + "\n";
  ignore_error(write_all(STDERR_FILENO, line), "a refused log line has nowhere to go");
}

Result<void> GdbServer::write_raw(std::string_view bytes) {
  auto r = write_all(out_fd_, bytes);
  if (!r) client_lost_ = true;  // EPIPE, ECONNRESET: the client is gone
  return r;
}

Result<bool> GdbServer::receive(bool block) {
  std::array<char, 4096> buf;
  const std::span<const int> in(&in_fd_, 1);
  if (!block) {
    auto ready = poll_in_once(in, 0);
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] == 0) return true;
  }
  // Blocking: polled for client_spin_'s window first (the header says why).
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  while (block && Clock::now() - begin < client_spin_.window()) {
    auto ready = poll_in_once(in, 0);
    if (!ready && ready.error().code() == ErrorCode::kIntr) return true;
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] != 0) break;
  }
  // Then a sleep, woken now and then to see whether a signal asked the server to end (a signal
  // between the check and a blocking read would otherwise go unnoticed until the client spoke).
  while (block) {
    if (interrupt_requested()) {
      interrupted_ = true;
      return false;
    }
    auto ready = poll_in_once(in, kSignalCheckMs);
    if (!ready && ready.error().code() == ErrorCode::kIntr) continue;
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] != 0) break;
  }
  auto n = read_some(in_fd_, buf);
  if (block) client_spin_.record(Clock::now() - begin);
  if (!n) {
    if (n.error().code() == ErrorCode::kIntr || n.error().code() == ErrorCode::kAgain) return true;
    // A reset connection (ECONNRESET) or any other failed read: the client is gone.
    client_lost_ = true;
    return false;
  }
  if (*n == 0) return false;
  reader_.feed(std::string_view(buf.data(), *n));
  return true;
}

int GdbServer::wire_signal(int signal) const {
  return native_signals_ ? signal : gdb_signal_from_linux(signal);
}

std::optional<int> GdbServer::host_signal(std::uint64_t wire) const {
  if (native_signals_) {
    if (wire > 64) return std::nullopt;
    return static_cast<int>(wire);
  }
  if (wire > 1000) return std::nullopt;
  return linux_signal_from_gdb(static_cast<int>(wire));
}

std::string GdbServer::stop_reply(int signal, pid_t tid, const std::string& reason) const {
  // gdbserver --disable-packet=T: an S reply, nothing more; =Tthread: no thread: field.
  if (disabled("T")) return "S" + hex_byte(wire_signal(signal));
  std::string out = "T" + hex_byte(wire_signal(signal)) +
                    (disabled("Tthread") ? std::string() : "thread:" + thread_id(tid) + ";") +
                    reason;
  // rbp, rsp and rip (gdb's 6, 7, 16): gdb then needs no 'g' to show where the thread is.
  if (auto regs = inferior_->get_regs(tid)) {
    out += "06:" + hex_le(regs->rbp, 8) + ";07:" + hex_le(regs->rsp, 8) +
           ";10:" + hex_le(regs->rip, 8) + ";";
  }
  if (list_threads_) {
    out += "threads:";
    bool first = true;
    for (pid_t t : inferior_->threads()) {
      out += (first ? "" : ",") + hex_u64(static_cast<std::uint64_t>(t));
      first = false;
    }
    out += ";";
  }
  return out;
}

Resume GdbServer::run_mode() const {
  const Resume mode = session_->resume_mode();
  return catch_syscalls_ && mode == Resume::kCont ? Resume::kSyscall : mode;
}

std::string GdbServer::thread_id(pid_t tid) const {
  const std::string id = hex_u64(static_cast<std::uint64_t>(tid));
  if (!multiprocess_) return id;
  return "p" + hex_u64(static_cast<std::uint64_t>(inferior_->group_of(tid))) + "." + id;
}

pid_t GdbServer::general_process() const {
  return inferior_->process_of(thread_for(g_thread_));
}

bool GdbServer::others_than(pid_t process) const {
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) != process) return true;
  }
  return false;
}

pid_t GdbServer::thread_for(pid_t selected) const {
  const std::vector<pid_t> threads = inferior_->threads();
  if (selected > 0 && std::find(threads.begin(), threads.end(), selected) != threads.end()) {
    return selected;
  }
  if (std::find(threads.begin(), threads.end(), last_thread_) != threads.end()) return last_thread_;
  return threads.empty() ? inferior_->pid() : threads.front();
}

Result<GdbServerEnd> GdbServer::serve() {
  auto end = serve_packets();
  if (end) return end;
  // Whatever broke off the serving (a write to a client that is gone, a failed request), the
  // process is left as a disconnect leaves it: nothing of ours in it.
  if (client_lost_) {
    if (auto gone = client_gone(); gone) return gone;
  }
  ignore_error(
      finish(interrupted_ ? GdbServerEnd::How::kInterrupted : GdbServerEnd::How::kDisconnected),
      "the connection's error is the one reported");
  return std::unexpected(end.error());
}

Result<GdbServerEnd> GdbServer::serve_packets() {
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
          // Breakpoints and watches the packet changed, to the watchdog (a failure is kept in
          // watchdog_error_; the packet's answer stands).
          ignore_error(publish_plan(), "kept in watchdog_error_");
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

Result<std::optional<GdbServerEnd>> GdbServer::finish(GdbServerEnd::How how) {
  if (finished_) return finished_;
  auto end = finish_once(how);
  if (end && *end) finished_ = **end;
  return end;
}

Result<std::optional<GdbServerEnd>> GdbServer::finish_once(GdbServerEnd::How how) {
  GdbServerEnd end = end_;
  end.how = how;
  if (inferior_ == nullptr || exited_ || !inferior_->alive()) {
    end.exited = exited_;
    return end;
  }
  // Undo everything while every thread is stopped: the int3 bytes, the session's watches.
  if (auto r = inferior_->stop_all(); !r && r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  // The traps of int3s about to go are no signals of the program: delivered at the detach they
  // would kill it.
  if (auto r = rewind_queued_traps(); !r) return std::unexpected(r.error());
  drop_rewound_traps();
  for (const auto& [process, int3s] : int3_) {
    for (const auto& [addr, bp] : int3s) {
      ignore_error(
          inferior_->write_memory(addr, std::span<const std::uint8_t>(&bp.original, 1), process),
          "a gone process has no int3");
    }
  }
  int3_.clear();
  Result<void> undone = session_->uninstall();
  const bool keep = how == GdbServerEnd::How::kDetached ||
                    (how != GdbServerEnd::How::kKilled && !inferior_->spawned());
  if (keep && undone) {
    // A spawned program the client detached from runs on after the server ends.
    if (inferior_->spawned()) ignore_error(inferior_->outlive_tracer(), "the detach goes on");
    // Signals reported to the client and not yet delivered go with the detach.
    if (auto r = inferior_->detach(); !r) return std::unexpected(r.error());
    end.how = how;
    return end;
  }
  if (auto r = inferior_->kill(); !r && r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  if (!undone) return std::unexpected(undone.error());
  end.how = how == GdbServerEnd::How::kDetached ? GdbServerEnd::How::kKilled : how;
  return end;
}

Result<std::optional<GdbServerEnd>> GdbServer::monitor(std::string_view hex_command) {
  auto bytes = from_hex(hex_command);
  const std::string command = bytes ? std::string(bytes->begin(), bytes->end()) : std::string();
  if (command == "exit") {
    // gdbserver's `monitor exit`: OK, then the server ends at once, leaving the process as a
    // client that goes away leaves it.
    if (auto r = reply("OK"); !r) return std::unexpected(r.error());
    auto end = finish(GdbServerEnd::How::kDisconnected);
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
  if ((command == "watches" || command == "slots") && session_ == nullptr) {
    text = "no process\n";
  } else if (command == "watches") {
    text = monitor_watches();
  } else if (command == "slots") {
    text = monitor_slots();
  } else if (command == "help") {
    text = help;
  } else if (command == "set debug 1" || command == "set debug 0") {
    debug_ = command.back() == '1';
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
  return std::optional<GdbServerEnd>();
}

std::string GdbServer::monitor_watches() const {
  const std::vector<WatchInfo> infos = session_->watches();
  if (infos.empty()) return "no watchpoints\n";
  std::string out = std::to_string(infos.size()) + " watchpoint(s): " + session_->describe() + "\n";
  for (const WatchInfo& w : infos) {
    const unsigned a = w.spec.access;
    std::string access;
    if ((a & kWatchRead) != 0) access += 'r';
    if ((a & kWatchWrite) != 0) access += 'w';
    if ((a & kWatchExec) != 0) access += 'x';
    out += "  #" + std::to_string(static_cast<std::size_t>(w.id)) + " 0x" + hex_u64(w.spec.addr) +
           "/" + std::to_string(w.spec.len) + ":" + access + "  " + placement_name(w.placement);
    if (w.placement == Placement::kHardware) {
      out += " (" + std::to_string(w.registers) + " debug register(s))";
    }
    if (!w.why.empty()) out += ": " + w.why;
    out += "\n";
  }
  return out;
}

std::string GdbServer::monitor_slots() const {
  const WatchSessionOptions& o = session_->options();
  int held = 0;
  for (const WatchInfo& w : session_->watches()) held += w.registers;
  std::string out = "debug registers per thread: " + std::to_string(o.slots) +
                    "; held by this session's watchpoints: " + std::to_string(held) + "\n";
  out += o.hardware ? std::string("hardware watchpoints: yes\n")
                    : "hardware watchpoints: no (" + o.no_hardware + ")\n";
  const std::vector<std::string> others = perf_event_holders();
  out += "other processes with perf events open:";
  if (others.empty()) out += " none";
  for (std::size_t i = 0; i < others.size(); ++i) out += (i == 0 ? " " : ", ") + others[i];
  out += "\n";
  if (o.cpu_accesses)
    out += "software watchpoints: the CPU makes each access (" + o.cpu_accesses_why + ")\n";
  return out;
}

Result<std::optional<GdbServerEnd>> GdbServer::on_packet(const std::string& p) {
  const auto answer = [&](Result<std::string> r) -> Result<std::optional<GdbServerEnd>> {
    auto sent = reply(r ? *r : error_reply(r.error(), error_messages_));
    if (!sent) return std::unexpected(sent.error());
    return std::optional<GdbServerEnd>();
  };
  if (p.empty()) return answer(std::string());
  if ((p.starts_with("vCont") && disabled("vCont")) || (p == "qC" && disabled("qC")) ||
      ((p == "qfThreadInfo" || p == "qsThreadInfo") && disabled("qfThreadInfo"))) {
    return answer(std::string());  // as a packet gdbserver does not know
  }
  const char c = p[0];
  const std::string_view rest = std::string_view(p).substr(1);
  if (inferior_ == nullptr) {
    if (c == 'k') return std::optional<GdbServerEnd>();  // nothing to kill; no reply to k
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
    return std::optional<GdbServerEnd>();
  }
  // A resume that ended because the client went away ends the session.
  const auto resumed = [&](Result<std::string> stop) -> Result<std::optional<GdbServerEnd>> {
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
      const auto threads = inferior_->threads();
      pid_t t = id->second;
      if (id->first > 0 && t <= 0) {
        // pPID.0 / pPID.-1: a thread of that process.
        const auto in = std::find_if(threads.begin(), threads.end(),
                                     [&](pid_t x) { return inferior_->group_of(x) == id->first; });
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
      const auto threads = inferior_->threads();
      if (std::find(threads.begin(), threads.end(), *t) == threads.end()) {
        return answer(make_error(ErrorCode::kSrch, "thread: no such thread"));
      }
      return answer(std::string("OK"));
    }
    case 'g': {
      const pid_t tid = thread_for(g_thread_);
      auto regs = read_registers(tid);
      if (!regs) return answer(std::unexpected(regs.error()));
      return answer(gdb_encode_registers(regs->first, regs->second));
    }
    case 'G': {
      const pid_t tid = thread_for(g_thread_);
      auto regs = read_registers(tid);
      if (!regs) return answer(std::unexpected(regs.error()));
      const auto before = *regs;
      if (auto r = gdb_decode_registers(rest, regs->first, regs->second); !r) {
        return answer(std::unexpected(r.error()));
      }
      return answer(write_registers(tid, *regs, before));
    }
    case 'p':
    case 'P': {
      std::string_view spec = rest;
      pid_t tid = thread_for(g_thread_);
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
      auto regs = read_registers(tid, *regno >= kGdbCoreRegisterCount);
      if (!regs) return answer(std::unexpected(regs.error()));
      const auto before = *regs;
      if (c == 'p') {
        return answer(gdb_read_register(static_cast<int>(*regno), regs->first, regs->second));
      }
      if (eq == std::string_view::npos) {
        return answer(make_error(ErrorCode::kInval, "packet: P without a value"));
      }
      if (auto r = gdb_write_register(static_cast<int>(*regno), spec.substr(eq + 1), regs->first,
                                      regs->second);
          !r) {
        return answer(std::unexpected(r.error()));
      }
      return answer(write_registers(tid, *regs, before));
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
      if (auto r = write_memory(al->first, data); !r) return answer(std::unexpected(r.error()));
      return answer(std::string("OK"));
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
      return answer(c == 'Z' ? insert_point(type, al->first, al->second, std::move(conditions))
                             : remove_point(type, al->first, al->second));
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
      const pid_t tid = thread_for(c_thread_);
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
          return answer(kill_process(*process));
        }
      }
      if (p.starts_with("vKill") && extended_) {
        // Extended mode: the server stays, with no process.
        if (auto r = drop_process(GdbServerEnd::How::kKilled); !r) {
          return answer(std::unexpected(r.error()));
        }
        return answer(std::string("OK"));
      }
      if (p.starts_with("vKill")) {
        auto end = finish(GdbServerEnd::How::kKilled);
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
          return answer(detach_process(*process));
        }
      }
      if (extended_) {
        // Extended mode: the process runs on; the server stays, with no process.
        auto left = drop_process(GdbServerEnd::How::kDetached);
        if (!left) return answer(std::unexpected(left.error()));
        return answer(std::string("OK"));
      }
      auto end = finish(GdbServerEnd::How::kDetached);
      if (!end) {
        ignore_error(reply(error_reply(end.error(), error_messages_)), "end's error is returned");
        return std::unexpected(end.error());
      }
      if (auto r = reply("OK"); !r) return std::unexpected(r.error());
      return end;
    }
    case 'R': {
      // Extended mode's restart (gdb without vRun): the last program again, with no reply.
      if (!extended_ || !launch_) return answer(std::string());
      if (auto r = drop_process(GdbServerEnd::How::kKilled); !r) return std::unexpected(r.error());
      std::vector<std::string> argv = last_program_.empty() ? launch_->program : last_program_;
      if (argv.empty()) return std::optional<GdbServerEnd>();
      std::string args = hex_text(argv[0]);
      for (std::size_t i = 1; i < argv.size(); ++i) args += ";" + hex_text(argv[i]);
      ignore_error(run_program(args),
                   "R has no reply: the client's next '?' says whether a program runs");
      return std::optional<GdbServerEnd>();
    }
    case 'k': {
      if (extended_) {
        // Extended mode: no reply, and the server waits with no process (gdbserver).
        if (auto r = drop_process(GdbServerEnd::How::kKilled); !r)
          return std::unexpected(r.error());
        return std::optional<GdbServerEnd>();
      }
      auto end = finish(GdbServerEnd::How::kKilled);
      if (!end) return std::unexpected(end.error());
      return end;  // no reply to k
    }
    default:
      return answer(std::string());  // unknown: the empty reply
  }
}

namespace {

// Where this CPU's XSAVE area keeps each component (the same for every thread of the machine).
const XsaveLayout& xsave_layout() {
  static const XsaveLayout layout = host_xsave_layout();
  return layout;
}

}  // namespace

Result<std::pair<x86::Regs, FpRegs>> GdbServer::read_registers(pid_t tid, bool ext) {
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  auto fx = inferior_->get_fxsave(tid);
  if (!fx) return std::unexpected(fx.error());
  FpRegs fp;
  fp.fxsave = *fx;
  if (ext) {
    auto area = inferior_->get_xstate(tid);
    if (area) {
      auto got = xsave_to_ext(*area, xsave_layout());
      if (!got) return std::unexpected(got.error());
      fp.ext = *got;
    } else if (area.error().code() != ErrorCode::kNoDev) {
      return std::unexpected(area.error());
    }
  }
  return std::pair{*regs, fp};
}

Result<std::string> GdbServer::write_registers(pid_t tid, const std::pair<x86::Regs, FpRegs>& r,
                                               const std::pair<x86::Regs, FpRegs>& before) {
  if (r.first != before.first) {
    if (auto w = inferior_->set_regs(tid, r.first); !w) return std::unexpected(w.error());
  }
  if (r.second.fxsave != before.second.fxsave) {
    if (auto w = inferior_->set_fxsave(tid, r.second.fxsave); !w) {
      return std::unexpected(w.error());
    }
  }
  if (r.second.ext != before.second.ext) {
    // Read again after the FXSAVE write above, so the area written back carries it.
    auto area = inferior_->get_xstate(tid);
    if (!area) return std::unexpected(area.error());
    if (auto w = ext_to_xsave(r.second.ext, *area, xsave_layout()); !w) {
      return std::unexpected(w.error());
    }
    if (auto w = inferior_->set_xstate(tid, *area); !w) return std::unexpected(w.error());
  }
  return std::string("OK");
}

// Host I/O (vFile): gdb reads the executable and libraries through the server (its default
// sysroot "target:"), and `remote put`, `get` and `delete` copy and delete files there.
// Replies "F<result>" or "F-1,<errno>" with gdb's File-I/O errno values.
std::string GdbServer::file_request(std::string_view request) {
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
    auto target = read_link(std::string(path->begin(), path->end()));
    if (!target) return fail(target.error());
    return "F" + hex_u64(target->size()) + ";" + *target;
  }
  if (op == "unlink") {
    auto path = from_hex(args.empty() ? std::string_view() : args[0]);
    if (!path) return fail(path.error());
    if (auto r = unlink_file(std::string(path->begin(), path->end())); !r) return fail(r.error());
    return "F0";
  }
  if (op == "open") {
    auto path = from_hex(args.empty() ? std::string_view() : args[0]);
    auto flags = number(1);
    auto mode = args.size() > 2 ? number(2) : Result<std::uint64_t>(0);
    if (!path || !flags || !mode) {
      return fail(!path ? path.error() : !flags ? flags.error() : mode.error());
    }
    // gdb's File-I/O open flags (O_RDONLY 0, O_WRONLY 1, O_RDWR 2, O_APPEND 0x8, O_CREAT 0x200,
    // O_TRUNC 0x400, O_EXCL 0x800), as Linux's; its mode bits are Linux's permission bits.
    int linux_flags = (*flags & 3) == 1 ? O_WRONLY : (*flags & 3) == 2 ? O_RDWR : O_RDONLY;
    if ((*flags & 0x8) != 0) linux_flags |= O_APPEND;
    if ((*flags & 0x200) != 0) linux_flags |= O_CREAT;
    if ((*flags & 0x400) != 0) linux_flags |= O_TRUNC;
    if ((*flags & 0x800) != 0) linux_flags |= O_EXCL;
    auto fd = open_file(std::string(path->begin(), path->end()), linux_flags,
                        static_cast<unsigned>(*mode & 07777));
    if (!fd) return fail(fd.error());
    const int n = fd->get();
    files_[n] = std::move(*fd);
    return "F" + hex_u64(static_cast<std::uint64_t>(n));
  }
  auto fd = number(0);
  if (!fd) return fail(fd.error());
  auto file = files_.find(static_cast<int>(*fd));
  if (file == files_.end()) return "F-1," + hex_u64(9);  // EBADF
  if (op == "close") {
    files_.erase(file);
    return "F0";
  }
  if (op == "pread") {
    auto count = number(1);
    auto offset = number(2);
    if (!count || !offset) return fail(count ? offset.error() : count.error());
    std::vector<std::uint8_t> data(std::min<std::uint64_t>(*count, kPacketSize / 2));
    auto n = pread_file(file->first, *offset, data);
    if (!n) return fail(n.error());
    return "F" + hex_u64(*n) + ";" + std::string(data.begin(), data.begin() + *n);
  }
  if (op == "fstat") {
    auto st = file_stat(file->first);
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
    auto n =
        pwrite_file(file->first, *offset,
                    std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
    if (!n) return fail(n.error());
    return "F" + hex_u64(*n);
  }
  return std::string();
}

Result<std::string> GdbServer::query(const std::string& p) {
  if (p.starts_with("qSupported")) {
    error_messages_ = p.find("error-message+") != std::string::npos;
    exec_events_ = p.find("exec-events+") != std::string::npos;
    multiprocess_ = p.find("multiprocess+") != std::string::npos;
    fork_events_ = multiprocess_ && p.find(";fork-events+") != std::string::npos;
    vfork_events_ = multiprocess_ && p.find("vfork-events+") != std::string::npos;
    // The parent of a fork stays stopped for its event (a vfork's also at its end).
    if (inferior_ != nullptr) {
      inferior_->hold_forks(fork_events_ || vfork_events_);
      // The thread id in the client's form (a stop not reported yet, or a W).
      if (!exited_ && (last_stop_.starts_with("T") || last_stop_.starts_with("S"))) {
        last_stop_ = stop_reply(SIGTRAP, last_thread_, "");
      }
    }
    return "PacketSize=" + hex_u64(kPacketSize) +
           ";qXfer:features:read+;qXfer:auxv:read+;qXfer:exec-file:read+;qXfer:threads:read+"
           ";qXfer:libraries-svr4:read+;qXfer:siginfo:read+"
           ";QStartNoAckMode+;swbreak+;hwbreak+;vContSupported+;QCatchSyscalls+"
           ";ConditionalBreakpoints+" +
           std::string(launch_ ? ";QDisableRandomization+;QEnvironmentHexEncoded+"
                                 ";QEnvironmentUnset+;QEnvironmentReset+"
                               : "") +
           std::string(error_messages_ ? ";error-message+" : "") +
           std::string(exec_events_ ? ";exec-events+" : "") +
           std::string(multiprocess_ ? ";multiprocess+" : "") +
           std::string(fork_events_ ? ";fork-events+" : "") +
           std::string(vfork_events_ ? ";vfork-events+" : "");
  }
  if (p == "qC") return "QC" + thread_id(thread_for(last_thread_));
  if (p.starts_with("qAttached")) return std::string(inferior_->spawned() ? "0" : "1");
  if (p == "qfThreadInfo") {
    std::string out = "m";
    bool first = true;
    for (pid_t t : inferior_->threads()) {
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
      catch_syscalls_ = false;
      caught_syscalls_.clear();
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
    catch_syscalls_ = true;
    caught_syscalls_ = std::move(numbers);
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
    return "pid:" + hex_u64(static_cast<std::uint64_t>(inferior_->pid())) +
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
    auto maps = read_maps(inferior_->pid());
    if (!maps) return std::unexpected(maps.error());
    std::uint64_t next = ~std::uint64_t{0};
    for (const Mapping& m : *maps) {
      if (*addr >= m.start && *addr < m.end) {
        std::string perms;
        if (m.read) perms += 'r';
        if (m.write) perms += 'w';
        if (m.exec) perms += 'x';
        std::string out = "start:" + hex_u64(m.start) + ";size:" + hex_u64(m.end - m.start) +
                          ";permissions:" + perms + ";";
        if (!m.path.empty()) out += "name:" + hex_text(m.path) + ";";
        return out;
      }
      if (m.start > *addr) next = std::min(next, m.start);
    }
    return "start:" + hex_u64(*addr) + ";size:" + hex_u64(next - *addr) + ";";
  }
  if (p.starts_with("qSymbol")) return std::string("OK");
  if (p.starts_with("QDisableRandomization:") && launch_) {
    // The next vRun's personality (gdb's `set disable-randomization`).
    launch_->inferior.disable_aslr = p.ends_with(":1");
    return std::string("OK");
  }
  if (launch_ && p.starts_with("QEnvironment")) return change_environment(p);
  return std::string();  // qTStatus, qOffsets, ...: not served
}

// gdb's `set environment` / `unset environment` for the programs vRun starts, as gdbserver keeps
// them: QEnvironmentReset gives back the server's own environment; QEnvironmentHexEncoded:HEX
// (NAME=VALUE) sets NAME; QEnvironmentUnset:HEX (NAME) removes it.
Result<std::string> GdbServer::change_environment(std::string_view p) {
  auto& env = launch_->inferior.environment;
  if (p == "QEnvironmentReset") {
    env.reset();
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
  if (!env) env = host_environment();
  const std::string prefix = (set ? text.substr(0, eq) : text) + "=";
  std::erase_if(*env, [&](const std::string& e) { return e.starts_with(prefix); });
  if (set) env->push_back(text);
  return std::string("OK");
}

Result<std::string> GdbServer::xfer(std::string_view object, std::string_view annex,
                                    std::uint64_t offset, std::uint64_t length) {
  if (object == "features") {
    if (annex != "target.xml") return make_error(ErrorCode::kNoEnt, "annex: no such feature file");
    // The registers of the thread gdb looks at: its XSAVE components (XCR0, the same for every
    // thread of the machine).
    std::uint64_t features = 0;
    if (inferior_ != nullptr) {
      if (auto regs = read_registers(thread_for(g_thread_), true)) {
        features = regs->second.ext.features;
      }
    }
    return xfer_slice(gdb_target_xml(features), offset, length);
  }
  if (object == "auxv") {
    auto auxv = read_proc_file(general_process(), "auxv");
    if (!auxv) return std::unexpected(auxv.error());
    return xfer_slice(*auxv, offset, length);
  }
  if (object == "libraries-svr4") {
    // The whole list at every offset 0 (no augmented-libraries-svr4-read: the annex is empty).
    auto auxv = read_proc_file(inferior_->pid(), "auxv");
    if (!auxv) return std::unexpected(auxv.error());
    auto map = read_link_map(std::span<const std::uint8_t>(
                                 reinterpret_cast<const std::uint8_t*>(auxv->data()), auxv->size()),
                             [this](std::uint64_t addr, std::span<std::uint8_t> out) {
                               return inferior_->read_memory(addr, out);
                             });
    if (!map) return std::unexpected(map.error());
    if (map->main_lm == 0) {
      // Before the dynamic linker has set r_debug up (a process stopped at its first
      // instruction), an error, as lldb-server answers: lldb then follows the rendezvous in
      // memory until the list exists (an empty list would make it miss every library loaded
      // at start-up); gdb reads the link map itself either way.
      return make_error(ErrorCode::kInval, "r_debug: not set up by the dynamic linker yet");
    }
    if (native_signals_) {
      // lldb (it asked qHostInfo) takes main-lm as where to follow the rendezvous from, and then
      // misses the libraries loaded at start-up: the list without it, as lldb-server sends it.
      LinkMap for_lldb = *map;
      for_lldb.main_lm = 0;
      return xfer_slice(svr4_library_xml(for_lldb), offset, length);
    }
    return xfer_slice(svr4_library_xml(*map), offset, length);
  }
  if (object == "exec-file") {
    pid_t process = inferior_->pid();
    if (auto annex_pid = parse_id(annex); !annex.empty() && annex_pid && *annex_pid > 0) {
      process = *annex_pid;
    }
    auto path = executable_path(process);
    if (!path) return std::unexpected(path.error());
    return xfer_slice(*path, offset, length);
  }
  if (object == "siginfo") {
    // The siginfo of the general thread's stop (x86-64 Linux layout, 128 bytes), as
    // PTRACE_GETSIGINFO gives it.
    const pid_t tid = thread_for(g_thread_);
    if (!inferior_->is_stopped(tid)) {
      return make_error(ErrorCode::kSrch, "thread: " + std::to_string(tid) + " is not stopped");
    }
    siginfo_t info{};
    if (auto r = ptrace_getsiginfo(tid, info); !r) return std::unexpected(r.error());
    return xfer_slice(std::string(reinterpret_cast<const char*>(&info), sizeof info), offset,
                      length);
  }
  if (object == "threads") {
    std::string xml = "<?xml version=\"1.0\"?>\n<threads>\n";
    for (pid_t t : inferior_->threads()) {
      // The thread's name, as gdbserver gives it (/proc/PID/task/TID/comm).
      auto comm = read_proc_file(inferior_->group_of(t), "task/" + std::to_string(t) + "/comm");
      std::string name = comm ? *comm : std::string();
      if (!name.empty() && name.back() == '\n') name.pop_back();
      xml += "<thread id=\"" + thread_id(t) + "\"" +
             (name.empty() ? std::string() : " name=\"" + xml_escape(name) + "\"") + "/>\n";
    }
    xml += "</threads>\n";
    return xfer_slice(xml, offset, length);
  }
  return std::string();
}

Result<std::string> GdbServer::read_memory(std::uint64_t addr, std::uint64_t len) {
  std::vector<std::uint8_t> bytes(len);
  const pid_t process = general_process();
  // All at once, else as much as is readable (gdb takes a short read).
  if (!inferior_->read_memory(addr, bytes, process)) {
    std::size_t got = 0;
    while (got < len) {
      const std::uint64_t at = addr + got;
      const std::uint64_t page_end = (at | 0xfff) + 1;
      const std::size_t chunk = std::min<std::uint64_t>(len - got, page_end - at);
      if (!inferior_->read_memory(at, std::span(bytes).subspan(got, chunk), process)) break;
      got += chunk;
    }
    if (got == 0)
      return make_error(ErrorCode::kFault, "addr: " + hex_u64(addr) + " is not readable");
    bytes.resize(got);
  }
  // The program's bytes, not the int3s planted in them.
  const auto show = [&](std::uint64_t at, std::uint8_t original) {
    if (at >= addr && at < addr + bytes.size()) bytes[at - addr] = original;
  };
  for (const auto& [at, bp] : int3_[process]) show(at, bp.original);
  for (const RestoreByte& b : session_->planted_bytes()) show(b.addr, b.original);
  return std::string(bytes.begin(), bytes.end());
}

Result<void> GdbServer::write_memory(std::uint64_t addr, const std::vector<std::uint8_t>& bytes) {
  std::vector<std::uint8_t> out = bytes;
  const pid_t process = general_process();
  // Over a planted int3 the program's byte changes, the int3 stays.
  for (auto& [at, bp] : int3_[process]) {
    if (at >= addr && at < addr + out.size()) {
      bp.original = out[at - addr];
      out[at - addr] = kInt3;
    }
  }
  return inferior_->write_memory(addr, out, process);
}

Result<std::string> GdbServer::insert_point(char type, std::uint64_t addr, std::uint64_t len,
                                            std::vector<AgentExpr> conditions) {
  const pid_t process = general_process();
  Int3Map& int3s = int3_[process];
  const auto plant = [&](bool software) -> Result<std::string> {
    if (auto it = int3s.find(addr); it != int3s.end()) {
      // gdb sends a breakpoint again when its conditions change: the new list replaces the old.
      (software ? it->second.software : it->second.hardware) = true;
      (software ? it->second.software_conditions : it->second.hardware_conditions) =
          std::move(conditions);
      return std::string("OK");
    }
    std::uint8_t original = 0;
    if (auto r = inferior_->read_memory(addr, std::span(&original, 1), process); !r) {
      return std::unexpected(r.error());
    }
    if (auto r = inferior_->write_memory(addr, std::span<const std::uint8_t>(&kInt3, 1), process);
        !r) {
      return std::unexpected(r.error());
    }
    Breakpoint& bp = int3s[addr];
    bp.original = original;
    bp.software = software;
    bp.hardware = !software;
    (software ? bp.software_conditions : bp.hardware_conditions) = std::move(conditions);
    return std::string("OK");
  };
  if (type == '0') return plant(true);
  // Another process than the first (a forked child the client keeps): int3s only; its watches
  // are not served (taken as placed, so that the client's bookkeeping goes on).
  if (process != inferior_->pid()) return type == '1' ? plant(false) : std::string("OK");
  WatchSpec spec{.addr = addr, .len = len, .access = kWatchWrite};
  // A hardware breakpoint with conditions is an int3: the conditions are evaluated at its trap.
  if (type == '1' && !conditions.empty()) return plant(false);
  if (type == '1') {
    spec.len = 1;
    spec.access = kWatchExec;
    // A debug register where one is free and hits are delivered; else an int3 (the software
    // path's own int3 would not stop the thread).
    spec.mode = WatchMode::kHardware;
  } else if (type == '3') {
    spec.access = kWatchRead;
  } else if (type == '4') {
    spec.access = kWatchRead | kWatchWrite;
  }
  const WatchKey key{type, addr, spec.len};
  removed_.erase(key);  // a removal not applied yet is undone
  if (watches_.contains(key)) return std::string("OK");
  // A new watch: the removed ones give their registers back first.
  if (auto r = flush_removed(); !r) return std::unexpected(r.error());
  auto info = session_->insert(spec);
  if (!info) {
    if (type == '1') return plant(false);
    return std::unexpected(info.error());
  }
  watches_[key] = info->id;
  watch_type_[info->id] = type;
  return std::string("OK");
}

Result<std::string> GdbServer::remove_point(char type, std::uint64_t addr, std::uint64_t len) {
  const pid_t process = general_process();
  if (type == '0' || type == '1') {
    Int3Map& int3s = int3_[process];
    auto it = int3s.find(addr);
    if (it != int3s.end() &&
        ((type == '0' && it->second.software) || (type == '1' && it->second.hardware))) {
      (type == '0' ? it->second.software : it->second.hardware) = false;
      if (!it->second.software && !it->second.hardware) {
        if (auto r = inferior_->write_memory(
                addr, std::span<const std::uint8_t>(&it->second.original, 1), process);
            !r) {
          return std::unexpected(r.error());
        }
        int3s.erase(it);
        lifted_.insert(addr);
      }
      return std::string("OK");
    }
    if (type == '0' || process != inferior_->pid()) return std::string("OK");
    len = 1;
  }
  if (process != inferior_->pid()) return std::string("OK");
  const WatchKey key{type, addr, len};
  if (!watches_.contains(key)) return std::string("OK");  // gdb removes what it never got
  // Taken off at the next resume, unless inserted again before: gdb removes and re-inserts every
  // watchpoint at each stop (breakpoint always-inserted off), and a removal rebuilds the
  // session's paths (perf events reopened, pages restored and protected again).
  removed_.insert(key);
  return std::string("OK");
}

Result<void> GdbServer::flush_removed() {
  for (auto key = removed_.begin(); key != removed_.end(); key = removed_.erase(key)) {
    auto it = watches_.find(*key);
    if (it == watches_.end()) continue;
    if (auto r = session_->remove(it->second); !r) return r;
    watch_type_.erase(it->second);
    watches_.erase(it);
  }
  return {};
}

Result<std::string> GdbServer::resume(const std::string& actions) {
  // Each action applies to its thread, or (without one) to every thread no earlier action named.
  struct Action {
    char kind = 'c';
    int signal = 0;
    pid_t tid = -1;
    pid_t process = 0;  // pPID.-1: the threads of PID (0 or -1: of any)
  };
  std::vector<Action> list;
  std::string_view rest = actions;
  while (!rest.empty()) {
    const std::size_t semi = rest.find(';');
    std::string_view one = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    if (one.empty()) continue;
    Action a;
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
  // Which threads the client lets run beyond those it names: a thread created meanwhile runs
  // only under such an action (see on_event).
  wildcard_process_.reset();
  for (const Action& a : list) {
    if ((a.tid == -1 || a.tid == 0) && (a.kind == 'c' || a.kind == 'C')) {
      wildcard_process_ = a.process > 0 ? a.process : 0;
      break;
    }
  }
  if (auto r = flush_removed(); !r) return std::unexpected(r.error());
  interrupt_ = false;
  stepping_ = 0;
  session_->set_stepping(0);
  const Resume mode = run_mode();
  // Each thread an action names must exist: else nothing is resumed (and nothing would stop).
  const std::vector<pid_t> threads = inferior_->threads();
  for (const Action& a : list) {
    if (a.tid > 0 && std::find(threads.begin(), threads.end(), a.tid) == threads.end()) {
      return make_error(ErrorCode::kSrch,
                        "vCont: no thread " + hex_u64(static_cast<std::uint64_t>(a.tid)));
    }
  }
  // The return of an execve the client catches: the exec stop's thread is at the new image's
  // first instruction with execve's exit stepped over (Inferior::leave_exec_stop), so that
  // syscall-exit stop is reported now, before anything runs, where gdbserver reports it.
  if (const pid_t tid = std::exchange(execve_return_, 0); tid != 0) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const Action& a) {
      return a.tid == tid || a.tid == -1 || a.tid == 0;
    });
    if (catch_syscalls_ && (caught_syscalls_.empty() || caught_syscalls_.contains(SYS_execve)) &&
        it != list.end() && it->kind == 'c' && inferior_->is_stopped(tid)) {
      last_thread_ = tid;
      return stop_reply(SIGTRAP, tid,
                        "syscall_return:" + hex_u64(static_cast<std::uint64_t>(SYS_execve)) + ";");
    }
  }
  std::size_t going = 0;  // threads resumed, or with an event to report
  deferred_.clear();
  // Signals already held for threads this resume leaves stopped (queued by a stop_all) wait
  // until those threads run: gdb stepping one thread over a breakpoint must hear from that thread
  // only (else gdb 13 fails an assertion in finish_step_over). They are queued again however
  // this resume ends, in their order. Other events (exits, forks the client does not take as
  // events, new threads) are handled as they come: none of them is a stop of the thread.
  struct Held {
    Inferior& inferior;
    std::vector<Event> events;
    ~Held() {
      for (auto ev = events.rbegin(); ev != events.rend(); ++ev) inferior.requeue(*ev);
    }
  } held{*inferior_, {}};
  for (pid_t tid : threads) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const Action& a) {
      return a.tid == tid || ((a.tid == -1 || a.tid == 0) &&
                              (a.process <= 0 || a.process == inferior_->group_of(tid)));
    });
    if (it == list.end() || it->kind == 't') {
      for (Event& ev : inferior_->discard_queued(tid)) {
        // A fork or vfork the client takes as an event is a stop of its thread too (gdbserver
        // reports it when that thread runs again), and so is the end of a vfork.
        const bool fork_stop =
            (ev.kind == EventKind::kFork && (ev.vfork ? vfork_events_ : fork_events_)) ||
            (ev.kind == EventKind::kVforkDone && vfork_events_);
        if (ev.kind == EventKind::kSignal || fork_stop) {
          held.events.push_back(std::move(ev));
        } else {
          inferior_->requeue(ev);
        }
      }
      continue;
    }
    ++going;
    if (!inferior_->is_stopped(tid)) continue;
    const bool step = it->kind == 's' || it->kind == 'S';
    if (inferior_->has_queued(tid)) {  // its event comes first
      deferred_[tid] = Asked{.step = step, .signal = it->signal};
      continue;
    }
    if (step) begin_step(tid);
    pending_signal_.erase(tid);
    if (auto r = inferior_->resume(tid, step ? Resume::kStep : mode, it->signal);
        !r && r.error().code() != ErrorCode::kSrch) {
      return std::unexpected(r.error());
    }
  }
  if (going == 0) return make_error(ErrorCode::kInval, "vCont: the actions resume no thread");
  for (;;) {
    auto got = inferior_->wait_or_poll(std::span<const int>(&in_fd_, 1), -1);
    if (!got && got.error().code() == ErrorCode::kIntr && interrupt_requested()) {
      // A signal asked the server to end (SIGINT, SIGTERM, SIGHUP): as if the client went away.
      interrupted_ = true;
      auto end = finish(GdbServerEnd::How::kInterrupted);
      if (!end) return std::unexpected(end.error());
      gone_ = *end;
      return std::string();
    }
    if (!got) {
      if (got.error().code() == ErrorCode::kIntr) continue;
      return std::unexpected(got.error());
    }
    if (!*got) {
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
        auto stopped = inferior_->stop_all();
        if (!stopped) return std::unexpected(stopped.error());
        if (auto r = rewind_queued_traps(); !r) return std::unexpected(r.error());
        // gdbserver sends SIGINT to the process, which its main thread takes (the kernel's
        // first choice): that thread's stop, not the last stop's thread again (gdb would step
        // that one off its breakpoint first at every continue, and it would win every race).
        const pid_t tid = thread_for(stepping_ != 0 ? stepping_ : inferior_->pid());
        last_thread_ = tid;
        last_stop_ = stop_reply(SIGINT, tid, "");
        return last_stop_;
      }
      continue;
    }
    auto stop = on_event(**got);
    // The session may have followed a fork, an exec, a mapping.
    ignore_error(publish_plan(), "kept in watchdog_error_");
    if (!stop) return std::unexpected(stop.error());
    if (*stop) {
      last_stop_ = **stop;
      return last_stop_;
    }
  }
}

std::string GdbServer::stepped_watch() const {
  // A software watch's hit is a stop of its own (the step faults); a debug register's trap may
  // have coalesced with the step's: the step's own operands tell.
  for (const WatchInfo& w : session_->watches()) {
    if (w.placement != Placement::kHardware || w.spec.access == kWatchExec) continue;
    for (const x86::MemRef& ref : step_accesses_) {
      const unsigned bits = (ref.access == x86::Access::kRead    ? kWatchRead
                             : ref.access == x86::Access::kWrite ? kWatchWrite
                                                                 : kWatchRead | kWatchWrite) &
                            w.spec.access;
      const std::uint64_t size = std::max<std::uint64_t>(ref.size, 1);
      if (bits == 0 || ref.address >= w.spec.addr + w.spec.len ||
          w.spec.addr >= ref.address + size) {
        continue;
      }
      const auto type = watch_type_.find(w.id);
      const char t = type == watch_type_.end() ? '2' : type->second;
      return std::string(t == '3'   ? "rwatch"
                         : t == '4' ? "awatch"
                                    : "watch") +
             ":" + hex_u64(std::max(ref.address, w.spec.addr)) + ";";
    }
  }
  return "";
}

void GdbServer::begin_step(pid_t tid) {
  stepping_ = tid;
  stepped_.insert(tid);
  session_->set_stepping(tid);
  // The step's accesses, for a debug-register hit whose trap the step's own SIGTRAP hides (two
  // SIGTRAPs of one instruction coalesce into one stop).
  step_accesses_.clear();
  auto regs = inferior_->get_regs(tid);
  auto insn =
      regs ? inferior_->decode_at(regs->rip) : Result<x86::Insn>(std::unexpected(regs.error()));
  if (insn) {
    if (auto refs = x86::effective_addresses(*insn, *regs)) step_accesses_ = std::move(*refs);
  }
}

Result<std::string> GdbServer::stop_others(pid_t tid, const std::string& reply) {
  auto stopped = inferior_->stop_all(tid);
  if (!stopped) return std::unexpected(stopped.error());
  if (auto r = rewind_queued_traps(); !r) return std::unexpected(r.error());
  last_thread_ = tid;
  stepping_ = 0;
  session_->set_stepping(0);
  return reply;
}

Result<void> GdbServer::rewind_queued_traps() {
  for (const Event& ev : inferior_->queued_events()) {
    if (ev.kind != EventKind::kSignal || ev.signal != SIGTRAP || ev.code != kSiKernel ||
        rewound_.contains(ev.tid)) {
      continue;
    }
    auto regs = inferior_->get_regs(ev.tid);
    if (!regs) {
      if (regs.error().code() == ErrorCode::kSrch) continue;  // gone: its exit follows
      return std::unexpected(regs.error());
    }
    if (!int3_[inferior_->process_of(ev.tid)].contains(regs->rip - 1)) continue;  // the program's
    regs->rip -= 1;
    if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return r;
    rewound_[ev.tid] = regs->rip;
  }
  return {};
}

void GdbServer::drop_rewound_traps() {
  for (const auto& [tid, addr] : rewound_) {
    bool dropped = false;
    std::vector<Event> keep;
    for (Event& ev : inferior_->discard_queued(tid)) {
      if (!dropped && ev.kind == EventKind::kSignal && ev.signal == SIGTRAP &&
          ev.code == kSiKernel) {
        dropped = true;
        continue;
      }
      keep.push_back(std::move(ev));
    }
    for (auto ev = keep.rbegin(); ev != keep.rend(); ++ev) inferior_->requeue(*ev);
  }
  rewound_.clear();
}

Result<void> GdbServer::run_as_asked(pid_t tid) {
  Asked asked;
  if (auto it = deferred_.find(tid); it != deferred_.end()) {
    asked = it->second;
    deferred_.erase(it);
  } else if (tid == stepping_) {
    asked.step = true;
  }
  if (asked.step) begin_step(tid);
  const Resume how = asked.step ? Resume::kStep : run_mode();
  if (auto r = inferior_->resume(tid, how, asked.signal);
      !r && r.error().code() != ErrorCode::kSrch) {
    return r;
  }
  return {};
}

Result<std::optional<std::string>> GdbServer::exec_stop(pid_t tid, bool running) {
  // A new image: the int3s went with the old one (gdb's removals must not write the old bytes
  // into the new code), and so did the threads and their held traps and signals.
  int3_.erase(inferior_->process_of(tid));
  lifted_.clear();
  rewound_.clear();
  pending_signal_.clear();
  deferred_.clear();
  // The session re-armed its watches in the new image and let the thread go on: it is stopped
  // again, a few instructions into the dynamic loader.
  auto stopped = running ? inferior_->stop_all() : inferior_->stop_all(tid);
  if (!stopped) return std::unexpected(stopped.error());
  last_thread_ = tid;
  stepping_ = 0;
  session_->set_stepping(0);
  // Unless a watch let it run, the thread is still where execve returns (see resume()).
  if (!running) execve_return_ = tid;
  std::string reason;
  if (auto path = executable_path(inferior_->pid()); path && exec_events_) {
    reason = "exec:" + hex_text(*path) + ";";
  } else if (native_signals_) {
    reason = "reason:exec;";
  }
  return std::optional<std::string>(stop_reply(SIGTRAP, tid, reason));
}

Result<std::optional<std::string>> GdbServer::fork_stop(const Event& ev) {
  const auto threads = inferior_->threads();
  if (!ev.vfork) {
    // The child becomes a process of this server (the session may have followed it already).
    if (std::find(threads.begin(), threads.end(), ev.child) == threads.end()) {
      if (auto r = inferior_->follow(ev.child); !r) return std::unexpected(r.error());
    }
    // Its copy of the text holds its parent's int3s: they are its own now, as gdbserver clones
    // a parent's breakpoints; the client removes them (Hg to the child, z0) before it detaches
    // it. A vfork child shares its parent's memory and int3s.
    int3_[ev.child] = int3_[inferior_->process_of(ev.tid)];
  }
  forked_.insert(ev.child);
  deferred_.erase(ev.tid);
  auto r = stop_others(
      ev.tid, stop_reply(SIGTRAP, ev.tid,
                         std::string(ev.vfork ? "vfork:" : "fork:") + thread_id(ev.child) + ";"));
  if (!r) return std::unexpected(r.error());
  return std::optional<std::string>(*r);
}

Result<std::string> GdbServer::detach_process(pid_t process) {
  if (auto r = inferior_->stop_all(); !r) return std::unexpected(r.error());
  if (auto r = flush_removed(); !r) return std::unexpected(r.error());
  // Its held int3 traps are no signals of the program (delivered, they would kill it).
  if (auto r = rewind_queued_traps(); !r) return std::unexpected(r.error());
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) != process || !rewound_.contains(t)) continue;
    rewound_.erase(t);
    std::vector<Event> keep;
    for (Event& e : inferior_->discard_queued(t)) {
      if (e.kind != EventKind::kSignal || e.signal != SIGTRAP || e.code != kSiKernel) {
        keep.push_back(std::move(e));
      }
    }
    for (auto e = keep.rbegin(); e != keep.rend(); ++e) inferior_->requeue(*e);
  }
  // A vfork child's int3s are its parent's (one memory); a forked child's or the first
  // process's go now.
  const bool vfork_child = inferior_->process_of(process) != process;
  if (!vfork_child && process != inferior_->pid()) {
    // The session followed the child with its watches (protected pages, int3s of its own): a
    // rebuild leaves a followed process unwatched, its memory as the program made it.
    // A rebuild that fails (a system call the child cannot run in its stop) does not keep the
    // child: it is let go as it is, as the client asked.
    ignore_error(rebuild_watches(), "let go as it is");
  }
  if (!vfork_child) {
    for (const auto& [addr, bp] : int3_[process]) {
      ignore_error(
          inferior_->write_memory(addr, std::span<const std::uint8_t>(&bp.original, 1), process),
          "a gone process has no int3");
    }
    int3_.erase(process);
  }
  const bool first = process == inferior_->pid();
  // A spawned program the client detached from runs on after the server ends.
  if (first && inferior_->spawned())
    ignore_error(inferior_->outlive_tracer(), "the detach goes on");
  if (auto r = inferior_->detach_process(process); !r) return std::unexpected(r.error());
  forked_.erase(process);
  if (first) forked_.erase(inferior_->pid());  // the child that took its place
  pending_signal_.clear();
  last_thread_ = thread_for(last_thread_);
  g_thread_ = c_thread_ = 0;
  return std::string("OK");
}

Result<void> GdbServer::rebuild_watches() {
  const std::vector<WatchInfo> all = session_->watches();
  if (all.empty()) return {};
  const WatchInfo& w = all.front();
  if (auto r = session_->remove(w.id); !r) return r;
  auto again = session_->insert(w.spec);
  if (!again) return std::unexpected(again.error());
  for (auto& [key, id] : watches_) {
    if (id != w.id) continue;
    id = again->id;
    if (auto type = watch_type_.find(w.id); type != watch_type_.end()) {
      const char t = type->second;
      watch_type_.erase(type);
      watch_type_[again->id] = t;
    }
    break;
  }
  return {};
}

Result<std::string> GdbServer::kill_process(pid_t process) {
  if (auto r = inferior_->stop_all(); !r) return std::unexpected(r.error());
  std::vector<pid_t> tids;
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) == process) tids.push_back(t);
  }
  // The leader last: its end is reported once the others are reaped.
  std::stable_partition(tids.begin(), tids.end(), [&](pid_t t) { return t != process; });
  forked_.erase(process);
  if (inferior_->process_of(process) == process) int3_.erase(process);
  if (auto r = send_signal(process, SIGKILL); !r) return std::unexpected(r.error());
  for (pid_t t : tids) {
    for (int i = 0; i < 16; ++i) {
      auto ev = inferior_->wait_for(t);
      if (!ev || ev->kind == EventKind::kThreadExit || ev->kind == EventKind::kExited ||
          ev->kind == EventKind::kKilled) {
        break;
      }
    }
  }
  if (process == inferior_->pid()) {
    (void)inferior_->adopt_followed();
    forked_.erase(inferior_->pid());
  }
  last_thread_ = thread_for(last_thread_);
  g_thread_ = c_thread_ = 0;
  return std::string("OK");
}

Result<std::optional<std::string>> GdbServer::on_breakpoint_trap(const Event& ev) {
  auto regs = inferior_->get_regs(ev.tid);
  if (!regs) return std::unexpected(regs.error());
  Int3Map& int3s = int3_[inferior_->process_of(ev.tid)];
  std::uint64_t at = 0;
  if (auto rewound = rewound_.find(ev.tid); rewound != rewound_.end()) {
    at = rewound->second;
    rewound_.erase(rewound);
    if (regs->rip != at || !int3s.contains(at)) {
      // The breakpoint went (or the thread was moved) after the stop that held this trap: the
      // trap is no stop any more.
      if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
      return std::optional<std::string>();
    }
  } else {
    if (!int3s.contains(regs->rip - 1)) {
      // The trap of an int3 of ours taken out since it was hit (the kernel held its SIGTRAP
      // behind a stop_all's interrupt): the instruction is run for real, as the thread was asked
      // to run. An int3 of the program's own is still in its text.
      std::uint8_t byte = 0;
      if (lifted_.contains(regs->rip - 1) &&
          inferior_->read_memory(regs->rip - 1, std::span(&byte, 1)) && byte != kInt3) {
        regs->rip -= 1;
        if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return std::unexpected(r.error());
        if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
        return std::optional<std::string>();
      }
      return std::optional<std::string>("");  // not ours
    }
    // Back onto the instruction, as a hardware breakpoint would stop.
    at = regs->rip - 1;
    regs->rip = at;
    if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return std::unexpected(r.error());
  }
  if (stepping_ != ev.tid && !condition_holds(ev.tid, int3s.at(at))) return step_over(ev.tid, at);
  deferred_.erase(ev.tid);
  const bool stepping = stepping_ != 0;
  auto r = stop_others(ev.tid, "");
  if (!r) return std::unexpected(r.error());
  // A step's stop is the stepping thread's; a continue's is drawn among the threads at breakpoints.
  const pid_t tid = stepping ? ev.tid : pick_reported(ev.tid, at);
  if (tid != ev.tid) at = rewound_.extract(tid).mapped();
  last_thread_ = tid;
  return std::optional<std::string>(
      stop_reply(SIGTRAP, tid, int3s.at(at).software ? "swbreak:;" : "hwbreak:;"));
}

bool GdbServer::condition_holds(pid_t tid, const Breakpoint& bp) {
  if ((bp.software && bp.software_conditions.empty()) ||
      (bp.hardware && bp.hardware_conditions.empty())) {
    return true;
  }
  // A watch's own stops and faults would interleave with the step over the breakpoint: with
  // watches, gdb evaluates the conditions.
  if (!session_->watches().empty()) return true;
  const pid_t process = inferior_->process_of(tid);
  std::optional<std::pair<x86::Regs, FpRegs>> regs;
  AgentAccess access;
  access.reg = [&](int regno) -> Result<std::uint64_t> {
    const bool ext = regno >= kGdbCoreRegisterCount;  // an AVX/AVX-512/PKU register
    if (!regs || (ext && regs->second.ext.features == 0)) {
      auto got = read_registers(tid, ext);
      if (!got) return std::unexpected(got.error());
      regs = *got;
    }
    auto hex = gdb_read_register(regno, regs->first, regs->second);
    if (!hex) return std::unexpected(hex.error());
    auto bytes = from_hex(*hex);
    if (!bytes) return std::unexpected(bytes.error());
    std::uint64_t v = 0;
    for (std::size_t i = std::min<std::size_t>(bytes->size(), 8); i-- > 0;)
      v = (v << 8) | (*bytes)[i];
    return v;
  };
  access.memory = [&](std::uint64_t addr, int size) -> Result<std::uint64_t> {
    std::array<std::uint8_t, 8> bytes{};
    auto r = inferior_->read_memory(addr, std::span(bytes.data(), static_cast<std::size_t>(size)),
                                    process);
    if (!r) return std::unexpected(r.error());
    // The program's bytes, not our int3s.
    for (const auto& [at, b] : int3_[process]) {
      if (at >= addr && at < addr + static_cast<std::uint64_t>(size)) bytes[at - addr] = b.original;
    }
    std::uint64_t v = 0;
    for (int i = size; i-- > 0;) v = (v << 8) | bytes[static_cast<std::size_t>(i)];
    return v;
  };
  const auto any = [&](const std::vector<AgentExpr>& conditions) {
    for (const AgentExpr& c : conditions) {
      auto v = eval_agent_expr(c, access);
      if (!v || *v != 0) return true;  // an error: reported, for gdb to evaluate
    }
    return false;
  };
  return (bp.software && any(bp.software_conditions)) ||
         (bp.hardware && any(bp.hardware_conditions));
}

Result<std::optional<std::string>> GdbServer::step_over(pid_t tid, std::uint64_t at) {
  const pid_t process = inferior_->process_of(tid);
  auto stopped = inferior_->stop_all(tid);
  if (!stopped) return std::unexpected(stopped.error());
  const std::uint8_t original = int3_[process].at(at).original;
  if (auto r = inferior_->write_memory(at, std::span(&original, 1), process); !r) {
    return std::unexpected(r.error());
  }
  Result<Event> ev = make_error(ErrorCode::kSrch, "thread: gone");
  if (auto r = inferior_->resume(tid, Resume::kStep); r) {
    ev = inferior_->wait_for(tid);
  } else if (r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  // The int3 goes back unless the step ended the image (an exec) or the breakpoint went.
  const bool exec = ev && ev->kind == EventKind::kExec;
  if (!exec && int3_[process].contains(at)) {
    if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&kInt3, 1), process);
        !r && r.error().code() != ErrorCode::kSrch) {
      return std::unexpected(r.error());
    }
  }
  if (!ev) {
    if (ev.error().code() != ErrorCode::kSrch) return std::unexpected(ev.error());
  } else if (ev->kind == EventKind::kSignal && ev->signal == SIGTRAP &&
             (ev->code == TRAP_TRACE || ev->code == TRAP_BRKPT)) {
    if (auto r = run_as_asked(tid); !r) return std::unexpected(r.error());
  } else {
    inferior_->requeue(*ev);  // handled by the main loop, as any event of the thread
  }
  for (pid_t t : *stopped) {
    if (!inferior_->is_stopped(t) || inferior_->has_queued(t)) continue;
    if (auto r = inferior_->resume_as_before(t); !r && r.error().code() != ErrorCode::kSrch) {
      return std::unexpected(r.error());
    }
  }
  return std::optional<std::string>();
}

pid_t GdbServer::pick_reported(pid_t tid, std::uint64_t at) {
  std::vector<pid_t> candidates{tid};
  for (const Event& ev : inferior_->queued_events()) {
    const auto rewound = rewound_.find(ev.tid);
    if (ev.kind != EventKind::kSignal || ev.signal != SIGTRAP || ev.code != kSiKernel ||
        rewound == rewound_.end() ||
        std::find(candidates.begin(), candidates.end(), ev.tid) != candidates.end()) {
      continue;
    }
    // A held trap at a breakpoint whose conditions are false for its thread is no stop: it is
    // stepped over when it is taken.
    const Int3Map& int3s = int3_[inferior_->process_of(ev.tid)];
    const auto bp = int3s.find(rewound->second);
    if (bp != int3s.end() && !condition_holds(ev.tid, bp->second)) continue;
    candidates.push_back(ev.tid);
  }
  // xorshift64: cheap, and no two runs need the same sequence.
  pick_state_ ^= pick_state_ << 13;
  pick_state_ ^= pick_state_ >> 7;
  pick_state_ ^= pick_state_ << 17;
  const pid_t chosen = candidates[pick_state_ % candidates.size()];
  if (chosen == tid) return tid;
  // The chosen thread's trap is taken out of the queue (its stop is the one reported); `tid`'s
  // is held in its place, as if a stop_all had queued it.
  std::vector<Event> keep;
  bool taken = false;
  for (Event& ev : inferior_->discard_queued(chosen)) {
    if (!taken && ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kSiKernel) {
      taken = true;
      continue;
    }
    keep.push_back(std::move(ev));
  }
  for (auto ev = keep.rbegin(); ev != keep.rend(); ++ev) inferior_->requeue(*ev);
  Event held;
  held.kind = EventKind::kSignal;
  held.tid = tid;
  held.signal = SIGTRAP;
  held.code = kSiKernel;
  inferior_->requeue(held);
  rewound_[tid] = at;
  return chosen;
}

Result<std::optional<std::string>> GdbServer::on_event(const Event& ev) {
  if (debug_) {
    debug_line("event: thread " + std::to_string(ev.tid) + " " + event_kind_name(ev.kind) +
               (ev.kind == EventKind::kSignal
                    ? " signal " + std::to_string(ev.signal) + " code " + std::to_string(ev.code)
                    : std::string()));
  }
  auto v = session_->handle(ev);
  if (!v) return std::unexpected(v.error());
  if (ev.kind == EventKind::kFork && !v->stopped && (ev.vfork ? vfork_events_ : fork_events_)) {
    return fork_stop(ev);
  }
  if (ev.kind == EventKind::kVforkDone) {
    // The vfork child execed or exited: its parent (resumed by the client after the vfork stop)
    // stops once more, as gdbserver's vforkdone.
    if (vfork_events_) {
      auto r = stop_others(ev.tid, stop_reply(SIGTRAP, ev.tid, "vforkdone:;"));
      if (!r) return std::unexpected(r.error());
      return std::optional<std::string>(*r);
    }
    if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
    return std::optional<std::string>();
  }
  if (ev.kind == EventKind::kFork && (fork_events_ || vfork_events_)) {
    // Held for an event the client did not ask for: the parent runs on as asked.
    if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
  }
  // A parent whose fork event a stop_all queued stayed stopped (a fork stop otherwise resumes
  // it at once): it runs on as it ran before, whoever follows the child.
  if (ev.kind == EventKind::kFork && !v->stopped && deferred_.erase(ev.tid) != 0 &&
      inferior_->is_stopped(ev.tid) && !inferior_->has_queued(ev.tid)) {
    if (auto r = inferior_->resume_as_before(ev.tid); !r && r.error().code() != ErrorCode::kSrch) {
      return std::unexpected(r.error());
    }
  }
  if (v->stopped) {
    // A watch's hit: the thread is stopped right after the access.
    std::string reason;
    for (const WatchHit& h : v->hits) {
      const auto type = watch_type_.find(WatchId(h.id));
      const char t = type == watch_type_.end() ? '2' : type->second;
      if (t == '1') {
        reason = "hwbreak:;";
      } else {
        reason = std::string(t == '3'   ? "rwatch"
                             : t == '4' ? "awatch"
                                        : "watch") +
                 ":" + hex_u64(h.addr) + ";";
      }
      break;
    }
    if (v->signal != 0) pending_signal_[ev.tid] = v->signal;
    auto r = stop_others(ev.tid, stop_reply(SIGTRAP, ev.tid, reason));
    if (!r) return std::unexpected(r.error());
    return std::optional<std::string>(*r);
  }
  if (ev.kind == EventKind::kExec && inferior_->process_of(ev.tid) == inferior_->pid()) {
    return exec_stop(ev.tid, v->handled);
  }
  if (v->handled) return std::optional<std::string>();
  const Resume mode = run_mode();
  Result<void> step;
  switch (ev.kind) {
    case EventKind::kExited:
    case EventKind::kKilled: {
      if (multiprocess_) {
        const std::string reply =
            (ev.kind == EventKind::kExited ? "W" + hex_byte(ev.status)
                                           : "X" + hex_byte(wire_signal(ev.signal))) +
            ";process:" + hex_u64(static_cast<std::uint64_t>(ev.tid));
        int3_.erase(ev.tid);
        if (inferior_->adopt_followed()) {
          // A forked child the client keeps goes on: it is the first process now, stopped as
          // gdbserver stops every process at a stop it reports.
          forked_.erase(inferior_->pid());
          g_thread_ = c_thread_ = 0;
          auto r = stop_others(-1, reply);
          if (!r) return std::unexpected(r.error());
          last_thread_ = inferior_->pid();
          return std::optional<std::string>(*r);
        }
        exited_ = true;
        end_.exited = true;
        end_.status = ev.status;
        end_.signal = ev.kind == EventKind::kKilled ? ev.signal : 0;
        return std::optional<std::string>(reply);
      }
      exited_ = true;
      end_.exited = true;
      end_.status = ev.status;
      end_.signal = ev.kind == EventKind::kKilled ? ev.signal : 0;
      return std::optional<std::string>(ev.kind == EventKind::kExited
                                            ? "W" + hex_byte(ev.status)
                                            : "X" + hex_byte(wire_signal(ev.signal)));
    }
    case EventKind::kThreadExit:
      if (forked_.erase(ev.tid) != 0) {
        // The end of a forked child the client keeps (the last of its threads).
        int3_.erase(ev.tid);
        auto r = stop_others(-1, (ev.signal == 0 ? "W" + hex_byte(ev.status)
                                                 : "X" + hex_byte(wire_signal(ev.signal))) +
                                     ";process:" + hex_u64(static_cast<std::uint64_t>(ev.tid)));
        if (!r) return std::unexpected(r.error());
        last_thread_ = thread_for(0);
        return std::optional<std::string>(*r);
      }
      return std::optional<std::string>();
    case EventKind::kSignal: {
      if (ev.signal == SIGTRAP && ev.code == kSiKernel) {
        // "" from on_breakpoint_trap: an int3 of the program's own, reported below.
        auto trap = on_breakpoint_trap(ev);
        if (!trap) return std::unexpected(trap.error());
        if (!*trap || !(*trap)->empty()) return trap;
      }
      const bool step_trap =
          ev.signal == SIGTRAP && (ev.code == TRAP_TRACE || ev.code == TRAP_BRKPT);
      if (step_trap && ev.tid != stepping_ && stepped_.erase(ev.tid) != 0) {
        // The trap of a step asked before the client resumed the thread otherwise (another
        // thread's stop held it): not reported, as gdbserver does not report it either.
        if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
        return std::optional<std::string>();
      }
      if (ev.signal == SIGTRAP && ev.tid == stepping_ && ev.code != kSiKernel) {
        stepped_.erase(ev.tid);
        auto r = stop_others(ev.tid, stop_reply(SIGTRAP, ev.tid, stepped_watch()));
        if (!r) return std::unexpected(r.error());
        return std::optional<std::string>(*r);
      }
      // The program's own signal: reported; delivered when the client resumes with it.
      pending_signal_[ev.tid] = ev.signal;
      auto r = stop_others(ev.tid, stop_reply(ev.signal, ev.tid, ""));
      if (!r) return std::unexpected(r.error());
      return std::optional<std::string>(*r);
    }
    case EventKind::kFork:
      if (!ev.vfork) {
        // The child has its own copy of the text, with our int3s in it: they go before it is let
        // go (else it dies of SIGTRAP at the first one it runs), as gdbserver detaches a child.
        for (const auto& [addr, bp] : int3_[inferior_->process_of(ev.tid)]) {
          ignore_error(inferior_->write_memory(addr, std::span<const std::uint8_t>(&bp.original, 1),
                                               ev.child),
                       "a gone child has no int3");
        }
      }
      step = ev.vfork ? inferior_->resume(ev.child, mode) : inferior_->release(ev.child);
      break;

    case EventKind::kSyscallEnter:
    case EventKind::kSyscallExit:
      if (catch_syscalls_ && (caught_syscalls_.empty() || caught_syscalls_.contains(ev.syscall))) {
        // `catch syscall`: the stop gdb asked for, as gdbserver reports it.
        const std::string reason =
            std::string(ev.kind == EventKind::kSyscallEnter ? "syscall_entry:"
                                                            : "syscall_return:") +
            hex_u64(static_cast<std::uint64_t>(ev.syscall)) + ";";
        auto r = stop_others(ev.tid, stop_reply(SIGTRAP, ev.tid, reason));
        if (!r) return std::unexpected(r.error());
        return std::optional<std::string>(*r);
      }
      step = inferior_->resume(ev.tid, ev.tid == stepping_ ? Resume::kStep : mode);
      break;
    case EventKind::kNewThread:
      // A thread created while the client runs only some threads (gdb stepping one thread
      // over a breakpoint it took out) stays stopped until the client resumes every thread:
      // run now, it could pass that breakpoint unseen. gdbserver leaves such a thread stopped.
      if (!wildcard_process_ ||
          (*wildcard_process_ != 0 && *wildcard_process_ != inferior_->group_of(ev.tid))) {
        break;
      }
      step = inferior_->resume(ev.tid, mode);
      break;
    default:
      step = inferior_->resume(ev.tid, ev.tid == stepping_ ? Resume::kStep : mode);
      break;
  }
  if (!step && step.error().code() != ErrorCode::kSrch) return std::unexpected(step.error());
  return std::optional<std::string>();
}

}  // namespace hwarb::native

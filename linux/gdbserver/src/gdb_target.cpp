#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <utility>

#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/gdb/rsp.h"
#include "hwarb/linux/gdb_server.h"
#include "hwarb/linux/link_map.h"
#include "hwarb/linux/os_tables.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/socket.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"
#include "hwarb/linux/thread_locals.h"

namespace hwarb::native {
namespace {

using gdb::StopEvent;
using Kind = gdb::StopEvent::Kind;

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
    case EventKind::kLeaderEnded:
      return "leader-ended";
  }
  return "?";
}

constexpr int kSiKernel = 0x80;  // SI_KERNEL: the SIGTRAP of an int3

// A SIGTRAP of an int3: ours, or the program's own.
bool is_int3_trap(const Event& ev) {
  return ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kSiKernel;
}

// A SIGTRAP of a single step (or of an int3 the step ran into).
bool is_step_trap(const Event& ev) {
  return ev.kind == EventKind::kSignal && ev.signal == SIGTRAP &&
         (ev.code == TRAP_TRACE || ev.code == TRAP_BRKPT);
}

constexpr std::uint8_t kInt3 = 0xCC;
constexpr int kSignalCheckMs = 100;  // how often a wait for the client looks at the signal flag

// Whether a resume action steps the thread: s, S, and r (a range step is a step at a time).
bool is_step(char kind) {
  return kind == 's' || kind == 'S' || kind == 'r';
}

StopEvent stop_of(Kind kind, pid_t tid, int signal = SIGTRAP) {
  StopEvent ev;
  ev.kind = kind;
  ev.tid = tid;
  ev.signal = signal;
  return ev;
}

gdb::PointType point_of(char type) {
  return static_cast<gdb::PointType>(type);
}

// Where this CPU's XSAVE area keeps each component (the same for every thread of the machine).
const gdb::XsaveLayout& xsave_layout() {
  static const gdb::XsaveLayout layout = gdb::host_xsave_layout();
  return layout;
}

}  // namespace

std::string startup_shell() {
  const char* shell = std::getenv("SHELL");
  return shell != nullptr && *shell != '\0' ? shell : "/bin/sh";
}

std::string shell_command(const std::vector<std::string>& words) {
  static constexpr std::string_view kSpecial = "\"!#$&*()\\|[]{}<>?'`~^; \t";
  std::string out = "exec";
  for (const std::string& word : words) {
    out += ' ';
    if (word.empty()) out += "''";
    for (const char c : word) {
      if (c == '\n') {
        out += "'\n'";  // a backslash-newline would vanish: quoted instead
        continue;
      }
      if (kSpecial.find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

Result<Inferior> spawn_program(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& argv, const InferiorOptions& options,
                               const std::string& shell) {
  std::vector<std::string> command = wrapper;
  command.insert(command.end(), argv.begin(), argv.end());
  // The execs to run through before the program's: the wrapper's, the shell's.
  int execs = wrapper.empty() ? 0 : 1;
  if (!shell.empty()) {
    command = {shell, "-c", shell_command(command)};
    ++execs;
  }
  auto inferior = Inferior::spawn(command, options);
  // As gdbserver: the program in a group of its own has the terminal's foreground (the server's
  // standard error), so that Ctrl-C there stops the program, not the server. Where standard
  // error is no terminal (sent to a file or a filter) and standard input is, that one: else the
  // program would stop at its first read of the terminal (SIGTTIN).
  if (inferior && options.own_process_group) {
    for (int fd : {STDERR_FILENO, STDIN_FILENO, STDOUT_FILENO}) {
      if (is_terminal(fd)) {
        give_terminal(fd, inferior->pid());
        break;
      }
    }
  }
  if (!inferior || execs == 0) return inferior;
  // The shell and the wrapper run until they exec the program, as under gdbserver.
  pid_t tid = inferior->pid();
  int signal = 0;
  for (;;) {
    if (auto r = inferior->resume(tid, Resume::kCont, signal); !r)
      return std::unexpected(r.error());
    auto ev = inferior->wait();
    if (!ev) return std::unexpected(ev.error());
    tid = ev->tid;
    signal = ev->kind == EventKind::kSignal ? ev->signal : 0;
    if (ev->kind == EventKind::kExec && --execs == 0) return inferior;
    if (ev->kind == EventKind::kExited && !shell.empty()) {
      return make_error(ErrorCode::kChild,
                        "during startup program exited with code " + std::to_string(ev->status));
    }
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      const std::string& first = wrapper.empty() ? shell : wrapper[0];
      return make_error(ErrorCode::kSrch,
                        "wrapper: '" + first + "' ended before it ran the program");
    }
  }
}

// GdbConnection.

void GdbConnection::reset(int in_fd, int out_fd) {
  in_fd_ = in_fd;
  out_fd_ = out_fd;
  client_lost_ = false;
}

bool GdbConnection::interrupt_requested() const {
  return native::interrupt_requested();
}

void GdbConnection::log(const std::string& line) {
  ignore_error(write_all(log_fd_ ? log_fd_.get() : STDERR_FILENO, line),
               "a refused log line has nowhere to go");
}

int GdbConnection::output_fd() const {
  return out_fd_ == STDOUT_FILENO ? STDERR_FILENO : STDOUT_FILENO;
}

Result<void> GdbConnection::write(std::string_view bytes) {
  auto r = write_all(out_fd_, bytes);
  if (!r) client_lost_ = true;  // EPIPE, ECONNRESET: the client is gone
  return r;
}

Result<gdb::Connection::Read> GdbConnection::read(bool block, std::string& out) {
  std::array<char, 4096> buf;
  const std::span<const int> in(&in_fd_, 1);
  if (!block) {
    auto ready = poll_in_once(in, 0);
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] == 0) return Read::kData;
  }
  // Blocking: polled for client_spin_'s window first (the header says why).
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  while (block && Clock::now() - begin < client_spin_.window()) {
    auto ready = poll_in_once(in, 0);
    if (!ready && ready.error().code() == ErrorCode::kIntr) return Read::kData;
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] != 0) break;
  }
  // Then a sleep, woken now and then to see whether a signal asked the server to end (a signal
  // between the check and a blocking read would otherwise go unnoticed until the client spoke).
  while (block) {
    if (native::interrupt_requested()) return Read::kInterrupted;
    std::vector<int> fds{in_fd_};
    if (meanwhile_fds_) {
      const std::vector<int> more = meanwhile_fds_();
      fds.insert(fds.end(), more.begin(), more.end());
    }
    auto ready = poll_in_once(fds, kSignalCheckMs);
    if (!ready && ready.error().code() == ErrorCode::kIntr) continue;
    if (!ready) return std::unexpected(ready.error());
    if ((*ready)[0] != 0) break;
    if (std::any_of(ready->begin() + 1, ready->end(), [](short r) { return r != 0; })) meanwhile_();
  }
  auto n = read_some(in_fd_, buf);
  if (block) client_spin_.record(Clock::now() - begin);
  if (!n) {
    if (n.error().code() == ErrorCode::kIntr || n.error().code() == ErrorCode::kAgain) {
      return Read::kData;
    }
    // A reset connection (ECONNRESET) or any other failed read: the client is gone.
    client_lost_ = true;
    return Read::kEnd;
  }
  if (*n == 0) return Read::kEnd;
  out.append(buf.data(), *n);
  return Read::kData;
}

// GdbServer.

GdbServer::GdbServer(Inferior& inferior, WatchSession& session, int in_fd, int out_fd)
    : connection_(std::make_unique<GdbConnection>(in_fd, out_fd, inferior.spin_max())),
      target_(std::make_unique<GdbInferiors>(inferior, session, *connection_)),
      server_(std::make_unique<gdb::Server>(*target_, *connection_)) {
  serve_requests_meanwhile();
}

GdbServer::GdbServer(int in_fd, int out_fd)
    : connection_(std::make_unique<GdbConnection>(in_fd, out_fd, std::chrono::nanoseconds(0))),
      target_(std::make_unique<GdbInferiors>(*connection_)),
      server_(std::make_unique<gdb::Server>(*target_, *connection_)) {
  serve_requests_meanwhile();
}

void GdbServer::serve_requests_meanwhile() {
  // A request that cannot be served (its thread gone meanwhile) is tried again at the next.
  connection_->serve_meanwhile([this] { return target_->request_fds(); },
                               [this] { ignore_error(target_->serve_requests(), "served again"); });
}

GdbServer::~GdbServer() = default;

void GdbServer::launch_with(GdbLaunch launch) {
  server_->set_options(gdb::ServerOptions{.multi = launch.multi,
                                          .once = launch.once,
                                          .disabled_packets = launch.disabled_packets,
                                          .debug = launch.debug,
                                          .remote_debug = launch.remote_debug,
                                          .debug_timestamps = launch.debug_timestamps});
  target_->launch_with(std::move(launch));
}

void GdbServer::connect(int in_fd, int out_fd) {
  connection_->reset(in_fd, out_fd);
  server_->connect();
}

// GdbTarget.

GdbTarget::GdbTarget(Inferior& inferior, WatchSession& session, GdbConnection& connection)
    : connection_(connection), inferior_(&inferior), session_(&session) {
  publish_plan();
}

GdbTarget::GdbTarget(GdbConnection& connection) : connection_(connection) {}

GdbTarget::~GdbTarget() = default;

void GdbTarget::set_features(const gdb::ClientFeatures& features, bool announced) {
  multiprocess_ = features.multiprocess;
  fork_events_ = features.fork_events;
  vfork_events_ = features.vfork_events;
  no_resumed_ = features.no_resumed;
  // The parent of a fork stays stopped for its event (a vfork's also at its end), and a child
  // the client follows stays traced across its exec, reported as gdbserver reports it.
  if (announced && inferior_ != nullptr) follow_children();
}

void GdbTarget::follow_children() {
  inferior_->hold_forks(fork_events_ || vfork_events_);
  if (fork_events_ || vfork_events_) inferior_->follow_execs(true);
}

void GdbTarget::set_catch_syscalls(std::optional<std::set<long>> numbers) {
  caught_ = std::move(numbers);
  // The software path takes system-call stops for itself: those of the caught calls stay ours.
  if (session_ != nullptr) session_->set_caller_syscalls(caught_);
}

void GdbTarget::set_working_directory(const std::string& dir) {
  std::optional<std::string> where;
  if (!dir.empty()) where = dir;
  const char* home = std::getenv("HOME");
  if (home != nullptr && (dir == "~" || dir.starts_with("~/"))) where = home + dir.substr(1);
  launch_->inferior.working_directory = where;
}

void GdbTarget::set_environment(const std::string& name_value) {
  auto& env = launch_->inferior.environment;
  if (!env) env = host_environment();
  const std::string prefix = name_value.substr(0, name_value.find('=')) + "=";
  std::erase_if(*env, [&](const std::string& e) { return e.starts_with(prefix); });
  env->push_back(name_value);
}

void GdbTarget::unset_environment(const std::string& name) {
  auto& env = launch_->inferior.environment;
  if (!env) env = host_environment();
  const std::string prefix = name + "=";
  std::erase_if(*env, [&](const std::string& e) { return e.starts_with(prefix); });
}

Result<gdb::ServerEnd> GdbTarget::drop_process(gdb::ServerEnd::How how) {
  const gdb::ServerEnd before = end_;
  if (inferior_ == nullptr) return before;
  auto left = finish_once(how);
  requeue_held();
  session_ = nullptr;
  inferior_ = nullptr;
  requests_.reset();  // the continuer serves the filter from now on
  requests_error_.reset();
  own_session_.reset();
  own_inferior_.reset();
  stepping_ = 0;
  steps_.clear();
  stop_requested_.clear();
  wildcard_process_.reset();
  step_accesses_.clear();
  exited_ = false;
  stepped_.clear();
  lifted_.clear();
  end_ = gdb::ServerEnd();
  pending_signal_.clear();
  deferred_.clear();
  held_.clear();
  rewound_.clear();
  forked_.clear();
  execve_return_ = 0;
  int3_.clear();
  unplanted_.clear();
  watches_.clear();
  removed_.clear();
  watch_type_.clear();
  if (!left) return std::unexpected(left.error());
  return before;
}

void GdbTarget::take_process(Inferior&& inferior) {
  own_inferior_ = std::make_unique<Inferior>(std::move(inferior));
  own_session_ = std::make_unique<WatchSession>(*own_inferior_, launch_->watches);
  inferior_ = own_inferior_.get();
  session_ = own_session_.get();
  session_->set_caller_syscalls(caught_);
  connection_.set_spin_max(inferior_->spin_max());
  follow_children();
  publish_plan();
}

Result<gdb::Tid> GdbTarget::start(std::vector<std::string> argv) {
  // An empty PROG: the last program run (or the command line's), with the arguments given now,
  // as gdbserver's handle_v_run.
  if (argv[0].empty()) {
    const std::vector<std::string>& last = last_program_.empty() ? launch_->program : last_program_;
    if (last.empty()) {
      return make_error(ErrorCode::kInval, "vRun: no program given, and none was run before");
    }
    argv[0] = last[0];
  } else if (auto here = in_working_directory(argv[0])) {
    argv[0] = *here;
  }
  if (auto r = drop_process(gdb::ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  last_program_ = argv;
  auto spawned = spawn_program(launch_->wrapper, argv, launch_->inferior,
                               launch_->startup_with_shell ? startup_shell() : std::string());
  if (!spawned) return std::unexpected(spawned.error());
  ignore_error(write_all(STDERR_FILENO, "hwarb gdbserver: process " + argv[0] + " created; pid = " +
                                            std::to_string(spawned->pid()) + "\n"),
               "a closed standard error loses the line, the session goes on");
  take_process(std::move(*spawned));
  return inferior_->pid();
}

Result<void> GdbTarget::restart() {
  std::vector<std::string> argv = last_program_.empty() ? launch_->program : last_program_;
  if (argv.empty()) return {};
  auto started = start(std::move(argv));
  if (!started) return std::unexpected(started.error());
  return {};
}

Result<gdb::Tid> GdbTarget::attach(gdb::Tid pid) {
  if (auto r = drop_process(gdb::ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  auto attached = Inferior::attach(pid, launch_->inferior);
  if (!attached) return std::unexpected(attached.error());
  ignore_error(write_all(STDERR_FILENO,
                         "hwarb gdbserver: attached to process " + std::to_string(pid) + "\n"),
               "a closed standard error loses the line, the session goes on");
  take_process(std::move(*attached));
  return pid;
}

std::optional<gdb::StopEvent> GdbTarget::attach_signal(gdb::Tid process) {
  if (inferior_ == nullptr || non_stop_) return std::nullopt;
  // The attach's stop_all queued the signal-delivery stop its main thread was in: taken as the
  // attach's stop, reported to the client (delivered if it resumes with it).
  const std::vector<Event> taken = take_queued(
      process,
      [](const Event& ev) {
        return ev.kind == EventKind::kSignal && ev.signal != SIGSTOP && ev.signal != SIGTRAP;
      },
      1);
  if (taken.empty()) return std::nullopt;
  pending_signal_[process] = taken.front().signal;
  return stop_of(Kind::kSignal, process, taken.front().signal);
}

void GdbTarget::publish_plan() {
  if (session_ == nullptr) return;
  // The process, stopped by the watchdog even without int3s (a step's trap pending at the
  // detach would kill it), and the int3 bytes.
  RestorePlan plan;
  plan.processes.push_back(inferior_->pid());
  if (auto it = int3_.find(inferior_->pid()); it != int3_.end()) {
    for (const auto& [addr, bp] : it->second) {
      plan.bytes.push_back(RestoreByte{.addr = addr, .original = bp.original});
    }
  }
  session_->set_caller_plan(std::move(plan));
  if (!watchdog_error_ && session_->watchdog_error()) watchdog_error_ = session_->watchdog_error();
}

// The session as RegisterYield's engine: a watch's registers given up to the program, and a
// thread the yield stopped run on as the target runs it (a step of the client's as a step; one
// whose own event came meanwhile keeps it queued, for the target's wait).
class GdbTarget::YieldEngine final : public Engine {
 public:
  explicit YieldEngine(GdbTarget& target) : target_(target) {}
  Result<bool> handle(const Event& event) override {
    (void)event;
    return false;
  }
  Resume resume_mode() const override { return target_.session_->resume_mode(); }
  Result<void> finish() override { return {}; }
  int yieldable_registers() const override { return target_.session_->yieldable_registers(); }
  int held_registers() const override { return target_.session_->held_registers(); }
  Result<int> yield_registers(const std::string& who) override {
    const int before = target_.session_->yieldable_registers();
    auto moved = target_.session_->yield_registers(who);
    if (!moved) return std::unexpected(moved.error());
    if (!*moved) return 0;
    if (target_.log_)
      target_.log_("watch " + std::to_string(static_cast<std::size_t>((*moved)->id)) +
                   " now software: " + (*moved)->why);
    return before - target_.session_->yieldable_registers();
  }
  Result<void> resume_stopped(Inferior& inferior, pid_t tid) override {
    (void)inferior;  // the target's own
    return target_.run_on(tid);
  }

 private:
  GdbTarget& target_;
};

void GdbTarget::arm_requests() {
  if (requests_ || requests_error_ || inferior_ == nullptr || !inferior_->spawned() ||
      session_->held_registers() == 0) {
    return;
  }
  // A stopped thread of the first process makes the injected call (its leader when it can).
  pid_t tid = 0;
  for (pid_t t : inferior_->threads()) {
    if (inferior_->process_of(t) != inferior_->pid() || !inferior_->is_stopped(t)) continue;
    if (tid == 0 || t == inferior_->pid()) tid = t;
  }
  if (tid == 0) return;  // none stopped now: the next watch tries again
  auto armed = RegisterYield::arm(*inferior_, tid);
  if (!armed) {
    requests_error_ = armed.error();
    if (log_) log_("the program's breakpoint requests are not held: " + armed.error().to_string());
    return;
  }
  requests_.emplace(std::move(*armed));
}

void GdbTarget::release_requests() {
  if (!requests_) return;
  requests_.reset();  // the continuer serves the filter from now on
  requests_error_ = Error(ErrorCode::kSrch,
                          "the process was let go; its filter is served by a process of hwarb's");
}

Result<void> GdbTarget::serve_requests() {
  if (!requests_ || inferior_ == nullptr) return {};
  YieldEngine engine(*this);
  const int before = requests_->yielded();
  auto served = requests_->serve(*inferior_, engine);
  if (requests_->yielded() != before) publish_plan();
  return served;
}

void GdbTarget::served() {
  // Breakpoints and watches the packet changed, to the session's watchdog (a failure is kept in
  // watchdog_error_; the packet's answer stands).
  publish_plan();
}

Resume GdbTarget::run_mode(pid_t tid) const {
  const Resume mode = session_->resume_mode(tid);
  const bool mappings = unplanted_.contains(inferior_->process_of(tid));
  return (caught_ || mappings) && mode == Resume::kCont ? Resume::kSyscall : mode;
}

Result<gdb::ServerEnd> GdbTarget::finish(gdb::ServerEnd::How how) {
  // Held events first: a detach delivers their signals and lets their fork children go.
  requeue_held();
  return finish_once(how);
}

Result<gdb::ServerEnd> GdbTarget::finish_once(gdb::ServerEnd::How how) {
  gdb::ServerEnd end = end_;
  end.how = how;
  if (inferior_ != nullptr && !exited_ && !inferior_->alive() &&
      how == gdb::ServerEnd::How::kDetached && !inferior_->threads().empty()) {
    // The first process was detached (D;PID) and what is left is its vfork child, which the
    // client detaches last: let go too, or it dies with the server (PTRACE_O_EXITKILL).
    ignore_error(inferior_->detach(), "a child that is gone needs no detach");
  }
  if (inferior_ == nullptr || exited_ || !inferior_->alive()) {
    end.exited = exited_;
    return end;
  }
  // Undo everything while every thread is stopped: the int3 bytes, the session's watches.
  if (auto r = inferior_->stop_all(); !r && r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  // The traps of int3s about to go, and of the server's own steps, are no signals of the
  // program: delivered at the detach they would kill it.
  if (auto r = surface_traps(inferior_->threads()); !r) return std::unexpected(r.error());
  if (auto r = rewind_queued_traps(); !r) return std::unexpected(r.error());
  drop_rewound_traps();
  drop_own_step_traps(0);
  for (const auto& [process, int3s] : int3_) {
    for (const auto& [addr, bp] : int3s) {
      ignore_error(
          inferior_->write_memory(addr, std::span<const std::uint8_t>(&bp.original, 1), process),
          "a gone process has no int3");
    }
  }
  int3_.clear();
  unplanted_.clear();
  // Nothing of the target's for the watchdog once the session's changes are undone too; the
  // program's breakpoint requests are the continuer's to serve (the server may wait for a client
  // for long).
  session_->set_caller_plan({});
  release_requests();
  Result<void> undone = session_->uninstall();
  const bool keep = how == gdb::ServerEnd::How::kDetached ||
                    (how != gdb::ServerEnd::How::kKilled && !inferior_->spawned());
  if (keep && undone) {
    // A spawned program the client detached from runs on after the server ends.
    if (inferior_->spawned()) ignore_error(inferior_->outlive_tracer(), "the detach goes on");
    // Signals reported to the client and not yet delivered go with the detach.
    requeue_program_signals(0);
    if (auto r = inferior_->detach(); !r) return std::unexpected(r.error());
    end.how = how;
    return end;
  }
  if (auto r = inferior_->kill(); !r && r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  if (!undone) return std::unexpected(undone.error());
  end.how = how == gdb::ServerEnd::How::kDetached ? gdb::ServerEnd::How::kKilled : how;
  return end;
}

std::string GdbTarget::describe_watches() {
  const std::vector<WatchInfo> infos = session_->watches();
  if (infos.empty()) return "no watchpoints\n";
  std::string out = std::to_string(infos.size()) + " watchpoint(s): " + session_->describe() + "\n";
  for (const WatchInfo& w : infos) {
    const unsigned a = w.spec.access;
    std::string access;
    if ((a & kWatchRead) != 0) access += 'r';
    if ((a & kWatchWrite) != 0) access += 'w';
    if ((a & kWatchExec) != 0) access += 'x';
    out += "  #" + std::to_string(static_cast<std::size_t>(w.id)) + " 0x" +
           gdb::hex_u64(w.spec.addr) + "/" + std::to_string(w.spec.len) + ":" + access + "  " +
           placement_name(w.placement);
    if (w.placement == Placement::kHardware) {
      out += " (" + std::to_string(w.registers) + " debug register(s))";
    }
    if (!w.why.empty()) out += ": " + w.why;
    out += "\n";
  }
  return out;
}

std::string GdbTarget::describe_slots() {
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
  out += "the program's own breakpoint requests: ";
  if (requests_) {
    out += "held until served; registers given up to it: " + std::to_string(requests_->yielded()) +
           "\n";
  } else if (requests_error_) {
    out += "not held (" + requests_error_->to_string() + ")\n";
  } else {
    out += inferior_->spawned() ? "not held (no watchpoint holds a register yet)\n"
                                : "not held (an attached process is never given a filter)\n";
  }
  return out;
}

Result<gdb::Registers> GdbTarget::read_registers(gdb::Tid tid, bool ext) {
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  auto fx = inferior_->get_fxsave(tid);
  if (!fx) return std::unexpected(fx.error());
  gdb::FpRegs fp;
  fp.fxsave = *fx;
  if (ext) {
    auto area = inferior_->get_xstate(tid);
    if (area) {
      auto got = gdb::xsave_to_ext(*area, xsave_layout());
      if (!got) return std::unexpected(got.error());
      fp.ext = *got;
    } else if (area.error().code() != ErrorCode::kNoDev) {
      return std::unexpected(area.error());
    }
  }
  return gdb::Registers{.regs = *regs, .fp = fp};
}

Result<void> GdbTarget::write_registers(gdb::Tid tid, const gdb::Registers& r,
                                        const gdb::Registers& before) {
  if (r.regs != before.regs) {
    if (auto w = inferior_->set_regs(tid, r.regs); !w) return w;
  }
  if (r.fp.fxsave != before.fp.fxsave) {
    if (auto w = inferior_->set_fxsave(tid, r.fp.fxsave); !w) return w;
  }
  if (r.fp.ext != before.fp.ext) {
    // Read again after the FXSAVE write above, so the area written back carries it.
    auto area = inferior_->get_xstate(tid);
    if (!area) return std::unexpected(area.error());
    if (auto w = gdb::ext_to_xsave(r.fp.ext, *area, xsave_layout()); !w) return w;
    if (auto w = inferior_->set_xstate(tid, *area); !w) return w;
  }
  return {};
}

Result<int> GdbTarget::open_file(const std::string& path, unsigned flags, unsigned mode) {
  // gdb's File-I/O open flags, as Linux's; its mode bits are Linux's permission bits.
  int linux_flags = (flags & 3) == gdb::kFileWriteOnly   ? O_WRONLY
                    : (flags & 3) == gdb::kFileReadWrite ? O_RDWR
                                                         : O_RDONLY;
  if ((flags & gdb::kFileAppend) != 0) linux_flags |= O_APPEND;
  if ((flags & gdb::kFileCreate) != 0) linux_flags |= O_CREAT;
  if ((flags & gdb::kFileTruncate) != 0) linux_flags |= O_TRUNC;
  if ((flags & gdb::kFileExclusive) != 0) linux_flags |= O_EXCL;
  auto fd = native::open_file(path, linux_flags, mode);
  if (!fd) return std::unexpected(fd.error());
  const int n = fd->get();
  files_[n] = std::move(*fd);
  return n;
}

Result<void> GdbTarget::close_file(int fd) {
  files_.erase(fd);
  return {};
}

Result<std::size_t> GdbTarget::pread_file(int fd, std::uint64_t offset,
                                          std::vector<std::uint8_t>& out) {
  return native::pread_file(fd, offset, out);
}

Result<std::size_t> GdbTarget::pwrite_file(int fd, std::uint64_t offset, std::string_view data) {
  return native::pwrite_file(
      fd, offset, std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
}

Result<gdb::FileStatus> GdbTarget::stat_file(int fd) {
  auto st = native::file_stat(fd);
  if (!st) return std::unexpected(st.error());
  return gdb::FileStatus{.dev = st->dev,
                         .ino = st->ino,
                         .mode = st->mode,
                         .nlink = st->nlink,
                         .uid = st->uid,
                         .gid = st->gid,
                         .rdev = st->rdev,
                         .size = st->size,
                         .blksize = st->blksize,
                         .blocks = st->blocks,
                         .atime = st->atime,
                         .mtime = st->mtime,
                         .ctime = st->ctime};
}

Result<void> GdbTarget::unlink_file(const std::string& path) {
  return native::unlink_file(path);
}

Result<std::string> GdbTarget::read_link(const std::string& path) {
  return native::read_link(path);
}

Result<std::string> GdbTarget::auxv(gdb::Tid process) {
  return read_proc_file(process, "auxv");
}

Result<std::string> GdbTarget::libraries_svr4(gdb::Tid process, bool without_main_lm) {
  auto auxv = read_proc_file(process, "auxv");
  if (!auxv) return std::unexpected(auxv.error());
  auto map = read_link_map(std::span<const std::uint8_t>(
                               reinterpret_cast<const std::uint8_t*>(auxv->data()), auxv->size()),
                           [this, process](std::uint64_t addr, std::span<std::uint8_t> out) {
                             return inferior_->read_memory(addr, out, process);
                           });
  if (!map) return std::unexpected(map.error());
  if (map->main_lm == 0) {
    // Before the dynamic linker has set r_debug up (a process stopped at its first
    // instruction), an error, as lldb-server answers: lldb then follows the rendezvous in
    // memory until the list exists (an empty list would make it miss every library loaded
    // at start-up); gdb reads the link map itself either way.
    return make_error(ErrorCode::kInval, "r_debug: not set up by the dynamic linker yet");
  }
  if (without_main_lm) {
    LinkMap for_lldb = *map;
    for_lldb.main_lm = 0;
    return svr4_library_xml(for_lldb);
  }
  return svr4_library_xml(*map);
}

Result<std::string> GdbTarget::exec_file(gdb::Tid process) {
  return executable_path(process);
}

Result<std::string> GdbTarget::siginfo(gdb::Tid tid) {
  // PTRACE_GETSIGINFO's x86-64 Linux layout, 128 bytes.
  siginfo_t info{};
  if (auto r = ptrace_getsiginfo(tid, info); !r) return std::unexpected(r.error());
  if (info.si_signo == SIGTRAP && (info.si_code >> 8) == PTRACE_EVENT_STOP) {
    // A thread the server stopped (PTRACE_INTERRUPT: the attach, another thread's stop): shown
    // as gdbserver's, which stops threads with SIGSTOP from the server (tgkill).
    info = siginfo_t{};
    info.si_signo = SIGSTOP;
    info.si_code = SI_TKILL;
    info.si_pid = own_pid();
    info.si_uid = own_uid();
  }
  return std::string(reinterpret_cast<const char*>(&info), sizeof info);
}

Result<std::size_t> GdbTarget::write_siginfo(gdb::Tid tid, std::uint64_t offset,
                                             std::string_view data) {
  siginfo_t info{};
  if (offset > sizeof info) {
    return make_error(ErrorCode::kInval, "offset: " + std::to_string(offset) +
                                             " is past the siginfo's " +
                                             std::to_string(sizeof info) + " bytes");
  }
  if (auto r = ptrace_getsiginfo(tid, info); !r) return std::unexpected(r.error());
  const std::size_t n = std::min<std::size_t>(data.size(), sizeof info - offset);
  std::memcpy(reinterpret_cast<char*>(&info) + offset, data.data(), n);
  if (auto r = ptrace_setsiginfo(tid, info); !r) return std::unexpected(r.error());
  return n;
}

std::string GdbTarget::thread_name(gdb::Tid tid) {
  // /proc/PID/task/TID/comm, as gdbserver gives it.
  auto comm = read_proc_file(inferior_->group_of(tid), "task/" + std::to_string(tid) + "/comm");
  std::string name = comm ? *comm : std::string();
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

Result<gdb::OsData> GdbTarget::os_data(const std::string& name) {
  auto table = read_os_table(name);
  if (!table) return std::unexpected(table.error());
  return gdb::OsData{std::move(table->type), std::move(table->columns), std::move(table->rows)};
}

Result<gdb::MemoryRegion> GdbTarget::memory_region(std::uint64_t addr) {
  auto maps = read_maps(inferior_->pid());
  if (!maps) return std::unexpected(maps.error());
  std::uint64_t next = ~std::uint64_t{0};
  for (const Mapping& m : *maps) {
    if (addr >= m.start && addr < m.end) {
      return gdb::MemoryRegion{.start = m.start,
                               .size = m.end - m.start,
                               .mapped = true,
                               .read = m.read,
                               .write = m.write,
                               .exec = m.exec,
                               .path = m.path};
    }
    if (m.start > addr) next = std::min(next, m.start);
  }
  gdb::MemoryRegion gap;
  gap.start = addr;
  gap.size = next - addr;
  return gap;
}

// libthread_db afresh for each question: its agent holds what it read of the process's thread
// library, which an exec or a newly loaded library changes; a question costs a few milliseconds.
Result<std::uint64_t> GdbTarget::tls_address(gdb::Tid tid, std::uint64_t offset, std::uint64_t lm) {
  auto locals = ThreadLocals::open(*inferior_, inferior_->process_of(tid));
  if (!locals) return std::unexpected(locals.error());
  return locals->address(tid, lm, offset);
}

Result<std::vector<std::uint8_t>> GdbTarget::read_memory(gdb::Tid process, std::uint64_t addr,
                                                         std::uint64_t len) {
  std::vector<std::uint8_t> bytes(len);
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
    if (got == 0) {
      return make_error(ErrorCode::kFault, "addr: " + gdb::hex_u64(addr) + " is not readable");
    }
    bytes.resize(got);
  }
  // The program's bytes, not the int3s planted in them.
  const auto show = [&](std::uint64_t at, std::uint8_t original) {
    if (at >= addr && at < addr + bytes.size()) bytes[at - addr] = original;
  };
  for (const auto& [at, bp] : int3_[process]) show(at, bp.original);
  for (const RestoreByte& b : session_->planted_bytes()) show(b.addr, b.original);
  return bytes;
}

Result<void> GdbTarget::write_memory(gdb::Tid process, std::uint64_t addr,
                                     const std::vector<std::uint8_t>& bytes) {
  std::vector<std::uint8_t> out = bytes;
  // Over a planted int3 the program's byte changes, the int3 stays.
  for (auto& [at, bp] : int3_[process]) {
    if (at >= addr && at < addr + out.size()) {
      bp.original = out[at - addr];
      out[at - addr] = kInt3;
    }
  }
  return inferior_->write_memory(addr, out, process);
}

Result<void> GdbTarget::insert_point(gdb::Tid process, gdb::PointType point, std::uint64_t addr,
                                     std::uint64_t len, gdb::PointAgent agent) {
  const char type = static_cast<char>(point);
  Int3Map& int3s = int3_[process];
  const auto plant = [&](bool software) -> Result<void> {
    if (auto it = int3s.find(addr); it != int3s.end()) {
      // gdb sends a breakpoint again when its conditions change, or after the code under it went
      // (a library unloaded, another one loaded at the same address: gdb removes no breakpoint
      // of an unloaded library). As gdbserver, the int3 is checked: still there, the new list
      // of conditions replaces the old; gone, it is planted anew over the new code.
      std::uint8_t now = 0;
      if (inferior_->read_memory(addr, std::span(&now, 1), process) && now == kInt3) {
        (software ? it->second.software : it->second.hardware) = true;
        (software ? it->second.software_agent : it->second.hardware_agent) = std::move(agent);
        return {};
      }
      int3s.erase(it);
    }
    std::uint8_t original = 0;
    if (auto r = inferior_->read_memory(addr, std::span(&original, 1), process); !r) return r;
    if (auto r = inferior_->write_memory(addr, std::span<const std::uint8_t>(&kInt3, 1), process);
        !r) {
      return r;
    }
    Breakpoint& bp = int3s[addr];
    bp.original = original;
    bp.software = software;
    bp.hardware = !software;
    (software ? bp.software_agent : bp.hardware_agent) = std::move(agent);
    return {};
  };
  // A hardware breakpoint as an int3: on memory not mapped yet, planted when it is (a debug
  // register would take the address as it is).
  const auto plant_hardware = [&]() -> Result<void> {
    auto planted = plant(false);
    if (planted) return planted;
    auto maps = read_maps(process);
    if (!maps || find_mapping(*maps, addr)) return planted;
    unplanted_[process][addr] = std::move(agent);
    return {};
  };
  if (type == '0') return plant(true);
  // Another process than the first (a forked child the client keeps): int3s only; its watches
  // are not served (taken as placed, so that the client's bookkeeping goes on).
  if (process != inferior_->pid()) return type == '1' ? plant_hardware() : Result<void>();
  WatchSpec spec{.addr = addr, .len = len, .access = kWatchWrite};
  // A hardware breakpoint with conditions or commands is an int3: they are evaluated at its
  // trap.
  if (type == '1' && (!agent.conditions.empty() || !agent.commands.empty())) {
    return plant_hardware();
  }
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
  if (watches_.contains(key)) return {};
  // A new watch: the removed ones give their registers back first.
  Result<WatchInfo> info = make_error(ErrorCode::kBusy, "threads: not stopped");
  if (auto r = with_all_stopped([&]() -> Result<void> {
        if (auto f = flush_removed(); !f) return f;
        info = session_->insert(spec);
        if (info) arm_requests();
        return {};
      });
      !r) {
    return r;
  }
  if (!info) {
    if (type == '1') return plant_hardware();
    return std::unexpected(info.error());
  }
  watches_[key] = info->id;
  watch_type_[info->id] = type;
  return {};
}

Result<void> GdbTarget::remove_point(gdb::Tid process, gdb::PointType point, std::uint64_t addr,
                                     std::uint64_t len) {
  const char type = static_cast<char>(point);
  if (type == '1') {
    if (auto it = unplanted_.find(process); it != unplanted_.end() && it->second.erase(addr)) {
      if (it->second.empty()) unplanted_.erase(it);
      return {};
    }
  }
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
          return r;
        }
        int3s.erase(it);
        lifted_.insert(addr);
      }
      return {};
    }
    if (type == '0' || process != inferior_->pid()) return {};
    len = 1;
  }
  if (process != inferior_->pid()) return {};
  const WatchKey key{type, addr, len};
  if (!watches_.contains(key)) return {};  // gdb removes what it never got
  // Taken off at the next resume, unless inserted again before: gdb removes and re-inserts every
  // watchpoint at each stop (breakpoint always-inserted off), and a removal rebuilds the
  // session's paths (perf events reopened, pages restored and protected again).
  removed_.insert(key);
  // Non-stop mode: now, while the other threads run (a hit of a removed watch would be a stop
  // the client cannot tell).
  if (non_stop_) return with_all_stopped([&] { return flush_removed(); });
  return {};
}

Result<void> GdbTarget::flush_removed() {
  for (auto key = removed_.begin(); key != removed_.end(); key = removed_.erase(key)) {
    auto it = watches_.find(*key);
    if (it == watches_.end()) continue;
    if (auto r = session_->remove(it->second); !r) return r;
    watch_type_.erase(it->second);
    watches_.erase(it);
  }
  return {};
}

Result<void> GdbTarget::follow_mappings(pid_t process, long nr) {
  if (nr != SYS_mmap && nr != SYS_mremap && nr != SYS_munmap) return {};
  auto pending = unplanted_.find(process);
  auto planted = int3_.find(process);
  const bool hardware_planted =
      planted != int3_.end() &&
      std::any_of(planted->second.begin(), planted->second.end(),
                  [](const auto& entry) { return entry.second.hardware; });
  if (pending == unplanted_.end() && !hardware_planted) return {};
  auto maps = read_maps(process);
  if (!maps) return {};  // the process is gone: its end follows
  // 1. A planted hardware-only int3 whose memory went away: unplanted again; one whose memory a
  //    new mapping replaced (the loader maps a library's text over the range it reserved):
  //    planted again over the new bytes. (A software one is gdb's to insert again, as
  //    gdbserver leaves it.)
  if (planted != int3_.end()) {
    for (auto it = planted->second.begin(); it != planted->second.end();) {
      Breakpoint& bp = it->second;
      if (!bp.hardware || bp.software) {
        ++it;
        continue;
      }
      std::uint8_t now = 0;
      if (!find_mapping(*maps, it->first) ||
          !inferior_->read_memory(it->first, std::span(&now, 1), process)) {
        unplanted_[process][it->first] = std::move(bp.hardware_agent);
        it = planted->second.erase(it);
        continue;
      }
      if (now != kInt3) {
        bp.original = now;
        if (auto r = inferior_->write_memory(it->first, std::span<const std::uint8_t>(&kInt3, 1),
                                             process);
            !r) {
          return r;
        }
      }
      ++it;
    }
  }
  // 2. An unplanted one whose address is mapped now: its int3.
  pending = unplanted_.find(process);
  if (pending == unplanted_.end()) return {};
  for (auto it = pending->second.begin(); it != pending->second.end();) {
    const std::uint64_t addr = it->first;
    std::uint8_t original = 0;
    if (!find_mapping(*maps, addr) ||
        !inferior_->read_memory(addr, std::span(&original, 1), process)) {
      ++it;
      continue;
    }
    if (auto r = inferior_->write_memory(addr, std::span<const std::uint8_t>(&kInt3, 1), process);
        !r) {
      return r;
    }
    Breakpoint& bp = int3_[process][addr];
    bp.original = original;
    bp.hardware = true;
    bp.hardware_agent = std::move(it->second);
    it = pending->second.erase(it);
  }
  if (pending->second.empty()) unplanted_.erase(pending);
  return {};
}

void GdbTarget::requeue_program_signals(gdb::Tid process) {
  for (const auto& [tid, sig] : pending_signal_) {
    const bool passed =
        program_signals_ ? program_signals_->contains(sig) : sig != SIGTRAP && sig != SIGINT;
    if (!passed || !inferior_->is_stopped(tid)) continue;
    if (process != 0 && inferior_->group_of(tid) != process) continue;
    // Its stop reported, the signal not delivered by a resume yet: queued again, the Inferior's
    // detach delivers it (from the thread's signal-delivery stop, or raised for it).
    const auto& queued = inferior_->queued_events();
    const bool there = std::any_of(queued.begin(), queued.end(), [&](const Event& e) {
      return e.tid == tid && e.kind == EventKind::kSignal;
    });
    if (there) continue;
    Event ev;
    ev.kind = EventKind::kSignal;
    ev.tid = tid;
    ev.signal = sig;
    inferior_->requeue(ev);
  }
}

void GdbTarget::requeue_held() {
  for (auto ev = held_.rbegin(); ev != held_.rend(); ++ev) inferior_->requeue(*ev);
  held_.clear();
}

Result<void> GdbTarget::set_non_stop(bool on) {
  // Back to all-stop: every thread stops (the client asks for their stops with '?').
  if (!on && non_stop_ && inferior_ != nullptr && inferior_->alive()) {
    if (auto r = inferior_->stop_all(); !r) return std::unexpected(r.error());
  }
  non_stop_ = on;
  steps_.clear();
  stop_requested_.clear();
  if (session_ != nullptr) session_->set_stepping(0);
  return {};
}

Result<void> GdbTarget::interrupt_process() {
  return send_signal(inferior_->pid(), SIGINT);
}

bool GdbTarget::stepping(pid_t tid) const {
  return non_stop_ ? steps_.contains(tid) : tid == stepping_;
}

std::vector<gdb::Tid> GdbTarget::threads() const {
  std::vector<pid_t> all = inferior_->threads();
  std::set<pid_t> unreported;
  const auto note = [&](const Event& ev) {
    if (ev.kind == EventKind::kFork && ev.vfork) unreported.insert(ev.child);
  };
  for (const Event& ev : inferior_->queued_events()) note(ev);
  for (const Event& ev : held_) note(ev);
  if (!unreported.empty()) {
    std::erase_if(all, [&](pid_t t) { return unreported.contains(inferior_->group_of(t)); });
  }
  return all;
}

bool GdbTarget::owns_thread(gdb::Tid tid) const {
  if (inferior_ == nullptr) return false;
  const std::vector<pid_t> all = inferior_->threads();
  return std::find(all.begin(), all.end(), tid) != all.end();
}

bool GdbTarget::owns_process(gdb::Tid process) const {
  if (inferior_ == nullptr) return false;
  if (process == inferior_->pid()) return true;
  const std::vector<pid_t> all = inferior_->threads();
  return std::any_of(all.begin(), all.end(),
                     [&](pid_t t) { return inferior_->group_of(t) == process; });
}

Result<void> GdbTarget::halt() {
  if (non_stop_ || inferior_ == nullptr || exited_) return {};
  return stop_others(-1);
}

std::set<pid_t> GdbTarget::running_threads() const {
  std::set<pid_t> running;
  for (pid_t t : inferior_->threads()) {
    if (!inferior_->is_stopped(t)) running.insert(t);
  }
  return running;
}

Result<void> GdbTarget::with_all_stopped(const std::function<Result<void>()>& change) {
  if (!non_stop_) return change();
  const std::set<pid_t> running = running_threads();
  auto stopped = inferior_->stop_all();
  if (!stopped) return std::unexpected(stopped.error());
  Result<void> changed = change();
  for (pid_t t : *stopped) {
    // Only what ran before (a forked child that came meanwhile waits for its fork's stop).
    if (!running.contains(t)) continue;
    if (auto r = run_on(t); !r && r.error().code() != ErrorCode::kSrch) return r;
  }
  return changed;
}

Result<void> GdbTarget::run_on(pid_t tid) {
  if (!inferior_->is_stopped(tid) || inferior_->has_queued(tid)) return {};
  // The session's way of running may have changed (the watches, a yield).
  return inferior_->resume(tid, stepping(tid) ? Resume::kStep : run_mode(tid));
}

Result<std::optional<StopEvent>> GdbTarget::resume_each(
    const std::vector<gdb::ResumeAction>& list) {
  const std::vector<pid_t> threads = inferior_->threads();
  for (const gdb::ResumeAction& a : list) {
    if (std::find(threads.begin(), threads.end(), a.tid) == threads.end()) continue;  // gone
    if (a.kind == 't') {
      stop_requested_.insert(a.tid);
      continue;
    }
    stop_requested_.erase(a.tid);
    const bool step = is_step(a.kind);
    set_step_range(a);
    if (!step && steps_.erase(a.tid) != 0) session_->set_stepping(steps_);
    if (inferior_->has_queued(a.tid)) {  // its event comes first
      if (log_) log_("resume: thread " + std::to_string(a.tid) + " deferred behind its event");
      deferred_[a.tid] = Asked{.step = step, .signal = a.signal};
      if (step) {
        steps_.insert(a.tid);
        session_->set_stepping(steps_);
      }
      continue;
    }
    if (step) begin_step(a.tid);
    pending_signal_.erase(a.tid);
    if (auto r = inferior_->resume(a.tid, step ? Resume::kStep : run_mode(a.tid), a.signal);
        !r && r.error().code() != ErrorCode::kSrch) {
      return std::unexpected(r.error());
    }
  }
  return std::optional<StopEvent>();
}

Result<void> GdbTarget::stop_only(const std::set<pid_t>& threads) {
  const std::set<pid_t> running = running_threads();
  auto stopped = inferior_->stop_all();
  if (!stopped) return std::unexpected(stopped.error());
  for (pid_t t : *stopped) {
    if (threads.contains(t) || !running.contains(t) || !inferior_->is_stopped(t)) continue;
    if (auto r = inferior_->resume_as_before(t); !r && r.error().code() != ErrorCode::kSrch) {
      return r;
    }
  }
  return {};
}

Result<std::optional<StopEvent>> GdbTarget::requested_stop() {
  const std::vector<pid_t> threads = inferior_->threads();
  for (auto it = stop_requested_.begin(); it != stop_requested_.end();) {
    const pid_t tid = *it;
    if (std::find(threads.begin(), threads.end(), tid) == threads.end()) {
      it = stop_requested_.erase(it);
      continue;
    }
    // A queued event is the thread's stop (or is handled first); a thread waiting for its vfork
    // child cannot stop until the child execs or exits.
    if (inferior_->has_queued(tid) || inferior_->vfork_child_of(tid) != 0) {
      ++it;
      continue;
    }
    if (!inferior_->is_stopped(tid)) {
      if (auto r = stop_only(stop_requested_); !r) return std::unexpected(r.error());
      if (!inferior_->is_stopped(tid) || inferior_->has_queued(tid)) {
        ++it;
        continue;
      }
    }
    stop_requested_.erase(it);
    if (auto r = stop_others(tid); !r) return std::unexpected(r.error());
    return std::optional<StopEvent>(stop_of(Kind::kSignal, tid, 0));
  }
  return std::optional<StopEvent>();
}

Result<std::optional<StopEvent>> GdbTarget::resume(const std::vector<gdb::ResumeAction>& list) {
  if (non_stop_) return resume_each(list);
  // Which threads the client lets run beyond those it names: a thread created meanwhile runs
  // only under such an action (see on_event).
  wildcard_process_.reset();
  for (const gdb::ResumeAction& a : list) {
    if ((a.tid == -1 || a.tid == 0) && (a.kind == 'c' || a.kind == 'C')) {
      wildcard_process_ = a.process > 0 ? a.process : 0;
      break;
    }
  }
  if (auto r = flush_removed(); !r) return std::unexpected(r.error());
  stepping_ = 0;
  session_->set_stepping(0);
  // Each thread an action names must exist: else nothing is resumed (and nothing would stop).
  const std::vector<pid_t> threads = inferior_->threads();
  for (const gdb::ResumeAction& a : list) {
    if (a.tid > 0 && std::find(threads.begin(), threads.end(), a.tid) == threads.end()) {
      return make_error(ErrorCode::kSrch,
                        "vCont: no thread " + gdb::hex_u64(static_cast<std::uint64_t>(a.tid)));
    }
  }
  // The return of an execve the client catches: the exec stop's thread is at the new image's
  // first instruction with execve's exit stepped over (Inferior::leave_exec_stop), so that
  // syscall-exit stop is reported now, before anything runs, where gdbserver reports it.
  if (const pid_t tid = std::exchange(execve_return_, 0); tid != 0) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const gdb::ResumeAction& a) {
      return a.tid == tid || a.tid == -1 || a.tid == 0;
    });
    if (catches(SYS_execve) && it != list.end() && it->kind == 'c' && inferior_->is_stopped(tid)) {
      StopEvent stop = stop_of(Kind::kSyscallReturn, tid);
      stop.syscall = SYS_execve;
      return std::optional<StopEvent>(stop);
    }
  }
  std::size_t going = 0;  // threads resumed, or with an event to report
  resumed_.clear();
  deferred_.clear();
  // Signals and system-call stops already held for threads this resume leaves stopped (queued
  // by a stop_all) wait until those threads run: gdb stepping one thread over a breakpoint must
  // hear from that thread only (else gdb 13 fails an assertion in finish_step_over), and a
  // system-call stop the session handles itself (a software watch's check of the call) would
  // run its thread on, into a watch hit gdb did not let it reach. They are queued again however
  // this resume ends, in their order (held_). Other events (exits, forks the client does not
  // take as events, new threads) are handled as they come: none of them is a stop of the thread.
  requeue_held();
  const auto fail = [&](const Error& e) -> Result<std::optional<StopEvent>> {
    requeue_held();
    return std::unexpected(e);
  };
  for (pid_t tid : threads) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const gdb::ResumeAction& a) {
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
        const bool syscall_stop =
            ev.kind == EventKind::kSyscallEnter || ev.kind == EventKind::kSyscallExit;
        if (ev.kind == EventKind::kSignal || fork_stop || syscall_stop) {
          held_.push_back(std::move(ev));
        } else {
          inferior_->requeue(ev);
        }
      }
      continue;
    }
    ++going;
    resumed_.insert(tid);
    if (!inferior_->is_stopped(tid)) continue;
    const bool step = is_step(it->kind);
    set_step_range(*it, tid);
    if (inferior_->has_queued(tid)) {  // its event comes first
      deferred_[tid] = Asked{.step = step, .signal = it->signal};
      // The session steps it on from a system-call stop it handles itself (a software watch's
      // check of the call), as run_as_asked does from any other.
      if (step) begin_step(tid);
      continue;
    }
    if (step) begin_step(tid);
    pending_signal_.erase(tid);
    if (auto r = inferior_->resume(tid, step ? Resume::kStep : run_mode(tid), it->signal);
        !r && r.error().code() != ErrorCode::kSrch) {
      return fail(r.error());
    }
  }
  if (going == 0) {
    return fail(Error(ErrorCode::kInval, "vCont: the actions resume no thread"));
  }
  return std::optional<StopEvent>();
}

Result<gdb::Waited> GdbTarget::wait(int client_fd) {
  return wait_events(client_fd, true);
}

Result<gdb::Waited> GdbTarget::poll_events(int client_fd) {
  return wait_events(client_fd, false);
}

Result<gdb::Waited> GdbTarget::wait_events(int client_fd, bool block) {
  bool ring_woke = false;
  for (;;) {
    if (non_stop_) {
      auto asked = requested_stop();
      if (!asked) return std::unexpected(asked.error());
      if (*asked) return gdb::Waited{.stop = **asked};
    }
    // Hits of threads that block SIGTRAP are looked for when a hardware hit's ring woke the
    // wait, and every kBlockedHitLookMs while threads run: their stops are queued first, and
    // this wait takes them.
    const bool looks = session_->has_hardware_watches();
    if (looks &&
        (std::exchange(ring_woke, false) || std::chrono::steady_clock::now() - last_look_ >=
                                                std::chrono::milliseconds(kBlockedHitLookMs))) {
      ignore_error(session_->surface_blocked_hits(), "the next look tries again");
      last_look_ = std::chrono::steady_clock::now();
    }
    const std::span<const int> fds(&client_fd, client_fd < 0 ? 0 : 1);
    std::vector<int> wake(fds.begin(), fds.end());
    if (looks && block) {
      const std::vector<int> rings = session_->wake_fds();
      wake.insert(wake.end(), rings.begin(), rings.end());
    }
    if (requests_) {
      // The program's breakpoint requests are served between events (it waits in each).
      if (auto r = serve_requests(); !r) {
        requeue_held();
        return std::unexpected(r.error());
      }
      if (block) wake.push_back(requests_->listener());
    }
    auto got = block ? inferior_->wait_or_poll(wake, looks ? kBlockedHitLookMs : -1)
                     : inferior_->poll_event();
    if (!got && got.error().code() == ErrorCode::kIntr) return std::unexpected(got.error());
    if (!got) {
      requeue_held();
      return std::unexpected(got.error());
    }
    if (!*got && block && (looks || requests_)) {
      // The client spoke, a ring or a request woke the wait, or the look's time came.
      ring_woke = looks;
      if (fds.empty()) continue;
      auto ready = poll_in_once(fds, 0);
      if (!ready) return std::unexpected(ready.error());
      if ((*ready)[0] == 0) continue;
    }
    if (!*got) return gdb::Waited{};  // the client spoke (blocking), or nothing yet
    // Before anything resumes the thread: memory a call mapped gets its breakpoints first.
    if (const Event& ev = **got; ev.kind == EventKind::kSyscallExit) {
      if (auto r = follow_mappings(inferior_->process_of(ev.tid), ev.syscall); !r) {
        requeue_held();
        return std::unexpected(r.error());
      }
    }
    auto stop = on_event(**got);
    if (!stop && stop.error().code() == ErrorCode::kSrch) {
      // A thread the event's handling stopped or read was killed meanwhile (ESRCH: its process
      // is ending, by exit_group or SIGKILL): no stop to report; the exit events follow.
      if (log_) log_("event: " + stop.error().to_string());
      stop = std::optional<StopEvent>();
    }
    // The session may have followed a fork, an exec, a mapping.
    publish_plan();
    if (!stop) {
      requeue_held();
      return std::unexpected(stop.error());
    }
    if (!*stop && client_fd >= 0) {
      // Between two events that made no stop (a storm of false conditions, of a software
      // watch's faults), the client is served first when it has spoken, as gdbserver's event
      // loop takes one event per turn.
      auto ready = poll_in_once(fds, 0);
      if (ready && (*ready)[0] != 0) return gdb::Waited{};  // as when the client spoke
    }
    if (*stop) {
      requeue_held();
      stop_requested_.erase((*stop)->tid);
      // A leader that ended while its threads run on is no thread any more (all-stop's
      // stop_all finds it so).
      if (non_stop_) inferior_->drop_ended_leaders();
      return gdb::Waited{.stop = **stop};
    }
  }
}

Result<StopEvent> GdbTarget::interrupt() {
  const std::set<pid_t> running = running_threads();
  auto stopped = inferior_->stop_all();
  if (!stopped) {
    requeue_held();
    return std::unexpected(stopped.error());
  }
  if (auto r = surface_traps(*stopped); !r) {
    requeue_held();
    return std::unexpected(r.error());
  }
  if (auto r = rewind_queued_traps(); !r) {
    requeue_held();
    return std::unexpected(r.error());
  }
  // gdbserver sends SIGINT to the process, which its main thread takes when it runs (the
  // kernel's first choice), else another thread that runs: that thread's stop, not the last
  // stop's thread again (gdb would step that one off its breakpoint first at every continue,
  // and it would win every race), nor a thread gdb held (scheduler-locking).
  pid_t tid = stepping_;
  if (tid == 0) {
    tid =
        running.empty() || running.contains(inferior_->pid()) ? inferior_->pid() : *running.begin();
  }
  requeue_held();
  return stop_of(Kind::kSignal, tid, SIGINT);
}

std::optional<StopEvent> GdbTarget::stepped_watch(pid_t tid) const {
  // A software watch's hit is a stop of its own (the step faults); a debug register's trap may
  // have coalesced with the step's: the step's own operands tell.
  for (const WatchInfo& w : session_->watches()) {
    if (w.placement != Placement::kHardware || w.spec.access == kWatchExec) continue;
    const auto accesses = step_accesses_.find(tid);
    if (accesses == step_accesses_.end()) break;
    for (const x86::MemRef& ref : accesses->second) {
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
      StopEvent stop = stop_of(Kind::kWatch, tid);
      // A hardware breakpoint's type is never that of a stepped access's watch.
      stop.point = t == '3'   ? gdb::PointType::kRead
                   : t == '4' ? gdb::PointType::kAccess
                              : gdb::PointType::kWrite;
      stop.addr = std::max(ref.address, w.spec.addr);
      return stop;
    }
  }
  return std::nullopt;
}

void GdbTarget::begin_step(pid_t tid) {
  stepping_ = tid;
  steps_.insert(tid);
  stepped_.insert(tid);
  if (non_stop_) {
    session_->set_stepping(steps_);
  } else {
    session_->set_stepping(tid);
  }
  // The step's accesses, for a debug-register hit whose trap the step's own SIGTRAP hides (two
  // SIGTRAPs of one instruction coalesce into one stop).
  std::vector<x86::MemRef>& accesses = step_accesses_[tid];
  accesses.clear();
  auto regs = inferior_->get_regs(tid);
  auto insn =
      regs ? inferior_->decode_at(regs->rip) : Result<x86::Insn>(std::unexpected(regs.error()));
  if (insn) {
    if (auto refs = x86::effective_addresses(*insn, *regs)) accesses = std::move(*refs);
  }
}

void GdbTarget::set_step_range(const gdb::ResumeAction& a, pid_t tid) {
  const pid_t t = tid != 0 ? tid : static_cast<pid_t>(a.tid);
  if (a.kind == 'r' && a.range_start < a.range_end) {
    step_ranges_[t] = {a.range_start, a.range_end};
  } else {
    step_ranges_.erase(t);
  }
}

Result<bool> GdbTarget::steps_on_in_range(pid_t tid) {
  const auto range = step_ranges_.find(tid);
  if (range == step_ranges_.end()) return false;
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t pc = regs->rip;
  if (pc < range->second.first || pc >= range->second.second ||
      int3_[inferior_->process_of(tid)].contains(pc)) {
    step_ranges_.erase(range);
    return false;
  }
  begin_step(tid);
  if (auto r = inferior_->resume(tid, Resume::kStep); !r) return std::unexpected(r.error());
  return true;
}

Result<void> GdbTarget::stop_others(pid_t tid) {
  if (non_stop_) {
    // The thread alone stops; the others run on.
    if (stepping_ == tid) stepping_ = 0;
    if (steps_.erase(tid) != 0) session_->set_stepping(steps_);
    return {};
  }
  auto stopped = inferior_->stop_all(tid);
  if (!stopped) return std::unexpected(stopped.error());
  if (auto r = surface_traps(*stopped); !r) return r;
  if (auto r = rewind_queued_traps(); !r) return r;
  stepping_ = 0;
  session_->set_stepping(0);
  return {};
}

Result<void> GdbTarget::surface_traps(const std::vector<pid_t>& stopped) {
  for (pid_t t : stopped) {
    auto surfaced = inferior_->surface_pending(t, std::uint64_t{1} << (SIGTRAP - 1));
    if (!surfaced) {
      if (surfaced.error().code() == ErrorCode::kSrch) continue;  // gone: its exit follows
      return std::unexpected(surfaced.error());
    }
    // requeue puts an event first: the last one back first keeps their order.
    for (auto ev = surfaced->rbegin(); ev != surfaced->rend(); ++ev) inferior_->requeue(*ev);
  }
  return {};
}

Result<void> GdbTarget::rewind_queued_traps() {
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
    // An int3 of ours, or one taken out since it was hit (its trap no stop any more: the
    // instruction runs for real, as on_breakpoint_trap does); else the program's.
    const std::uint64_t at = regs->rip - 1;
    if (!int3_[inferior_->process_of(ev.tid)].contains(at) && !lifted_int3(at)) continue;
    regs->rip -= 1;
    if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return r;
    rewound_[ev.tid] = regs->rip;
  }
  return {};
}

bool GdbTarget::lifted_int3(std::uint64_t at) {
  std::uint8_t byte = 0;
  return lifted_.contains(at) && inferior_->read_memory(at, std::span(&byte, 1)) && byte != kInt3;
}

std::vector<Event> GdbTarget::take_queued(pid_t tid, const std::function<bool(const Event&)>& which,
                                          std::size_t limit) {
  std::vector<Event> taken;
  std::vector<Event> keep;
  for (Event& ev : inferior_->discard_queued(tid)) {
    if (taken.size() < limit && which(ev)) {
      taken.push_back(std::move(ev));
    } else {
      keep.push_back(std::move(ev));
    }
  }
  // requeue puts an event first: the last one back first keeps their order.
  for (auto ev = keep.rbegin(); ev != keep.rend(); ++ev) inferior_->requeue(*ev);
  return taken;
}

void GdbTarget::drop_own_step_traps(gdb::Tid process) {
  for (auto it = stepped_.begin(); it != stepped_.end();) {
    if (process != 0 && inferior_->group_of(*it) != process) {
      ++it;
      continue;
    }
    (void)take_queued(*it, is_step_trap, 1);
    it = stepped_.erase(it);
  }
}

void GdbTarget::drop_rewound_traps() {
  for (const auto& [tid, addr] : rewound_) (void)take_queued(tid, is_int3_trap, 1);
  rewound_.clear();
}

Result<void> GdbTarget::run_as_asked(pid_t tid) {
  Asked asked;
  if (auto it = deferred_.find(tid); it != deferred_.end()) {
    asked = it->second;
    deferred_.erase(it);
  } else if (stepping(tid)) {
    asked.step = true;
  }
  if (asked.step) begin_step(tid);
  const Resume how = asked.step ? Resume::kStep : run_mode(tid);
  if (auto r = inferior_->resume(tid, how, asked.signal);
      !r && r.error().code() != ErrorCode::kSrch) {
    return r;
  }
  return {};
}

Result<StopEvent> GdbTarget::exec_stop(pid_t tid, bool running) {
  // A new image: the int3s went with the old one (gdb's removals must not write the old bytes
  // into the new code), and so did the threads and their held traps and signals.
  int3_.erase(inferior_->process_of(tid));
  unplanted_.erase(inferior_->process_of(tid));
  lifted_.clear();
  rewound_.clear();
  pending_signal_.clear();
  deferred_.clear();
  // The session re-armed its watches in the new image and let the thread go on: it is stopped
  // again, a few instructions into the dynamic loader.
  if (non_stop_) {
    // Non-stop mode: the thread alone stops (the other processes' threads run on).
    if (running) {
      if (auto r = stop_only({tid}); !r) return std::unexpected(r.error());
    }
    if (auto r = stop_others(tid); !r) return std::unexpected(r.error());
  } else {
    auto stopped = running ? inferior_->stop_all() : inferior_->stop_all(tid);
    if (!stopped) return std::unexpected(stopped.error());
    stepping_ = 0;
    session_->set_stepping(0);
  }
  // Unless a watch let it run, the thread is still where execve returns (see resume()).
  if (!running) execve_return_ = tid;
  StopEvent stop = stop_of(Kind::kExec, tid);
  if (auto path = executable_path(inferior_->process_of(tid))) stop.exec_path = *path;
  return stop;
}

Result<StopEvent> GdbTarget::fork_stop(const Event& ev) {
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
  StopEvent stop = stop_of(Kind::kFork, ev.tid);
  stop.child = ev.child;
  stop.vfork = ev.vfork;
  if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
  return stop;
}

Result<void> GdbTarget::detach_process(gdb::Tid process) {
  // Non-stop mode: the other processes' threads run on after it.
  return with_all_stopped([&] { return detach_stopped(process); });
}

Result<void> GdbTarget::detach_stopped(gdb::Tid process) {
  if (auto r = inferior_->stop_all(); !r) return std::unexpected(r.error());
  if (auto r = flush_removed(); !r) return r;
  // A thread that hit an int3 just as stop_all interrupted it holds that SIGTRAP pending, not
  // reported yet (its interrupt's stop came first): each is made to surface and queued, for the
  // rewind below to take as the others.
  std::vector<pid_t> its;
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) == process) its.push_back(t);
  }
  if (auto r = surface_traps(its); !r) return r;
  // Its held int3 traps are no signals of the program (delivered, they would kill it).
  if (auto r = rewind_queued_traps(); !r) return r;
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) != process || !rewound_.contains(t)) continue;
    rewound_.erase(t);
    (void)take_queued(t, is_int3_trap);
  }
  // So is the trap of a step the server asked and did not report (a Ctrl-C's stop came first).
  drop_own_step_traps(process);
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
    unplanted_.erase(process);
  }
  const bool first = process == inferior_->pid();
  // The first process goes while a forked child stays (follow-fork-mode child): the session's
  // watches live in the first process (its breakpoints, its protected pages), the child's are
  // copies the session follows. They are taken out of both (the first process goes unwatched,
  // as the program made it) and put back once the child has taken the first one's place.
  std::vector<WatchInfo> moved;
  if (first) {
    const auto threads = inferior_->threads();
    const bool child_stays = std::any_of(threads.begin(), threads.end(), [&](pid_t t) {
      return inferior_->process_of(t) != process;
    });
    if (child_stays) moved = session_->watches();
  }
  for (const WatchInfo& w : moved) {
    if (auto r = session_->remove(w.id); !r) return r;
  }
  // The session's stops kept for it (a hit of the child the session had let run with its
  // watches, before the client's decision) would be delivered at the detach: its signals.
  session_->drop_own_stops(process);
  // A spawned program the client detached from runs on after the server ends.
  if (first && inferior_->spawned())
    ignore_error(inferior_->outlive_tracer(), "the detach goes on");
  requeue_program_signals(process);
  // The first process goes: its breakpoint requests (and those of children that inherited its
  // filter) are the continuer's to serve; a forked child's watches take no register.
  if (first) release_requests();
  if (auto r = inferior_->detach_process(process); !r) return r;
  forked_.erase(process);
  if (first) forked_.erase(inferior_->pid());  // the child that took its place
  pending_signal_.clear();
  if (!moved.empty() && inferior_->pid() != process) return insert_again(moved);
  return {};
}

Result<void> GdbTarget::rebuild_watches() {
  const std::vector<WatchInfo> all = session_->watches();
  if (all.empty()) return {};
  const WatchInfo& w = all.front();
  if (auto r = session_->remove(w.id); !r) return r;
  return insert_again({w});
}

Result<void> GdbTarget::insert_again(const std::vector<WatchInfo>& infos) {
  Result<void> first;
  for (const WatchInfo& w : infos) {
    auto again = session_->insert(w.spec);
    if (!again) {
      if (first) first = std::unexpected(again.error());
      continue;
    }
    renumber(w.id, again->id);
  }
  return first;
}

void GdbTarget::renumber(WatchId from, WatchId to) {
  for (auto& [key, id] : watches_) {
    if (id != from) continue;
    id = to;
    break;
  }
  if (auto type = watch_type_.find(from); type != watch_type_.end()) {
    const char t = type->second;
    watch_type_.erase(type);
    watch_type_[to] = t;
  }
}

Result<void> GdbTarget::kill_process(gdb::Tid process) {
  return with_all_stopped([&] { return kill_stopped(process); });
}

Result<void> GdbTarget::kill_stopped(gdb::Tid process) {
  if (auto r = inferior_->stop_all(); !r) return std::unexpected(r.error());
  std::vector<pid_t> tids;
  for (pid_t t : inferior_->threads()) {
    if (inferior_->group_of(t) == process) tids.push_back(t);
  }
  // The leader last: its end is reported once the others are reaped.
  std::stable_partition(tids.begin(), tids.end(), [&](pid_t t) { return t != process; });
  forked_.erase(process);
  if (inferior_->process_of(process) == process) {
    int3_.erase(process);
    unplanted_.erase(process);
  }
  if (auto r = send_signal(process, SIGKILL); !r) return r;
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
  return {};
}

Result<GdbTarget::Trap> GdbTarget::on_breakpoint_trap(const Event& ev) {
  auto regs = inferior_->get_regs(ev.tid);
  if (!regs && regs.error().code() == ErrorCode::kSrch) {
    // Killed since its trap was held (another thread's exit, a SIGKILL): no stop; its exit
    // comes next.
    rewound_.erase(ev.tid);
    return Trap{};
  }
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
      return Trap{};
    }
  } else {
    if (!int3s.contains(regs->rip - 1)) {
      // The trap of an int3 of ours taken out since it was hit (the kernel held its SIGTRAP
      // behind a stop_all's interrupt): the instruction is run for real, as the thread was asked
      // to run. An int3 of the program's own is still in its text.
      if (lifted_int3(regs->rip - 1)) {
        regs->rip -= 1;
        if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return std::unexpected(r.error());
        if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
        return Trap{};
      }
      return Trap{.ours = false, .stop = std::nullopt};
    }
    // Back onto the instruction, as a hardware breakpoint would stop.
    at = regs->rip - 1;
    regs->rip = at;
    if (auto r = inferior_->set_regs(ev.tid, *regs); !r) return std::unexpected(r.error());
  }
  if (!stepping(ev.tid) && !breakpoint_stops(ev.tid, int3s.at(at), true)) {
    if (auto r = step_over(ev.tid, at); !r) return std::unexpected(r.error());
    return Trap{};
  }
  deferred_.erase(ev.tid);
  const bool alone = stepping_ != 0 || non_stop_;
  if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
  // A step's stop is the stepping thread's; a continue's is drawn among the threads at breakpoints
  // (non-stop mode: each thread's stop is its own).
  const pid_t tid = alone ? ev.tid : pick_reported(ev.tid, at);
  if (tid != ev.tid) at = rewound_.extract(tid).mapped();
  StopEvent stop = stop_of(Kind::kBreakpoint, tid);
  const Int3Map& reported = int3_[inferior_->process_of(tid)];
  const auto point = reported.find(at);
  stop.point = point != reported.end() && !point->second.software ? gdb::PointType::kHardware
                                                                  : gdb::PointType::kSoftware;
  return Trap{.stop = stop};
}

bool GdbTarget::breakpoint_stops(pid_t tid, const Breakpoint& bp, bool run) {
  const auto plain = [](const gdb::PointAgent& a) {
    return a.conditions.empty() && a.commands.empty();
  };
  if ((bp.software && plain(bp.software_agent)) || (bp.hardware && plain(bp.hardware_agent))) {
    return true;
  }
  // A watch's own stops and faults would interleave with the step over the breakpoint: with
  // watches, gdb is told of every hit (and evaluates the conditions).
  if (!session_->watches().empty()) return true;
  const pid_t process = inferior_->process_of(tid);
  std::optional<gdb::Registers> regs;
  gdb::AgentAccess access;
  access.reg = [&](int regno) -> Result<std::uint64_t> {
    const bool ext = regno >= gdb::kGdbCoreRegisterCount;  // an AVX/AVX-512/PKU register
    if (!regs || (ext && regs->fp.ext.features == 0)) {
      auto got = read_registers(tid, ext);
      if (!got) return std::unexpected(got.error());
      regs = *got;
    }
    auto hex = gdb::gdb_read_register(regno, regs->regs, regs->fp);
    if (!hex) return std::unexpected(hex.error());
    auto bytes = gdb::from_hex(*hex);
    if (!bytes) return std::unexpected(bytes.error());
    std::uint64_t v = 0;
    for (std::size_t i = std::min<std::size_t>(bytes->size(), 8); i-- > 0;)
      v = (v << 8) | (*bytes)[i];
    return v;
  };
  // The program's bytes, not our int3s.
  const auto read = [&](std::uint64_t addr, std::span<std::uint8_t> out) -> Result<void> {
    if (auto r = inferior_->read_memory(addr, out, process); !r) return r;
    for (const auto& [at, b] : int3_[process]) {
      if (at >= addr && at - addr < out.size()) out[at - addr] = b.original;
    }
    return {};
  };
  access.memory = [&](std::uint64_t addr, int size) -> Result<std::uint64_t> {
    std::array<std::uint8_t, 8> bytes{};
    if (auto r = read(addr, std::span(bytes.data(), static_cast<std::size_t>(size))); !r) {
      return std::unexpected(r.error());
    }
    std::uint64_t v = 0;
    for (int i = size; i-- > 0;) v = (v << 8) | bytes[static_cast<std::size_t>(i)];
    return v;
  };
  access.string = [&](std::uint64_t addr) -> Result<std::string> {
    // A page at a time (to its end): a string that ends before an unmapped page is read whole,
    // one whose first page is unmapped is the read's error. At most kAgentStringMax bytes.
    std::string text;
    while (text.size() < kAgentStringMax) {
      const std::uint64_t at = addr + text.size();
      std::vector<std::uint8_t> chunk(
          std::min<std::uint64_t>(kAgentStringMax - text.size(), 4096 - (at & 4095)));
      if (auto r = read(at, chunk); !r) {
        if (text.empty()) return std::unexpected(r.error());
        break;  // the string runs to the end of the mapped memory
      }
      const auto nul = std::find(chunk.begin(), chunk.end(), 0);
      text.append(chunk.begin(), nul);
      if (nul != chunk.end()) break;
    }
    return text;
  };
  access.print = [&](std::string_view text) {
    ignore_error(write_all(connection_.output_fd(), text),
                 "dprintf output with nowhere to go is lost");
  };
  // Per type: whether a condition holds (none, or one true, or one in error: then gdb evaluates).
  const auto holds = [&](const gdb::PointAgent& a) {
    if (a.conditions.empty()) return true;
    for (const gdb::AgentExpr& c : a.conditions) {
      auto v = gdb::eval_agent_expr(c, access);
      if (!v || *v != 0) return true;
    }
    return false;
  };
  bool stops = false;
  for (const auto& [placed, agent] :
       {std::pair{bp.software, &bp.software_agent}, std::pair{bp.hardware, &bp.hardware_agent}}) {
    if (!placed || !holds(*agent)) continue;
    if (agent->commands.empty()) {
      stops = true;
      continue;
    }
    if (!run) continue;
    for (const gdb::AgentExpr& cmd : agent->commands) {
      // A command that fails (a string it cannot read, a format it refuses): gdb is told of the
      // stop, as a condition in error, and shows it there.
      if (auto r = gdb::run_agent_commands(cmd, access); !r) stops = true;
    }
  }
  return stops;
}

Result<void> GdbTarget::step_over(pid_t tid, std::uint64_t at) {
  const pid_t process = inferior_->process_of(tid);
  if (int3_[process].at(at).original == kInt3) {
    // A breakpoint over the program's own int3 (gdb's permanent breakpoint): run, that int3
    // would trap again at once, at the same breakpoint. The thread goes on past it, as gdb and
    // gdbserver skip a permanent breakpoint whose condition is false.
    auto regs = inferior_->get_regs(tid);
    if (!regs) return std::unexpected(regs.error());
    regs->rip = at + 1;
    if (auto r = inferior_->set_regs(tid, *regs); !r) return r;
    return run_as_asked(tid);
  }
  auto stopped = inferior_->stop_all(tid);
  if (!stopped) return std::unexpected(stopped.error());
  const std::uint8_t original = int3_[process].at(at).original;
  if (auto r = inferior_->write_memory(at, std::span(&original, 1), process); !r) return r;
  Result<Event> ev = make_error(ErrorCode::kSrch, "thread: gone");
  if (auto r = inferior_->resume(tid, Resume::kStep); r) {
    ev = inferior_->wait_for(tid);
  } else if (r.error().code() != ErrorCode::kSrch) {
    return r;
  }
  // The int3 goes back unless the step ended the image (an exec) or the breakpoint went.
  const bool exec = ev && ev->kind == EventKind::kExec;
  if (!exec && int3_[process].contains(at)) {
    if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&kInt3, 1), process);
        !r && r.error().code() != ErrorCode::kSrch) {
      return r;
    }
  }
  if (!ev) {
    if (ev.error().code() != ErrorCode::kSrch) return std::unexpected(ev.error());
  } else if (is_step_trap(*ev)) {
    if (auto r = run_as_asked(tid); !r) return r;
  } else {
    inferior_->requeue(*ev);  // handled by the main loop, as any event of the thread
  }
  for (pid_t t : *stopped) {
    if (!inferior_->is_stopped(t) || inferior_->has_queued(t)) continue;
    if (auto r = inferior_->resume_as_before(t); !r && r.error().code() != ErrorCode::kSrch) {
      return r;
    }
  }
  return {};
}

pid_t GdbTarget::pick_reported(pid_t tid, std::uint64_t at) {
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
    // A held trap at a breakpoint removed since is no stop either: it runs on when taken.
    if (bp == int3s.end() || !breakpoint_stops(ev.tid, bp->second, false)) continue;
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
  (void)take_queued(chosen, is_int3_trap, 1);
  Event held;
  held.kind = EventKind::kSignal;
  held.tid = tid;
  held.signal = SIGTRAP;
  held.code = kSiKernel;
  inferior_->requeue(held);
  rewound_[tid] = at;
  return chosen;
}

Result<std::optional<StopEvent>> GdbTarget::on_event(const Event& ev) {
  using Stop = std::optional<StopEvent>;
  if (log_) {
    log_("event: thread " + std::to_string(ev.tid) + " " + event_kind_name(ev.kind) +
         (ev.kind == EventKind::kSignal
              ? " signal " + std::to_string(ev.signal) + " code " + std::to_string(ev.code)
              : std::string()));
  }
  auto v = session_->handle(ev);
  if (!v) return std::unexpected(v.error());
  if (ev.kind == EventKind::kFork && !v->stopped && (ev.vfork ? vfork_events_ : fork_events_)) {
    auto stop = fork_stop(ev);
    if (!stop) return std::unexpected(stop.error());
    return Stop(*stop);
  }
  if (ev.kind == EventKind::kVforkDone) {
    // The vfork child execed or exited: its parent (resumed by the client after the vfork stop)
    // stops once more, as gdbserver's vforkdone.
    if (vfork_events_) {
      if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
      return Stop(stop_of(Kind::kVforkDone, ev.tid));
    }
    if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
    return Stop();
  }
  if (ev.kind == EventKind::kFork && (fork_events_ || vfork_events_)) {
    // Held for an event the client did not ask for: the parent runs on as asked, and so does
    // a child the session follows (it held it for the client's decision).
    if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
    if (v->handled && inferior_->is_stopped(ev.child)) {
      if (auto r = inferior_->resume(ev.child, run_mode(ev.child));
          !r && r.error().code() != ErrorCode::kSrch) {
        return std::unexpected(r.error());
      }
    }
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
    StopEvent stop = stop_of(Kind::kSignal, ev.tid);
    for (const WatchHit& h : v->hits) {
      const auto type = watch_type_.find(WatchId(h.id));
      const char t = type == watch_type_.end() ? '2' : type->second;
      stop.kind = Kind::kWatch;
      stop.point = point_of(t == '1' || t == '3' || t == '4' ? t : '2');
      stop.addr = h.addr;
      break;
    }
    if (v->signal != 0) pending_signal_[ev.tid] = v->signal;
    if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
    return Stop(stop);
  }
  // An exec of the first process, or of any the client follows (a forked or vforked child it
  // took a fork event of): a vforked child's exec is what ends its parent's vfork for gdb.
  if (ev.kind == EventKind::kExec &&
      (inferior_->process_of(ev.tid) == inferior_->pid() || fork_events_ || vfork_events_)) {
    auto stop = exec_stop(ev.tid, v->handled);
    if (!stop) return std::unexpected(stop.error());
    return Stop(*stop);
  }
  if (v->handled && !v->caller) return Stop();
  const Resume mode = run_mode(ev.tid);
  Result<void> step;
  switch (ev.kind) {
    case EventKind::kExited:
    case EventKind::kKilled: {
      StopEvent stop = stop_of(ev.kind == EventKind::kExited ? Kind::kExited : Kind::kKilled, 0,
                               ev.kind == EventKind::kKilled ? ev.signal : 0);
      stop.process = ev.tid;
      stop.status = ev.status;
      if (multiprocess_) {
        int3_.erase(ev.tid);
        unplanted_.erase(ev.tid);
        if (inferior_->adopt_followed()) {
          // A forked child the client keeps goes on: it is the first process now, stopped as
          // gdbserver stops every process at a stop it reports.
          forked_.erase(inferior_->pid());
          if (auto r = stop_others(-1); !r) return std::unexpected(r.error());
          stop.remains = true;
          stop.tid = inferior_->pid();
          return Stop(stop);
        }
      }
      exited_ = true;
      end_.exited = true;
      end_.status = ev.status;
      end_.signal = ev.kind == EventKind::kKilled ? ev.signal : 0;
      return Stop(stop);
    }
    case EventKind::kLeaderEnded:
    case EventKind::kThreadExit:
      if (ev.kind == EventKind::kThreadExit && forked_.erase(ev.tid) != 0) {
        // The end of a forked child the client keeps (the last of its threads).
        int3_.erase(ev.tid);
        unplanted_.erase(ev.tid);
        StopEvent stop = stop_of(ev.signal == 0 ? Kind::kExited : Kind::kKilled, 0, ev.signal);
        stop.process = ev.tid;
        stop.status = ev.status;
        stop.remains = true;
        if (auto r = stop_others(-1); !r) return std::unexpected(r.error());
        return Stop(stop);
      }
      if (non_stop_) {
        // Non-stop mode: the client hears of it (with QThreadEvents) as gdbserver tells it.
        stop_requested_.erase(ev.tid);
        if (steps_.erase(ev.tid) != 0) session_->set_stepping(steps_);
        stepped_.erase(ev.tid);
        step_accesses_.erase(ev.tid);
        StopEvent stop = stop_of(Kind::kThreadExited, ev.tid, 0);
        stop.status = ev.status;
        return Stop(stop);
      }
      // All-stop: the last thread the client resumed has ended (the others held, e.g. by
      // scheduler-locking), and nothing else is left to report: gdbserver's N. A thread that
      // is dying (killed from outside, its exit not read yet) is still there.
      if (no_resumed_) {
        inferior_->drop_ended_leaders();
        const std::vector<pid_t> live = inferior_->threads();
        const bool left = std::any_of(resumed_.begin(), resumed_.end(), [&](pid_t t) {
          return std::find(live.begin(), live.end(), t) != live.end();
        });
        if (!left && inferior_->queued_events().empty() && !inferior_->exit_due()) {
          if (auto r = stop_others(-1); !r) return std::unexpected(r.error());
          return Stop(stop_of(Kind::kNoResumed, ev.tid));
        }
      }
      return Stop();
    case EventKind::kSignal: {
      if (ev.signal == SIGTRAP && ev.code == kSiKernel) {
        // Not ours: an int3 of the program's own, reported below.
        auto trap = on_breakpoint_trap(ev);
        if (!trap) return std::unexpected(trap.error());
        if (trap->ours) return trap->stop;
      }
      if (is_step_trap(ev) && !stepping(ev.tid) && stepped_.erase(ev.tid) != 0) {
        // The trap of a step asked before the client resumed the thread otherwise (another
        // thread's stop held it): not reported, as gdbserver does not report it either.
        if (auto r = run_as_asked(ev.tid); !r) return std::unexpected(r.error());
        return Stop();
      }
      if (ev.signal == SIGTRAP && stepping(ev.tid) && ev.code != kSiKernel) {
        stepped_.erase(ev.tid);
        Stop stop = stepped_watch(ev.tid);
        if (!stop) {
          // Range stepping: a step that stays in the range and is at no breakpoint of the
          // client's goes on, unreported (gdbserver's range stepping).
          auto more = steps_on_in_range(ev.tid);
          if (!more) return std::unexpected(more.error());
          if (*more) return Stop();
        }
        if (!stop) stop = stop_of(Kind::kSignal, ev.tid);
        if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
        return stop;
      }
      // The program's own signal: reported; delivered when the client resumes with it.
      pending_signal_[ev.tid] = ev.signal;
      if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
      return Stop(stop_of(Kind::kSignal, ev.tid, ev.signal));
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
      step =
          ev.vfork ? inferior_->resume(ev.child, run_mode(ev.child)) : inferior_->release(ev.child);
      break;

    case EventKind::kSyscallEnter:
    case EventKind::kSyscallExit:
      if (catches(ev.syscall)) {
        // `catch syscall`: the stop gdb asked for, as gdbserver reports it.
        StopEvent stop = stop_of(
            ev.kind == EventKind::kSyscallEnter ? Kind::kSyscallEntry : Kind::kSyscallReturn,
            ev.tid);
        stop.syscall = ev.syscall;
        if (auto r = stop_others(ev.tid); !r) return std::unexpected(r.error());
        return Stop(stop);
      }
      // A stop held while the thread was left stopped: it runs now as the client asked.
      if (deferred_.contains(ev.tid)) {
        step = run_as_asked(ev.tid);
        break;
      }
      step = inferior_->resume(ev.tid, stepping(ev.tid) ? Resume::kStep : mode);
      break;
    case EventKind::kNewThread:
      // A thread created while the client runs only some threads (gdb stepping one thread
      // over a breakpoint it took out) stays stopped until the client resumes every thread:
      // run now, it could pass that breakpoint unseen. gdbserver leaves such a thread stopped.
      // Non-stop mode: reported (the client resumes it, or the server when the client did not
      // ask for thread events).
      if (non_stop_) return Stop(stop_of(Kind::kThreadCreated, ev.tid));
      if (!wildcard_process_ ||
          (*wildcard_process_ != 0 && *wildcard_process_ != inferior_->group_of(ev.tid))) {
        break;
      }
      step = inferior_->resume(ev.tid, mode);
      // It runs as its creator does: the N reply waits for its end too.
      resumed_.insert(ev.tid);
      break;
    default:
      step = inferior_->resume(ev.tid, stepping(ev.tid) ? Resume::kStep : mode);
      break;
  }
  if (!step && step.error().code() != ErrorCode::kSrch) return std::unexpected(step.error());
  return Stop();
}

}  // namespace hwarb::native

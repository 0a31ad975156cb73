#include "hwarb/linux/inferior.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/proc_maps.h"
#include "sys_error.h"

extern char** environ;

namespace hwarb::linux {
namespace {

using detail::sys_fail;

constexpr long kOptions = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                          PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD;
constexpr int kSyscallTrap = SIGTRAP | 0x80;

long raw_ptrace(long request, pid_t pid, std::uint64_t addr, std::uint64_t data) {
  return ::syscall(SYS_ptrace, request, static_cast<long>(pid), addr, data);
}

std::string tid_text(pid_t tid) {
  return "thread " + std::to_string(tid);
}

Result<void> ptrace_call(long request, const char* name, pid_t tid, std::uint64_t addr,
                         std::uint64_t data) {
  if (raw_ptrace(request, tid, addr, data) != 0) {
    const int err = errno;
    return sys_fail(err, "pid", std::string(name) + " of " + tid_text(tid));
  }
  return {};
}

int ptrace_event(int status) {
  return (status >> 16) & 0xffff;
}

// The thread group of `tid` (/proc/TID/status Tgid), or -1.
pid_t thread_group_of(pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::stol(line.substr(5)));
  }
  return -1;
}

// argv[0] resolved the way execvp would, so that a missing command is an error of the caller's
// process (ENOENT naming `command`) instead of an exit status 127 of the child.
Result<std::string> resolve_command(const std::string& name) {
  if (name.empty()) return make_error(ErrorCode::kInval, "command: empty");
  auto runnable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    const int err = errno != 0 ? errno : EACCES;
    return sys_fail<std::string>(err, "command", "'" + name + "' cannot be run");
  }
  const char* path = ::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (runnable(candidate)) return candidate;
    begin = end + 1;
  }
  return make_error(ErrorCode::kNoEnt, "command: '" + name + "' not found in PATH");
}

Error attach_error(int err, pid_t pid) {
  std::string why = "PTRACE_SEIZE of " + tid_text(pid);
  if (err == EPERM) {
    why +=
        " refused: the process is traced already (a debugger), belongs to another user, or "
        "/proc/sys/kernel/yama/ptrace_scope forbids attaching to a non-child";
  }
  return detail::sys_error(err, "pid", why);
}

}  // namespace

Inferior::Inferior(pid_t pid, bool spawned) : pid_(pid), spawned_(spawned) {}

Inferior::Inferior(Inferior&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      spawned_(other.spawned_),
      exited_(other.exited_),
      mem_(std::move(other.mem_)),
      threads_(std::move(other.threads_)),
      queued_(std::move(other.queued_)),
      children_(std::move(other.children_)),
      gadget_(other.gadget_) {
  other.threads_.clear();
}

Inferior& Inferior::operator=(Inferior&& other) noexcept {
  if (this != &other) {
    forget();
    pid_ = std::exchange(other.pid_, -1);
    spawned_ = other.spawned_;
    exited_ = other.exited_;
    mem_ = std::move(other.mem_);
    threads_ = std::move(other.threads_);
    queued_ = std::move(other.queued_);
    children_ = std::move(other.children_);
    gadget_ = other.gadget_;
    other.threads_.clear();
  }
  return *this;
}

Inferior::~Inferior() {
  forget();
}

void Inferior::forget() {
  if (pid_ <= 0) return;
  if (!exited_) {
    if (spawned_) {
      (void)kill();
    } else {
      (void)detach();
    }
  }
  for (auto& [child, unused] : children_) {
    (void)raw_ptrace(PTRACE_DETACH, child, 0, 0);
  }
  children_.clear();
  pid_ = -1;
}

Result<Inferior> Inferior::spawn(const std::vector<std::string>& argv,
                                 const InferiorOptions& options) {
  if (argv.empty()) return make_error(ErrorCode::kInval, "command: no command given");
  auto path = resolve_command(argv[0]);
  if (!path) return std::unexpected(path.error());
  // Everything the child needs is built before fork: the child only makes system calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail<Inferior>(errno, "command", "fork");
  if (pid == 0) {
    if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, 1);
    if (options.disable_aslr) {
      const long current = ::syscall(SYS_personality, 0xffffffffUL);
      if (current != -1)
        ::syscall(SYS_personality, static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE);
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_UNBLOCK, &chld, nullptr);  // wait_or_poll may have blocked it in hwarb
    ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);
    ::execve(path->c_str(), args.data(), environ);
    ::_exit(127);
  }
  Inferior inferior(pid, true);
  int status = 0;
  if (::waitpid(pid, &status, WSTOPPED) != pid || !WIFSTOPPED(status)) {
    inferior.pid_ = -1;
    return make_error(ErrorCode::kIo, "command: the child did not stop before exec");
  }
  const long options_bits = kOptions | (options.kill_on_exit ? PTRACE_O_EXITKILL : 0);
  if (raw_ptrace(PTRACE_SEIZE, pid, 0, static_cast<std::uint64_t>(options_bits)) != 0) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    inferior.pid_ = -1;
    return std::unexpected(attach_error(err, pid));
  }
  inferior.threads_[pid] = Thread{};
  ::kill(pid, SIGCONT);
  // Until the exec stop: the SIGCONT and the group-stop reports are job control, not the
  // program's; they are suppressed.
  for (;;) {
    if (::waitpid(pid, &status, __WALL) != pid) {
      return sys_fail<Inferior>(errno, "command", "waitpid before exec");
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      inferior.exited_ = true;
      return make_error(ErrorCode::kNoEnt, "command: '" + argv[0] +
                                               "' exited before it could be traced (exec failed)");
    }
    if (ptrace_event(status) == PTRACE_EVENT_EXEC) break;
    if (raw_ptrace(PTRACE_CONT, pid, 0, 0) != 0) {
      return sys_fail<Inferior>(errno, "pid", "PTRACE_CONT before exec");
    }
  }
  Thread& t = inferior.threads_[pid];
  t.stopped = true;
  t.stop = StopKind::kEvent;
  if (auto mem = inferior.open_mem(); !mem) return std::unexpected(mem.error());
  if (auto r = inferior.leave_exec_stop(pid); !r) return std::unexpected(r.error());
  return inferior;
}

Result<Inferior> Inferior::attach(pid_t pid, const InferiorOptions&) {
  if (pid <= 0) return make_error(ErrorCode::kInval, "pid: must be positive");
  if (pid == ::getpid()) return make_error(ErrorCode::kInval, "pid: hwarb cannot trace itself");
  if (thread_group_of(pid) != pid) {
    return make_error(ErrorCode::kSrch, "pid: no process " + std::to_string(pid) +
                                            " (or it is a thread: give its process id)");
  }
  Inferior inferior(pid, false);
  // Seize until no thread appears unseized: a thread created between the listing and the seize
  // of its creator is caught by the next listing (or by TRACECLONE once the creator is seized).
  for (bool more = true; more;) {
    more = false;
    auto tids = list_threads(pid);
    if (!tids) {
      if (inferior.threads_.empty()) return std::unexpected(tids.error());
      break;
    }
    for (pid_t tid : *tids) {
      if (inferior.threads_.contains(tid)) continue;
      if (raw_ptrace(PTRACE_SEIZE, tid, 0, static_cast<std::uint64_t>(kOptions)) != 0) {
        const int err = errno;
        if (err == ESRCH && !inferior.threads_.empty()) continue;  // exited meanwhile
        return std::unexpected(attach_error(err, tid));
      }
      inferior.threads_[tid] = Thread{};
      more = true;
    }
  }
  if (auto mem = inferior.open_mem(); !mem) return std::unexpected(mem.error());
  if (auto s = inferior.stop_all(); !s) return std::unexpected(s.error());
  return inferior;
}

Result<void> Inferior::leave_exec_stop(pid_t tid) {
  // The exec stop is inside execve: the call's return value would overwrite rax after any
  // resume, so nothing can be injected there. One single-step completes the call and runs the
  // new image's first instruction, leaving the thread in an ordinary SIGTRAP stop.
  Thread* t = thread(tid);
  for (;;) {
    if (auto r = ptrace_call(PTRACE_SINGLESTEP, "PTRACE_SINGLESTEP", tid, 0, 0); !r) return r;
    auto status = wait_stop(tid);
    if (!status) return std::unexpected(status.error());
    if (!WIFSTOPPED(*status)) {
      return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " ended at its exec");
    }
    const int sig = WSTOPSIG(*status);
    if (sig == SIGTRAP && ptrace_event(*status) == 0) break;
    if (ptrace_event(*status) == 0 && sig != kSyscallTrap) t->kept_signal = sig;
  }
  t->stopped = true;
  t->stop = StopKind::kSignal;
  t->stop_signal = SIGTRAP;
  return {};
}

Result<void> Inferior::open_mem() {
  const std::string path = "/proc/" + std::to_string(pid_) + "/mem";
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return sys_fail(errno, "pid", "open " + path);
  mem_.reset(fd);
  return {};
}

std::vector<pid_t> Inferior::threads() const {
  std::vector<pid_t> out;
  for (const auto& [tid, unused] : threads_) out.push_back(tid);
  return out;
}

bool Inferior::is_stopped(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.stopped;
}

Inferior::Thread* Inferior::thread(pid_t tid) {
  if (auto it = threads_.find(tid); it != threads_.end()) return &it->second;
  if (auto it = children_.find(tid); it != children_.end()) return &it->second;
  return nullptr;
}

Result<void> Inferior::read_memory(std::uint64_t addr, std::span<std::uint8_t> out, pid_t process) {
  Fd other;
  int fd = mem_.get();
  if (process != 0 && process != pid_) {
    const std::string path = "/proc/" + std::to_string(process) + "/mem";
    other.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!other) return sys_fail(errno, "pid", "open " + path);
    fd = other.get();
  }
  const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(addr));
  if (n != static_cast<ssize_t>(out.size())) {
    return sys_fail(n < 0 ? errno : EFAULT, "addr",
                    "read of " + std::to_string(out.size()) + " bytes at " + hex(addr));
  }
  return {};
}

Result<void> Inferior::write_memory(std::uint64_t addr, std::span<const std::uint8_t> data,
                                    pid_t process) {
  Fd other;
  int fd = mem_.get();
  if (process != 0 && process != pid_) {
    const std::string path = "/proc/" + std::to_string(process) + "/mem";
    other.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!other) return sys_fail(errno, "pid", "open " + path);
    fd = other.get();
  }
  const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(addr));
  if (n != static_cast<ssize_t>(data.size())) {
    return sys_fail(n < 0 ? errno : EFAULT, "addr",
                    "write of " + std::to_string(data.size()) + " bytes at " + hex(addr));
  }
  return {};
}

Result<x86::Insn> Inferior::decode_at(std::uint64_t addr) {
  std::uint8_t code[15] = {};
  std::size_t have = sizeof(code);
  while (have > 0 && !read_memory(addr, std::span(code, have))) --have;
  return x86::decode(std::span<const std::uint8_t>(code, have), addr);
}

Result<std::uint64_t> Inferior::read_word(std::uint64_t addr, int size) {
  if (size < 1 || size > 8) return make_error(ErrorCode::kInval, "size: must be 1..8");
  std::uint8_t bytes[8] = {};
  if (auto r = read_memory(addr, std::span(bytes, static_cast<std::size_t>(size))); !r) {
    return std::unexpected(r.error());
  }
  std::uint64_t value = 0;
  std::memcpy(&value, bytes, static_cast<std::size_t>(size));
  return value;
}

Result<x86::Regs> Inferior::get_regs(pid_t tid) {
  x86::Regs regs{};
  iovec io{&regs, sizeof(regs)};
  if (raw_ptrace(PTRACE_GETREGSET, tid, 1 /* NT_PRSTATUS */,
                 reinterpret_cast<std::uint64_t>(&io)) != 0) {
    return sys_fail<x86::Regs>(errno, "pid", "PTRACE_GETREGSET of " + tid_text(tid));
  }
  return regs;
}

Result<void> Inferior::set_regs(pid_t tid, const x86::Regs& regs) {
  x86::Regs copy = regs;
  iovec io{&copy, sizeof(copy)};
  return ptrace_call(PTRACE_SETREGSET, "PTRACE_SETREGSET", tid, 1 /* NT_PRSTATUS */,
                     reinterpret_cast<std::uint64_t>(&io));
}

Result<std::uint64_t> Inferior::find_gadget() {
  if (gadget_) return *gadget_;
  auto maps = read_maps(pid_);
  if (!maps) return std::unexpected(maps.error());
  std::vector<std::uint8_t> chunk;
  for (const Mapping& m : *maps) {
    if (!m.exec || m.path == "[vsyscall]") continue;
    for (std::uint64_t at = m.start; at < m.end; at += 65536) {
      const std::uint64_t n = std::min<std::uint64_t>(65536 + 1, m.end - at);
      chunk.resize(n);
      if (!read_memory(at, chunk)) break;
      for (std::size_t i = 0; i + 1 < chunk.size(); ++i) {
        if (chunk[i] == 0x0f && chunk[i + 1] == 0x05) {
          gadget_ = at + i;
          return *gadget_;
        }
      }
    }
  }
  return make_error(ErrorCode::kNoEnt,
                    "text: no `syscall` instruction in the process's executable mappings");
}

Result<int> Inferior::wait_stop(pid_t tid) {
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(tid, &status, __WALL);
    if (got == tid) return status;
    if (got < 0 && errno == EINTR) continue;
    return sys_fail<int>(errno, "pid", "waitpid of " + tid_text(tid));
  }
}

Result<std::int64_t> Inferior::inject_syscall(pid_t tid, long nr,
                                              std::array<std::uint64_t, 6> args) {
  Thread* t = thread(tid);
  if (t == nullptr || !t->stopped) {
    return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " is not in a stop");
  }
  auto saved = get_regs(tid);
  if (!saved) return std::unexpected(saved.error());
  x86::Regs regs = *saved;
  auto set_args = [&](x86::Regs& r) {
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
  };
  // Resumes with `request` until the next syscall stop; signals that arrive meanwhile are kept
  // (the last one wins; Linux coalesces standard signals the same way) and suppressed now.
  auto run_to_syscall_stop = [&](long request) -> Result<void> {
    for (;;) {
      if (auto r = ptrace_call(request, "PTRACE_SYSCALL", tid, 0, 0); !r) return r;
      auto status = wait_stop(tid);
      if (!status) return std::unexpected(status.error());
      if (!WIFSTOPPED(*status)) {
        return make_error(ErrorCode::kSrch,
                          "pid: " + tid_text(tid) + " ended during a system call");
      }
      const int sig = WSTOPSIG(*status);
      if (sig == kSyscallTrap) return {};
      if (ptrace_event(*status) == 0 && sig != SIGTRAP) t->kept_signal = sig;
    }
  };
  Result<std::int64_t> result = 0;
  switch (t->stop) {
    case StopKind::kSyscallEnter: {
      // Case 1: turn this entry into `nr`, then rewind to re-enter the original call.
      regs.orig_rax = static_cast<std::uint64_t>(nr);
      set_args(regs);
      if (auto r = set_regs(tid, regs); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(PTRACE_SYSCALL); !r) return std::unexpected(r.error());
      auto after = get_regs(tid);
      if (!after) return std::unexpected(after.error());
      result = static_cast<std::int64_t>(after->rax);
      x86::Regs again = *saved;
      again.rip -= 2;
      again.rax = saved->orig_rax;
      if (auto r = set_regs(tid, again); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(PTRACE_SYSCALL); !r) return std::unexpected(r.error());
      break;
    }
    case StopKind::kSyscallExit: {
      // Case 2: rewind to the `syscall` instruction with `nr`, run it, restore the result of
      // the original call.
      regs.rip -= 2;
      regs.rax = static_cast<std::uint64_t>(nr);
      set_args(regs);
      if (auto r = set_regs(tid, regs); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(PTRACE_SYSCALL); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(PTRACE_SYSCALL); !r) return std::unexpected(r.error());
      auto after = get_regs(tid);
      if (!after) return std::unexpected(after.error());
      result = static_cast<std::int64_t>(after->rax);
      if (auto r = set_regs(tid, *saved); !r) return std::unexpected(r.error());
      break;
    }
    case StopKind::kSignal:
    case StopKind::kEvent:
    case StopKind::kNone: {
      // Case 3: single-step a `syscall` instruction of the process's text. orig_rax = -1 so
      // the kernel does not apply syscall-restart rules to the injected call.
      auto gadget = find_gadget();
      if (!gadget) return std::unexpected(gadget.error());
      regs.rip = *gadget;
      regs.rax = static_cast<std::uint64_t>(nr);
      regs.orig_rax = ~0ULL;
      set_args(regs);
      if (auto r = set_regs(tid, regs); !r) return std::unexpected(r.error());
      for (;;) {
        if (auto r = ptrace_call(PTRACE_SINGLESTEP, "PTRACE_SINGLESTEP", tid, 0, 0); !r) {
          return std::unexpected(r.error());
        }
        auto status = wait_stop(tid);
        if (!status) return std::unexpected(status.error());
        if (!WIFSTOPPED(*status)) {
          return make_error(ErrorCode::kSrch,
                            "pid: " + tid_text(tid) + " ended during an injected system call");
        }
        const int sig = WSTOPSIG(*status);
        auto now = get_regs(tid);
        if (!now) return std::unexpected(now.error());
        if (sig == SIGTRAP && now->rip == *gadget + 2) {
          result = static_cast<std::int64_t>(now->rax);
          break;
        }
        if (ptrace_event(*status) == 0 && sig != SIGTRAP) t->kept_signal = sig;
      }
      if (auto r = set_regs(tid, *saved); !r) return std::unexpected(r.error());
      t->stop = StopKind::kSignal;
      t->stop_signal = SIGTRAP;
      break;
    }
  }
  return result;
}

Result<void> Inferior::resume(pid_t tid, Resume how, int signal) {
  Thread* t = thread(tid);
  if (t == nullptr || !t->stopped) {
    return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " is not in a stop");
  }
  int deliver = signal;
  if (t->kept_signal != 0) {
    // A signal kept from an injected call: delivered directly from a signal-delivery-stop (when
    // the caller passes none), else re-raised for the thread.
    if (t->stop == StopKind::kSignal && deliver == 0) {
      deliver = t->kept_signal;
    } else {
      ::syscall(SYS_tgkill, pid_, tid, t->kept_signal);
    }
    t->kept_signal = 0;
  }
  if (t->stop != StopKind::kSignal) deliver = 0;  // only a signal-delivery-stop injects
  const long request = how == Resume::kCont   ? PTRACE_CONT
                       : how == Resume::kStep ? PTRACE_SINGLESTEP
                                              : PTRACE_SYSCALL;
  if (auto r = ptrace_call(request, "resume", tid, 0, static_cast<std::uint64_t>(deliver)); !r) {
    return r;
  }
  t->stopped = false;
  t->stop = StopKind::kNone;
  t->last = how;
  return {};
}

Result<void> Inferior::resume_all(Resume how) {
  for (auto& [tid, t] : threads_) {
    if (!t.stopped) continue;
    if (auto r = resume(tid, how); !r) return r;
  }
  return {};
}

Result<std::optional<Event>> Inferior::next_event(bool block, bool& idle) {
  idle = false;
  if (!queued_.empty()) {
    Event ev = queued_.front();
    queued_.pop_front();
    return ev;
  }
  if (exited_) return make_error(ErrorCode::kSrch, "pid: the process has exited");
  int status = 0;
  const pid_t tid = ::waitpid(-1, &status, __WALL | (block ? 0 : WNOHANG));
  if (tid < 0) {
    const int err = errno;
    return sys_fail<std::optional<Event>>(err, "pid", "waitpid for the traced threads");
  }
  if (tid == 0) {
    idle = true;
    return std::optional<Event>();
  }
  return translate(tid, status);
}

Result<Event> Inferior::wait() {
  for (;;) {
    bool idle = false;
    auto ev = next_event(true, idle);
    if (!ev) return std::unexpected(ev.error());
    if (*ev) return **ev;
  }
}

namespace {

// The signalfd through which wait_or_poll learns of child status changes (see the header). Made
// once per process; SIGCHLD stays blocked in the thread that made it.
Result<int> sigchld_fd() {
  static const Result<int> fd = []() -> Result<int> {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
      return sys_fail<int>(EINVAL, "sigchld", "pthread_sigmask(SIG_BLOCK, SIGCHLD)");
    }
    const int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) return sys_fail<int>(errno, "sigchld", "signalfd(SIGCHLD)");
    return fd;
  }();
  return fd;
}

}  // namespace

Result<std::optional<Event>> Inferior::wait_or_poll(std::span<const int> fds, int timeout_ms) {
  auto sigfd = sigchld_fd();
  if (!sigfd) return std::unexpected(sigfd.error());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  std::vector<pollfd> pfds;
  pfds.reserve(fds.size() + 1);
  for (;;) {
    // The notification first, then the statuses: a SIGCHLD arriving after the waitpid keeps the
    // signalfd readable, so none is missed.
    signalfd_siginfo info;
    while (::read(*sigfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    }
    bool idle = false;
    auto ev = next_event(false, idle);
    if (!ev) return ev;
    if (*ev) return ev;
    if (!idle) continue;  // a status that made no event
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::optional<Event>();
      wait_ms = static_cast<int>(left.count());
    }
    pfds.clear();
    pfds.push_back(pollfd{*sigfd, POLLIN, 0});
    for (int fd : fds) pfds.push_back(pollfd{fd, POLLIN, 0});
    const int r = ::poll(pfds.data(), pfds.size(), wait_ms);
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) return make_error(ErrorCode::kIntr, "pid: interrupted");
      return sys_fail<std::optional<Event>>(err, "fds", "poll");
    }
    if (r == 0) return std::optional<Event>();
    for (std::size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) return std::optional<Event>();
    }
  }
}

Result<std::optional<Event>> Inferior::translate(pid_t tid, int status) {
  if (auto it = children_.find(tid); it != children_.end()) {
    // A forked child the caller has not released yet: its stops wait for release().
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      children_.erase(it);
    } else {
      it->second.stopped = true;
    }
    return std::optional<Event>();
  }
  Thread* t = thread(tid);
  if (t == nullptr) {
    if (WIFEXITED(status) || WIFSIGNALED(status)) return std::optional<Event>();
    // A first stop of a task not seen yet: a new thread of this process, or a forked child
    // whose parent's fork event has not been read yet.
    if (thread_group_of(tid) == pid_) {
      Thread& fresh = threads_[tid];
      fresh.stopped = true;
      fresh.stop = StopKind::kEvent;
      Event ev;
      ev.kind = EventKind::kNewThread;
      ev.tid = tid;
      return std::optional<Event>(ev);
    }
    Thread& early = children_[tid];
    early.stopped = true;
    early.stop = StopKind::kEvent;
    return std::optional<Event>();
  }
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    const bool vfork_child = t->vfork_child;
    threads_.erase(tid);
    Event ev;
    ev.tid = tid;
    if (WIFEXITED(status)) {
      ev.status = WEXITSTATUS(status);
    } else {
      ev.signal = WTERMSIG(status);
    }
    if (tid == pid_ && !vfork_child) {
      exited_ = true;
      ev.kind = WIFEXITED(status) ? EventKind::kExited : EventKind::kKilled;
      threads_.clear();
    } else {
      ev.kind = EventKind::kThreadExit;
    }
    return std::optional<Event>(ev);
  }
  if (!WIFSTOPPED(status)) return std::optional<Event>();
  t->stopped = true;
  const int sig = WSTOPSIG(status);
  const int event = ptrace_event(status);
  Event ev;
  ev.tid = tid;
  if (sig == kSyscallTrap) {
    __ptrace_syscall_info info{};
    if (raw_ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof(info),
                   reinterpret_cast<std::uint64_t>(&info)) <= 0) {
      return sys_fail<std::optional<Event>>(errno, "pid", "PTRACE_GET_SYSCALL_INFO");
    }
    if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
      t->stop = StopKind::kSyscallEnter;
      ev.kind = EventKind::kSyscallEnter;
      ev.syscall = static_cast<long>(info.entry.nr);
      for (int i = 0; i < 6; ++i) ev.args[static_cast<std::size_t>(i)] = info.entry.args[i];
    } else {
      t->stop = StopKind::kSyscallExit;
      ev.kind = EventKind::kSyscallExit;
      ev.ret = info.exit.rval;
      auto regs = get_regs(tid);
      if (regs) ev.syscall = static_cast<long>(regs->orig_rax);
    }
    return std::optional<Event>(ev);
  }
  switch (event) {
    case PTRACE_EVENT_CLONE: {
      t->stop = StopKind::kEvent;
      if (auto r = resume(tid, t->last); !r) return std::unexpected(r.error());
      return std::optional<Event>();
    }
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK: {
      t->stop = StopKind::kEvent;
      unsigned long child = 0;
      if (raw_ptrace(PTRACE_GETEVENTMSG, tid, 0, reinterpret_cast<std::uint64_t>(&child)) != 0) {
        return sys_fail<std::optional<Event>>(errno, "pid", "PTRACE_GETEVENTMSG");
      }
      const auto cpid = static_cast<pid_t>(child);
      if (!children_.contains(cpid)) {
        auto st = wait_stop(cpid);
        if (!st) return std::unexpected(st.error());
      }
      children_.erase(cpid);
      ev.kind = EventKind::kFork;
      ev.child = cpid;
      ev.vfork = event == PTRACE_EVENT_VFORK;
      if (ev.vfork) {
        Thread& c = threads_[cpid];
        c.stopped = true;
        c.stop = StopKind::kEvent;
        c.vfork_child = true;
      } else {
        Thread& c = children_[cpid];
        c.stopped = true;
        c.stop = StopKind::kEvent;
      }
      if (auto r = resume(tid, t->last); !r) return std::unexpected(r.error());
      return std::optional<Event>(ev);
    }
    case PTRACE_EVENT_EXEC: {
      t->stop = StopKind::kEvent;
      if (t->vfork_child) {
        (void)raw_ptrace(PTRACE_DETACH, tid, 0, 0);
        threads_.erase(tid);
        ev.kind = EventKind::kThreadExit;
        return std::optional<Event>(ev);
      }
      // The exec'ing thread takes the leader's id; every other thread is gone.
      Thread leader = *t;
      threads_.clear();
      threads_[pid_] = leader;
      gadget_.reset();
      if (auto m = open_mem(); !m) return std::unexpected(m.error());
      if (auto r = leave_exec_stop(pid_); !r) return std::unexpected(r.error());
      ev.kind = EventKind::kExec;
      ev.tid = pid_;
      return std::optional<Event>(ev);
    }
    case PTRACE_EVENT_STOP: {
      siginfo_t info{};
      if (raw_ptrace(PTRACE_GETSIGINFO, tid, 0, reinterpret_cast<std::uint64_t>(&info)) != 0 &&
          errno == EINVAL) {
        // A group-stop: keep job control (the thread stays stopped until SIGCONT).
        t->stopped = false;
        t->stop = StopKind::kNone;
        (void)raw_ptrace(PTRACE_LISTEN, tid, 0, 0);
        return std::optional<Event>();
      }
      // An interrupt nobody waits for any more (it stayed pending across another stop).
      t->interrupt_pending = false;
      t->stop = StopKind::kEvent;
      if (auto r = resume(tid, t->last); !r) return std::unexpected(r.error());
      return std::optional<Event>();
    }
    default:
      break;
  }
  // A signal-delivery-stop.
  t->stop = StopKind::kSignal;
  t->stop_signal = sig;
  siginfo_t info{};
  if (raw_ptrace(PTRACE_GETSIGINFO, tid, 0, reinterpret_cast<std::uint64_t>(&info)) == 0) {
    ev.code = info.si_code;
    ev.fault_addr = reinterpret_cast<std::uint64_t>(info.si_addr);
  }
  ev.kind = EventKind::kSignal;
  ev.signal = sig;
  return std::optional<Event>(ev);
}

Result<std::vector<pid_t>> Inferior::stop_all(pid_t except) {
  return stop_threads(except);
}

Result<void> Inferior::resume_as_before(pid_t tid) {
  Thread* t = thread(tid);
  if (t == nullptr) return make_error(ErrorCode::kSrch, "pid: no " + tid_text(tid));
  return resume(tid, t->last);
}

std::vector<Event> Inferior::discard_queued(pid_t tid) {
  std::vector<Event> out;
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (it->tid == tid) {
      out.push_back(*it);
      it = queued_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

Result<Event> Inferior::wait_for(pid_t tid) {
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    if (it->tid == tid) {
      Event ev = *it;
      queued_.erase(it);
      return ev;
    }
  }
  for (;;) {
    auto status = wait_stop(tid);
    if (!status) return std::unexpected(status.error());
    auto ev = translate(tid, *status);
    if (!ev) return std::unexpected(ev.error());
    if (*ev) return **ev;
  }
}

namespace {

// Signals pending for the thread (its own and the process's) and not blocked by it, from
// /proc/PID/task/TID/status (bit n-1 for signal n).
Result<std::uint64_t> deliverable_signals(pid_t pid, pid_t tid) {
  const std::string path =
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status";
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kSrch, "tid: " + path + " is gone");
  std::uint64_t pending = 0, blocked = 0;
  std::string line;
  while (std::getline(in, line)) {
    const bool own = line.rfind("SigPnd:", 0) == 0;
    const bool shared = line.rfind("ShdPnd:", 0) == 0;
    const bool block = line.rfind("SigBlk:", 0) == 0;
    if (!own && !shared && !block) continue;
    const std::uint64_t bits = std::strtoull(line.c_str() + 7, nullptr, 16);
    if (block) {
      blocked = bits;
    } else {
      pending |= bits;
    }
  }
  return pending & ~blocked;
}

}  // namespace

Result<std::vector<Event>> Inferior::surface_pending(pid_t tid, std::uint64_t mask) {
  std::vector<Event> out;
  for (const Event& ev : queued_) {
    // Resuming would suppress the signal of that stop: the caller's to handle first.
    if (ev.tid == tid && ev.kind == EventKind::kSignal) return out;
  }
  // Each round reports one signal; a thread has at most 64 kinds pending.
  for (int round = 0; round < 64; ++round) {
    auto pending = deliverable_signals(pid_, tid);
    if (!pending) return std::unexpected(pending.error());
    if ((*pending & mask) == 0) break;
    if (auto r = resume(tid, Resume::kCont); !r) return std::unexpected(r.error());
    auto ev = wait_for(tid);
    if (!ev) return std::unexpected(ev.error());
    if (ev->kind != EventKind::kSignal) {
      requeue(*ev);  // the thread ended, or stopped for something else: the caller's to handle
      break;
    }
    out.push_back(*ev);
  }
  return out;
}

Result<std::vector<pid_t>> Inferior::stop_threads(pid_t except) {
  std::vector<pid_t> waiting;
  std::vector<pid_t> stopped;
  for (auto& [tid, t] : threads_) {
    if (tid == except || t.stopped) continue;
    if (raw_ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
      if (errno == ESRCH) continue;
      return sys_fail<std::vector<pid_t>>(errno, "pid", "PTRACE_INTERRUPT of " + tid_text(tid));
    }
    t.interrupt_pending = true;
    waiting.push_back(tid);
  }
  for (pid_t tid : waiting) {
    for (;;) {
      Thread* t = thread(tid);
      if (t == nullptr || t->stopped) break;
      auto status = wait_stop(tid);
      if (!status) {
        if (status.error().code() == ErrorCode::kChild) {
          threads_.erase(tid);
          break;
        }
        return std::unexpected(status.error());
      }
      if (WIFSTOPPED(*status) && ptrace_event(*status) == PTRACE_EVENT_STOP) {
        siginfo_t info{};
        const bool group =
            raw_ptrace(PTRACE_GETSIGINFO, tid, 0, reinterpret_cast<std::uint64_t>(&info)) != 0 &&
            errno == EINVAL;
        if (!group || t->interrupt_pending) {
          // Our interrupt (a group-stop is as good a stop as any while we hold the threads).
          t->stopped = true;
          t->stop = StopKind::kEvent;
          t->interrupt_pending = false;
          stopped.push_back(tid);
          break;
        }
      }
      auto ev = translate(tid, *status);
      if (!ev) return std::unexpected(ev.error());
      if (*ev) queued_.push_back(**ev);
      if (exited_) return stopped;
    }
  }
  return stopped;
}

Result<void> Inferior::release(pid_t child) {
  if (!children_.contains(child)) {
    return make_error(ErrorCode::kSrch, "pid: " + std::to_string(child) + " is not a forked child");
  }
  children_.erase(child);
  return ptrace_call(PTRACE_DETACH, "PTRACE_DETACH", child, 0, 0);
}

Result<void> Inferior::detach() {
  if (pid_ <= 0 || exited_) return {};
  if (auto s = stop_all(); !s) return std::unexpected(s.error());
  // Signals the caller has not handled yet go to the threads as they leave.
  std::map<pid_t, int> pending;
  for (const Event& ev : queued_) {
    if (ev.kind == EventKind::kSignal) pending[ev.tid] = ev.signal;
  }
  queued_.clear();
  Result<void> first;
  for (auto& [tid, t] : threads_) {
    int sig = pending.contains(tid) ? pending[tid] : 0;
    if (sig == 0 && t.kept_signal != 0) sig = t.kept_signal;
    if (t.stop != StopKind::kSignal && sig != 0) {
      ::syscall(SYS_tgkill, pid_, tid, sig);
      sig = 0;
    }
    if (raw_ptrace(PTRACE_DETACH, tid, 0, static_cast<std::uint64_t>(sig)) != 0 && first &&
        errno != ESRCH) {
      first = sys_fail(errno, "pid", "PTRACE_DETACH of " + tid_text(tid));
    }
  }
  threads_.clear();
  exited_ = true;
  return first;
}

Result<void> Inferior::kill() {
  if (pid_ <= 0 || exited_) return {};
  ::kill(pid_, SIGKILL);
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(-1, &status, __WALL);
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (got == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) break;
  }
  threads_.clear();
  exited_ = true;
  return {};
}

}  // namespace hwarb::linux

#include "hwarb/linux/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/linux/signals.h"
#include "sys_error.h"

extern char** environ;

namespace hwarb::native {
namespace {

using detail::sys_fail;

// The spawned child until its execve: async-signal-safe calls only, on what spawn_stopped built
// before the fork.
[[noreturn]] void exec_child(pid_t parent, const char* path, char* const* argv, char* const* envp,
                             const SpawnOptions& options) {
  // A parent that dies before it seized and continued the child (hwarb killed at start-up) must
  // not leave it stopped: it dies too (also when the parent died before this call).
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
  if (::syscall(SYS_getppid) != parent) ::_exit(127);
  if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, 1);
  if (options.disable_aslr) {
    const long current = ::syscall(SYS_personality, 0xffffffffUL);
    if (current != -1) {
      ::syscall(SYS_personality, static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE);
    }
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_UNBLOCK, &chld, nullptr);
  if (options.own_process_group) ::setpgid(0, 0);
  if (options.working_directory && ::chdir(options.working_directory->c_str()) != 0) ::_exit(127);
  // The actions the caller set to SIG_IGN for itself go back to the default (an ignored action
  // would outlive the execve).
  const std::uint64_t ignored = signals_ignored_here();
  for (int sig = 1; sig <= 64; ++sig) {
    if ((ignored >> (sig - 1) & 1) != 0) ::signal(sig, SIG_DFL);
  }
  // raise(SIGSTOP): the child has one thread, so its pid is the thread's id.
  ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);
  // Continued: the parent has it traced. A program that must outlive it drops the signal now.
  if (!options.die_with_parent) ::syscall(SYS_prctl, PR_SET_PDEATHSIG, 0L, 0L, 0L, 0L);
  ::execve(path, argv, envp);
  ::_exit(127);
}

// The gated child: raw system calls only (see stopped_child.cpp). Waits for one byte on `go`,
// then runs `body` and exits.
[[noreturn]] void gated_child(pid_t parent, int go, int go_write_end, void (*body)()) {
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
  if (::syscall(SYS_getppid) != parent) ::syscall(SYS_exit_group, kGatedOrphaned);
  // Without the write end, a parent that gives up closes the pipe and read returns 0.
  ::syscall(SYS_close, go_write_end);
  char byte = 0;
  long n = -1;
  do {
    n = ::syscall(SYS_read, go, &byte, 1L);
  } while (n < 0 && errno == EINTR);
  if (n != 1) ::syscall(SYS_exit_group, kGatedNotStarted);
  body();
  ::syscall(SYS_exit_group, 0);
  __builtin_unreachable();
}

}  // namespace

std::vector<std::string> host_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

Result<void> check_runnable(const std::string& path) {
  const std::string what = "'" + path + "' cannot be run";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return sys_fail(errno, "command", what);
  if (!S_ISREG(st.st_mode)) return sys_fail(EACCES, "command", what);
  if (::access(path.c_str(), X_OK) != 0) return sys_fail(errno, "command", what);
  return {};
}

Result<std::string> resolve_command(const std::string& name) {
  if (name.empty()) return make_error(ErrorCode::kInval, "command: empty");
  if (name.find('/') != std::string::npos) {
    if (auto runnable = check_runnable(name); !runnable) return std::unexpected(runnable.error());
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (check_runnable(candidate)) return candidate;
    begin = end + 1;
  }
  return make_error(ErrorCode::kNoEnt, "command: '" + name + "' not found in PATH");
}

std::optional<std::string> in_working_directory(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  // getcwd(3) with a buffer that grows: a working directory may be deeper than PATH_MAX.
  std::string dir(256, '\0');
  while (::getcwd(dir.data(), dir.size()) == nullptr) {
    if (errno != ERANGE) return "./" + name;  // still this file, named relative to here
    dir.resize(dir.size() * 2);
  }
  dir.resize(std::char_traits<char>::length(dir.c_str()));
  return (dir == "/" ? dir : dir + "/") + name;
}

Result<pid_t> spawn_stopped(const std::string& path, const std::vector<std::string>& argv,
                            const SpawnOptions& options) {
  std::string program = path;
  if (options.working_directory) {
    const std::string& dir = *options.working_directory;
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return sys_fail<pid_t>(errno, "cwd", "'" + dir + "'");
    if (!S_ISDIR(st.st_mode)) return sys_fail<pid_t>(ENOTDIR, "cwd", "'" + dir + "'");
    if (::access(dir.c_str(), X_OK) != 0) return sys_fail<pid_t>(errno, "cwd", "'" + dir + "'");
    // The program's path is the caller's: a relative one is made absolute before the chdir.
    if (!program.starts_with('/')) {
      char here[4096];
      if (::getcwd(here, sizeof here) == nullptr) {
        return sys_fail<pid_t>(errno, "cwd", "getcwd() for '" + program + "'");
      }
      program = std::string(here) + "/" + program;
    }
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  if (options.environment) {
    env.reserve(options.environment->size() + 1);
    for (const std::string& e : *options.environment) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
  }
  char* const* envp = options.environment ? env.data() : environ;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail<pid_t>(errno, "command", "fork");
  if (pid == 0) exec_child(parent, program.c_str(), args.data(), envp, options);
  int status = 0;
  if (::waitpid(pid, &status, WSTOPPED) != pid || !WIFSTOPPED(status)) {
    return make_error(ErrorCode::kIo, "command: the child did not stop before exec");
  }
  return pid;
}

Result<GatedChild> fork_gated(void (*body)()) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return sys_fail<GatedChild>(errno, "pipe", "pipe2()");
  Fd go_read(pipe_fds[0]);
  Fd go_write(pipe_fds[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail<GatedChild>(errno, "fork", "fork()");
  if (pid == 0) gated_child(parent, pipe_fds[0], pipe_fds[1], body);
  return GatedChild{pid, std::move(go_write)};
}

Result<void> start_gated(GatedChild& child) {
  const char go = 'g';
  const ssize_t n = ::write(child.go.get(), &go, 1);
  if (n != 1) {
    return sys_fail(n < 0 ? errno : EIO, "pipe",
                    "write() of the go byte to pid " + std::to_string(child.pid));
  }
  return {};
}

Result<int> run_as_user(uid_t uid, gid_t gid, int (*body)(const void* arg), const void* arg) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return sys_fail<int>(errno, "pipe", "pipe2()");
  Fd answer_read(pipe_fds[0]);
  Fd answer_write(pipe_fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail<int>(errno, "fork", "fork()");
  if (pid == 0) {
    // The answer: {0, errno} when a drop failed (the step in `step`), {1, body's value}.
    int out[3] = {1, 0, 0};
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::setgroups(1, &gid) != 0) {
      out[0] = 0, out[1] = errno, out[2] = 1;
    } else if (::setresgid(gid, gid, gid) != 0) {
      out[0] = 0, out[1] = errno, out[2] = 2;
    } else if (::setresuid(uid, uid, uid) != 0) {
      out[0] = 0, out[1] = errno, out[2] = 3;
    } else {
      out[1] = body(arg);
    }
    const ssize_t n = ::write(pipe_fds[1], out, sizeof out);
    ::_exit(n == static_cast<ssize_t>(sizeof out) ? 0 : 1);
  }
  answer_write = Fd();
  int in[3] = {0, 0, 0};
  std::size_t got = 0;
  while (got < sizeof in) {
    const ssize_t n = ::read(answer_read.get(), reinterpret_cast<char*>(in) + got, sizeof in - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof in) {
    return sys_fail<int>(EIO, "fork",
                         "the child of pid " + std::to_string(pid) + " ended without an answer");
  }
  if (in[0] == 0) {
    static constexpr const char* kSteps[] = {"", "setgroups()", "setresgid()", "setresuid()"};
    return sys_fail<int>(
        in[1], "uid",
        std::string(kSteps[in[2] & 3]) + " to " + std::to_string(uid) + ":" + std::to_string(gid));
  }
  return in[1];
}

Result<ForkSide> fork_detached(std::span<const int> keep) {
  std::vector<unsigned> kept(keep.begin(), keep.end());
  kept.push_back(2);
  std::sort(kept.begin(), kept.end());
  const pid_t first = ::fork();
  if (first < 0) return sys_fail<ForkSide>(errno, "fork", "fork of a detached process");
  if (first == 0) {
    // The intermediate child: a process group of its own, the caller's descriptors closed, then
    // the detached process, and out. Closed here, before the caller's waitpid returns, no copy
    // of them outlives this call: a copy of a perf event's descriptor would keep its debug
    // register taken after the caller closed its own (the kernel frees it with the last one).
    ::setpgid(0, 0);
    for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE}) ::signal(sig, SIG_IGN);
    unsigned from = 0;
    for (unsigned k : kept) {
      if (k > from) ::syscall(SYS_close_range, from, k - 1, 0U);
      from = std::max(from, k + 1);
    }
    ::syscall(SYS_close_range, from, ~0U, 0U);
    const pid_t second = ::fork();
    if (second != 0) ::_exit(second < 0 ? 1 : 0);
    return ForkSide::kDetached;
  }
  int status = 0;
  pid_t r = -1;
  do {
    r = ::waitpid(first, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r != first) {
    return sys_fail<ForkSide>(r < 0 ? errno : EIO, "fork", "waitpid of the intermediate child");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return sys_fail<ForkSide>(EIO, "fork", "the intermediate child could not fork");
  }
  return ForkSide::kCaller;
}

Result<void> make_realtime() {
  sched_param param{};
  param.sched_priority = ::sched_get_priority_min(SCHED_FIFO);
  if (::sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
    return sys_fail(errno, "policy", "sched_setscheduler(SCHED_FIFO)");
  }
  return {};
}

[[noreturn]] void exit_now(int status) {
  ::_exit(status);
}

}  // namespace hwarb::native

#include "hwarb/linux/stopped_child.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <utility>

#include "sys_error.h"

namespace hwarb::native {
namespace {

// Exit statuses of a child that could not get to its stop.
constexpr int kOrphaned = 120;
constexpr int kTraceMeRefused = 121;
constexpr int kPinRefused = 122;

// The child after fork: raw system calls only. No libc wrapper that a sanitizer intercepts (ASan's
// _exit runs the leak check, for one), no allocation, no lock.
// `cpus` (built before the fork) is null when the child is not to be pinned.
[[noreturn]] void child_main(pid_t parent, const cpu_set_t* cpus) {
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
  if (::syscall(SYS_getppid) != parent) ::syscall(SYS_exit_group, kOrphaned);
  if (cpus != nullptr && ::syscall(SYS_sched_setaffinity, 0L, sizeof *cpus, cpus) != 0) {
    ::syscall(SYS_exit_group, kPinRefused);
  }
  if (::syscall(SYS_ptrace, PTRACE_TRACEME, 0L, 0L, 0L) != 0) {
    ::syscall(SYS_exit_group, kTraceMeRefused);
  }
  // raise(SIGSTOP): the child has one thread, so its pid is the thread's id.
  ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);
  for (;;) ::syscall(SYS_pause);
}

}  // namespace

Result<StoppedChild> StoppedChild::spawn(std::optional<int> cpu) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (cpu) {
    if (*cpu < 0 || *cpu >= CPU_SETSIZE) {
      return make_error(ErrorCode::kInval, "cpu: " + std::to_string(*cpu) + " is outside 0.." +
                                               std::to_string(CPU_SETSIZE - 1));
    }
    CPU_SET(*cpu, &cpus);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return detail::sys_fail<StoppedChild>(errno, "fork", "fork()");
  if (pid == 0) child_main(parent, cpu ? &cpus : nullptr);
  StoppedChild child(pid);
  auto st = child.wait(false);
  if (!st) return std::unexpected(st.error().with_context("child"));
  if (st->kind == WaitKind::kStopped && st->value == SIGSTOP) return child;
  const int kind = static_cast<int>(st->kind);
  const int value = st->value;
  ignore_error(child.kill(), "its unexpected stop or end is the error reported");
  if (st->kind == WaitKind::kExited && value == kPinRefused) {
    return make_error(ErrorCode::kInval, "cpu: the child may not run on CPU " +
                                             std::to_string(*cpu) +
                                             " (sched_setaffinity refused it)");
  }
  if (st->kind == WaitKind::kExited && value == kTraceMeRefused) {
    return make_error(ErrorCode::kPerm,
                      "ptrace: PTRACE_TRACEME refused in the child (seccomp or a security "
                      "module forbids tracing here)");
  }
  return make_error(ErrorCode::kIo, "child: expected its SIGSTOP stop, waitpid reported kind " +
                                        std::to_string(kind) + " value " + std::to_string(value));
}

StoppedChild::StoppedChild(StoppedChild&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}

StoppedChild& StoppedChild::operator=(StoppedChild&& other) noexcept {
  if (this != &other) {
    ignore_error(kill(), "noexcept: a child that is gone needs no kill");
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

StoppedChild::~StoppedChild() {
  ignore_error(kill(), "a destructor: a child that is gone needs no kill");
}

Result<WaitStatus> StoppedChild::wait(bool nohang) {
  if (pid_ <= 0) return make_error(ErrorCode::kSrch, "child: already reaped");
  auto st = wait_for(pid_, nohang);
  if (!st) {
    // Not our child any more (reaped behind our back): never touch that pid again.
    if (st.error().code() == ErrorCode::kChild) pid_ = -1;
    return st;
  }
  if (st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) pid_ = -1;
  return st;
}

Result<void> StoppedChild::kill() {
  if (pid_ <= 0) return {};
  // An unreaped child (even a zombie) keeps its pid, so the signal cannot reach another process.
  if (auto sent = send_signal(pid_, SIGKILL); !sent) return sent;
  while (pid_ > 0) {
    auto st = wait(false);
    if (!st) return std::unexpected(st.error());
  }
  return {};
}

}  // namespace hwarb::native

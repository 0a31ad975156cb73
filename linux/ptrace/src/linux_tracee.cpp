#include "hwarb/linux/linux_tracee.h"

#include <csignal>
#include <string>
#include <utility>

namespace hwarb::native {
namespace {

using ptrace_compat::UserLayout;

Result<void> check_layout(UserLayout layout) {
  if (layout == UserLayout::kI386) {
    return make_error(ErrorCode::kOpNotSupp,
                      "layout: i386 (struct user32, the compat getreg32/putreg32 path) is what a "
                      "32-bit tracer sees; this tracer is 64-bit, so only x86_64 is available");
  }
  return {};
}

std::string pid_text(pid_t pid) {
  return "pid " + std::to_string(pid);
}

Error gone_error(pid_t pid, const WaitStatus& st) {
  return Error(ErrorCode::kSrch, "pid: " + pid_text(pid) +
                                     (st.kind == WaitKind::kExited
                                          ? " exited with status " + std::to_string(st.value)
                                          : " was killed by signal " + std::to_string(st.value)));
}

// Waits for the next stop of a tracee that is not a child of ours, passing on every signal but
// `wanted` (as the tracee would have received it untraced). ESRCH when it ends first.
Result<void> wait_for_signal_stop(pid_t pid, int wanted) {
  for (;;) {
    auto st = wait_for(pid, false);
    if (!st) return std::unexpected(st.error());
    if (st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) {
      return std::unexpected(gone_error(pid, *st));
    }
    if (st->kind != WaitKind::kStopped) continue;
    if (st->value == wanted) return {};
    if (auto r = ptrace_cont(pid, st->value); !r) return r;
  }
}

}  // namespace

Result<LinuxTracee> LinuxTracee::create(StoppedChild child, UserLayout layout) {
  if (auto r = check_layout(layout); !r) return std::unexpected(r.error());
  if (!child.alive()) return make_error(ErrorCode::kSrch, "child: already reaped");
  const pid_t pid = child.pid();
  return LinuxTracee(std::move(child), pid, SIGSTOP);
}

Result<LinuxTracee> LinuxTracee::attach(pid_t pid, UserLayout layout) {
  if (auto r = check_layout(layout); !r) return std::unexpected(r.error());
  if (auto r = ptrace_attach(pid); !r) return std::unexpected(r.error());
  if (auto r = wait_for_signal_stop(pid, SIGSTOP); !r) {
    // Still attached if it stopped at all; a detach needs a stop, so try and ignore the answer.
    ignore_error(ptrace_detach(pid, 0),
                 "ESRCH when it never stopped: the attach error is the answer");
    return std::unexpected(r.error());
  }
  return LinuxTracee(std::nullopt, pid, SIGSTOP);
}

LinuxTracee::LinuxTracee(LinuxTracee&& other) noexcept
    : child_(std::move(other.child_)),
      pid_(std::exchange(other.pid_, -1)),
      stop_(std::exchange(other.stop_, std::nullopt)),
      ended_(std::exchange(other.ended_, std::nullopt)) {
  other.child_.reset();
}

LinuxTracee& LinuxTracee::operator=(LinuxTracee&& other) noexcept {
  if (this != &other) {
    release();
    child_ = std::move(other.child_);
    other.child_.reset();
    pid_ = std::exchange(other.pid_, -1);
    stop_ = std::exchange(other.stop_, std::nullopt);
    ended_ = std::exchange(other.ended_, std::nullopt);
  }
  return *this;
}

LinuxTracee::~LinuxTracee() {
  release();
}

void LinuxTracee::release() {
  if (child_) {
    child_.reset();  // kills and reaps it
  } else if (pid_ > 0) {
    // Attached to a thread that is not ours: leave it running, untraced.
    bool stopped = stop_.has_value();
    if (!stopped) stopped = send_signal(pid_, SIGSTOP) && wait_for_signal_stop(pid_, SIGSTOP);
    if (stopped)
      ignore_error(ptrace_detach(pid_, 0),
                   "release has no error path; a gone thread needs no detach");
  }
  pid_ = -1;
  stop_.reset();
  ended_.reset();
}

Result<std::uint64_t> LinuxTracee::peek_user(std::uint64_t offset) {
  if (pid_ <= 0) return make_error(ErrorCode::kSrch, "pid: the tracee is gone");
  return ptrace_peek_user(pid_, offset);
}

Result<void> LinuxTracee::poke_user(std::uint64_t offset, std::uint64_t value) {
  if (pid_ <= 0) return make_error(ErrorCode::kSrch, "pid: the tracee is gone");
  return ptrace_poke_user(pid_, offset, value);
}

Result<WaitStatus> LinuxTracee::wait_raw(bool nohang) {
  if (child_) return child_->wait(nohang);
  return wait_for(pid_, nohang);
}

Result<void> LinuxTracee::collect(bool nohang) {
  auto st = wait_raw(nohang);
  if (!st) return std::unexpected(st.error());
  switch (st->kind) {
    case WaitKind::kRunning:
      break;
    case WaitKind::kStopped:
      stop_ = st->value;
      break;
    case WaitKind::kExited:
    case WaitKind::kKilled:
      // Reaped now: the pid may be reused, so nothing may address it any more.
      ended_ = st->kind == WaitKind::kExited ? ptrace_compat::Stop::exited(st->value)
                                             : ptrace_compat::Stop::killed(st->value);
      pid_ = -1;
      child_.reset();
      break;
  }
  return {};
}

Result<std::optional<ptrace_compat::Stop>> LinuxTracee::wait(ptrace_compat::WaitMode mode) {
  if (ended_) return std::exchange(ended_, std::nullopt);
  if (pid_ <= 0) return make_error(ErrorCode::kSrch, "pid: the tracee is gone");
  if (!stop_) {
    if (auto r = collect(mode == ptrace_compat::WaitMode::kNoHang); !r) {
      return std::unexpected(r.error());
    }
    if (ended_) return std::exchange(ended_, std::nullopt);
    if (!stop_) return std::nullopt;
  }
  auto dr6 = peek_debugreg(6);
  if (!dr6) return std::unexpected(dr6.error());
  return ptrace_compat::Stop{*stop_, *dr6};
}

Result<void> LinuxTracee::resume(bool step) {
  if (pid_ <= 0) return make_error(ErrorCode::kSrch, "pid: the tracee is gone");
  if (!stop_) {
    // A stop that happened since the last wait() counts: the kernel would accept the request.
    // An end found here stays for wait() to report.
    const pid_t pid = pid_;
    if (auto r = collect(true); !r) return r;
    if (ended_) {
      return make_error(ErrorCode::kSrch,
                        "pid: " + pid_text(pid) + " has ended (wait reports how)");
    }
    if (!stop_) {
      return make_error(ErrorCode::kSrch,
                        "pid: " + pid_text(pid_) + " is running (not in a ptrace-stop)");
    }
  }
  auto r = step ? ptrace_singlestep(pid_, 0) : ptrace_cont(pid_, 0);
  if (r) stop_.reset();
  return r;
}

Result<void> LinuxTracee::cont() {
  return resume(false);
}

Result<void> LinuxTracee::step() {
  return resume(true);
}

}  // namespace hwarb::native

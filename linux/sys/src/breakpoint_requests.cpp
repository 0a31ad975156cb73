// breakpoint_requests.cpp — the seccomp filter that holds a program's requests for debug
// registers, and its listener's side (see breakpoint_requests.h).
#include "hwarb/linux/breakpoint_requests.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "hwarb/linux/spawn.h"
#include "sys_error.h"

namespace hwarb::native {

using detail::sys_fail;

namespace {

// struct seccomp_data: nr at 0, arch at 4, instruction_pointer at 8, args[6] from 16; a 64-bit
// argument's low half first (little-endian).
constexpr std::uint32_t kNrAt = offsetof(seccomp_data, nr);
constexpr std::uint32_t kArchAt = offsetof(seccomp_data, arch);
constexpr std::uint32_t arg_low_at(int i) {
  return static_cast<std::uint32_t>(offsetof(seccomp_data, args) + 8 * i);
}

sock_filter statement(std::uint16_t code, std::uint32_t k) {
  return sock_filter{code, 0, 0, k};
}
sock_filter jump(std::uint16_t code, std::uint32_t k, std::uint8_t jt, std::uint8_t jf) {
  return sock_filter{code, jt, jf, k};
}

// The filter, instruction by instruction; a jump's offsets count from the next instruction.
//   0  A = arch                      5  A = args[0] (low half: the request)
//   1  arch != x86-64  -> 11 allow   6  request != PTRACE_POKEUSER -> 11 allow
//   2  A = nr                        7  A = args[2] (low half: the offset in struct user)
//   3  nr == perf_event_open -> 10   8  offset < DR0 -> 11 allow
//   4  nr != ptrace -> 11 allow      9  offset >= DR0 + 8 registers -> 11 allow
//  10  notify the listener          11  allow
std::vector<sock_filter> request_filter() {
  const auto dr0 = static_cast<std::uint32_t>(debug_register_offset(0));
  return {
      statement(BPF_LD | BPF_W | BPF_ABS, kArchAt),
      jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 9),
      statement(BPF_LD | BPF_W | BPF_ABS, kNrAt),
      jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 6, 0),
      jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_ptrace, 0, 6),
      statement(BPF_LD | BPF_W | BPF_ABS, arg_low_at(0)),
      jump(BPF_JMP | BPF_JEQ | BPF_K, PTRACE_POKEUSER, 0, 4),
      statement(BPF_LD | BPF_W | BPF_ABS, arg_low_at(2)),
      jump(BPF_JMP | BPF_JGE | BPF_K, dr0, 0, 2),
      jump(BPF_JMP | BPF_JGE | BPF_K, dr0 + 8 * 8, 1, 0),
      statement(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
}

}  // namespace

std::uint64_t debug_register_offset(int n) {
  return offsetof(struct user, u_debugreg) + sizeof(unsigned long) * static_cast<unsigned>(n);
}

unsigned request_filter_flags() {
  return SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_TSYNC |
         SECCOMP_FILTER_FLAG_TSYNC_ESRCH;
}

std::vector<std::uint8_t> request_filter_image(std::uint64_t at) {
  const std::vector<sock_filter> program = request_filter();
  // struct sock_fprog: the instruction count, then (8-aligned) the address of the instructions,
  // which follow the struct.
  constexpr std::size_t kHeader = 16;
  std::vector<std::uint8_t> image(kHeader + program.size() * sizeof(sock_filter), 0);
  const auto count = static_cast<std::uint16_t>(program.size());
  const std::uint64_t instructions = at + kHeader;
  std::memcpy(image.data(), &count, sizeof count);
  std::memcpy(image.data() + 8, &instructions, sizeof instructions);
  std::memcpy(image.data() + kHeader, program.data(), program.size() * sizeof(sock_filter));
  return image;
}

Result<Fd> take_descriptor(pid_t pid, int fd) {
  const long pidfd = ::syscall(SYS_pidfd_open, static_cast<long>(pid), 0L);
  if (pidfd < 0) return sys_fail<Fd>(errno, "fd", "pidfd_open of process " + std::to_string(pid));
  Fd owner(static_cast<int>(pidfd));
  const long copy = ::syscall(SYS_pidfd_getfd, pidfd, static_cast<long>(fd), 0L);
  if (copy < 0) {
    return sys_fail<Fd>(
        errno, "fd",
        "pidfd_getfd of descriptor " + std::to_string(fd) + " of process " + std::to_string(pid));
  }
  return Fd(static_cast<int>(copy));
}

Result<BreakpointRequest> receive_request(int listener) {
  seccomp_notif notice;
  std::memset(&notice, 0, sizeof notice);
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &notice) != 0) {
    return sys_fail<BreakpointRequest>(errno, "request", "SECCOMP_IOCTL_NOTIF_RECV");
  }
  BreakpointRequest request;
  request.id = notice.id;
  request.tid = static_cast<pid_t>(notice.pid);
  request.kind =
      notice.data.nr == __NR_perf_event_open ? RequestKind::kPerfEvent : RequestKind::kPokeDebugReg;
  for (std::size_t i = 0; i < request.args.size(); ++i) request.args[i] = notice.data.args[i];
  return request;
}

bool request_valid(int listener, std::uint64_t id) {
  return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

Result<void> continue_request(int listener, std::uint64_t id) {
  seccomp_notif_resp response;
  std::memset(&response, 0, sizeof response);
  response.id = id;
  response.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response) != 0 && errno != ENOENT) {
    return sys_fail(errno, "request", "SECCOMP_IOCTL_NOTIF_SEND");
  }
  return {};
}

namespace {

// The continuer's life, in raw system calls only (it runs on a copy of the caller's memory):
// asleep until the gate closes, then every request let through until the listener hangs up.
[[noreturn]] void run_continuer(int listener, int gate) {
  for (;;) {
    pollfd p{gate, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      exit_now(1);
    }
    char byte = 0;
    const ssize_t n = ::read(gate, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  ::close(gate);
  for (;;) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      exit_now(1);
    }
    if ((p.revents & POLLIN) != 0) {
      seccomp_notif notice;
      std::memset(&notice, 0, sizeof notice);
      if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &notice) != 0) continue;
      seccomp_notif_resp response;
      std::memset(&response, 0, sizeof response);
      response.id = notice.id;
      response.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &response);
      continue;
    }
    if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) exit_now(0);
  }
}

}  // namespace

Result<Fd> start_continuer(int listener) {
  int ends[2] = {-1, -1};
  if (::pipe2(ends, O_CLOEXEC) != 0) return sys_fail<Fd>(errno, "pipe", "pipe2 of the gate");
  Fd read_end(ends[0]);
  Fd write_end(ends[1]);
  const int keep[] = {listener, read_end.get()};
  auto side = fork_detached(keep);
  if (!side) return std::unexpected(side.error());
  if (*side == ForkSide::kDetached) run_continuer(listener, read_end.get());
  return write_end;
}

}  // namespace hwarb::native

#include "hwarb/linux/syscalls.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "hwarb/base/format.h"
#include "hwarb/breakpoints/validate.h"
#include "sys_error.h"

namespace hwarb::linux {
namespace {

using detail::sys_fail;

std::string pid_text(pid_t pid) {
  return "pid " + std::to_string(pid);
}

std::string offset_text(std::uint64_t offset) {
  return std::to_string(offset) + " (" + hex(offset) + ")";
}

// The raw ptrace system call: glibc's wrapper returns the word for PEEK requests, which makes
// -1 ambiguous; the system call stores it through `data` and returns 0.
long raw_ptrace(long request, pid_t pid, std::uint64_t addr, std::uint64_t data) {
  return ::syscall(SYS_ptrace, request, static_cast<long>(pid), addr, data);
}

// The field a ptrace request's errno is about.
const char* ptrace_field(int err) {
  switch (err) {
    case EIO:
    case EFAULT:
      return "offset";
    case ESRCH:
    case EPERM:
      return "pid";
    default:
      return "value";
  }
}

Result<void> resume(long request, const char* name, pid_t pid, int signal) {
  if (raw_ptrace(request, pid, 0, static_cast<std::uint64_t>(signal)) != 0) {
    const int err = errno;
    return sys_fail(
        err, err == EIO ? "signal" : "pid",
        std::string(name) + " of " + pid_text(pid) + " with signal " + std::to_string(signal));
  }
  return {};
}

// The field a perf_event_open errno is about.
const char* perf_field(int err) {
  switch (err) {
    case ENOSPC:
      return "slots";
    case ESRCH:
    case EACCES:
    case EPERM:
      return "pid";
    default:
      return "attr";
  }
}

// "w" for a known type, the number for any other value.
std::string type_text(pmu::BpType type) {
  const std::string_view name = breakpoints::to_string(type);
  return name != "?" ? std::string(name) : std::to_string(static_cast<int>(type));
}

// pmu::BpType uses Linux's HW_BREAKPOINT_* values; checked here, where both are visible.
static_assert(static_cast<int>(pmu::BpType::kEmpty) == HW_BREAKPOINT_EMPTY);
static_assert(static_cast<int>(pmu::BpType::kR) == HW_BREAKPOINT_R);
static_assert(static_cast<int>(pmu::BpType::kW) == HW_BREAKPOINT_W);
static_assert(static_cast<int>(pmu::BpType::kRw) == HW_BREAKPOINT_RW);
static_assert(static_cast<int>(pmu::BpType::kX) == HW_BREAKPOINT_X);

}  // namespace

Result<std::uint64_t> ptrace_peek_user(pid_t pid, std::uint64_t offset) {
  unsigned long word = 0;
  if (raw_ptrace(PTRACE_PEEKUSER, pid, offset, reinterpret_cast<std::uintptr_t>(&word)) != 0) {
    const int err = errno;
    return sys_fail<std::uint64_t>(
        err, ptrace_field(err),
        "PTRACE_PEEKUSER at " + offset_text(offset) + " of " + pid_text(pid));
  }
  return word;
}

Result<void> ptrace_poke_user(pid_t pid, std::uint64_t offset, std::uint64_t value) {
  if (raw_ptrace(PTRACE_POKEUSER, pid, offset, value) != 0) {
    const int err = errno;
    return sys_fail(
        err, ptrace_field(err),
        "PTRACE_POKEUSER of " + hex(value) + " at " + offset_text(offset) + " of " + pid_text(pid));
  }
  return {};
}

Result<void> ptrace_cont(pid_t pid, int signal) {
  return resume(PTRACE_CONT, "PTRACE_CONT", pid, signal);
}

Result<void> ptrace_singlestep(pid_t pid, int signal) {
  return resume(PTRACE_SINGLESTEP, "PTRACE_SINGLESTEP", pid, signal);
}

Result<void> ptrace_detach(pid_t pid, int signal) {
  return resume(PTRACE_DETACH, "PTRACE_DETACH", pid, signal);
}

Result<void> ptrace_attach(pid_t pid) {
  if (raw_ptrace(PTRACE_ATTACH, pid, 0, 0) != 0) {
    return sys_fail(errno, "pid", "PTRACE_ATTACH to " + pid_text(pid));
  }
  return {};
}

Result<void> send_signal(pid_t pid, int signal) {
  if (::kill(pid, signal) != 0) {
    const int err = errno;
    return sys_fail(err, err == EINVAL ? "signal" : "pid",
                    "kill(" + pid_text(pid) + ", " + std::to_string(signal) + ")");
  }
  return {};
}

Result<std::vector<int>> cpu_affinity(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(pid, sizeof set, &set) != 0) {
    return sys_fail<std::vector<int>>(errno, "pid", "sched_getaffinity(" + pid_text(pid) + ")");
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

Result<void> limit_address_space(std::uint64_t extra) {
  std::uint64_t vm_kib = 0;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmSize:")) vm_kib = std::strtoull(line.c_str() + 7, nullptr, 10);
  }
  if (vm_kib == 0) return make_error(ErrorCode::kNoEnt, "VmSize: not in /proc/self/status");
  const rlim_t limit = static_cast<rlim_t>(vm_kib * 1024 + extra);
  const rlimit rl{limit, limit};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) {
    return sys_fail(errno, "extra", "setrlimit(RLIMIT_AS, " + std::to_string(limit) + ")");
  }
  return {};
}

Result<void> pin_to_cpu(pid_t pid, int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu) + " is outside 0.." +
                                             std::to_string(CPU_SETSIZE - 1));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(pid, sizeof set, &set) != 0) {
    const int err = errno;
    return sys_fail(err, err == EINVAL ? "cpu" : "pid",
                    "sched_setaffinity(" + pid_text(pid) + ", {" + std::to_string(cpu) + "})");
  }
  return {};
}

Result<WaitStatus> wait_for(pid_t pid, bool nohang) {
  int status = 0;
  pid_t r = 0;
  do {
    r = ::waitpid(pid, &status, __WALL | (nohang ? WNOHANG : 0));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return sys_fail<WaitStatus>(errno, "pid", "waitpid(" + pid_text(pid) + ")");
  if (r == 0) return WaitStatus{};
  if (WIFSTOPPED(status)) return WaitStatus{WaitKind::kStopped, WSTOPSIG(status), status};
  if (WIFEXITED(status)) return WaitStatus{WaitKind::kExited, WEXITSTATUS(status), status};
  if (WIFSIGNALED(status)) return WaitStatus{WaitKind::kKilled, WTERMSIG(status), status};
  // WIFCONTINUED is not reported without WCONTINUED; anything else is a kernel we do not know.
  return make_error(ErrorCode::kIo,
                    "status: waitpid(" + pid_text(pid) + ") returned " + hex(unsigned(status)));
}

Result<Fd> perf_breakpoint_open(pid_t pid, std::uint64_t addr, std::uint64_t len,
                                pmu::BpType type) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.size = sizeof attr;
  attr.bp_type = static_cast<std::uint32_t>(type);
  attr.bp_addr = addr;
  attr.bp_len = len;
  attr.sample_period = 1;
  attr.pinned = 1;
  attr.exclude_kernel = 1;
  long fd = -1;
  do {
    fd = ::syscall(SYS_perf_event_open, &attr, static_cast<long>(pid), -1L, -1L,
                   static_cast<unsigned long>(PERF_FLAG_FD_CLOEXEC));
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    return sys_fail<Fd>(err, perf_field(err),
                        "perf_event_open(breakpoint addr " + hex(addr) + " len " +
                            std::to_string(len) + " type " + type_text(type) + ") on " +
                            pid_text(pid));
  }
  return Fd(static_cast<int>(fd));
}

}  // namespace hwarb::linux

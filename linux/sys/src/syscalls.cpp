#include "hwarb/linux/syscalls.h"

#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "hwarb/base/format.h"
#include "sys_error.h"

namespace hwarb::native {
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

// A ptrace request that only names its tracee: every errno is about `pid`.
Result<void> plain_request(long request, const char* name, pid_t pid) {
  if (raw_ptrace(request, pid, 0, 0) != 0) {
    return sys_fail(errno, "pid", std::string(name) + " of " + pid_text(pid));
  }
  return {};
}

// The field a PTRACE_GETREGS-like request's errno is about.
const char* regs_field(int err) {
  return err == ESRCH || err == EPERM ? "pid" : "regs";
}

// A waitpid status as a WaitStatus; EIO naming `status` for one that is none of the three.
Result<WaitStatus> decode_status(pid_t pid, int status) {
  if (WIFSTOPPED(status)) return WaitStatus{WaitKind::kStopped, WSTOPSIG(status), status};
  if (WIFEXITED(status)) return WaitStatus{WaitKind::kExited, WEXITSTATUS(status), status};
  if (WIFSIGNALED(status)) return WaitStatus{WaitKind::kKilled, WTERMSIG(status), status};
  // WIFCONTINUED is not reported without WCONTINUED; anything else is a kernel we do not know.
  return make_error(ErrorCode::kIo,
                    "status: waitpid(" + pid_text(pid) + ") returned " + hex(unsigned(status)));
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
std::string type_text(BpType type) {
  const std::string_view name = to_string(type);
  return name != "?" ? std::string(name) : std::to_string(static_cast<int>(type));
}

// BpType uses Linux's HW_BREAKPOINT_* values; checked here, where both are visible.
static_assert(static_cast<int>(BpType::kEmpty) == HW_BREAKPOINT_EMPTY);
static_assert(static_cast<int>(BpType::kR) == HW_BREAKPOINT_R);
static_assert(static_cast<int>(BpType::kW) == HW_BREAKPOINT_W);
static_assert(static_cast<int>(BpType::kRw) == HW_BREAKPOINT_RW);
static_assert(static_cast<int>(BpType::kX) == HW_BREAKPOINT_X);

}  // namespace

Error syscall_return_error(std::int64_t ret, std::string_view field, std::string_view what) {
  return detail::sys_error(static_cast<int>(-ret), field, what);
}

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

Result<void> ptrace_seize(pid_t pid, std::uint64_t options) {
  if (raw_ptrace(PTRACE_SEIZE, pid, 0, options) != 0) {
    const int err = errno;
    std::string why = "PTRACE_SEIZE of " + pid_text(pid);
    if (err == EPERM) {
      why +=
          " refused: the process is traced already (a debugger), belongs to another user, or "
          "/proc/sys/kernel/yama/ptrace_scope forbids attaching to a non-child";
    } else if (err == EIO) {
      why += " with options " + hex(options);
    }
    return sys_fail(err, err == EIO ? "options" : "pid", why);
  }
  return {};
}

Result<void> ptrace_interrupt(pid_t pid) {
  return plain_request(PTRACE_INTERRUPT, "PTRACE_INTERRUPT", pid);
}

Result<void> ptrace_listen(pid_t pid) {
  return plain_request(PTRACE_LISTEN, "PTRACE_LISTEN", pid);
}

Result<void> ptrace_syscall(pid_t pid, int signal) {
  return resume(PTRACE_SYSCALL, "PTRACE_SYSCALL", pid, signal);
}

Result<void> send_signal(pid_t pid, int signal) {
  if (::kill(pid, signal) != 0) {
    const int err = errno;
    return sys_fail(err, err == EINVAL ? "signal" : "pid",
                    "kill(" + pid_text(pid) + ", " + std::to_string(signal) + ")");
  }
  return {};
}

Result<void> send_thread_signal(pid_t tgid, pid_t tid, int signal) {
  if (::syscall(SYS_tgkill, static_cast<long>(tgid), static_cast<long>(tid),
                static_cast<long>(signal)) != 0) {
    const int err = errno;
    return sys_fail(err, err == EINVAL ? "signal" : "tid",
                    "tgkill(" + pid_text(tgid) + ", thread " + std::to_string(tid) + ", " +
                        std::to_string(signal) + ")");
  }
  return {};
}

pid_t own_pid() {
  return ::getpid();
}

uid_t own_uid() {
  return ::getuid();
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
  return decode_status(pid, status);
}

Result<WaitEvent> wait_once(pid_t pid, bool nohang) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, __WALL | (nohang ? WNOHANG : 0));
  if (r < 0) return sys_fail<WaitEvent>(errno, "pid", "waitpid(" + pid_text(pid) + ")");
  if (r == 0) return WaitEvent{};
  auto decoded = decode_status(r, status);
  if (!decoded) return std::unexpected(decoded.error());
  return WaitEvent{r, *decoded};
}

Result<pid_t> peek_wait(bool nohang) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (::waitid(P_ALL, 0, &info, WEXITED | __WALL | WNOWAIT | (nohang ? WNOHANG : 0)) != 0) {
    return sys_fail<pid_t>(errno, "pid", "waitid(P_ALL, WNOWAIT)");
  }
  return info.si_pid;
}

Result<bool> has_wait_status(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | __WALL | WNOWAIT | WNOHANG) != 0) {
    return sys_fail<bool>(errno, "pid", "waitid(P_PID " + pid_text(pid) + ", WNOWAIT)");
  }
  return info.si_pid != 0;
}

namespace {

Result<Fd> open_breakpoint(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type,
                           bool disabled) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.size = sizeof attr;
  attr.bp_type = static_cast<std::uint32_t>(type);
  attr.bp_addr = addr;
  attr.bp_len = len;
  attr.sample_period = 1;
  attr.pinned = 1;
  attr.disabled = disabled ? 1 : 0;
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

}  // namespace

Result<Fd> perf_breakpoint_open(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type) {
  return open_breakpoint(pid, addr, len, type, false);
}

Result<Fd> perf_breakpoint_reserve(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type) {
  return open_breakpoint(pid, addr, len, type, true);
}

Result<Fd> open_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_fail<Fd>(errno, "file", "open " + path);
  return Fd(fd);
}

Result<Fd> open_file(const std::string& path, int flags, unsigned mode) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) return sys_fail<Fd>(errno, "file", "open " + path);
  return Fd(fd);
}

Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::span<const std::uint8_t> data) {
  const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return sys_fail<std::size_t>(errno, "fd", "pwrite of fd " + std::to_string(fd));
  return static_cast<std::size_t>(n);
}

Result<void> unlink_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return sys_fail<void>(errno, "file", "unlink " + path);
  return {};
}

Result<std::size_t> pread_file(int fd, std::uint64_t offset, std::span<std::uint8_t> out) {
  const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
  if (n < 0) return sys_fail<std::size_t>(errno, "fd", "pread of fd " + std::to_string(fd));
  return static_cast<std::size_t>(n);
}

Result<FileStat> file_stat(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return sys_fail<FileStat>(errno, "fd", "fstat of fd " + std::to_string(fd));
  }
  return FileStat{.dev = st.st_dev,
                  .ino = st.st_ino,
                  .size = static_cast<std::uint64_t>(st.st_size),
                  .blksize = static_cast<std::uint64_t>(st.st_blksize),
                  .blocks = static_cast<std::uint64_t>(st.st_blocks),
                  .mode = st.st_mode,
                  .nlink = static_cast<std::uint32_t>(st.st_nlink),
                  .uid = st.st_uid,
                  .gid = st.st_gid,
                  .rdev = static_cast<std::uint32_t>(st.st_rdev),
                  .atime = st.st_atime,
                  .mtime = st.st_mtime,
                  .ctime = st.st_ctime};
}

}  // namespace hwarb::native

// probe and perf ring (linux_perf)
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/user.h>

namespace hwarb::native {

Result<Fd> perf_event_open_attr(const ::perf_event_attr& attr, pid_t pid, int cpu, int group_fd,
                                unsigned long flags) {
  long fd = -1;
  do {
    fd = ::syscall(SYS_perf_event_open, &attr, static_cast<long>(pid), static_cast<long>(cpu),
                   static_cast<long>(group_fd), flags | PERF_FLAG_FD_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    return sys_fail<Fd>(err, perf_field(err),
                        "perf_event_open(type " + std::to_string(attr.type) + " config " +
                            hex(attr.config) + ") on " + pid_text(pid) + " cpu " +
                            std::to_string(cpu));
  }
  return Fd(static_cast<int>(fd));
}

Result<int> perf_ioctl(int fd, unsigned long request, unsigned long arg) {
  const int r = ::ioctl(fd, request, arg);
  if (r < 0) {
    const int err = errno;
    return sys_fail<int>(
        err, err == EINVAL ? "arg" : "fd",
        "ioctl(" + std::to_string(fd) + ", " + hex(request) + ", " + hex(arg) + ")");
  }
  return r;
}

Result<std::uint64_t> perf_event_id(int fd) {
  std::uint64_t id = 0;
  if (::ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0) {
    return sys_fail<std::uint64_t>(errno, "fd",
                                   "ioctl(" + std::to_string(fd) + ", PERF_EVENT_IOC_ID)");
  }
  return id;
}

Result<std::uint64_t> perf_read_count(int fd) {
  std::uint64_t count = 0;
  ssize_t n = -1;
  do {
    n = ::read(fd, &count, sizeof count);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return sys_fail<std::uint64_t>(errno, "fd", "read(" + std::to_string(fd) + ")");
  if (n != static_cast<ssize_t>(sizeof count)) {
    return make_error(ErrorCode::kIo, "fd: read(" + std::to_string(fd) + ") returned " +
                                          std::to_string(n) + " bytes, expected 8");
  }
  return count;
}

std::size_t page_size() {
  return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::optional<int> perf_event_paranoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

Result<void> set_perf_event_paranoid(int value) {
  const char* path = "/proc/sys/kernel/perf_event_paranoid";
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return sys_fail(errno, "perf_event_paranoid", std::string("open ") + path);
  const std::string text = std::to_string(value) + "\n";
  ssize_t n = -1;
  do {
    n = ::write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  const int err = n < 0 ? errno : n != static_cast<ssize_t>(text.size()) ? EIO : 0;
  ::close(fd);
  if (err != 0) {
    return sys_fail(err, "perf_event_paranoid",
                    "write " + text.substr(0, text.size() - 1) + " to " + path);
  }
  return {};
}

Error name_perf_permission(const Error& error, std::string_view needs) {
  if (error.code() != ErrorCode::kAcces && error.code() != ErrorCode::kPerm) return error;
  const std::optional<int> knob = perf_event_paranoid();
  return error.with_context("perf_event_paranoid is " + (knob ? std::to_string(*knob) : "?") +
                            " (/proc/sys/kernel/perf_event_paranoid; " + std::string(needs) + ")");
}

Result<void*> map_shared(int fd, std::size_t bytes, std::uint64_t offset) {
  void* p =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    const int err = errno;
    const bool size_refused = err == ENOMEM || err == EPERM || err == EAGAIN;
    return sys_fail<void*>(err, size_refused ? "bytes" : "fd",
                           "mmap(" + std::to_string(bytes) + " bytes at offset " +
                               std::to_string(offset) + " of fd " + std::to_string(fd) + ")");
  }
  // A mapping of a perf event holds the event as its descriptor does: a forked copy of this
  // process (a watchdog, a child before its exec) must not keep it, and so the event, alive.
  if (::madvise(p, bytes, MADV_DONTFORK) != 0) {
    const int err = errno;
    ::munmap(p, bytes);
    return sys_fail<void*>(err, "bytes",
                           "madvise(MADV_DONTFORK) of a mapping of fd " + std::to_string(fd));
  }
  return p;
}

Result<void*> map_shared_anonymous(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return sys_fail<void*>(errno, "bytes",
                           "mmap(" + std::to_string(bytes) + " bytes, shared anonymous)");
  }
  return p;
}

void unmap(void* addr, std::size_t bytes) {
  if (addr != nullptr) (void)::munmap(addr, bytes);
}

namespace {

// poll(2) for POLLIN on `fds`, retried on EINTR when `retry`.
Result<std::vector<short>> poll_fds(std::span<const int> fds, int timeout_ms, bool retry) {
  std::vector<pollfd> pfds(fds.size());
  for (std::size_t i = 0; i < fds.size(); ++i) pfds[i] = pollfd{fds[i], POLLIN, 0};
  int r = -1;
  do {
    r = ::poll(pfds.data(), pfds.size(), timeout_ms);
  } while (retry && r < 0 && errno == EINTR);
  if (r < 0) {
    const int err = errno;
    return sys_fail<std::vector<short>>(
        err, err == EINVAL ? "fds" : "timeout",
        "poll(" + std::to_string(fds.size()) + " fds, " + std::to_string(timeout_ms) + " ms)");
  }
  std::vector<short> revents(fds.size());
  for (std::size_t i = 0; i < fds.size(); ++i) revents[i] = pfds[i].revents;
  return revents;
}

}  // namespace

Result<std::vector<short>> poll_in(const std::vector<int>& fds, int timeout_ms) {
  return poll_fds(fds, timeout_ms, true);
}

Result<std::vector<short>> poll_in_once(std::span<const int> fds, int timeout_ms) {
  return poll_fds(fds, timeout_ms, false);
}

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  auto bad = [&] {
    return make_error(ErrorCode::kInval, "cpus: '" + std::string(text) + "' is not a CPU list");
  };
  if (text.empty()) return bad();
  auto number = [](std::string_view& t, int& out) {
    if (t.empty() || t.front() < '0' || t.front() > '9') return false;
    long v = 0;
    while (!t.empty() && t.front() >= '0' && t.front() <= '9') {
      v = v * 10 + (t.front() - '0');
      if (v > 1 << 20) return false;
      t.remove_prefix(1);
    }
    out = static_cast<int>(v);
    return true;
  };
  std::string_view rest = text;
  while (true) {
    int first = 0, last = 0;
    if (!number(rest, first)) return bad();
    last = first;
    if (!rest.empty() && rest.front() == '-') {
      rest.remove_prefix(1);
      if (!number(rest, last) || last < first) return bad();
    }
    if (!cpus.empty() && first <= cpus.back()) return bad();
    for (int c = first; c <= last; ++c) cpus.push_back(c);
    if (rest.empty()) break;
    if (rest.front() != ',') return bad();
    rest.remove_prefix(1);
  }
  return cpus;
}

Result<std::vector<int>> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (!in || !std::getline(in, text)) {
    return make_error(ErrorCode::kNoEnt, "cpus: /sys/devices/system/cpu/online is unreadable");
  }
  return parse_cpu_list(text);
}

Result<void> ptrace_getregs(pid_t pid, ::user_regs_struct& regs) {
  if (raw_ptrace(PTRACE_GETREGS, pid, 0, reinterpret_cast<std::uintptr_t>(&regs)) != 0) {
    const int err = errno;
    return sys_fail(err, regs_field(err), "PTRACE_GETREGS of " + pid_text(pid));
  }
  return {};
}

Result<void> ptrace_setregs(pid_t pid, const ::user_regs_struct& regs) {
  if (raw_ptrace(PTRACE_SETREGS, pid, 0, reinterpret_cast<std::uintptr_t>(&regs)) != 0) {
    const int err = errno;
    return sys_fail(err, regs_field(err), "PTRACE_SETREGS of " + pid_text(pid));
  }
  return {};
}

Result<void> ptrace_singleblock(pid_t pid, int signal) {
  return resume(PTRACE_SINGLEBLOCK, "PTRACE_SINGLEBLOCK", pid, signal);
}

Result<std::size_t> ptrace_get_regset(pid_t pid, int note, std::span<std::byte> out) {
  iovec io{out.data(), out.size()};
  if (raw_ptrace(PTRACE_GETREGSET, pid, static_cast<std::uint64_t>(note),
                 reinterpret_cast<std::uintptr_t>(&io)) != 0) {
    const int err = errno;
    return sys_fail<std::size_t>(
        err, regs_field(err), "PTRACE_GETREGSET " + std::to_string(note) + " of " + pid_text(pid));
  }
  return io.iov_len;
}

Result<void> ptrace_set_regset(pid_t pid, int note, std::span<const std::byte> in) {
  // The kernel only reads through iov_base.
  iovec io{const_cast<std::byte*>(in.data()), in.size()};
  if (raw_ptrace(PTRACE_SETREGSET, pid, static_cast<std::uint64_t>(note),
                 reinterpret_cast<std::uintptr_t>(&io)) != 0) {
    const int err = errno;
    return sys_fail(err, regs_field(err),
                    "PTRACE_SETREGSET " + std::to_string(note) + " of " + pid_text(pid));
  }
  return {};
}

Result<void> ptrace_getsiginfo(pid_t pid, siginfo_t& info) {
  if (raw_ptrace(PTRACE_GETSIGINFO, pid, 0, reinterpret_cast<std::uintptr_t>(&info)) != 0) {
    return sys_fail(errno, "pid", "PTRACE_GETSIGINFO of " + pid_text(pid));
  }
  return {};
}

Result<std::size_t> ptrace_peeksiginfo(pid_t pid, bool shared, std::span<siginfo_t> out) {
  __ptrace_peeksiginfo_args args{};
  args.off = 0;
  args.flags = shared ? PTRACE_PEEKSIGINFO_SHARED : 0;
  args.nr = static_cast<std::int32_t>(out.size());
  const long n = ::ptrace(PTRACE_PEEKSIGINFO, pid, &args, out.data());
  if (n < 0) {
    return sys_fail<std::size_t>(errno, "pid", "PTRACE_PEEKSIGINFO of " + pid_text(pid));
  }
  return static_cast<std::size_t>(n);
}

Result<void> ptrace_setsiginfo(pid_t pid, const siginfo_t& info) {
  if (raw_ptrace(PTRACE_SETSIGINFO, pid, 0, reinterpret_cast<std::uintptr_t>(&info)) != 0) {
    return sys_fail(errno, "pid", "PTRACE_SETSIGINFO of " + pid_text(pid));
  }
  return {};
}

Result<std::uint64_t> ptrace_getsigmask(pid_t pid) {
  std::uint64_t mask = 0;
  if (raw_ptrace(PTRACE_GETSIGMASK, pid, sizeof mask, reinterpret_cast<std::uintptr_t>(&mask)) !=
      0) {
    return sys_fail<std::uint64_t>(errno, "pid", "PTRACE_GETSIGMASK of " + pid_text(pid));
  }
  return mask;
}

Result<std::optional<std::uint64_t>> ptrace_singlestep_unblocked(pid_t pid) {
  constexpr std::uint64_t kTrapBit = std::uint64_t{1} << (SIGTRAP - 1);
  auto mask = ptrace_getsigmask(pid);
  if (!mask) return std::unexpected(mask.error());
  std::optional<std::uint64_t> saved;
  if ((*mask & kTrapBit) != 0) {
    if (auto r = ptrace_setsigmask(pid, *mask & ~kTrapBit); !r) return std::unexpected(r.error());
    saved = *mask;
  }
  if (auto r = ptrace_singlestep(pid); !r) {
    if (saved) ignore_error(ptrace_setsigmask(pid, *saved), "the step's error is the one reported");
    return std::unexpected(r.error());
  }
  return saved;
}

Result<RseqArea> ptrace_get_rseq(pid_t pid) {
  ::__ptrace_rseq_configuration config{};
  if (raw_ptrace(PTRACE_GET_RSEQ_CONFIGURATION, pid, sizeof config,
                 reinterpret_cast<std::uintptr_t>(&config)) < 0) {
    return sys_fail<RseqArea>(errno, "pid", "PTRACE_GET_RSEQ_CONFIGURATION of " + pid_text(pid));
  }
  return RseqArea{.addr = config.rseq_abi_pointer, .len = config.rseq_abi_size};
}

Result<void> ptrace_setsigmask(pid_t pid, std::uint64_t mask) {
  if (raw_ptrace(PTRACE_SETSIGMASK, pid, sizeof mask, reinterpret_cast<std::uintptr_t>(&mask)) !=
      0) {
    return sys_fail(errno, "pid", "PTRACE_SETSIGMASK of " + pid_text(pid));
  }
  return {};
}

Result<unsigned long> ptrace_event_message(pid_t pid) {
  unsigned long message = 0;
  if (raw_ptrace(PTRACE_GETEVENTMSG, pid, 0, reinterpret_cast<std::uintptr_t>(&message)) != 0) {
    return sys_fail<unsigned long>(errno, "pid", "PTRACE_GETEVENTMSG of " + pid_text(pid));
  }
  return message;
}

Result<std::size_t> ptrace_get_syscall_info(pid_t pid, ::__ptrace_syscall_info& info) {
  const long size = raw_ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info,
                               reinterpret_cast<std::uintptr_t>(&info));
  if (size < 0) {
    return sys_fail<std::size_t>(errno, "pid", "PTRACE_GET_SYSCALL_INFO of " + pid_text(pid));
  }
  return static_cast<std::size_t>(size);
}

}  // namespace hwarb::native

// report files (the CLI's -o)
#include "hwarb/linux/files.h"

namespace hwarb::native {

Result<Fd> create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return sys_fail<Fd>(errno, "file", "create " + path);
  return Fd(fd);
}

namespace {

// "<output>: <ERRNAME>: <text>": the CLI prints it after its name, as the reason the report is
// incomplete. A stream error without an errno (none of glibc's) reads EIO.
Result<void> stream_fail(int err, std::string_view output) {
  if (err == 0) err = EIO;
  const char* name = strerrorname_np(err);
  const char* text = strerrordesc_np(err);
  std::string msg(output);
  msg += ": ";
  msg += name != nullptr ? name : "errno " + std::to_string(err);
  if (text != nullptr) {
    msg += ": ";
    msg += text;
  }
  return std::unexpected(Error(from_errno(err), std::move(msg)));
}

}  // namespace

Result<void> write_stream(std::FILE* stream, std::string_view text, std::string_view output) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stream) != text.size()) {
    return stream_fail(errno, output);
  }
  return {};
}

Result<void> flush_stream(std::FILE* stream, std::string_view output) {
  errno = 0;
  if (std::fflush(stream) != 0) return stream_fail(errno, output);
  return {};
}

Result<void> close_stream(std::FILE* stream, std::string_view output) {
  errno = 0;
  if (std::fclose(stream) != 0) return stream_fail(errno, output);
  return {};
}

}  // namespace hwarb::native

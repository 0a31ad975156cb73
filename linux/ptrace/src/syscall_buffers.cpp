#include "hwarb/linux/syscall_buffers.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hwarb::native {
namespace {

bool overlaps(std::uint64_t a, std::uint64_t alen, std::uint64_t b, std::uint64_t blen) {
  return a < b + blen && b < a + alen;
}

// The system calls whose user buffer hwarb knows: where it is and whether the kernel reads it
// (write-like) or writes it (read-like). Other calls are checked by their pointer arguments.
struct BufferArgs {
  long nr;
  const char* name;
  int buf;  // argument index of the buffer
  int len;  // argument index of its length
  bool kernel_reads;
};
constexpr BufferArgs kBufferSyscalls[] = {
    {SYS_read, "read", 1, 2, false},           {SYS_write, "write", 1, 2, true},
    {SYS_pread64, "pread64", 1, 2, false},     {SYS_pwrite64, "pwrite64", 1, 2, true},
    {SYS_recvfrom, "recvfrom", 1, 2, false},   {SYS_sendto, "sendto", 1, 2, true},
    {SYS_getrandom, "getrandom", 0, 1, false}, {SYS_readlink, "readlink", 1, 2, false},
    {SYS_getcwd, "getcwd", 0, 1, false},       {SYS_readlinkat, "readlinkat", 2, 3, false},
};

// The entry of `nr` in one of the tables; nullptr when it is not there.
template <std::size_t N>
const BufferArgs* find_call(const BufferArgs (&table)[N], long nr) {
  for (const BufferArgs& b : table) {
    if (b.nr == nr) return &b;
  }
  return nullptr;
}

const BufferArgs* buffer_args(long nr) {
  return find_call(kBufferSyscalls, nr);
}

// The system calls whose buffers are described by an iovec array (`iov`, `count` argument
// indices), or by a msghdr (`iov` is its argument index, `count` -1): msg_name, msg_iov's buffers
// and msg_control.
constexpr BufferArgs kVectorSyscalls[] = {
    {SYS_readv, "readv", 1, 2, false},      {SYS_writev, "writev", 1, 2, true},
    {SYS_preadv, "preadv", 1, 2, false},    {SYS_pwritev, "pwritev", 1, 2, true},
    {SYS_preadv2, "preadv2", 1, 2, false},  {SYS_pwritev2, "pwritev2", 1, 2, true},
    {SYS_recvmsg, "recvmsg", 1, -1, false}, {SYS_sendmsg, "sendmsg", 1, -1, true},
};

const BufferArgs* vector_args(long nr) {
  return find_call(kVectorSyscalls, nr);
}

// UIO_MAXIOV: the kernel refuses longer iovec arrays (EINVAL) before touching a buffer.
constexpr std::uint64_t kMaxIovecs = 1024;

// The user buffers of a call of kVectorSyscalls, read from the tracee's iovec array (and
// msghdr). Empty when they cannot be read: the kernel then fails the call (EFAULT, EINVAL)
// before it touches any buffer.
std::vector<std::pair<std::uint64_t, std::uint64_t>> vector_buffers(
    Inferior& inferior, const BufferArgs& call, pid_t tid,
    const std::array<std::uint64_t, 6>& args) {
  const pid_t process = inferior.process_of(tid);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  std::uint64_t iov = args[static_cast<std::size_t>(call.buf)];
  std::uint64_t count = 0;
  if (call.len >= 0) {
    count = args[static_cast<std::size_t>(call.len)];
  } else {
    // struct msghdr: msg_name, msg_namelen (+ padding), msg_iov, msg_iovlen, msg_control,
    // msg_controllen, msg_flags.
    std::array<std::uint64_t, 6> msg{};
    if (!inferior.read_memory(iov, std::span(reinterpret_cast<std::uint8_t*>(msg.data()), 48),
                              process)) {
      return out;
    }
    out.emplace_back(msg[0], msg[1] & 0xffffffffu);
    out.emplace_back(msg[4], msg[5]);
    iov = msg[2];
    count = msg[3];
  }
  if (count == 0 || count > kMaxIovecs) return out;
  std::vector<std::uint64_t> words(2 * count);
  if (!inferior.read_memory(
          iov, std::span(reinterpret_cast<std::uint8_t*>(words.data()), words.size() * 8),
          process)) {
    return out;
  }
  for (std::uint64_t i = 0; i < count; ++i) out.emplace_back(words[2 * i], words[2 * i + 1]);
  return out;
}

}  // namespace

bool has_buffer_arguments(long nr) {
  return buffer_args(nr) != nullptr;
}

bool has_vector_arguments(long nr) {
  return vector_args(nr) != nullptr;
}

// The buffers of a call of kBufferSyscalls or kVectorSyscalls (for sendmsg/recvmsg, the data
// after the msghdr's name and control buffers: data_from 2); nullopt for any other call.
std::optional<SyscallBuffers> call_buffers(Inferior& inferior, pid_t tid, long nr,
                                           const std::array<std::uint64_t, 6>& args) {
  SyscallBuffers out;
  if (const BufferArgs* b = buffer_args(nr)) {
    out.kernel_reads = b->kernel_reads;
    out.buffers.emplace_back(args[static_cast<std::size_t>(b->buf)],
                             args[static_cast<std::size_t>(b->len)]);
    return out;
  }
  if (const BufferArgs* v = vector_args(nr)) {
    out.kernel_reads = v->kernel_reads;
    out.buffers = vector_buffers(inferior, *v, tid, args);
    out.data_from = v->len < 0 ? 2 : 0;
    return out;
  }
  return std::nullopt;
}

// Whether a read-like call (SyscallBuffers, !kernel_reads) that returned `ret` wrote user memory
// overlapping [addr, addr + len). Its result counts the bytes it wrote: they fill its data
// buffers in order, the first `ret` of them. The kernel writes them whatever they held: each
// such call is a write of the range (the 1000th read of the same bytes as much as the first), as
// a store of an equal value is one for the hardware. Buffers before data_from (a msghdr's name
// and control) are judged by their bytes changing.
bool wrote_data(const SyscallBuffers& call, std::int64_t ret, std::uint64_t addr,
                std::uint64_t len) {
  if (call.kernel_reads || ret <= 0 || ret > 0x7fffffff) return false;
  auto left = static_cast<std::uint64_t>(ret);
  for (std::size_t i = call.data_from; i < call.buffers.size() && left > 0; ++i) {
    const auto [buf, size] = call.buffers[i];
    const std::uint64_t filled = std::min(left, size);
    if (filled > 0 && overlaps(buf, filled, addr, len)) return true;
    left -= filled;
  }
  return false;
}

std::string syscall_name(long nr) {
  if (const BufferArgs* b = buffer_args(nr)) return b->name;
  if (const BufferArgs* b = vector_args(nr)) return b->name;
  switch (nr) {
    case SYS_futex:
      return "futex";
    case SYS_nanosleep:
      return "nanosleep";
    case SYS_clock_gettime:
      return "clock_gettime";
    case SYS_clock_nanosleep:
      return "clock_nanosleep";
    case SYS_gettimeofday:
      return "gettimeofday";
    case SYS_fstat:
      return "fstat";
    case SYS_newfstatat:
      return "newfstatat";
    case SYS_stat:
      return "stat";
    case SYS_ioctl:
      return "ioctl";
    case SYS_pipe:
      return "pipe";
    case SYS_pipe2:
      return "pipe2";
    case SYS_wait4:
      return "wait4";
    case SYS_rt_sigaction:
      return "rt_sigaction";
    case SYS_rt_sigprocmask:
      return "rt_sigprocmask";
    case SYS_uname:
      return "uname";
    case SYS_sysinfo:
      return "sysinfo";
    case SYS_times:
      return "times";
    case SYS_poll:
      return "poll";
    case SYS_select:
      return "select";
    case SYS_mprotect:
      return "mprotect";
    case SYS_munmap:
      return "munmap";
    case SYS_mmap:
      return "mmap";
    case SYS_mremap:
      return "mremap";
    default:
      return "syscall " + std::to_string(nr);
  }
}

// The futex words a futex(2) call touches and the access it needs to each (PROT_READ for a value
// the kernel compares, PROT_WRITE for one it changes: the PI operations and FUTEX_WAKE_OP's second
// word). Operations the kernel does not know touch nothing: it fails them with ENOSYS.
std::vector<std::pair<std::uint64_t, int>> futex_words(const std::array<std::uint64_t, 6>& args) {
  const int op = static_cast<int>(args[1]) & FUTEX_CMD_MASK;
  const std::uint64_t uaddr = args[0];
  const std::uint64_t uaddr2 = args[4];
  constexpr int kRead = PROT_READ;
  constexpr int kBoth = PROT_READ | PROT_WRITE;
  switch (op) {
    case FUTEX_WAIT:
    case FUTEX_WAIT_BITSET:
    case FUTEX_WAKE:
    case FUTEX_WAKE_BITSET:
    case FUTEX_FD:
      return {{uaddr, kRead}};
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE:
      return {{uaddr, kRead}, {uaddr2, kRead}};
    case FUTEX_WAKE_OP:
      return {{uaddr, kRead}, {uaddr2, kBoth}};
    case FUTEX_LOCK_PI:
    case FUTEX_LOCK_PI2:
    case FUTEX_UNLOCK_PI:
    case FUTEX_TRYLOCK_PI:
      return {{uaddr, kBoth}};
    case FUTEX_WAIT_REQUEUE_PI:
      return {{uaddr, kRead}, {uaddr2, kBoth}};
    case FUTEX_CMP_REQUEUE_PI:
      return {{uaddr, kRead}, {uaddr2, kBoth}};
    default:
      return {};
  }
}

}  // namespace hwarb::native

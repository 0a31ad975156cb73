// hwarb/linux/syscall_buffers.h — which system calls touch user memory and where: the table
// the software watch opens protected pages by, and reports the kernel's writes with.
//
// Three kinds of call are known:
//  1. a (buffer, length) pair of arguments: read, write, pread64, pwrite64, recvfrom, sendto,
//     getrandom, readlink, readlinkat, getcwd;
//  2. an iovec array (readv, writev, preadv, pwritev and their v2 forms) or a msghdr (sendmsg,
//     recvmsg: its name, its iovecs' buffers and its control buffer), read from the tracee;
//  3. futex(2): the futex words of each operation and the access the kernel needs to each.
// Any other call is judged by its pointer arguments (SoftWatch).
//
// Contract: pure except call_buffers(), which reads the tracee's iovec array or msghdr (thread
// `tid` stopped at the call's entry); unreadable or oversized arrays give no buffers (the kernel
// fails the call, EFAULT or EINVAL, before it touches one).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/linux/inferior.h"

namespace hwarb::native {

// A system call's user buffers (read, write, their vector and socket forms): where its data
// goes (buffers from data_from on, in order; before them a msghdr's name and control buffers)
// and whether the kernel reads them (write-like) or writes them (read-like).
struct SyscallBuffers {
  bool kernel_reads = false;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> buffers;
  std::size_t data_from = 0;
};

// Kind 1 above.
bool has_buffer_arguments(long nr);
// Kind 2 above.
bool has_vector_arguments(long nr);
// The buffers of a call of kind 1 or 2 with arguments `args` (for sendmsg/recvmsg, the data
// after the msghdr's name and control buffers: data_from 2); nullopt for any other call.
std::optional<SyscallBuffers> call_buffers(Inferior& inferior, pid_t tid, long nr,
                                           const std::array<std::uint64_t, 6>& args);
// Whether a read-like call that returned `ret` wrote user memory overlapping [addr, addr + len).
bool wrote_data(const SyscallBuffers& call, std::int64_t ret, std::uint64_t addr,
                std::uint64_t len);
// The call's name for messages ("read", "futex", ...; "syscall N" when unnamed).
std::string syscall_name(long nr);
// The futex words a futex(2) call with `args` touches, each with the access it needs
// (PROT_READ, PROT_WRITE).
std::vector<std::pair<std::uint64_t, int>> futex_words(const std::array<std::uint64_t, 6>& args);

}  // namespace hwarb::native

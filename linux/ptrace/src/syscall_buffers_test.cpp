// Tests of the system-call buffer table: which calls are known, the futex words and accesses,
// and which bytes a read-like call wrote by its result.
#include "hwarb/linux/syscall_buffers.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <gtest/gtest.h>

namespace hwarb::native {
namespace {

TEST(SyscallBuffers, KnownCallsByKind) {
  EXPECT_TRUE(has_buffer_arguments(SYS_read));
  EXPECT_TRUE(has_buffer_arguments(SYS_getrandom));
  EXPECT_FALSE(has_buffer_arguments(SYS_readv));
  EXPECT_TRUE(has_vector_arguments(SYS_readv));
  EXPECT_TRUE(has_vector_arguments(SYS_recvmsg));
  EXPECT_FALSE(has_vector_arguments(SYS_futex));
  EXPECT_EQ(syscall_name(SYS_pwrite64), "pwrite64");
  EXPECT_EQ(syscall_name(SYS_sendmsg), "sendmsg");
  EXPECT_EQ(syscall_name(SYS_mremap), "mremap");
  EXPECT_EQ(syscall_name(100000), "syscall 100000");
}

TEST(SyscallBuffers, FutexWordsAndTheirAccess) {
  using Words = std::vector<std::pair<std::uint64_t, int>>;
  EXPECT_EQ(futex_words({0x1000, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, 0, 0x2000, 0}),
            (Words{{0x1000, PROT_READ}}));
  EXPECT_EQ(futex_words({0x1000, FUTEX_WAKE_OP, 0, 0, 0x2000, 0}),
            (Words{{0x1000, PROT_READ}, {0x2000, PROT_READ | PROT_WRITE}}));
  EXPECT_EQ(futex_words({0x1000, FUTEX_LOCK_PI, 0, 0, 0, 0}),
            (Words{{0x1000, PROT_READ | PROT_WRITE}}));
  EXPECT_TRUE(futex_words({0x1000, 99, 0, 0, 0, 0}).empty());  // unknown: ENOSYS, touches nothing
}

TEST(SyscallBuffers, AReadWroteTheBytesItsResultCounts) {
  // readv into two buffers of 8 bytes at 0x1000 and 0x2000.
  const SyscallBuffers call{false, {{0x1000, 8}, {0x2000, 8}}, 0};
  EXPECT_TRUE(wrote_data(call, 4, 0x1000, 1));
  EXPECT_FALSE(wrote_data(call, 4, 0x1004, 4));  // past the 4 bytes it read
  EXPECT_TRUE(wrote_data(call, 10, 0x2001, 1));  // the second buffer's first 2 bytes
  EXPECT_FALSE(wrote_data(call, 10, 0x2002, 6));
  EXPECT_FALSE(wrote_data(call, -11, 0x1000, 8));  // failed: wrote nothing
  const SyscallBuffers write_like{true, {{0x1000, 8}}, 0};
  EXPECT_FALSE(wrote_data(write_like, 8, 0x1000, 8));  // the kernel reads it
  // recvmsg: name and control before data_from are judged elsewhere.
  const SyscallBuffers message{false, {{0x3000, 16}, {0x4000, 16}, {0x1000, 8}}, 2};
  EXPECT_FALSE(wrote_data(message, 8, 0x3000, 16));
  EXPECT_TRUE(wrote_data(message, 8, 0x1000, 8));
}

}  // namespace
}  // namespace hwarb::native

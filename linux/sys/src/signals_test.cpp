#include "hwarb/linux/signals.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <string_view>
#include <thread>

#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::native {
namespace {

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

// The signal mask is per thread: each test blocks its signal in a thread of its own, so the
// test program's main thread keeps its mask.
template <typename F>
void in_own_thread(F f) {
  std::thread t(f);
  t.join();
}

// SIGINT, SIGTERM and SIGHUP (a closed terminal) only set the flag: hwarb cleans up its tracee
// instead of dying. Each in a forked child, whose exit status says whether it survived.
TEST(InterruptFlag, IntTermAndHupSetTheFlagInsteadOfKilling) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      install_interrupt_flag();
      const unsigned before = interrupt_count();
      ::raise(sig);
      ::raise(sig);
      // Each signal counted: a waiter that polls learns of one from the count.
      ::_exit(interrupt_requested() && interrupt_count() == before + 2 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "signal " << sig << ": status " << status;
  }
}

TEST(BlockedSignalFd, ReadsTheBlockedSignalsOfTheThread) {
  in_own_thread([] {
    auto fd = blocked_signal_fd(SIGUSR2);
    ASSERT_TRUE(fd) << fd.error().to_string();
    EXPECT_EQ(::fcntl(fd->get(), F_GETFD), FD_CLOEXEC);
    EXPECT_NE(::fcntl(fd->get(), F_GETFL) & O_NONBLOCK, 0);
    sigset_t mask;
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, nullptr, &mask), 0);
    EXPECT_EQ(sigismember(&mask, SIGUSR2), 1);
    EXPECT_EQ(*drain_signal_fd(fd->get()), 0);
    // Blocked, the signal waits on the descriptor instead of ending the program.
    ASSERT_TRUE(send_thread_signal(own_pid(), ::gettid(), SIGUSR2));
    EXPECT_EQ(*drain_signal_fd(fd->get()), 1);
    EXPECT_EQ(*drain_signal_fd(fd->get()), 0);
  });
}

TEST(BlockedSignalFd, ANumberThatIsNoSignalIsEinval) {
  in_own_thread([] {
    expect_error(blocked_signal_fd(0), ErrorCode::kInval, "signal");
    expect_error(blocked_signal_fd(1000), ErrorCode::kInval, "signal");
  });
}

TEST(DrainSignalFd, ABadDescriptorIsNamed) {
  auto r = drain_signal_fd(-1);
  expect_error(r, ErrorCode::kIo, "fd");  // EBADF is folded into EIO, its name kept
  EXPECT_NE(r.error().message().find("EBADF"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace hwarb::native

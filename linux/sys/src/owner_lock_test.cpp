#include "hwarb/linux/owner_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

// A child waits for the lock; the parent's process (the owner) is simulated by a forked owner
// that either unlocks or is SIGKILLed holding the lock.
struct Shared {
  alignas(64) unsigned char lock[sizeof(OwnerLock)];
  int outcome = -1;  // what the waiter saw
};

int waiter_outcome(bool owner_dies) {
  auto mem = map_shared_anonymous(sizeof(Shared));
  EXPECT_TRUE(mem);
  if (!mem) return -2;
  auto* shared = new (*mem) Shared();
  const pid_t owner = ::fork();
  if (owner == 0) {
    auto lock = OwnerLock::init(shared->lock);
    if (!lock) ::_exit(3);
    const pid_t waiter = ::fork();
    if (waiter == 0) {
      auto got = (*lock)->wait();
      shared->outcome = got ? static_cast<int>(*got) : -3;
      ::_exit(0);
    }
    ::usleep(50'000);
    if (owner_dies) ::raise(SIGKILL);
    (*lock)->unlock();
    int status = 0;
    ::waitpid(waiter, &status, 0);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(owner, &status, 0);
  // A dead owner's waiter is reparented: wait until it wrote its outcome (bounded).
  for (int i = 0; i < 200 && shared->outcome == -1; ++i) ::usleep(10'000);
  const int outcome = shared->outcome;
  unmap(*mem, sizeof(Shared));
  return outcome;
}

TEST(OwnerLock, AWaiterGetsTheLockWhenTheOwnerUnlocks) {
  EXPECT_EQ(waiter_outcome(false), static_cast<int>(OwnerLock::Outcome::kReleased));
}

TEST(OwnerLock, AWaiterIsWokenWhenTheOwnerDiesHoldingIt) {
  EXPECT_EQ(waiter_outcome(true), static_cast<int>(OwnerLock::Outcome::kOwnerDied));
}

}  // namespace
}  // namespace hwarb::native

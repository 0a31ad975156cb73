// hwarb/linux/owner_lock.h — OwnerLock, a lock in memory shared between processes whose owner's
// death wakes the process waiting for it, as early in the owner's exit as the kernel allows.
//
// It is a robust, process-shared pthread mutex: the kernel walks a dying thread's robust list
// when it releases the thread's memory (the first step of its exit, before its files are closed
// and before its tracees are detached), marks each mutex it held OWNER_DIED and wakes a waiter.
// A watchdog that waits here learns of its owner's death before the owner's tracees run on.
//
// Contract:
//  - init() constructs the lock in place at `at` (memory shared with the processes to be forked,
//    e.g. map_shared_anonymous) and locks it for the calling thread. The owner must not unlock
//    it from another thread.
//  - wait() blocks until the lock is free: kReleased when its owner unlocked it, kOwnerDied when
//    the owner died holding it. Either way the caller then holds it.
//  - unlock() is the owner's normal release.
//  Errors name `lock` with the pthread error (EINVAL, ENOTRECOVERABLE, ...).
// Thread-safety: as pthread_mutex_t; one owner, any number of waiting processes.
#pragma once

#include <cstdint>

#include "hwarb/base/error.h"

namespace hwarb::native {

class OwnerLock {
 public:
  enum class Outcome : std::uint8_t { kReleased, kOwnerDied };

  static Result<OwnerLock*> init(void* at);
  Result<Outcome> wait();
  void unlock();

  // Storage large enough for the mutex (checked in owner_lock.cpp).
  alignas(16) unsigned char storage[64];

 private:
  OwnerLock() = default;
};

}  // namespace hwarb::native

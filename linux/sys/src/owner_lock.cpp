#include "hwarb/linux/owner_lock.h"

#include <pthread.h>

#include <cerrno>
#include <new>

#include "sys_error.h"

namespace hwarb::native {

namespace {

static_assert(sizeof(pthread_mutex_t) <= sizeof(OwnerLock::storage));

pthread_mutex_t* mutex_of(OwnerLock& lock) {
  return std::launder(reinterpret_cast<pthread_mutex_t*>(lock.storage));
}

}  // namespace

Result<OwnerLock*> OwnerLock::init(void* at) {
  auto* lock = new (at) OwnerLock();
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  auto* m = new (lock->storage) pthread_mutex_t;
  int err = pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
  if (err != 0)
    return detail::sys_fail<OwnerLock*>(err, "lock", "pthread_mutex_init (robust, shared)");
  err = pthread_mutex_lock(m);
  if (err != 0) return detail::sys_fail<OwnerLock*>(err, "lock", "pthread_mutex_lock");
  return lock;
}

Result<OwnerLock::Outcome> OwnerLock::wait() {
  pthread_mutex_t* m = mutex_of(*this);
  const int err = pthread_mutex_lock(m);
  if (err == 0) return Outcome::kReleased;
  if (err == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    return Outcome::kOwnerDied;
  }
  return detail::sys_fail<Outcome>(err, "lock", "pthread_mutex_lock");
}

void OwnerLock::unlock() {
  pthread_mutex_unlock(mutex_of(*this));
}

}  // namespace hwarb::native

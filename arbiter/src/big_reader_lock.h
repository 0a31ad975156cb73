// big_reader_lock.h — a reader-writer lock whose read side touches only the caller's own cache
// line (a "brlock", like Linux's percpu_rw_semaphore).
//
// Readers are spread over kSlots padded counters by thread; the read side is one atomic
// increment of the caller's slot plus one load of the writer flag. The write side is expensive:
// it raises the flag and waits for every slot to drain. Writers exclude each other with a mutex
// and are never starved: readers back off while the flag is up.
//
// Memory ordering: a reader's increment and its load of the flag are seq_cst, as are the writer's
// store of the flag and its loads of the slots, so either the writer sees the reader's count or
// the reader sees the flag (never neither). Reader exit is a release decrement that the writer's
// acquiring load of zero synchronises with; writer exit is a release store of the flag that the
// next reader's load synchronises with.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <thread>

namespace hwarb::arbiter::detail {

class BigReaderLock {
 public:
  static constexpr std::size_t kSlots = 64;

  // Returns the slot index to pass to unlock_shared.
  std::size_t lock_shared() {
    std::size_t slot = my_slot();
    for (;;) {
      slots_[slot].readers.fetch_add(1);
      if (!writer_.load()) return slot;
      slots_[slot].readers.fetch_sub(1, std::memory_order_release);
      while (writer_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
  }
  void unlock_shared(std::size_t slot) {
    slots_[slot].readers.fetch_sub(1, std::memory_order_release);
  }

  void lock() {
    writer_mutex_.lock();
    writer_.store(true);
    for (auto& s : slots_) {
      while (s.readers.load() != 0) std::this_thread::yield();
    }
  }
  void unlock() {
    writer_.store(false, std::memory_order_release);
    writer_mutex_.unlock();
  }

 private:
  static std::size_t my_slot() {
    static std::atomic<std::size_t> next{0};
    thread_local std::size_t slot = next.fetch_add(1, std::memory_order_relaxed) % kSlots;
    return slot;
  }

  struct alignas(64) Slot {
    std::atomic<int> readers{0};
  };
  std::array<Slot, kSlots> slots_{};
  alignas(64) std::atomic<bool> writer_{false};
  std::mutex writer_mutex_;
};

class SharedGuard {
 public:
  explicit SharedGuard(BigReaderLock& lock) : lock_(lock), slot_(lock.lock_shared()) {}
  ~SharedGuard() { lock_.unlock_shared(slot_); }
  SharedGuard(const SharedGuard&) = delete;
  SharedGuard& operator=(const SharedGuard&) = delete;

 private:
  BigReaderLock& lock_;
  std::size_t slot_;
};

}  // namespace hwarb::arbiter::detail

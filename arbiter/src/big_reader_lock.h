// big_reader_lock.h — a reader-writer lock whose read side touches only the caller's own cache
// line (a "brlock", like Linux's percpu_rw_semaphore).
//
// Each thread claims a private reader slot on first use (kPrivateSlots of them, handed back when
// the thread exits); threads beyond that share kSharedSlots slots by hash. On a private slot the
// read side is one atomic exchange to enter (it is also the full barrier the protocol needs) and
// a plain release store to leave; on a shared slot both are read-modify-writes. The write side is
// expensive: it raises the flag and waits for every slot to drain. Writers exclude each other
// with a mutex and are never starved: readers back off while the flag is up. The read side
// nests; the write side does not.
//
// Memory ordering: a reader's slot update and its load of the flag are seq_cst, as are the
// writer's store of the flag and its loads of the slots, so either the writer sees the reader's
// count or the reader sees the flag (never neither). Reader exit is a release store/decrement
// that the writer's acquiring load of zero synchronises with; writer exit is a release store of
// the flag that the next reader's load synchronises with.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace hwarb::arbiter::detail {

class BigReaderLock {
 public:
  static constexpr std::size_t kPrivateSlots = 64;
  static constexpr std::size_t kSharedSlots = 16;

  // Returns the slot index to pass to unlock_shared.
  std::size_t lock_shared() {
    const std::size_t slot = my_slot();
    std::atomic<int>& readers = slots_[slot].readers;
    for (;;) {
      if (slot < kPrivateSlots) {
        readers.exchange(readers.load(std::memory_order_relaxed) + 1);
      } else {
        readers.fetch_add(1);
      }
      if (!writer_.load()) return slot;
      leave(slot);
      while (writer_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
  }
  void unlock_shared(std::size_t slot) { leave(slot); }

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
  void leave(std::size_t slot) {
    std::atomic<int>& readers = slots_[slot].readers;
    if (slot < kPrivateSlots) {
      readers.store(readers.load(std::memory_order_relaxed) - 1, std::memory_order_release);
    } else {
      readers.fetch_sub(1, std::memory_order_release);
    }
  }

  // Private slots are owned process-wide (any BigReaderLock uses the same index for a thread).
  struct SlotOwner {
    std::size_t slot;
    SlotOwner() : slot(claim()) {}
    ~SlotOwner() {
      if (slot < kPrivateSlots) owned().fetch_and(~(std::uint64_t{1} << slot));
    }
    static std::atomic<std::uint64_t>& owned() {
      static std::atomic<std::uint64_t> bits{0};
      return bits;
    }
    static std::size_t claim() {
      std::uint64_t bits = owned().load();
      while (bits != ~std::uint64_t{0}) {
        const int free = std::countr_one(bits);
        if (owned().compare_exchange_weak(bits, bits | (std::uint64_t{1} << free))) {
          return static_cast<std::size_t>(free);
        }
      }
      static std::atomic<std::size_t> next{0};
      return kPrivateSlots + next.fetch_add(1, std::memory_order_relaxed) % kSharedSlots;
    }
  };
  static_assert(kPrivateSlots == 64, "the private-slot bitmap is one 64-bit word");

  static std::size_t my_slot() {
    thread_local SlotOwner owner;
    return owner.slot;
  }

  struct alignas(64) Slot {
    std::atomic<int> readers{0};
  };
  std::array<Slot, kPrivateSlots + kSharedSlots> slots_{};
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

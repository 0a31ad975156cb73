// big_reader_lock.h — a reader-writer lock whose read side touches only the caller's own cache
// line (a "brlock", like Linux's percpu_rw_semaphore).
//
// Each thread claims a private reader slot on first use (kPrivateSlots of them, handed back when
// the thread exits); threads beyond that share kSharedSlots slots by hash. On a private slot the
// read side is one atomic exchange to enter (it is also the full barrier the protocol needs) and
// a plain release store to leave; on a shared slot both are read-modify-writes. The write side is
// expensive: it raises the flag and waits for every slot to drain. Writers exclude each other
// with a mutex and are never starved: readers back off while the flag is up.
//
// NESTING
//
//   1. The read side nests, even with a writer waiting. A reader that backed off for a raised
//      flag while it already held the lock would wait for the writer, which waits for that
//      reader's slot to drain: a deadlock. So a thread that already holds the read side enters
//      again without looking at the flag. That is safe: the writer cannot be past this thread's
//      slot while the outer hold keeps it non-zero. A private slot knows it is held by its
//      count (only its owner thread changes it); a thread on a shared slot, whose count other
//      threads share, keeps a short per-thread list of the locks it holds (kMaxSharedNesting).
//   2. The write side does not nest, and a thread holding the read side must not take the write
//      side (it would wait for itself): both abort with HWARB_CHECK instead of hanging.
//   3. held_exclusively() tells whether the calling thread holds the write side; functions whose
//      rules require it check it (assert_held), and are annotated for Clang's -Wthread-safety.
//
// Memory ordering: a reader's slot update and its load of the flag are seq_cst, as are the
// writer's store of the flag and its loads of the slots, so either the writer sees the reader's
// count or the reader sees the flag (never neither). Reader exit is a release store/decrement
// that the writer's acquiring load of zero synchronises with; writer exit is a release store of
// the flag that the next reader's load synchronises with. A nested entry needs no ordering: the
// outer entry already synchronised.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "hwarb/base/check.h"
#include "hwarb/base/thread_annotations.h"

namespace hwarb::arbiter::detail {

class HWARB_CAPABILITY("brlock") BigReaderLock {
 public:
  static constexpr std::size_t kPrivateSlots = 64;
  static constexpr std::size_t kSharedSlots = 16;
  // How many read holds one thread on a shared slot may have at once (nesting rule 1).
  static constexpr std::size_t kMaxSharedNesting = 8;

  // Returns the slot index to pass to unlock_shared. The common case (a private slot, not nested,
  // no writer) is inline; the rest is out of line.
  [[gnu::always_inline]] std::size_t lock_shared() HWARB_ACQUIRE_SHARED() {
    const std::size_t slot = my_slot();
    if (slot >= kPrivateSlots) [[unlikely]]
      return lock_shared_slow(slot);
    std::atomic<int>& readers = slots_[slot].readers;
    const int held = readers.load(std::memory_order_relaxed);
    if (held > 0) {  // rule 1: nested on a private slot
      readers.store(held + 1, std::memory_order_relaxed);
      return slot;
    }
    readers.exchange(1);
    if (!writer_.load()) [[likely]]
      return slot;
    leave(slot);
    return lock_shared_slow(slot);
  }
  [[gnu::always_inline]] void unlock_shared(std::size_t slot) HWARB_RELEASE_SHARED() {
    if (slot >= kPrivateSlots) [[unlikely]]
      forget_shared_hold();
    leave(slot);
  }

  void lock() HWARB_ACQUIRE() {
    HWARB_CHECK(!held_exclusively(), "BigReaderLock: the write side does not nest");
    HWARB_CHECK(!holds_read_side(), "BigReaderLock: write side taken with the read side held");
    writer_mutex_.lock();
    writer_.store(true);
    for (auto& s : slots_) {
      while (s.readers.load() != 0) std::this_thread::yield();
    }
    writer_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  void unlock() HWARB_RELEASE() {
    writer_thread_.store(std::thread::id(), std::memory_order_relaxed);
    writer_.store(false, std::memory_order_release);
    writer_mutex_.unlock();
  }

  // Whether a writer has raised the flag (it may still be waiting for readers to drain).
  [[nodiscard]] bool writer_pending() const { return writer_.load(std::memory_order_acquire); }
  // Whether the calling thread holds the write side (only that thread can make it true).
  [[nodiscard]] bool held_exclusively() const {
    return writer_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  // Aborts unless the calling thread holds the write side (rule 3).
  void assert_held() const HWARB_ASSERT_CAPABILITY(this) {
    HWARB_CHECK(held_exclusively(), "BigReaderLock: the write side is required here");
  }

 private:
  // The read holds of a thread on a shared slot, innermost last (nesting rule 1).
  struct SharedHolds {
    std::array<const BigReaderLock*, kMaxSharedNesting> locks{};
    std::size_t size = 0;
    [[nodiscard]] std::size_t count(const BigReaderLock* lock) const {
      std::size_t n = 0;
      for (std::size_t i = 0; i < size; ++i) n += locks[i] == lock ? 1 : 0;
      return n;
    }
    void push(const BigReaderLock* lock) {
      HWARB_CHECK(size < kMaxSharedNesting, "BigReaderLock: too many nested read holds");
      locks[size++] = lock;
    }
    void pop(const BigReaderLock* lock) {
      for (std::size_t i = size; i-- > 0;) {
        if (locks[i] != lock) continue;
        for (std::size_t j = i; j + 1 < size; ++j) locks[j] = locks[j + 1];
        --size;
        return;
      }
      HWARB_CHECK(false, "BigReaderLock: unlock_shared without lock_shared");
    }
  };
  static SharedHolds& shared_holds() {
    thread_local SharedHolds holds;
    return holds;
  }

  // lock_shared for a shared slot, or for a private one that backed off for a writer (its
  // count is back to what it was, 0).
  [[gnu::noinline]] std::size_t lock_shared_slow(std::size_t slot) {
    std::atomic<int>& readers = slots_[slot].readers;
    if (slot >= kPrivateSlots && shared_holds().count(this) > 0) {  // rule 1: nested, shared
      readers.fetch_add(1, std::memory_order_relaxed);
      shared_holds().push(this);
      return slot;
    }
    for (;;) {
      while (writer_.load(std::memory_order_acquire)) std::this_thread::yield();
      if (slot < kPrivateSlots) {
        readers.exchange(readers.load(std::memory_order_relaxed) + 1);
      } else {
        readers.fetch_add(1);
      }
      if (!writer_.load()) break;
      leave(slot);
    }
    if (slot >= kPrivateSlots) shared_holds().push(this);
    return slot;
  }

  [[nodiscard]] bool holds_read_side() const {
    const std::size_t slot = my_slot();
    if (slot < kPrivateSlots) return slots_[slot].readers.load(std::memory_order_relaxed) > 0;
    return shared_holds().count(this) > 0;
  }

  [[gnu::noinline]] void forget_shared_hold() { shared_holds().pop(this); }
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

  // The calling thread's slot: a plain thread-local read once claimed (no initialisation guard
  // on the fast path); the first call claims it through the SlotOwner that hands it back.
  static std::size_t my_slot() {
    const std::size_t cached = cached_slot();
    if (cached != 0) [[likely]]
      return cached - 1;
    return claim_slot();
  }
  // Slot + 1, 0 before the thread's first claim.
  static std::size_t& cached_slot() {
    // initial-exec: one %fs-relative load (hwarb is linked into executables, or into libraries
    // loaded at start-up), not a __tls_get_addr call.
    [[gnu::tls_model("initial-exec")]] thread_local constinit std::size_t slot_plus_one = 0;
    return slot_plus_one;
  }
  [[gnu::noinline]] static std::size_t claim_slot() {
    thread_local SlotOwner owner;
    cached_slot() = owner.slot + 1;
    return owner.slot;
  }

  struct alignas(64) Slot {
    std::atomic<int> readers{0};
  };
  std::array<Slot, kPrivateSlots + kSharedSlots> slots_{};
  alignas(64) std::atomic<bool> writer_{false};
  std::atomic<std::thread::id> writer_thread_{};
  std::mutex writer_mutex_;
};

class HWARB_SCOPED_CAPABILITY SharedGuard {
 public:
  explicit SharedGuard(BigReaderLock& lock) HWARB_ACQUIRE_SHARED(lock)
      : lock_(lock), slot_(lock.lock_shared()) {}
  ~SharedGuard() HWARB_RELEASE() { lock_.unlock_shared(slot_); }
  SharedGuard(const SharedGuard&) = delete;
  SharedGuard& operator=(const SharedGuard&) = delete;

 private:
  BigReaderLock& lock_;
  std::size_t slot_;
};

// The write side for a scope (std::lock_guard carries no thread-safety annotations).
class HWARB_SCOPED_CAPABILITY WriteGuard {
 public:
  explicit WriteGuard(BigReaderLock& lock) HWARB_ACQUIRE(lock) : lock_(lock) { lock_.lock(); }
  ~WriteGuard() HWARB_RELEASE() { lock_.unlock(); }
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;

 private:
  BigReaderLock& lock_;
};

}  // namespace hwarb::arbiter::detail

#include "big_reader_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

namespace hwarb::arbiter::detail {
namespace {

using namespace std::chrono_literals;

// Runs `body` on a thread and fails the whole program if it has not finished within `limit`:
// a deadlock must fail the test, not hang it until ctest's timeout.
template <typename F>
void finishes_within(std::chrono::seconds limit, F body, const char* what) {
  std::packaged_task<void()> task(body);
  auto done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "deadlock: %s did not finish within %llds\n", what,
                 static_cast<long long>(limit.count()));
    std::_Exit(1);
  }
  runner.join();
}

void wait_until_pending(const BigReaderLock& lock) {
  while (!lock.writer_pending()) std::this_thread::yield();
}

TEST(BigReaderLock, ReadSideNestsWhileAWriterWaits) {
  finishes_within(
      20s,
      [] {
        BigReaderLock lock;
        const std::size_t outer = lock.lock_shared();
        std::thread writer([&] {
          lock.lock();
          lock.unlock();
        });
        wait_until_pending(lock);
        const std::size_t inner = lock.lock_shared();
        lock.unlock_shared(inner);
        lock.unlock_shared(outer);
        writer.join();
      },
      "a nested read with a writer waiting");
}

// Every private slot taken, so that some threads read through shared slots: their nesting is
// tracked per thread, not by the slot's count (which other threads share).
TEST(BigReaderLock, ReadSideNestsOnSharedSlotsWhileAWriterWaits) {
  finishes_within(
      60s,
      [] {
        constexpr int kThreads = static_cast<int>(BigReaderLock::kPrivateSlots) + 12;
        BigReaderLock lock;
        std::atomic<int> holding{0};
        std::atomic<bool> go{false};
        std::atomic<int> nested{0};
        std::vector<std::thread> readers;
        for (int i = 0; i < kThreads; ++i) {
          readers.emplace_back([&] {
            const std::size_t outer = lock.lock_shared();
            holding.fetch_add(1);
            while (!go.load()) std::this_thread::yield();
            const std::size_t inner = lock.lock_shared();
            const std::size_t innermost = lock.lock_shared();
            nested.fetch_add(1);
            lock.unlock_shared(innermost);
            lock.unlock_shared(inner);
            lock.unlock_shared(outer);
          });
        }
        while (holding.load() != kThreads) std::this_thread::yield();
        std::thread writer([&] {
          lock.lock();
          lock.unlock();
        });
        wait_until_pending(lock);
        go.store(true);
        for (auto& t : readers) t.join();
        writer.join();
        EXPECT_EQ(nested.load(), kThreads);
      },
      "nested reads on shared slots with a writer waiting");
}

TEST(BigReaderLock, HeldExclusivelyOnlyByTheWriterThread) {
  BigReaderLock lock;
  EXPECT_FALSE(lock.held_exclusively());
  lock.lock();
  EXPECT_TRUE(lock.held_exclusively());
  bool seen_elsewhere = true;
  std::thread([&] { seen_elsewhere = lock.held_exclusively(); }).join();
  EXPECT_FALSE(seen_elsewhere);
  lock.assert_held();
  lock.unlock();
  EXPECT_FALSE(lock.held_exclusively());
}

TEST(BigReaderLockDeathTest, AssertHeldWithoutTheWriteSideAborts) {
  BigReaderLock lock;
  EXPECT_DEATH(lock.assert_held(), "the write side is required here");
}

TEST(BigReaderLockDeathTest, WriteSideDoesNotNest) {
  EXPECT_DEATH(
      {
        BigReaderLock lock;
        lock.lock();
        lock.lock();
      },
      "the write side does not nest");
}

TEST(BigReaderLockDeathTest, WriteSideUnderTheReadSideAborts) {
  EXPECT_DEATH(
      {
        BigReaderLock lock;
        const std::size_t slot = lock.lock_shared();
        lock.lock();
        lock.unlock_shared(slot);
      },
      "write side taken with the read side held");
}

// Readers (nesting at random depths) never see a writer's two updates half done, and writers
// never lose one. Labelled race: also run under ThreadSanitizer.
TEST(BigReaderLockRace, NestedReadersAndWritersKeepTheInvariant) {
  finishes_within(
      120s,
      [] {
        BigReaderLock lock;
        long first = 0;  // written under the write side, read under the read side
        long second = 0;
        std::atomic<long> torn{0};
        constexpr int kReaders = 3;
        constexpr int kWriters = 2;
        constexpr int kRounds = 2000;
        std::vector<std::thread> threads;
        for (int r = 0; r < kReaders; ++r) {
          threads.emplace_back([&, r] {
            for (int i = 0; i < kRounds; ++i) {
              const int depth = 1 + (i + r) % 3;
              std::size_t slots[3];
              for (int d = 0; d < depth; ++d) {
                slots[d] = lock.lock_shared();
                if (first != second) torn.fetch_add(1);
              }
              for (int d = depth; d-- > 0;) lock.unlock_shared(slots[d]);
            }
          });
        }
        for (int w = 0; w < kWriters; ++w) {
          threads.emplace_back([&] {
            for (int i = 0; i < kRounds / 4; ++i) {
              WriteGuard guard(lock);
              ++first;
              ++second;
            }
          });
        }
        for (auto& t : threads) t.join();
        EXPECT_EQ(torn.load(), 0);
        EXPECT_EQ(first, kWriters * (kRounds / 4));
        EXPECT_EQ(second, first);
      },
      "readers and writers");
}

}  // namespace
}  // namespace hwarb::arbiter::detail

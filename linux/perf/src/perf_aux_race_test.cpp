// perf_aux_race_test — the AUX-area reader while the kernel writes: a producer thread (the
// fake kernel of perf_aux_fake_kernel.h) hands over stretches of any size whenever there is room,
// the test thread drains concurrently; every record arrives once, in order. Labelled race, so the
// ThreadSanitizer stage runs it too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "hwarb/linux/perf_aux.h"
#include "perf_aux_fake_kernel.h"

namespace hwarb::native {
namespace {

using testing::FakeKernel;
using testing::nth;
using testing::Reader;
using testing::reader_over;

TEST(PerfAux, ConcurrentProducerAndConsumerLoseNothing) {
  FakeKernel k(4, 8192);
  Reader r = reader_over(k);
  constexpr std::uint64_t kRecords = 200'000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    std::mt19937_64 rng(11);
    std::vector<std::uint8_t> pending;
    std::uint64_t next = 0;
    while (next < kRecords || !pending.empty()) {
      while (pending.size() < 4096 && next < kRecords) {
        const auto rec = testing::encode(nth(next++));
        pending.insert(pending.end(), rec.begin(), rec.end());
      }
      const std::size_t n = std::min<std::size_t>({1 + rng() % 3000, pending.size(), k.aux_free()});
      if (n == 0 || !k.hand_over(std::span(pending).subspan(0, n))) {
        std::this_thread::yield();
        continue;
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<long>(n));
    }
    done.store(true, std::memory_order_release);
  });
  for (;;) {
    const bool finished = done.load(std::memory_order_acquire);
    const auto d = r.drain();
    ASSERT_TRUE(d.has_value()) << d.error().to_string();
    if (finished) break;
    if (d->stretches == 0) std::this_thread::yield();
  }
  producer.join();
  ASSERT_EQ(r.got.size(), kRecords);
  for (std::size_t i = 0; i < r.got.size(); ++i) ASSERT_EQ(r.got[i], nth(i)) << i;
}

}  // namespace
}  // namespace hwarb::native

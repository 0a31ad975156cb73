// One producer thread and one consumer thread on an AuxRing. The producer writes
// sequence-numbered records in batches of 1-7 (so that batches get padded at the end of the
// buffer); the consumer reads views in place and releases them, sometimes only in part. Checked:
// every record that was written arrives exactly once, in order and intact; the sequence numbers
// skip exactly by the lost_before of the chunk after the gap; the lost records add up to lost().
//  - lossless: the producer waits for free space before each batch (free_space()), so nothing
//    may be lost;
//  - sleeping: lossless, the producer sleeping in wait_for_space and the consumer (dawdling, so
//    that the producer has to wait) in wait_for_data, each woken by the other (a missed wakeup
//    shows as a long timeout);
//  - lossy: a small ring, a producer that writes bursts of 256 records without waiting and a
//    consumer that dawdles, so that records are lost and truncation markers are exercised (the
//    test checks that both happened).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "hwarb/bts/aux_ring.h"

namespace hwarb::bts {
namespace {

constexpr std::size_t kR = kDefaultRecordSize;
constexpr std::size_t kMaxBatch = 7;
constexpr std::uint64_t kBurst = 256;

// Record counts, and a time budget per test after which the producer stops early (a loaded
// machine then checks fewer records, never times out).
#if defined(__SANITIZE_THREAD__)
constexpr std::uint64_t kLosslessRecords = 2'000'000;
constexpr std::uint64_t kLossyRecords = 1'000'000;
constexpr auto kBudget = std::chrono::seconds(8);
#elif defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kLosslessRecords = 4'000'000;
constexpr std::uint64_t kLossyRecords = 1'000'000;
constexpr auto kBudget = std::chrono::seconds(10);
#else
constexpr std::uint64_t kLosslessRecords = 10'000'000;
constexpr std::uint64_t kLossyRecords = 2'000'000;
constexpr auto kBudget = std::chrono::seconds(10);
#endif

void fill(std::byte* at, std::uint64_t seq) {
  const std::uint64_t words[3] = {seq, ~seq, seq * 0x9e3779b97f4a7c15ULL};
  std::memcpy(at, words, kR);
}

// Busy work the slow consumer does per record (a yield would hand the CPU away for a whole
// time slice on a loaded machine).
constexpr int kDawdle = 200;
void spin(int n) {
  for (int i = 0; i < n; ++i) asm volatile("");
}

struct ConsumerStats {
  std::uint64_t received = 0;
  std::uint64_t lost_seen = 0;
  std::uint64_t truncations = 0;
  std::uint64_t next = 0;  // the next sequence number expected
  std::uint64_t errors = 0;
  std::uint64_t wakeups = 0;
  std::uint64_t timeouts = 0;  // of the long waits
};

// How the two threads wait: the producer for space (lossless runs), the consumer for data.
enum class Wait {
  kPoll,   // free_space() and yield; wait_for_data with a short timeout
  kSleep,  // wait_for_space and wait_for_data with long timeouts, which must not pass
};
constexpr auto kLongTimeout = std::chrono::seconds(20);

// Reads views until the producer has closed the ring and everything is read.
ConsumerStats consume(AuxRing& ring, bool dawdle, Wait wait) {
  ConsumerStats s;
  std::uint64_t views = 0;
  for (;;) {
    const bool closed = ring.closed();  // before the view: a closed ring's view is complete
    AuxView v = ring.view();
    AuxChunk c;
    std::uint64_t release = v.begin();
    const bool partial = ++views % 5 == 0;
    while (v.next(c)) {
      if (c.data.size() % kR != 0 ||
          c.position % ring.capacity() + c.data.size() > ring.capacity()) {
        if (s.errors++ < 5) ADD_FAILURE() << "chunk at " << c.position << " straddles or is torn";
      }
      if (c.truncated()) {
        ++s.truncations;
        s.lost_seen += c.lost_before;
        s.next += c.lost_before;
      }
      for (std::size_t off = 0; off < c.data.size(); off += kR) {
        std::uint64_t words[3];
        std::memcpy(words, c.data.data() + off, kR);
        if (words[0] != s.next || words[1] != ~words[0] ||
            words[2] != words[0] * 0x9e3779b97f4a7c15ULL) {
          if (s.errors++ < 5) {
            ADD_FAILURE() << "record " << words[0] << " where " << s.next << " was expected";
          }
        }
        s.next = words[0] + 1;
        ++s.received;
        if (dawdle) spin(kDawdle);
      }
      release = c.position + c.data.size();
      if (partial) break;
    }
    if (auto r = ring.release_to(release); !r && s.errors++ < 5) {
      ADD_FAILURE() << "release_to: " << r.error().to_string();
    }
    if (v.empty()) {
      if (closed) return s;
      if (wait == Wait::kPoll) {
        if (ring.wait_for_data(std::chrono::microseconds(200))) ++s.wakeups;
      } else if (ring.wait_for_data(kLongTimeout)) {
        ++s.wakeups;
      } else {
        ++s.timeouts;
      }
    }
  }
}

struct ProducerStats {
  std::uint64_t produced = 0;  // sequence numbers used: written + dropped
  std::uint64_t written = 0;
  std::uint64_t dropped = 0;
  std::uint64_t padded = 0;
  std::uint64_t timeouts = 0;     // of the long waits
  std::uint64_t space_waits = 0;  // Wait::kSleep: batches that had to wait for space
};

ProducerStats produce(AuxRing& ring, std::uint64_t total, bool wait_for_space, Wait wait) {
  ProducerStats s;
  std::vector<std::byte> batch(kMaxBatch * kR);
  std::uint64_t seq = 0;
  std::size_t size = 1;
  const auto deadline = std::chrono::steady_clock::now() + kBudget;
  std::uint64_t batches = 0;
  while (seq < total) {
    if (++batches % 256 == 0 && std::chrono::steady_clock::now() > deadline) total = seq + 1;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size, total - seq));
    size = size % kMaxBatch + 1;
    for (std::size_t i = 0; i < n; ++i) fill(batch.data() + i * kR, seq + i);
    const std::span<const std::byte> bytes(batch.data(), n * kR);
    // The last batch is retried until written, so that every loss is followed by a record.
    const bool must = wait_for_space || seq + n == total;
    if (!wait_for_space && seq / kBurst != (seq + n) / kBurst) {
      // Lossy mode: bursts of kBurst records, each started once half the ring is free, so that
      // the consumer keeps up in part and every burst both delivers and loses records.
      while (ring.free_space() < ring.capacity() / 2) std::this_thread::yield();
    }
    for (;;) {
      if (must && wait == Wait::kPoll) {
        while (ring.free_space() < 2 * kMaxBatch * kR) std::this_thread::yield();
      } else if (must) {
        if (!ring.fits(bytes.size())) ++s.space_waits;
        if (!ring.wait_for_space(bytes.size(), kLongTimeout)) {
          ++s.timeouts;
          continue;
        }
      }
      auto w = ring.write(bytes);
      if (!w) {
        ADD_FAILURE() << w.error().to_string();
        return s;
      }
      if (w->padded) ++s.padded;
      if (w->written) {
        s.written += n;
        break;
      }
      if (!must) {
        s.dropped += n;
        break;
      }
      ADD_FAILURE() << "a batch was dropped although the space was there";
      return s;
    }
    seq += n;
  }
  s.produced = seq;
  ring.close();
  return s;
}

void run(std::size_t ring_records, std::uint64_t total, bool lossy, Wait wait = Wait::kPoll) {
  auto ring = AuxRing::create({.size = ring_records * kR,
                               .threshold = ring_records / 4 * kR,
                               .watermark = ring_records / 8 * kR});
  ASSERT_TRUE(ring.has_value()) << ring.error().to_string();
  ProducerStats p;
  ConsumerStats c;
  // The consumer dawdles where the producer must get ahead of it: losses, or waits for space.
  const bool dawdle = lossy || wait == Wait::kSleep;
  std::thread consumer([&] { c = consume(**ring, dawdle, wait); });
  std::thread producer([&] { p = produce(**ring, total, !lossy, wait); });
  producer.join();
  consumer.join();

  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(p.written + p.dropped, p.produced);
  EXPECT_GE(p.produced, std::min<std::uint64_t>(total, 10'000));
  EXPECT_EQ(c.received, p.written);
  EXPECT_EQ(c.next, p.produced);  // the last record arrived
  EXPECT_EQ((*ring)->lost(), p.dropped);
  EXPECT_EQ(c.lost_seen, p.dropped);
  EXPECT_EQ((*ring)->head(), (*ring)->tail());
  EXPECT_GT(p.padded, 0u);
  EXPECT_EQ(p.timeouts, 0u);  // a missed wakeup would leave a thread asleep until its timeout
  EXPECT_EQ(c.timeouts, 0u);
  if (wait == Wait::kSleep) {
    EXPECT_GT(p.space_waits, 0u);  // the producer did wait
  }
  if (lossy) {
    EXPECT_GT(p.dropped, 0u);
    EXPECT_GT(c.truncations, 0u);
  } else {
    EXPECT_EQ(p.dropped, 0u);
    EXPECT_EQ(c.truncations, 0u);
  }
  std::printf(
      "%s: %llu of %llu records produced: %llu written, %llu lost in %llu truncations, %llu "
      "padded batches, %llu wakeups, %llu waits for space\n",
      lossy ? "lossy" : "lossless", static_cast<unsigned long long>(p.produced),
      static_cast<unsigned long long>(total), static_cast<unsigned long long>(p.written),
      static_cast<unsigned long long>(p.dropped), static_cast<unsigned long long>(c.truncations),
      static_cast<unsigned long long>(p.padded), static_cast<unsigned long long>(c.wakeups),
      static_cast<unsigned long long>(p.space_waits));
}

TEST(AuxRingRaceTest, LosslessWhenTheProducerWaitsForSpace) {
  run(/*ring_records=*/1000, kLosslessRecords, /*lossy=*/false);
}

// Both threads sleep instead of polling: the producer in wait_for_space until the consumer's
// release wakes it, the consumer in wait_for_data until a watermark or close() wakes it.
TEST(AuxRingRaceTest, LosslessWhenBothThreadsSleep) {
  run(/*ring_records=*/128, kLosslessRecords / 4, /*lossy=*/false, Wait::kSleep);
}

TEST(AuxRingRaceTest, LossesAreReportedExactlyWhereRecordsAreMissing) {
  run(/*ring_records=*/61, kLossyRecords, /*lossy=*/true);
}

}  // namespace
}  // namespace hwarb::bts

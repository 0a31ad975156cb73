#include "hwarb/bts/aux_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace hwarb::bts {
namespace {

constexpr std::size_t kR = kDefaultRecordSize;

// Record `seq`: three words seq, ~seq, seq * 3, so that a torn or misplaced record shows.
std::vector<std::byte> records(std::uint64_t first, std::size_t n) {
  std::vector<std::byte> out(n * kR);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t seq = first + i;
    const std::uint64_t words[3] = {seq, ~seq, seq * 3};
    std::memcpy(out.data() + i * kR, words, kR);
  }
  return out;
}

// The sequence numbers in a chunk, checking each record's redundancy.
std::vector<std::uint64_t> seqs(const AuxChunk& c) {
  EXPECT_EQ(c.data.size() % kR, 0u);
  std::vector<std::uint64_t> out;
  for (std::size_t off = 0; off < c.data.size(); off += kR) {
    std::uint64_t words[3];
    std::memcpy(words, c.data.data() + off, kR);
    EXPECT_EQ(words[1], ~words[0]);
    EXPECT_EQ(words[2], words[0] * 3);
    out.push_back(words[0]);
  }
  return out;
}

struct Seen {
  std::vector<std::uint64_t> seqs;
  std::vector<std::uint64_t> positions;  // of each chunk
  std::vector<std::uint64_t> lost;       // lost_before of each chunk
};

// Reads the whole view and releases it.
Seen read_all(AuxRing& ring) {
  Seen s;
  AuxView v = ring.view();
  AuxChunk c;
  while (v.next(c)) {
    s.positions.push_back(c.position);
    s.lost.push_back(c.lost_before);
    for (std::uint64_t q : seqs(c)) s.seqs.push_back(q);
  }
  ring.release(v);
  return s;
}

std::unique_ptr<AuxRing> make(std::size_t records, std::size_t threshold_records = 0,
                              std::size_t watermark_records = 0) {
  auto r = AuxRing::create({.size = records * kR,
                            .threshold = threshold_records * kR,
                            .watermark = watermark_records * kR});
  EXPECT_TRUE(r.has_value()) << r.error().to_string();
  return std::move(*r);
}

WriteResult put(AuxRing& ring, std::uint64_t first, std::size_t n = 1) {
  auto r = ring.write(records(first, n));
  EXPECT_TRUE(r.has_value()) << r.error().to_string();
  return r.value_or(WriteResult{});
}

TEST(AuxRingTest, CreateRejectsBadConfigs) {
  auto bad = [](AuxRingConfig c) {
    auto r = AuxRing::create(c);
    EXPECT_FALSE(r.has_value());
    return r ? std::string() : r.error().message();
  };
  EXPECT_EQ(bad({.size = 25}), "size: must be a whole number of 24-byte records");
  EXPECT_EQ(bad({.size = 0}), "size: must be at least one 24-byte record");
  EXPECT_EQ(bad({.size = 48, .record_size = 0}), "record_size: must be positive");
  EXPECT_EQ(bad({.size = 96, .threshold = 30}).rfind("threshold:", 0), 0u);
  EXPECT_EQ(bad({.size = 96, .threshold = 96}).rfind("threshold:", 0), 0u);
  EXPECT_EQ(bad({.size = 96, .watermark = 120}).rfind("watermark:", 0), 0u);
  EXPECT_EQ(bad({.size = 96, .watermark = 10}).rfind("watermark:", 0), 0u);
  EXPECT_EQ(bad({.size = kMaxBufferBytes / kR * kR + kR}).rfind("size:", 0), 0u);

  auto failing = [](std::size_t) -> Result<ByteBuffer> {
    return make_error(ErrorCode::kNoMem, "buffer: injected failure");
  };
  auto r = AuxRing::create({.size = 96}, failing);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kNoMem);

  auto ok = AuxRing::create({.size = 5 * kR, .record_size = kR});
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ((*ok)->capacity(), 120u);
  EXPECT_EQ((*ok)->watermark(), 48u);  // half of 5 records, rounded down to whole records
  EXPECT_EQ(make(1)->watermark(), 24u);
}

TEST(AuxRingTest, WriteRejectsBadBatchesWithoutSideEffects) {
  auto ring = make(4);
  EXPECT_EQ(ring->write({}).error().code(), ErrorCode::kInval);
  std::vector<std::byte> odd(23);
  EXPECT_EQ(ring->write(odd).error().message(),
            "records: must be a non-empty whole number of 24-byte records");
  EXPECT_EQ(ring->write(records(0, 5)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(ring->head(), 0u);
  EXPECT_EQ(ring->lost(), 0u);
}

TEST(AuxRingTest, ExactlyFullThenOnePastIsLost) {
  auto ring = make(4);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(put(*ring, i).written);
  EXPECT_EQ(ring->free_space(), 0u);
  EXPECT_FALSE(put(*ring, 4).written);
  EXPECT_EQ(ring->lost(), 1u);
  EXPECT_EQ(ring->head(), 96u);

  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(ring->tail(), 96u);

  // After the wrap the next written record carries the truncation.
  EXPECT_TRUE(put(*ring, 5).written);
  s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{5}));
  EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{96}));
  EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{1}));
}

TEST(AuxRingTest, CapacityOfOneRecord) {
  auto ring = make(1);
  EXPECT_TRUE(put(*ring, 0).written);
  EXPECT_FALSE(put(*ring, 1).written);
  EXPECT_FALSE(put(*ring, 2).written);
  EXPECT_EQ(read_all(*ring).seqs, (std::vector<std::uint64_t>{0}));
  for (std::uint64_t i = 3; i < 10; ++i) {
    EXPECT_TRUE(put(*ring, i).written);
    Seen s = read_all(*ring);
    EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{i}));
    EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{i == 3 ? 2u : 0u}));
    EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{(i - 2) * kR}));
  }
  EXPECT_EQ(ring->lost(), 2u);
}

TEST(AuxRingTest, TruncationSplitsTheViewWhereRecordsWereLost) {
  auto ring = make(3);
  put(*ring, 0, 3);
  EXPECT_FALSE(put(*ring, 3).written);
  EXPECT_FALSE(put(*ring, 4).written);
  ring->view();
  ASSERT_TRUE(ring->release_to(kR).has_value());  // consume record 0 only
  EXPECT_TRUE(put(*ring, 5).written);
  EXPECT_FALSE(put(*ring, 6).written);
  ring->view();
  ASSERT_TRUE(ring->release_to(2 * kR).has_value());  // record 1
  EXPECT_TRUE(put(*ring, 7).written);
  Seen s = read_all(*ring);
  // 2 (plain), 5 (after 3 and 4 were lost), 7 (after 6 was lost).
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{2, 5, 7}));
  EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{0, 2, 1}));
  EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{48, 72, 96}));
  EXPECT_EQ(ring->lost(), 3u);
}

TEST(AuxRingTest, BatchThatWouldStraddleTheEndIsPaddedToTheStart) {
  auto ring = make(5);
  EXPECT_FALSE(put(*ring, 0, 2).padded);
  put(*ring, 2, 2);
  // Offset 96: one record left before the end; a 2-record batch needs 24 bytes of padding plus
  // 48 and only 24 are free: dropped, both records lost.
  WriteResult w = put(*ring, 4, 2);
  EXPECT_FALSE(w.written);
  EXPECT_EQ(ring->lost(), 2u);
  EXPECT_EQ(read_all(*ring).seqs, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  w = put(*ring, 6, 2);
  EXPECT_TRUE(w.written);
  EXPECT_TRUE(w.padded);
  EXPECT_EQ(ring->head(), 96u + 24u + 48u);
  EXPECT_EQ(ring->free_space(), 120u - 72u);  // the padding holds space until released
  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{6, 7}));
  EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{120}));  // offset 0 of the second lap
  EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(ring->tail(), 168u);
  EXPECT_EQ(ring->free_space(), 120u);
}

TEST(AuxRingTest, PaddingIsSkippedInsideOneView) {
  auto ring = make(5);
  put(*ring, 0, 3);
  read_all(*ring);   // tail 72
  put(*ring, 3, 1);  // offset 72..96
  put(*ring, 4, 2);  // 96..120 padded, batch at 0..48
  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{3, 4, 5}));
  EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{72, 120}));
  EXPECT_EQ(s.lost, (std::vector<std::uint64_t>{0, 0}));
}

TEST(AuxRingTest, FitsCountsThePaddingABatchWouldNeed) {
  auto ring = make(5);
  put(*ring, 0, 3);
  read_all(*ring);  // tail 72: 5 records free, 2 of them before the end
  EXPECT_TRUE(ring->fits(2 * kR));
  EXPECT_TRUE(ring->fits(3 * kR));   // padding 2 + 3 records = 5
  EXPECT_FALSE(ring->fits(4 * kR));  // padding 2 + 4 records > 5
  EXPECT_EQ(ring->free_space(), 5 * kR);
  EXPECT_FALSE(put(*ring, 3, 4).written);
  EXPECT_TRUE(put(*ring, 7, 3).padded);
  EXPECT_FALSE(ring->fits(kR));
}

TEST(AuxRingTest, WaitForSpaceSleepsUntilTheConsumerReleases) {
  using std::chrono::milliseconds;
  auto ring = make(4);
  EXPECT_TRUE(ring->wait_for_space(4 * kR, milliseconds(0)));  // fits at once
  put(*ring, 0, 4);
  EXPECT_FALSE(ring->fits(kR));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ring->wait_for_space(kR, milliseconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(5));

  std::atomic<bool> released{false};
  std::thread consumer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    AuxView v = ring->view();
    released.store(true);
    EXPECT_TRUE(ring->release_to(v.begin() + 2 * kR).has_value());
  });
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ring->wait_for_space(2 * kR, std::chrono::seconds(30)));
  const auto waited = std::chrono::steady_clock::now() - t0;
  consumer.join();
  EXPECT_TRUE(released.load());
  EXPECT_LT(waited, std::chrono::seconds(30));  // woken by the release, not by the timeout
  EXPECT_FALSE(ring->wait_for_space(3 * kR, milliseconds(1)));  // 2 records free
  EXPECT_TRUE(put(*ring, 4, 2).written);
  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{2, 3, 4, 5}));
}

TEST(AuxRingTest, ReleaseToValidatesAndSkipsPadding) {
  auto ring = make(5);
  put(*ring, 0, 4);
  read_all(*ring);   // tail 96
  put(*ring, 4, 2);  // padding 96..120, records at 120..168
  AuxView v = ring->view();
  EXPECT_EQ(v.end(), 168u);
  EXPECT_EQ(ring->release_to(90).error().message(),
            "position: 90 is outside [96, 168], the data of the last view");
  EXPECT_EQ(ring->release_to(192).error().code(), ErrorCode::kInval);
  EXPECT_EQ(ring->release_to(100).error().message(), "position: 100 is not on a record boundary");
  ASSERT_TRUE(ring->release_to(96).has_value());  // the start of the padding: moves past it
  EXPECT_EQ(ring->tail(), 120u);
  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{4, 5}));
}

TEST(AuxRingTest, PaddingPublishedAfterTheViewIsLeftToTheNextView) {
  auto ring = make(5);
  put(*ring, 0, 3);
  read_all(*ring);   // tail 72
  put(*ring, 3, 1);  // 72..96
  AuxView v = ring->view();
  EXPECT_EQ(v.end(), 96u);
  EXPECT_TRUE(put(*ring, 4, 2).padded);  // padding 96..120 starts where the view ends
  ASSERT_TRUE(ring->release_to(96).has_value());
  EXPECT_EQ(ring->tail(), 96u);
  Seen s = read_all(*ring);
  EXPECT_EQ(s.seqs, (std::vector<std::uint64_t>{4, 5}));
  EXPECT_EQ(s.positions, (std::vector<std::uint64_t>{120}));
  EXPECT_EQ(ring->tail(), 168u);
}

TEST(AuxRingTest, ThresholdFiresOncePerApproachExactlyWhereDocumented) {
  auto ring = make(10, /*threshold_records=*/3, /*watermark_records=*/10);
  std::vector<int> fired;
  for (int i = 1; i <= 8; ++i) {
    if (put(*ring, static_cast<std::uint64_t>(i)).threshold) fired.push_back(i);
  }
  EXPECT_EQ(fired, (std::vector<int>{7}));  // the 7th write leaves 3 records free
  read_all(*ring);
  fired.clear();
  for (int i = 1; i <= 7; ++i) {
    if (put(*ring, static_cast<std::uint64_t>(100 + i)).threshold) fired.push_back(i);
  }
  EXPECT_EQ(fired, (std::vector<int>{7}));  // re-armed by the first write after the release
}

TEST(AuxRingTest, ThresholdZeroFiresWhenFull) {
  auto ring = make(3, 0, 3);
  EXPECT_FALSE(put(*ring, 0).threshold);
  EXPECT_FALSE(put(*ring, 1).threshold);
  EXPECT_TRUE(put(*ring, 2).threshold);
}

TEST(AuxRingTest, WatermarkFiresEveryWBytesOfRecords) {
  auto ring = make(10, 0, 3);
  std::vector<int> fired;
  for (int i = 1; i <= 9; ++i) {
    if (put(*ring, static_cast<std::uint64_t>(i)).wakeup) fired.push_back(i);
    read_all(*ring);
  }
  EXPECT_EQ(fired, (std::vector<int>{3, 6, 9}));
  EXPECT_EQ(ring->events(), 3u);

  // Batches: marks at 3, then written + 3.
  auto batches = make(10, 0, 3);
  std::vector<bool> w;
  for (int i = 0; i < 4; ++i) {
    w.push_back(put(*batches, 0, 2).wakeup);
    read_all(*batches);
  }
  EXPECT_EQ(w, (std::vector<bool>{false, true, false, true}));  // at 4 records, then at 8 >= 7
}

TEST(AuxRingTest, WaitForDataReturnsOnEventsAndTimesOut) {
  auto ring = make(4, 0, 2);
  EXPECT_FALSE(ring->wait_for_data(std::chrono::milliseconds(1)));
  put(*ring, 0);
  EXPECT_FALSE(ring->wait_for_data(std::chrono::milliseconds(1)));  // below the watermark
  EXPECT_TRUE(put(*ring, 1).wakeup);
  EXPECT_TRUE(ring->wait_for_data(std::chrono::milliseconds(0)));
  EXPECT_FALSE(ring->wait_for_data(std::chrono::milliseconds(1)));  // already seen
  ring->wakeup();
  EXPECT_TRUE(ring->wait_for_data(std::chrono::milliseconds(0)));
  ring->close();
  EXPECT_TRUE(ring->closed());
  EXPECT_TRUE(ring->wait_for_data(std::chrono::milliseconds(0)));
  EXPECT_TRUE(ring->wait_for_data(std::chrono::milliseconds(0)));
  EXPECT_EQ(ring->write(records(2, 1)).error().message(), "ring: closed");
}

// Random batches and partial releases against a model of what must come out; a watermark of one
// record and a threshold make every write() take the out-of-line path, no threshold and a
// watermark of the whole ring let most take the inline one.
TEST(AuxRingTest, ManyWrapsMatchTheModel) {
  for (const bool notify_often : {true, false})
    for (std::size_t cap_records : {1u, 2u, 3u, 7u, 10u, 64u}) {
      auto ring =
          notify_often ? make(cap_records, cap_records / 2, 1) : make(cap_records, 0, cap_records);
      std::mt19937_64 rng(cap_records);
      std::uint64_t next_seq = 0;
      std::uint64_t expect = 0;  // next seq the consumer must see, after adding lost_before
      std::uint64_t lost = 0;
      std::uint64_t received = 0;
      // Reads the view (only its first chunk when `partial`), checking the order, and releases.
      auto consume = [&](bool partial) {
        AuxView v = ring->view();
        AuxChunk c;
        std::uint64_t release = v.begin();
        while (v.next(c)) {
          EXPECT_LE(c.position % ring->capacity() + c.data.size(), ring->capacity());
          expect += c.lost_before;
          for (std::uint64_t q : seqs(c)) {
            EXPECT_EQ(q, expect) << "capacity " << cap_records;
            ++expect;
            ++received;
          }
          release = c.position + c.data.size();
          if (partial) break;
        }
        EXPECT_TRUE(ring->release_to(release).has_value());
      };
      for (int step = 0; step < 20000; ++step) {
        if (rng() % 3 != 0) {
          const std::size_t n = 1 + rng() % cap_records;
          WriteResult w = put(*ring, next_seq, n);
          if (!w.written) lost += n;
          next_seq += n;
        } else {
          consume(rng() % 2 == 0);
        }
        if (HasFailure()) return;
      }
      consume(false);
      EXPECT_EQ(ring->lost(), lost);
      EXPECT_EQ(received + lost, next_seq) << "capacity " << cap_records;
      EXPECT_GT(lost, 0u);
    }
}

}  // namespace
}  // namespace hwarb::bts

// perf_aux_test — the AUX-area reader and the intel_bts record decoder, against a producer that
// writes the mapping exactly as the kernel's perf_aux_output_end does (same thread, then a
// concurrent thread), and against the real kernel for what this machine has (an event without
// an AUX area must be refused cleanly).
#include "hwarb/linux/perf_aux.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "hwarb/linux/syscalls.h"
#include "perf_aux_fake_kernel.h"

namespace hwarb::native {
namespace {

using testing::aux_record;
using testing::encode;
using testing::FakeKernel;
using testing::kPage;
using testing::nth;
using testing::Reader;
using testing::reader_over;

TEST(PerfAux, DecodesAuxRecordsAndRefusesOthers) {
  const auto ev = decode_aux_event(aux_record(4800, 240, kAuxTruncated | kAuxPartial));
  ASSERT_TRUE(ev.has_value()) << ev.error().to_string();
  EXPECT_EQ(ev->offset, 4800u);
  EXPECT_EQ(ev->size, 240u);
  EXPECT_TRUE(ev->truncated());
  EXPECT_EQ(ev->flags & kAuxPartial, kAuxPartial);

  RingRecord lost;
  lost.type = PERF_RECORD_LOST;
  lost.body.resize(16);
  const auto wrong = decode_aux_event(lost);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.error().code(), ErrorCode::kInval);
  EXPECT_NE(wrong.error().to_string().find("record"), std::string::npos);

  RingRecord shorty = aux_record(0, 24, 0);
  shorty.body.resize(16);
  const auto cut = decode_aux_event(shorty);
  ASSERT_FALSE(cut.has_value());
  EXPECT_EQ(cut.error().code(), ErrorCode::kIo);
}

TEST(PerfAux, BtsRecordsDecodeWhereverTheStreamIsCut) {
  std::vector<std::uint8_t> stream;
  std::vector<x86::BtsRecord> want;
  for (std::uint64_t i = 0; i < 9; ++i) {
    want.push_back(nth(i));
    const auto r = encode(nth(i));
    stream.insert(stream.end(), r.begin(), r.end());
    if (i == 4) stream.insert(stream.end(), kBtsRecordBytes, 0);  // the driver's padding
  }
  // Every pair of cut points: three feeds of any lengths.
  for (std::size_t a = 0; a <= stream.size(); a += 5) {
    for (std::size_t b = a; b <= stream.size(); b += 7) {
      BtsStreamDecoder d;
      std::vector<x86::BtsRecord> got;
      const auto sink = [&](const x86::BtsRecord& h) { got.push_back(h); };
      d.feed(std::span(stream).subspan(0, a), sink);
      d.feed(std::span(stream).subspan(a, b - a), sink);
      d.feed(std::span(stream).subspan(b), sink);
      ASSERT_EQ(got, want) << "cut at " << a << " and " << b;
      EXPECT_EQ(d.padding(), 1u);
      EXPECT_EQ(d.records(), want.size());
      EXPECT_EQ(d.partial(), 0u);
    }
  }
}

// The layout the kernel's intel_bts driver hands over (struct bts_record: u64 from, to, flags;
// flags bit 4 predicted), written byte by byte here, not with the project's encoder.
TEST(PerfAux, RecordsHaveTheDriversLayout) {
  std::vector<std::uint8_t> raw(2 * kBtsRecordBytes, 0);
  const std::uint64_t words[6] = {0x401122, 0x7fff00003344, 0x10, 0x401200, 0x401000, 0x0};
  std::memcpy(raw.data(), words, sizeof words);
  BtsStreamDecoder d;
  std::vector<x86::BtsRecord> got;
  d.feed(raw, [&](const x86::BtsRecord& r) { got.push_back(r); });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (x86::BtsRecord{0x401122, 0x7fff00003344, true}));
  EXPECT_EQ(got[1], (x86::BtsRecord{0x401200, 0x401000, false}));
}

TEST(PerfAux, RestartDropsAnIncompleteRecord) {
  BtsStreamDecoder d;
  std::vector<x86::BtsRecord> got;
  const auto sink = [&](const x86::BtsRecord& h) { got.push_back(h); };
  const auto first = encode(nth(1));
  d.feed(std::span(first).subspan(0, 10), sink);
  EXPECT_EQ(d.partial(), 10u);
  d.restart();
  const auto second = encode(nth(2));
  d.feed(second, sink);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], nth(2));
}

TEST(PerfAux, StretchesArriveInOrderAcrossTheWrapAndGiveTheSpaceBack) {
  FakeKernel k(2, 4096);
  Reader r = reader_over(k);
  std::mt19937_64 rng(7);
  std::uint64_t next = 0;
  std::vector<std::uint8_t> pending;  // encoded, not yet handed over
  std::uint64_t handed = 0;
  for (int round = 0; round < 400; ++round) {
    while (pending.size() < 2000) {
      const auto rec = encode(nth(next++));
      pending.insert(pending.end(), rec.begin(), rec.end());
    }
    // Stretches of any length, not whole records, as long as they fit.
    const std::size_t want = 1 + rng() % 1500;
    const std::size_t n = std::min<std::size_t>(want, k.aux_free());
    if (n != 0 && k.hand_over(std::span(pending).subspan(0, n))) {
      pending.erase(pending.begin(), pending.begin() + static_cast<long>(n));
      handed += n;
    }
    if (rng() % 3 == 0) {
      const auto d = r.drain();
      ASSERT_TRUE(d.has_value()) << d.error().to_string();
      EXPECT_EQ(k.aux_tail(), handed);  // every stretch read is given back
      EXPECT_EQ(r.ring.pending(), 0u);
    }
  }
  ASSERT_TRUE(r.drain().has_value());
  ASSERT_EQ(r.got.size(), handed / kBtsRecordBytes);
  for (std::size_t i = 0; i < r.got.size(); ++i) ASSERT_EQ(r.got[i], nth(i)) << i;
  EXPECT_GT(handed, 10 * k.aux().size());  // the area wrapped many times
}

TEST(PerfAux, TruncationLostRecordsAndOtherRecordsAreCounted) {
  FakeKernel k(1, 4096);
  Reader r = reader_over(k);
  const auto a = encode(nth(0));
  const auto b = encode(nth(1));
  std::vector<std::uint8_t> with_half(a);
  with_half.insert(with_half.end(), b.begin(), b.begin() + 12);  // half a record, then full
  ASSERT_TRUE(k.hand_over(with_half, kAuxTruncated));
  RingRecord lost;
  lost.type = PERF_RECORD_LOST;
  lost.body.resize(16);
  const std::uint64_t n = 5;
  std::memcpy(lost.body.data() + 8, &n, 8);
  k.put_record(lost);
  RingRecord start;
  start.type = PERF_RECORD_ITRACE_START;
  start.body.resize(8);
  k.put_record(start);
  const auto c = encode(nth(2));
  ASSERT_TRUE(k.hand_over(c));
  ASSERT_TRUE(k.hand_over({}, kAuxTruncated));  // an empty stretch that only says "lost"
  const auto d = r.drain();
  ASSERT_TRUE(d.has_value()) << d.error().to_string();
  EXPECT_EQ(d->stretches, 3u);
  EXPECT_EQ(d->truncations, 2u);
  EXPECT_EQ(d->lost, 5u);
  EXPECT_EQ(d->other, 1u);
  EXPECT_EQ(d->bytes, with_half.size() + c.size());
  // The half record before the truncation is dropped, not glued to the next stretch.
  ASSERT_EQ(r.got.size(), 2u);
  EXPECT_EQ(r.got[0], nth(0));
  EXPECT_EQ(r.got[1], nth(2));
}

TEST(PerfAux, AStretchOutsideTheReadableWindowIsAnErrorAndTheRingStillMoves) {
  FakeKernel k(1, 4096);
  Reader r = reader_over(k);
  const auto a = encode(nth(0));
  ASSERT_TRUE(k.hand_over(a));
  ASSERT_TRUE(r.drain().has_value());
  k.hand_over_raw(0, 24);  // behind aux_tail (24)
  auto d = r.drain();
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), ErrorCode::kIo);
  EXPECT_NE(d.error().to_string().find("aux:"), std::string::npos) << d.error().to_string();
  EXPECT_EQ(r.ring.pending(), 0u);
  k.hand_over_raw(24, 8192);  // longer than the area
  d = r.drain();
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), ErrorCode::kIo);
  EXPECT_EQ(k.aux_tail(), 24u);  // nothing given back for the bad ones
  EXPECT_EQ(r.got.size(), 1u);
}

TEST(PerfAux, OverRefusesLayoutsThatDoNotFit) {
  std::vector<std::uint8_t> meta(2 * kPage);
  std::vector<std::uint8_t> aux(4096);
  auto* m = reinterpret_cast<perf_event_mmap_page*>(meta.data());
  m->data_offset = kPage;
  m->data_size = 3000;  // not a power of two
  auto r = PerfAuxRing::over(meta, aux);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find("meta:"), std::string::npos);
  m->data_size = 2 * kPage;  // runs past the memory
  EXPECT_FALSE(PerfAuxRing::over(meta, aux).has_value());
  m->data_size = kPage;
  std::vector<std::uint8_t> odd(3000);
  r = PerfAuxRing::over(meta, odd);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find("aux:"), std::string::npos);
  EXPECT_TRUE(PerfAuxRing::over(meta, aux).has_value());
}

// The intel_bts driver on the simulated processor: the processor's BTS (x86::store_bts, BTINT
// set) writes records straight into the AUX area, as the kernel's driver points the DS area at
// it (bts_buffer_reset): the BTS buffer is the free space from aux_head to the end of the area
// or to aux_tail, at most the wakeup watermark, whole records only, the interrupt threshold at
// its end. On the PMI, or when
// the task is scheduled out, the driver hands the stored bytes over. Space at the end of the area
// too small for a record is zeroed and skipped (bts_buffer_pad_out, perf_aux_output_skip). With
// no space left, BTS stays off and the next stretch is flagged TRUNCATED.
class SimBtsDriver {
 public:
  explicit SimBtsDriver(FakeKernel& kernel) : k_(kernel) {}

  // One taken user branch of the traced task.
  void branch(const x86::BtsRecord& r) {
    if (!on_ && !reset()) {
      ++dropped_;
      return;
    }
    const std::uint64_t debugctl =
        x86::debugctl::enable_bts(0, {.kernel = false, .user = true, .interrupt = true});
    auto store = x86::store_bts(x86::BtsFormat::k64, debugctl, area_, chunk_, r, false);
    ASSERT_TRUE(store.has_value()) << store.error().to_string();
    ASSERT_TRUE(store->stored);
    if (store->interrupt) hand_over();
  }
  // The task is scheduled out (perf's del): what is stored is handed over.
  void sched_out() {
    if (on_) hand_over();
  }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t truncations() const { return truncations_; }

 private:
  std::size_t offset() const { return static_cast<std::size_t>(head_ % k_.aux().size()); }

  // Points the DS area at the free space from head_; false (BTS stays off) when none is left.
  bool reset() {
    const std::size_t size = k_.aux().size();
    const std::size_t to_end = size - offset();
    if (to_end < kBtsRecordBytes) {
      // Only padding fits before the end of the area.
      if (k_.aux_free() < to_end) return lose();
      k_.skip(to_end);
      head_ += to_end;
    }
    // At most the wakeup watermark (perf's default: half the area), so that the consumer gets
    // records before the area is full.
    std::size_t room = static_cast<std::size_t>(
        std::min<std::uint64_t>({k_.aux_free(), size - offset(), size / 2}));
    room -= room % kBtsRecordBytes;
    if (room == 0) return lose();
    chunk_ = std::as_writable_bytes(k_.aux().subspan(offset(), room));
    area_ = {};
    area_.bts_buffer_base = 0x1000000 + offset();
    area_.bts_index = area_.bts_buffer_base;
    area_.bts_absolute_maximum = area_.bts_buffer_base + room;
    area_.bts_interrupt_threshold = area_.bts_absolute_maximum;
    on_ = true;
    return true;
  }
  bool lose() {
    lost_ = true;
    return false;
  }
  // The stored records (perf_aux_output_end).
  void hand_over() {
    on_ = false;
    const std::size_t n = static_cast<std::size_t>(area_.bts_index - area_.bts_buffer_base);
    const std::vector<std::uint8_t> bytes(k_.aux().begin() + static_cast<long>(offset()),
                                          k_.aux().begin() + static_cast<long>(offset() + n));
    if (!bytes.empty() || lost_) emit(bytes);
  }
  void emit(const std::vector<std::uint8_t>& bytes) {
    if (lost_) ++truncations_;
    ASSERT_TRUE(k_.hand_over(bytes, lost_ ? kAuxTruncated : 0));
    lost_ = false;
    head_ += bytes.size();
  }

  FakeKernel& k_;
  std::uint64_t head_ = 0;
  std::span<std::byte> chunk_;
  x86::DsArea area_;
  bool on_ = false;
  bool lost_ = false;
  std::uint64_t dropped_ = 0;
  std::uint64_t truncations_ = 0;
};

TEST(PerfAux, TheSimulatedBtsDriversStretchesDecodeToTheBranchStream) {
  for (const bool slow_reader : {false, true}) {
    FakeKernel k(4, 4096);  // 4096 is not a multiple of 24: padding at every wrap
    SimBtsDriver driver(k);
    Reader r = reader_over(k);
    std::mt19937_64 rng(slow_reader ? 5 : 3);
    std::vector<x86::BtsRecord> kept;  // what the consumer must see
    for (std::uint64_t i = 0; i < 50'000; ++i) {
      const std::uint64_t before = driver.dropped();
      driver.branch(nth(i));
      if (driver.dropped() == before) kept.push_back(nth(i));
      if (rng() % 97 == 0) driver.sched_out();
      // A prompt reader drains every 20 branches (the area holds 170 records); a slow one at
      // random, about every 2000.
      if (slow_reader ? rng() % 2000 == 0 : i % 20 == 0) {
        const auto d = r.drain();
        ASSERT_TRUE(d.has_value()) << d.error().to_string();
      }
    }
    driver.sched_out();
    ASSERT_TRUE(r.drain().has_value());
    ASSERT_EQ(r.got.size(), kept.size()) << "slow reader " << slow_reader;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      ASSERT_EQ(r.got[i], kept[i]) << "record " << i << ", slow reader " << slow_reader;
    }
    EXPECT_GT(r.skipped, 0u);  // the area wrapped, past its unusable end
    EXPECT_EQ(r.decoder.padding(), 0u);
    EXPECT_EQ(r.truncations, driver.truncations());
    if (slow_reader) {
      EXPECT_GT(driver.dropped(), 0u);
      EXPECT_GT(driver.truncations(), 0u);
    } else {
      EXPECT_EQ(driver.dropped(), 0u);
    }
  }
}

TEST(PerfAux, MapChecksPageCounts) {
  auto r = PerfAuxRing::map(-1, 3, 8);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().to_string().find("data_pages"), std::string::npos);
  r = PerfAuxRing::map(-1, 4, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find("aux_pages"), std::string::npos);
}

// The real kernel: a software event has a data ring but no AUX area; the mapping is refused and
// nothing stays mapped (the same event maps a plain ring afterwards).
TEST(PerfAux, TheKernelRefusesAnAuxAreaOnAnEventWithoutOne) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.exclude_kernel = 1;
  auto fd = perf_event_open_attr(attr, 0, -1, -1, 0);
  if (!fd && (fd.error().code() == ErrorCode::kAcces || fd.error().code() == ErrorCode::kPerm)) {
    GTEST_SKIP() << "perf_event_open refused: " << fd.error().to_string();
  }
  ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
  auto ring = PerfAuxRing::map(fd->get(), 1, 2);
  ASSERT_FALSE(ring.has_value());
  EXPECT_EQ(ring.error().code(), ErrorCode::kOpNotSupp) << ring.error().to_string();
  EXPECT_NE(ring.error().to_string().find("aux"), std::string::npos) << ring.error().to_string();
  auto plain = PerfRing::map(fd->get(), 1);
  EXPECT_TRUE(plain.has_value()) << plain.error().to_string();
}

}  // namespace
}  // namespace hwarb::native

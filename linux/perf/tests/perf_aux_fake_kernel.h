// perf_aux_fake_kernel.h (linux/perf tests only) — the kernel's side of a perf event's mmap
// for PerfAuxRing tests: FakeKernel lays out a perf_event_mmap_page, a data ring and an AUX area
// in memory and writes them as perf_aux_output_end does (AUX bytes, then a PERF_RECORD_AUX, then
// the heads with release stores); Reader decodes what a PerfAuxRing over that memory drains.
// FakeKernel may run on another thread than the Reader (the shared fields are atomic).
#pragma once

#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "hwarb/linux/perf_aux.h"
#include "hwarb/x86/bts.h"

namespace hwarb::native::testing {

inline constexpr std::size_t kPage = 4096;

inline std::vector<std::uint8_t> encode(const x86::BtsRecord& b) {
  std::vector<std::uint8_t> out(kBtsRecordBytes);
  const auto r = x86::bts::encode(x86::BtsFormat::k64, b, std::as_writable_bytes(std::span(out)));
  EXPECT_TRUE(r.has_value());
  return out;
}

inline x86::BtsRecord nth(std::uint64_t i) {
  return x86::BtsRecord{0x401000 + i * 16, 0x402000 + (i * 7919 % 4096), i % 3 == 0};
}

inline RingRecord aux_record(std::uint64_t offset, std::uint64_t size, std::uint64_t flags) {
  RingRecord r;
  r.type = PERF_RECORD_AUX;
  r.size = 8 + 24;
  r.body.resize(24);
  std::memcpy(r.body.data(), &offset, 8);
  std::memcpy(r.body.data() + 8, &size, 8);
  std::memcpy(r.body.data() + 16, &flags, 8);
  return r;
}

// The kernel's side of one event's mapping: a perf_event_mmap_page, a data ring of `data_pages`
// pages and an AUX area of `aux_bytes`, in page-aligned memory.
class FakeKernel {
 public:
  FakeKernel(std::size_t data_pages, std::size_t aux_bytes)
      : meta_((1 + data_pages) * kPage), aux_(aux_bytes) {
    auto* m = meta();
    m->data_offset = kPage;
    m->data_size = data_pages * kPage;
    m->aux_offset = (1 + data_pages) * kPage;
    m->aux_size = aux_bytes;
  }

  perf_event_mmap_page* meta() { return reinterpret_cast<perf_event_mmap_page*>(meta_.data()); }
  std::span<std::uint8_t> meta_and_data() { return meta_; }
  std::span<std::uint8_t> aux() { return aux_; }

  std::uint64_t aux_tail() {
    return std::atomic_ref(meta()->aux_tail).load(std::memory_order_acquire);
  }
  std::uint64_t aux_free() { return aux_.size() - (aux_head_ - aux_tail()); }
  std::uint64_t data_free() {
    return meta()->data_size -
           (data_head_ - std::atomic_ref(meta()->data_tail).load(std::memory_order_acquire));
  }

  // Hands over `bytes` of trace as one stretch (the caller checked the space), then publishes
  // the PERF_RECORD_AUX. Returns false when the data ring has no room for the record.
  bool hand_over(std::span<const std::uint8_t> bytes, std::uint64_t flags = 0) {
    if (data_free() < 32) return false;
    const std::size_t size = aux_.size();
    for (std::size_t i = 0; i < bytes.size(); ++i) aux_[(aux_head_ + i) % size] = bytes[i];
    put_record(aux_record(aux_head_, bytes.size(), flags));
    aux_head_ += bytes.size();
    std::atomic_ref(meta()->aux_head).store(aux_head_, std::memory_order_release);
    return true;
  }
  // perf_aux_output_skip: aux_head moves past `n` bytes (zeroed) without a PERF_RECORD_AUX.
  void skip(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) aux_[(aux_head_ + i) % aux_.size()] = 0;
    aux_head_ += n;
    std::atomic_ref(meta()->aux_head).store(aux_head_, std::memory_order_release);
  }
  // A stretch the kernel never writes (for the error paths).
  void hand_over_raw(std::uint64_t offset, std::uint64_t size) {
    put_record(aux_record(offset, size, 0));
  }
  void put_record(const RingRecord& r) {
    const std::size_t dsize = meta()->data_size;
    std::vector<std::uint8_t> bytes(8);
    const perf_event_header h{r.type, r.misc, static_cast<std::uint16_t>(8 + r.body.size())};
    std::memcpy(bytes.data(), &h, 8);
    bytes.insert(bytes.end(), r.body.begin(), r.body.end());
    std::uint8_t* data = meta_.data() + meta()->data_offset;
    for (std::size_t i = 0; i < bytes.size(); ++i) data[(data_head_ + i) % dsize] = bytes[i];
    data_head_ += bytes.size();
    std::atomic_ref(meta()->data_head).store(data_head_, std::memory_order_release);
  }

 private:
  std::vector<std::uint8_t> meta_;
  std::vector<std::uint8_t> aux_;
  std::uint64_t aux_head_ = 0;
  std::uint64_t data_head_ = 0;
};

// A reader over the fake kernel's memory that decodes records into `got`.
struct Reader {
  PerfAuxRing ring;
  BtsStreamDecoder decoder;
  std::vector<x86::BtsRecord> got;
  std::uint64_t truncations = 0;
  std::uint64_t skipped = 0;

  Result<AuxDrain> drain() {
    PerfAuxRing::Sink sink;
    sink.begin = [this](const AuxEvent& ev) {
      skipped += ev.skipped;
      decoder.begin(ev);
    };
    sink.bytes = [this](std::span<const std::uint8_t> b) {
      decoder.feed(b, [this](const x86::BtsRecord& h) { got.push_back(h); });
    };
    sink.end = [this](const AuxEvent& ev) {
      if (ev.truncated()) ++truncations;
      decoder.end(ev);
    };
    return ring.drain(sink);
  }
};

inline Reader reader_over(FakeKernel& k) {
  auto ring = PerfAuxRing::over(k.meta_and_data(), k.aux());
  EXPECT_TRUE(ring.has_value()) << ring.error().to_string();
  return Reader{std::move(*ring), {}, {}, 0, 0};
}

}  // namespace hwarb::native::testing

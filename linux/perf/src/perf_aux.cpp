#include "hwarb/linux/perf_aux.h"

#include <linux/perf_event.h>

#include <atomic>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

bool all_zero(const std::uint8_t* p) {
  for (std::size_t i = 0; i < kBtsRecordBytes; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

// ---- BtsStreamDecoder ------------------------------------------------------------------------

void BtsStreamDecoder::take(const std::uint8_t* record, const Sink& sink) {
  if (all_zero(record)) {
    ++padding_;
    return;
  }
  ++records_;
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(record, kBtsRecordBytes));
  // The span holds a whole record: decode cannot fail.
  sink(*x86::bts::decode(x86::BtsFormat::k64, bytes));
}

void BtsStreamDecoder::feed(std::span<const std::uint8_t> bytes, const Sink& sink) {
  const std::uint8_t* p = bytes.data();
  std::size_t left = bytes.size();
  if (partial_ != 0) {
    const std::size_t n = std::min(left, kBtsRecordBytes - partial_);
    std::memcpy(carry_ + partial_, p, n);
    partial_ += n;
    p += n;
    left -= n;
    if (partial_ < kBtsRecordBytes) return;
    partial_ = 0;
    take(carry_, sink);
  }
  for (; left >= kBtsRecordBytes; p += kBtsRecordBytes, left -= kBtsRecordBytes) take(p, sink);
  if (left != 0) {
    std::memcpy(carry_, p, left);
    partial_ = left;
  }
}

// ---- PerfAuxRing -----------------------------------------------------------------------------

Result<PerfAuxRing> PerfAuxRing::map(int fd, std::size_t data_pages, std::size_t aux_pages) {
  if (auto r = check_ring_pages("aux_pages", aux_pages); !r) return std::unexpected(r.error());
  auto ring = PerfRing::map(fd, data_pages);
  if (!ring) return std::unexpected(ring.error());
  // The AUX area goes right after the data ring (a page multiple, as the kernel requires).
  const std::size_t aux_bytes = aux_pages * page_size();
  const std::uint64_t aux_offset = ring->mapped_bytes();
  ring->meta()->aux_offset = aux_offset;
  ring->meta()->aux_size = aux_bytes;
  auto aux = map_shared(fd, aux_bytes, aux_offset);
  if (!aux) return std::unexpected(aux.error().with_context("aux"));  // ring unmaps itself
  return PerfAuxRing(std::move(*ring),
                     std::span<std::uint8_t>(static_cast<std::uint8_t*>(*aux), aux_bytes), true);
}

Result<PerfAuxRing> PerfAuxRing::over(std::span<std::uint8_t> meta_and_data,
                                      std::span<std::uint8_t> aux) {
  auto ring = PerfRing::over(meta_and_data);
  if (!ring) return std::unexpected(ring.error());
  if (aux.empty() || !std::has_single_bit(aux.size())) {
    return make_error(ErrorCode::kInval,
                      "aux: " + std::to_string(aux.size()) + " bytes is not a power of two");
  }
  return PerfAuxRing(std::move(*ring), aux, false);
}

PerfAuxRing::PerfAuxRing(PerfAuxRing&& other) noexcept
    : ring_(std::move(other.ring_)),
      aux_(std::exchange(other.aux_, {})),
      owned_(std::exchange(other.owned_, false)) {}

PerfAuxRing& PerfAuxRing::operator=(PerfAuxRing&& other) noexcept {
  if (this != &other) {
    reset();
    ring_ = std::move(other.ring_);
    aux_ = std::exchange(other.aux_, {});
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

PerfAuxRing::~PerfAuxRing() {
  reset();
}

void PerfAuxRing::reset() {
  if (owned_) unmap(aux_.data(), aux_.size());
  aux_ = {};
  owned_ = false;
}

Result<AuxDrain> PerfAuxRing::drain(const Sink& sink) {
  perf_event_mmap_page* meta = ring_.meta();
  if (meta == nullptr) return make_error(ErrorCode::kInval, "ring: not mapped (moved from)");
  std::uint64_t head = 0;
  auto records = ring_.records(head);
  // Whatever happens below, the data ring's bytes are consumed (see the contract).
  struct Consume {
    PerfRing& ring;
    const std::uint64_t& head;
    ~Consume() { ring.consume(head); }
  } consume{ring_, head};
  if (!records) return std::unexpected(records.error());

  AuxDrain out;
  const std::uint64_t size = aux_.size();
  for (const RingRecord& record : *records) {
    if (record.type == PERF_RECORD_LOST) {
      if (auto n = decode_lost(record)) out.lost += *n;
      continue;
    }
    if (record.type != PERF_RECORD_AUX) {
      ++out.other;
      continue;
    }
    auto ev = decode_aux_event(record);
    if (!ev) return std::unexpected(ev.error());
    ++out.stretches;
    if (ev->truncated()) ++out.truncations;
    const std::uint64_t aux_tail = std::atomic_ref(meta->aux_tail).load(std::memory_order_relaxed);
    if (ev->offset < aux_tail || ev->size > size || ev->offset + ev->size - aux_tail > size) {
      return make_error(ErrorCode::kIo, "aux: a stretch of " + std::to_string(ev->size) +
                                            " bytes at position " + std::to_string(ev->offset) +
                                            " is outside the readable window (" + "aux_tail " +
                                            std::to_string(aux_tail) + ", area of " +
                                            std::to_string(size) + " bytes)");
    }
    ev->skipped = ev->offset - aux_tail;
    if (sink.begin) sink.begin(*ev);
    if (ev->size != 0) {
      const std::uint64_t start = ev->offset & (size - 1);
      const std::uint64_t first = std::min(ev->size, size - start);
      if (sink.bytes) {
        sink.bytes(aux_.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(first)));
        if (first < ev->size) {
          sink.bytes(aux_.subspan(0, static_cast<std::size_t>(ev->size - first)));
        }
      }
      out.bytes += ev->size;
    }
    if (sink.end) sink.end(*ev);
    // The stretch is read: the kernel may reuse its space.
    std::atomic_ref(meta->aux_tail).store(ev->offset + ev->size, std::memory_order_release);
  }
  return out;
}

}  // namespace hwarb::native

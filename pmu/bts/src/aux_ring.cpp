#include "hwarb/bts/aux_ring.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "hwarb/base/check.h"

namespace hwarb::bts {
namespace {

std::string records_of(std::size_t record_size) {
  return std::to_string(record_size) + "-byte records";
}

}  // namespace

Result<std::unique_ptr<AuxRing>> AuxRing::create(const AuxRingConfig& config,
                                                 const Allocator& alloc) {
  const std::size_t rs = config.record_size;
  if (auto r = check_buffer_size("size", config.size, rs); !r) return std::unexpected(r.error());
  if (config.threshold % rs != 0 || config.threshold >= config.size) {
    return make_error(ErrorCode::kInval,
                      "threshold: must be a whole number of " + records_of(rs) + " below the size");
  }
  if (config.watermark % rs != 0 || config.watermark > config.size) {
    return make_error(ErrorCode::kInval,
                      "watermark: must be a whole number of " + records_of(rs) + " up to the size");
  }
  auto data = alloc(config.size);
  if (!data) return std::unexpected(data.error());
  if (data->size() != config.size) {
    return make_error(ErrorCode::kNoMem, "buffer: the allocator returned the wrong size");
  }
  const std::size_t slots = config.size / rs + 1;
  std::unique_ptr<Marker[]> markers(new (std::nothrow) Marker[slots]);
  if (!markers) return make_error(ErrorCode::kNoMem, "markers: cannot allocate the marker ring");
  std::unique_ptr<AuxRing> ring(new (std::nothrow)
                                    AuxRing(config, std::move(*data), std::move(markers), slots));
  if (!ring) return make_error(ErrorCode::kNoMem, "ring: cannot allocate");
  return ring;
}

AuxRing::AuxRing(const AuxRingConfig& config, ByteBuffer data, std::unique_ptr<Marker[]> markers,
                 std::size_t marker_slots)
    : capacity_(config.size),
      record_size_(config.record_size),
      threshold_(config.threshold),
      watermark_(config.watermark != 0
                     ? config.watermark
                     : std::max(config.record_size,
                                config.size / 2 / config.record_size * config.record_size)),
      marker_slots_(marker_slots),
      data_(std::move(data)),
      markers_(std::move(markers)),
      next_wakeup_(watermark_) {}

AuxRing::~AuxRing() = default;

// ---- producer --------------------------------------------------------------------------------

void AuxRing::push_marker(const Marker& m) {
  Marker& slot = markers_[marker_head_ % marker_slots_];
  // The entry being replaced must already be behind data_tail (see the header's bound).
  HWARB_CHECK(marker_head_ < marker_slots_ || slot.pos < tail_cache_, "AuxRing: marker overrun");
  slot = m;
  ++marker_head_;
}

Result<WriteResult> AuxRing::write_slow(std::span<const std::byte> records) {
  const std::size_t n = records.size();
  if (n != record_size_ && (n == 0 || n % record_size_ != 0)) {  // no division for one record
    return make_error(ErrorCode::kInval,
                      "records: must be a non-empty whole number of " + records_of(record_size_));
  }
  if (n > capacity_) {
    return make_error(ErrorCode::kInval, "records: a batch of " + std::to_string(n) +
                                             " bytes exceeds the capacity of " +
                                             std::to_string(capacity_));
  }
  if (closing_) {
    return make_error(ErrorCode::kInval, "ring: closed");
  }
  WriteResult r;
  const std::uint64_t contiguous = capacity_ - offset_;
  const std::uint64_t pad = n > contiguous ? contiguous : 0;
  const std::uint64_t need = pad + n;
  if (head_ + need - tail_cache_ > capacity_) {
    tail_cache_ = data_tail_.load(std::memory_order_acquire);
    if (head_ + need - tail_cache_ > capacity_) {
      const std::uint64_t dropped = n / record_size_;
      pending_lost_ += dropped;
      lost_ += dropped;
      lost_pub_.store(lost_, std::memory_order_relaxed);
      return r;
    }
  }
  const std::uint64_t markers_before = marker_head_;
  if (pad != 0) {
    std::memset(data_.data() + offset_, 0, pad);
    push_marker({head_, 0, head_ + pad});
    head_ += pad;
    offset_ = 0;
    r.padded = true;
  }
  if (pending_lost_ != 0) {
    push_marker({head_, pending_lost_, 0});
    pending_lost_ = 0;
  }
  std::memcpy(data_.data() + offset_, records.data(), n);
  head_ += n;
  offset_ += n;
  if (offset_ == capacity_) offset_ = 0;
  if (marker_head_ != markers_before) {
    marker_head_pub_.store(marker_head_, std::memory_order_release);
  }
  data_head_.store(head_, std::memory_order_release);
  r.written = true;

  written_ += n;
  written_pub_.store(written_, std::memory_order_relaxed);
  if (written_ >= next_wakeup_) {
    next_wakeup_ = written_ + watermark_;
    r.wakeup = true;
  }
  std::uint64_t free = capacity_ - (head_ - tail_cache_);
  if (free <= threshold_) {
    tail_cache_ = data_tail_.load(std::memory_order_acquire);
    free = capacity_ - (head_ - tail_cache_);
  }
  const bool low = free <= threshold_;
  r.threshold = low && !low_;
  low_ = low;
  if (r.wakeup || r.threshold) notify();
  return r;
}

std::size_t AuxRing::free_space() {
  tail_cache_ = data_tail_.load(std::memory_order_acquire);
  return capacity_ - (head_ - tail_cache_);
}

bool AuxRing::fits_slow(std::size_t bytes) {
  tail_cache_ = data_tail_.load(std::memory_order_acquire);
  return fits_at(bytes, tail_cache_);
}

bool AuxRing::wait_for_space(std::size_t bytes, std::chrono::nanoseconds timeout) {
  if (fits(bytes)) return true;
  timeout = std::min<std::chrono::nanoseconds>(timeout, std::chrono::hours(24));
  // Announced before data_tail is read again (both sequentially consistent, as the consumer's
  // store of data_tail and its read of space_waiters_ in release_to): either the consumer sees a
  // waiter and notifies, or this thread sees the released space.
  space_waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool ok;
  {
    std::unique_lock<std::mutex> lock(space_mu_);
    ok = space_cv_.wait_for(lock, timeout, [&] {
      tail_cache_ = data_tail_.load(std::memory_order_seq_cst);
      return fits_at(bytes, tail_cache_);
    });
  }
  space_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  return ok;
}

void AuxRing::notify() {
  events_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
}

void AuxRing::wakeup() {
  notify();
}

void AuxRing::close() {
  closing_ = true;
  closed_.store(true, std::memory_order_release);
  notify();
}

// ---- consumer --------------------------------------------------------------------------------

AuxView AuxRing::view() {
  const std::uint64_t head = data_head_.load(std::memory_order_acquire);
  const std::uint64_t marker_end = marker_head_pub_.load(std::memory_order_acquire);
  view_end_ = head;
  return AuxView(this, tail_, head, marker_tail_, marker_end);
}

bool AuxRing::next_chunk(AuxView& v, AuxChunk& out) const {
  if (v.cur_ >= v.end_) return false;
  std::uint64_t lost = 0;
  // Markers at the current position: padding moves it, truncations add up.
  while (v.marker_ < v.marker_end_) {
    const Marker& m = markers_[v.marker_ % marker_slots_];
    if (m.pos > v.cur_ || m.pos >= v.end_) break;
    if (m.pos == v.cur_) {
      if (m.lost == 0) {
        v.cur_ = m.skip_to;
      } else {
        lost += m.lost;
      }
    }
    ++v.marker_;
  }
  if (v.cur_ >= v.end_) return false;
  const std::uint64_t offset = v.cur_ % capacity_;
  std::uint64_t stop = std::min<std::uint64_t>(v.end_, v.cur_ + (capacity_ - offset));
  if (v.marker_ < v.marker_end_) {
    const Marker& m = markers_[v.marker_ % marker_slots_];
    if (m.pos < stop) stop = m.pos;
  }
  out.data = std::span<const std::byte>(data_.data() + offset, stop - v.cur_);
  out.position = v.cur_;
  out.lost_before = lost;
  v.cur_ = stop;
  return true;
}

void AuxRing::release(const AuxView& view) {
  HWARB_CHECK(release_to(view.end()).has_value(), "AuxRing::release: a view of another state");
}

Result<void> AuxRing::release_to(std::uint64_t position) {
  if (position < tail_ || position > view_end_) {
    return make_error(ErrorCode::kInval, "position: " + std::to_string(position) + " is outside [" +
                                             std::to_string(tail_) + ", " +
                                             std::to_string(view_end_) +
                                             "], the data of the last view");
  }
  if (position % capacity_ % record_size_ != 0) {
    return make_error(ErrorCode::kInval,
                      "position: " + std::to_string(position) + " is not on a record boundary");
  }
  const std::uint64_t marker_end = marker_head_pub_.load(std::memory_order_acquire);
  // Only markers inside the last view count: a padding published after it, starting at its end,
  // is skipped by the next view, not here (its records may not be published yet).
  while (marker_tail_ < marker_end) {
    const Marker& m = markers_[marker_tail_ % marker_slots_];
    if (m.pos >= view_end_) break;
    if (m.lost == 0 && m.pos <= position && position < m.skip_to) position = m.skip_to;
    if (m.pos >= position) break;
    ++marker_tail_;
  }
  tail_ = position;
  data_tail_.store(position, std::memory_order_seq_cst);
  if (space_waiters_.load(std::memory_order_seq_cst) != 0) {
    std::lock_guard<std::mutex> lock(space_mu_);
    space_cv_.notify_all();
  }
  return {};
}

bool AuxRing::wait_for_data(std::chrono::nanoseconds timeout) {
  auto ready = [this] {
    return closed_.load(std::memory_order_seq_cst) ||
           events_.load(std::memory_order_seq_cst) != seen_events_;
  };
  bool ok = ready();
  if (!ok) {
    timeout = std::min<std::chrono::nanoseconds>(timeout, std::chrono::hours(24));
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(mu_);
      ok = cv_.wait_for(lock, timeout, ready);
    }
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  if (ok) seen_events_ = events_.load(std::memory_order_acquire);
  return ok;
}

}  // namespace hwarb::bts

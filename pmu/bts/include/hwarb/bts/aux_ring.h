// hwarb/bts/aux_ring.h — the AUX-area mode of the BTS PMU: a byte ring shared by ONE producer
// (the tracing hardware and its PMU driver) and ONE consumer (the user reading the trace), modelled
// on perf's AUX area (perf_event_mmap_page aux_head / aux_tail) and the intel_bts driver.
//
// Contract:
//  - Positions. data_head and data_tail are monotonically increasing 64-bit byte counters; the
//    byte at position p lives at offset p % capacity. Only the producer writes data_head, with a
//    release store after the bytes and markers it covers are written; only the consumer writes
//    data_tail, with a release store after it has finished reading everything below it. Always
//    0 <= data_head - data_tail <= capacity.
//  - Capacity: any positive whole number of records up to kMaxBufferBytes; a power of two is not
//    required (the producer keeps its offset incrementally, the consumer divides once per view and
//    per chunk).
//  - Writes. write() takes a batch of n >= 1 whole records. A batch is atomic and all-or-nothing:
//    it is published by one data_head store, or dropped entirely. It is contiguous: it never
//    straddles the end of the buffer. A batch that does not fit between data_head and the end is
//    preceded by padding: the bytes from data_head to the end are zeroed and skipped, and the
//    batch starts at offset 0 (intel_bts pads out the rest of its buffer the same way). Padding
//    takes ring space (it counts against the free space and is freed when data_tail passes it)
//    but is never shown to the consumer. A single record never needs padding, because the
//    capacity is a whole number of records.
//  - Overrun. The producer never overruns data_tail: a batch that does not fit (with its padding)
//    in the free space is dropped and its records are counted in lost(). The next batch that is
//    written carries a truncation marker: the consumer sees it start a chunk whose lost_before is
//    the number of records dropped right before it (perf sets PERF_AUX_FLAG_TRUNCATED on the next
//    AUX record; here the count comes with it). Records dropped after the last written batch show
//    in lost() only, until a batch follows them.
//  - Markers. Padding and truncation are published in a side ring of markers {position, lost,
//    skip_to}, written before the data_head store that covers them and freed implicitly when
//    data_tail passes their position. Every live marker owns a distinct record slot of the live
//    window, so at most capacity / record_size are live and the side ring (one more entry than
//    that) never overflows.
//  - Reading is zero-copy. view() snapshots [data_tail, data_head); next() yields its chunks in
//    order: each chunk is a span of whole records, contiguous in the buffer, with no loss inside.
//    A chunk ends at the end of the buffer, at a marker or at the end of the view. The consumer
//    processes chunks in place, then release(view) or release_to(position) stores data_tail and
//    frees the space. A view's bytes stay valid and unchanged until they are released; a view
//    must not be used after a release.
//  - Notifications (producer side), each also reported in WriteResult:
//     wakeup watermark W (bytes, whole records, 0 < W <= capacity; 0 in the config means half the
//       capacity rounded down to whole records, at least one record: perf's default
//       aux_watermark): the write after which written_bytes() (record bytes written, padding not
//       counted) reaches the next mark fires, and the next mark becomes written_bytes() + W. The
//       first mark is W.
//     interrupt threshold T (bytes, whole records, T < capacity): the write after which the free
//       space (capacity - (data_head - data_tail), data_tail read fresh) is <= T fires, if after
//       the previous written batch it was > T (edge-triggered like the BTS interrupt threshold:
//       once per approach to full). T = 0 fires on the write that fills the ring.
//    A firing increments the event count and wakes wait_for_data(); wakeup() and close() do the
//    same explicitly.
//  - Errors: create() EINVAL for a bad config (messages start with the field), ENOMEM when the
//    allocator fails; write() EINVAL for a batch that is empty, not whole records or larger than
//    the capacity (nothing is written or counted); release_to() EINVAL for a position outside the
//    last view or not on a record boundary (data_tail unchanged).
//  - Waiting. The consumer may sleep in wait_for_data until an event; a producer that would
//    rather wait than lose records may sleep in wait_for_space until the consumer's release_to
//    (or release) has freed enough space: the release wakes it.
//  - Thread-safety: one producer thread calls write, free_space, fits, wait_for_space, wakeup,
//    close; one consumer thread calls view, release, release_to, wait_for_data (and
//    AuxView::next). The two run concurrently without locks (wait_for_data and wait_for_space
//    sleep on a mutex and condition variable each, which the other thread touches only while
//    the sleeper is announced). The observers (capacity ... closed) may be called from any
//    thread; they read atomics and give momentary values. write() and fits() are inline for
//    the common case (see write below) and behave exactly as documented here.
//  - An AuxRing is neither copyable nor movable (both threads hold it); create() returns it in a
//    unique_ptr, and the ring owns its memory (ByteBuffer and the marker array).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>

#include "hwarb/base/error.h"
#include "hwarb/bts/byte_buffer.h"

namespace hwarb::bts {

struct AuxRingConfig {
  std::size_t size = 0;  // bytes, a whole number of records
  std::size_t record_size = kDefaultRecordSize;
  std::size_t threshold = 0;  // bytes, whole records, < size
  std::size_t watermark = 0;  // bytes, whole records, <= size; 0: half the size
};

struct WriteResult {
  bool written = false;    // false: the batch was dropped and counted in lost()
  bool padded = false;     // padding to the end of the buffer preceded the batch
  bool wakeup = false;     // the wakeup watermark was reached (consumer notified)
  bool threshold = false;  // the free space fell to the interrupt threshold (consumer notified)
};

struct AuxChunk {
  std::span<const std::byte> data;  // whole records, contiguous
  std::uint64_t position = 0;       // position of data[0]
  std::uint64_t lost_before = 0;    // records dropped right before data[0]
  bool truncated() const { return lost_before != 0; }
};

class AuxRing;

// A consumer's snapshot of the readable records; see AuxRing.
class AuxView {
 public:
  // The next chunk, in order; false at the end of the view.
  bool next(AuxChunk& out);
  std::uint64_t begin() const { return begin_; }
  std::uint64_t end() const { return end_; }
  bool empty() const { return begin_ == end_; }

 private:
  friend class AuxRing;
  AuxView(const AuxRing* ring, std::uint64_t begin, std::uint64_t end, std::uint64_t marker,
          std::uint64_t marker_end)
      : ring_(ring),
        begin_(begin),
        end_(end),
        cur_(begin),
        marker_(marker),
        marker_end_(marker_end) {}

  const AuxRing* ring_;
  std::uint64_t begin_;
  std::uint64_t end_;
  std::uint64_t cur_;
  std::uint64_t marker_;
  std::uint64_t marker_end_;
};

class AuxRing {
 public:
  static Result<std::unique_ptr<AuxRing>> create(const AuxRingConfig& config,
                                                 const Allocator& alloc = default_allocator());
  AuxRing(const AuxRing&) = delete;
  AuxRing& operator=(const AuxRing&) = delete;
  ~AuxRing();

  // ---- producer ----
  Result<WriteResult> write(std::span<const std::byte> records);
  // Bytes free right now (data_tail read fresh); padding a batch may need counts against it.
  std::size_t free_space();
  // True when a batch of `bytes` (with the padding it would need) would be written now; reads
  // data_tail only when the producer's last copy of it says no. For a producer that waits for
  // space instead of losing records.
  bool fits(std::size_t bytes);
  // True at once if fits(bytes); otherwise sleeps until the consumer has released enough space
  // for it (true) or the timeout passes (false; always, for more bytes than the capacity).
  // Timeouts above 24 hours count as 24 hours. For a producer that waits for space without
  // spinning (the consumer's release wakes it).
  bool wait_for_space(std::size_t bytes, std::chrono::nanoseconds timeout);
  // Notifies the consumer now (an event for wait_for_data).
  void wakeup();
  // No more writes: notifies the consumer; closed() becomes true. Further writes are EINVAL.
  void close();

  // ---- consumer ----
  AuxView view();
  // data_tail = view.end().
  void release(const AuxView& view);
  // data_tail = position: within [data_tail, end of the last view], on a record boundary. A
  // position at or inside padding of the last view moves to the end of the padding.
  Result<void> release_to(std::uint64_t position);
  // True at once if an event (watermark, threshold, wakeup(), close()) happened since the last
  // call that returned true, or the ring is closed; otherwise sleeps until one happens (true) or
  // the timeout passes (false). Timeouts above 24 hours count as 24 hours.
  bool wait_for_data(std::chrono::nanoseconds timeout);

  // ---- observers (any thread) ----
  std::size_t capacity() const { return capacity_; }
  std::size_t record_size() const { return record_size_; }
  std::size_t threshold() const { return threshold_; }
  std::size_t watermark() const { return watermark_; }
  std::uint64_t head() const { return data_head_.load(std::memory_order_acquire); }
  std::uint64_t tail() const { return data_tail_.load(std::memory_order_acquire); }
  std::uint64_t lost() const { return lost_pub_.load(std::memory_order_relaxed); }
  std::uint64_t written_bytes() const { return written_pub_.load(std::memory_order_relaxed); }
  std::uint64_t events() const { return events_.load(std::memory_order_relaxed); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  friend class AuxView;
  struct Marker {
    std::uint64_t pos = 0;
    std::uint64_t lost = 0;     // > 0: truncation before the record at pos
    std::uint64_t skip_to = 0;  // lost == 0: padding [pos, skip_to)
  };
  static constexpr std::size_t kLine = 64;

  AuxRing(const AuxRingConfig& config, ByteBuffer data, std::unique_ptr<Marker[]> markers,
          std::size_t marker_slots);
  bool next_chunk(AuxView& v, AuxChunk& out) const;
  Result<WriteResult> write_slow(std::span<const std::byte> records);
  bool fits_at(std::size_t bytes, std::uint64_t tail) const;
  bool fits_slow(std::size_t bytes);
  void push_marker(const Marker& m);
  void notify();

  // Read-only after construction.
  const std::size_t capacity_;
  const std::size_t record_size_;
  const std::size_t threshold_;
  const std::size_t watermark_;
  const std::size_t marker_slots_;
  ByteBuffer data_;
  std::unique_ptr<Marker[]> markers_;

  // Producer-private.
  alignas(kLine) std::uint64_t head_ = 0;
  std::uint64_t offset_ = 0;  // head_ % capacity_
  std::uint64_t tail_cache_ = 0;
  std::uint64_t marker_head_ = 0;
  std::uint64_t pending_lost_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t written_ = 0;
  std::uint64_t next_wakeup_ = 0;
  bool low_ = false;
  bool closing_ = false;  // close() was called (closed_ for the producer, without the atomic)

  // Written by the producer.
  alignas(kLine) std::atomic<std::uint64_t> data_head_{0};
  std::atomic<std::uint64_t> marker_head_pub_{0};
  std::atomic<std::uint64_t> lost_pub_{0};
  std::atomic<std::uint64_t> written_pub_{0};

  // Written by the consumer.
  alignas(kLine) std::atomic<std::uint64_t> data_tail_{0};

  // Consumer-private.
  alignas(kLine) std::uint64_t tail_ = 0;
  std::uint64_t view_end_ = 0;
  std::uint64_t marker_tail_ = 0;
  std::uint64_t seen_events_ = 0;

  // Notification.
  alignas(kLine) std::atomic<std::uint64_t> events_{0};
  std::atomic<std::uint32_t> waiters_{0};
  std::atomic<bool> closed_{false};
  std::mutex mu_;
  std::condition_variable cv_;

  // The producer sleeping in wait_for_space.
  alignas(kLine) std::atomic<std::uint32_t> space_waiters_{0};
  std::mutex space_mu_;
  std::condition_variable space_cv_;
};

inline bool AuxView::next(AuxChunk& out) {
  return ring_->next_chunk(*this, out);
}

// The common case of write() inline: whole records that fit before the end of the buffer and,
// by the producer's copy of data_tail, in the free space with more than the threshold left, no
// truncation marker and no wakeup due. Everything else, errors included, is write_slow().
inline Result<WriteResult> AuxRing::write(std::span<const std::byte> records) {
  const std::size_t n = records.size();
  if ((n != record_size_ && (n == 0 || n % record_size_ != 0)) || n > capacity_ - offset_ ||
      head_ + n - tail_cache_ >= capacity_ - threshold_ || written_ + n >= next_wakeup_ ||
      pending_lost_ != 0 || closing_) {
    return write_slow(records);
  }
  std::memcpy(data_.data() + offset_, records.data(), n);
  head_ += n;
  offset_ += n;
  if (offset_ == capacity_) offset_ = 0;
  data_head_.store(head_, std::memory_order_release);
  written_ += n;
  written_pub_.store(written_, std::memory_order_relaxed);
  low_ = false;
  WriteResult r;
  r.written = true;
  return r;
}

inline bool AuxRing::fits_at(std::size_t bytes, std::uint64_t tail) const {
  const std::uint64_t contiguous = capacity_ - offset_;
  const std::uint64_t need = (bytes > contiguous ? contiguous : 0) + bytes;
  return head_ + need - tail <= capacity_;
}

inline bool AuxRing::fits(std::size_t bytes) {
  return fits_at(bytes, tail_cache_) || fits_slow(bytes);
}

}  // namespace hwarb::bts

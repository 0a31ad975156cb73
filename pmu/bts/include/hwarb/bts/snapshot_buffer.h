// hwarb/bts/snapshot_buffer.h — the AUX snapshot mode of the BTS PMU: one contiguous buffer the
// producer overwrites in place, read on demand (perf's AUX overwrite mode, intel_bts "snapshot").
//
// Contract:
//  - Capacity: a positive whole number of records up to kMaxBufferBytes. The buffer is circular:
//    when it is full, each new record overwrites the oldest one. It never interrupts, never
//    refuses a record and never pads (records never straddle the end: every record starts at a
//    multiple of record_size and the capacity is a whole number of records).
//  - write(records): a batch of n >= 1 whole records (EINVAL otherwise, nothing written). Always
//    succeeds; a batch longer than the capacity leaves only its newest records.
//  - Accounting: written() records ever written, size() records held (min(written, capacity in
//    records)), overwritten() records overwritten; always written() == size() + overwritten().
//    Nothing else is lost.
//  - snapshot() copies out the held records (the newest capacity bytes of whole records), oldest
//    first; snapshot_into(out) copies the newest records that fit in `out`, oldest first, and
//    returns the bytes copied. Reading does not change the buffer.
//  - clear() forgets the records and resets the counters.
//  - Not thread-safe: the caller stops the producer while it takes a snapshot (perf disables the
//    event around an AUX snapshot). Move-only; the buffer owns its memory (ByteBuffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/bts/byte_buffer.h"

namespace hwarb::bts {

class SnapshotBuffer {
 public:
  // EINVAL for a bad size or record_size, ENOMEM when the allocator fails.
  static Result<SnapshotBuffer> create(std::size_t size,
                                       std::size_t record_size = kDefaultRecordSize,
                                       const Allocator& alloc = default_allocator());

  Result<void> write(std::span<const std::byte> records);

  std::size_t capacity() const { return buf_.size(); }
  std::size_t record_size() const { return record_size_; }
  std::uint64_t size() const { return held_ / record_size_; }
  std::uint64_t written() const { return written_ / record_size_; }
  std::uint64_t overwritten() const { return written() - size(); }

  std::vector<std::byte> snapshot() const;
  std::size_t snapshot_into(std::span<std::byte> out) const;
  void clear();

 private:
  SnapshotBuffer(ByteBuffer buf, std::size_t record_size)
      : buf_(std::move(buf)), record_size_(record_size) {}

  ByteBuffer buf_;
  std::size_t record_size_;
  std::size_t offset_ = 0;     // where the next record goes
  std::uint64_t held_ = 0;     // bytes held
  std::uint64_t written_ = 0;  // bytes ever written
};

}  // namespace hwarb::bts

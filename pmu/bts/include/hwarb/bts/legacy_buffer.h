// hwarb/bts/legacy_buffer.h — the per-task BTS buffer of the legacy ptrace API (the 2007 and 2008
// ptrace BTS patches: PTRACE_BTS_CONFIG / SIZE / GET / CLEAR / DRAIN), with its two overflow modes.
//
// Contract:
//  - Sizes are in bytes and rounded DOWN to a whole number of records (ds_allocate's rule):
//    round_size(bytes) = bytes / record_size * record_size. A request below one record rounds to
//    0: no buffer (capacity 0; write() is ENXIO, as PTRACE_BTS_* without a buffer). A rounded
//    size above kMaxBufferBytes is EINVAL. Because the comparison is made after rounding, asking
//    for the same size twice (or any size that rounds to the current one) changes nothing: no
//    reallocation, no record lost.
//  - Overflow modes: kWrapAround (circular: when full, a new record overwrites the oldest and
//    write() says kOverwrote; counted in overwritten()) and kSignal (when full, the new record is
//    not stored and write() says kFull so that the caller can notify the tracer; nothing is
//    overwritten; counted in dropped()). set_mode() changes the mode and keeps the records.
//  - write(record): exactly one record (EINVAL otherwise, nothing changes).
//  - write_batch(records): n >= 1 whole records back to back (EINVAL otherwise: an empty span or
//    a size that is not a multiple of record_size; nothing changes; ENXIO without a buffer, as
//    write()). Exactly the same effect as calling write() once per record, in order: in
//    kWrapAround all n are stored and the ones that push out an older record (held or from the
//    same batch) are counted in overwritten(); in kSignal the first min(n, capacity - size)
//    records are stored and the rest are not stored and counted in dropped(). The BatchWrite says
//    how many were stored, overwritten and dropped (stored + dropped == n; overwritten <= stored),
//    and full = the buffer is full after the batch (it became or already was full). The slot
//    arithmetic is done once per batch and the copy takes at most two memcpy's (the ring's wrap
//    point); in kWrapAround a batch of more than capacity records copies only the newest capacity.
//  - size() = records held; get(index): index 0 is the newest record, size() - 1 the oldest;
//    EINVAL for index >= size(). The span stays valid until the next mutating call.
//  - drain(): every held record, oldest first, then the buffer is empty (as clear()).
//  - clear(): forgets the records (the memory is zeroed, like ds_clear); counters are kept.
//  - resize(bytes) is all or nothing: the new buffer is allocated BEFORE the old one is freed, and
//    when the allocation fails (ENOMEM from the allocator) the old buffer, its records and its
//    counters are kept unchanged. On success the newest records that fit are carried over (order
//    kept) and the ones that do not fit are counted in overwritten(). resize to a size rounding
//    to 0 frees the buffer (its records are counted in overwritten()).
//  - Not thread-safe (the tracer serialises, as ptrace does with the tracee stopped). Move-only;
//    the buffer owns its memory (ByteBuffer) and the allocator it was created with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/bts/byte_buffer.h"

namespace hwarb::bts {

enum class OverflowMode : std::uint8_t { kWrapAround, kSignal };
enum class LegacyWrite : std::uint8_t {
  kWritten,    // stored, nothing lost
  kOverwrote,  // stored over the oldest record (kWrapAround)
  kFull,       // not stored: the buffer is full (kSignal)
};

// What one write_batch() did (see the contract).
struct BatchWrite {
  std::size_t stored = 0;       // records stored (kWritten or kOverwrote)
  std::size_t overwritten = 0;  // of the stored, how many pushed out an older record
  std::size_t dropped = 0;      // records not stored (kFull)
  bool full = false;            // the buffer is full after the batch

  bool operator==(const BatchWrite&) const = default;
};

class LegacyBuffer {
 public:
  static std::size_t round_size(std::size_t bytes, std::size_t record_size) {
    return record_size == 0 ? 0 : bytes / record_size * record_size;
  }

  // EINVAL for record_size 0 or a size above the maximum; ENOMEM when the allocator fails.
  static Result<LegacyBuffer> create(std::size_t bytes, OverflowMode mode,
                                     std::size_t record_size = kDefaultRecordSize,
                                     Allocator alloc = default_allocator());

  Result<LegacyWrite> write(std::span<const std::byte> record);
  Result<BatchWrite> write_batch(std::span<const std::byte> records);
  Result<std::span<const std::byte>> get(std::size_t index) const;
  std::vector<std::byte> drain();
  void clear();
  Result<void> resize(std::size_t bytes);

  std::size_t size() const { return count_; }
  std::size_t capacity() const { return slots_; }  // records
  std::size_t capacity_bytes() const { return buf_.size(); }
  std::size_t record_size() const { return record_size_; }
  bool full() const { return slots_ != 0 && count_ == slots_; }
  OverflowMode mode() const { return mode_; }
  void set_mode(OverflowMode mode) { mode_ = mode; }
  std::uint64_t overwritten() const { return overwritten_; }
  std::uint64_t dropped() const { return dropped_; }

 private:
  LegacyBuffer(ByteBuffer buf, OverflowMode mode, std::size_t record_size, Allocator alloc)
      : buf_(std::move(buf)),
        alloc_(std::move(alloc)),
        record_size_(record_size),
        slots_(buf_.size() / record_size),
        mode_(mode) {}
  // Slot of the i-th oldest record.
  std::size_t slot_of_oldest(std::size_t i) const;
  const std::byte* record_at(std::size_t slot) const { return buf_.data() + slot * record_size_; }
  // Copies n <= slots_ records to the slots from next_ on (wrapping once) and advances next_.
  void copy_in(const std::byte* src, std::size_t n);

  ByteBuffer buf_;
  Allocator alloc_;
  std::size_t record_size_;
  std::size_t slots_;
  OverflowMode mode_;
  std::size_t next_ = 0;  // slot the next record goes to
  std::size_t count_ = 0;
  std::uint64_t overwritten_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace hwarb::bts

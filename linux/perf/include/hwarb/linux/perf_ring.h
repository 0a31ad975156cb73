// hwarb/linux/perf_ring.h — the perf mmap ring buffer: a pure parser of its data area and
// PerfRing, the move-only owner of one ring mapped on a perf event descriptor.
//
// Contract:
//  - The parser (split_ring, decode_sample, decode_lost, parse_ring) is pure. `data` is the data
//    area (a power of two bytes, EINVAL naming `data` otherwise); the bytes to read are the
//    positions [tail, head) taken modulo its size, as perf_event_mmap_page's data_tail and
//    data_head count them. A record that straddles the end of the area is read across the wrap.
//  - Anything the kernel never writes is EIO naming `ring` with the position: head behind tail,
//    more pending bytes than the area holds, a truncated header, a record size below its 8-byte
//    header or running past head, a sample too short for its sample_type. A sample_type bit the
//    decoder does not know (only IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU and PERIOD
//    are laid out here) is EINVAL naming `sample_type`.
//  - PerfRing::map maps 1 + data_pages pages (data_pages a power of two) read-write, so that the
//    kernel stops at a full ring (and writes PERF_RECORD_LOST) instead of overwriting. drain()
//    reads data_head with acquire ordering, parses [data_tail, data_head) and publishes
//    data_tail = data_head with release ordering. drain() consumes the bytes even when they do
//    not parse (the error is returned), so that one bad record does not stall the ring.
// Thread-safety: the parser is reentrant; a PerfRing has one reader (one owner).
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

// One record as it sits in the ring: its perf_event_header and the bytes after it.
struct RingRecord {
  std::uint32_t type = 0;  // PERF_RECORD_*
  std::uint16_t misc = 0;
  std::uint16_t size = 0;          // including the 8-byte header
  std::vector<std::uint8_t> body;  // size - 8 bytes, the wrap resolved
};

// A PERF_RECORD_SAMPLE's fields (those its sample_type did not ask for stay 0).
struct PerfSample {
  std::uint64_t ip = 0;
  std::uint32_t pid = 0, tid = 0;
  std::uint64_t time = 0;
  std::uint64_t addr = 0;
  std::uint64_t id = 0;  // PERF_SAMPLE_IDENTIFIER or PERF_SAMPLE_ID
  friend bool operator==(const PerfSample&, const PerfSample&) = default;
};

// The sample_type of the breakpoint events hwarb opens.
inline constexpr std::uint64_t kWatchSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_IDENTIFIER;

// What one pass over a ring found.
struct RingBatch {
  std::vector<PerfSample> samples;  // in ring order
  std::uint64_t lost = 0;           // summed PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES counts
  std::uint64_t other = 0;          // records of any other type (skipped)
};

// The records in [tail, head) in ring order.
Result<std::vector<RingRecord>> split_ring(std::span<const std::uint8_t> data, std::uint64_t tail,
                                           std::uint64_t head);
// A PERF_RECORD_SAMPLE's body laid out by `sample_type`. EINVAL naming `record` for another type.
Result<PerfSample> decode_sample(const RingRecord& record, std::uint64_t sample_type);
// The count of a PERF_RECORD_LOST ({id, lost}) or PERF_RECORD_LOST_SAMPLES ({lost}). EINVAL
// naming `record` for another type.
Result<std::uint64_t> decode_lost(const RingRecord& record);

// PERF_RECORD_AUX's flags.
inline constexpr std::uint64_t kAuxTruncated = 0x01;
inline constexpr std::uint64_t kAuxOverwrite = 0x02;
inline constexpr std::uint64_t kAuxPartial = 0x04;
inline constexpr std::uint64_t kAuxCollision = 0x08;

// One stretch of AUX data handed over by the kernel (PERF_RECORD_AUX; see perf_aux.h).
struct AuxEvent {
  std::uint64_t offset = 0;   // position of the first byte (a growing counter)
  std::uint64_t size = 0;     // bytes
  std::uint64_t flags = 0;    // kAux*
  std::uint64_t skipped = 0;  // PerfAuxRing::drain: bytes skipped by the driver between the
                              // previous stretch (aux_tail) and this one
  bool truncated() const { return (flags & kAuxTruncated) != 0; }
};
// PERF_RECORD_AUX's {aux_offset, aux_size, flags}. EINVAL naming `record` for another type, EIO
// naming `record` for a body shorter than its three u64s.
Result<AuxEvent> decode_aux_event(const RingRecord& record);

// A ring's page count (data or AUX area), as the kernel requires it: EINVAL naming `field`
// unless a power of two >= 1.
Result<void> check_ring_pages(const char* field, std::size_t pages);
// split_ring and the decoders in one pass, without a copy for records that do not wrap.
Result<RingBatch> parse_ring(std::span<const std::uint8_t> data, std::uint64_t tail,
                             std::uint64_t head, std::uint64_t sample_type);

class PerfRing {
 public:
  // Maps the ring of perf event `fd` (the descriptor is not owned: the mapping stays valid after
  // it is closed, as mmap's do). EINVAL naming `data_pages` unless a power of two >= 1; the
  // mmap's errors (map_shared).
  static Result<PerfRing> map(int fd, std::size_t data_pages);
  // A ring over memory the caller lays out as the kernel does (a perf_event_mmap_page whose
  // data_offset and data_size locate a power-of-two data area inside `memory`), not owned: for
  // tests and replay. EINVAL naming `meta` when they do not.
  static Result<PerfRing> over(std::span<std::uint8_t> memory);

  PerfRing(PerfRing&& other) noexcept;
  PerfRing& operator=(PerfRing&& other) noexcept;
  PerfRing(const PerfRing&) = delete;
  PerfRing& operator=(const PerfRing&) = delete;
  ~PerfRing();

  // The data area's size in bytes.
  std::size_t data_size() const { return data_size_; }
  // The control page (for the AUX fields); nullptr when moved from.
  perf_event_mmap_page* meta() const { return static_cast<perf_event_mmap_page*>(base_); }
  // The bytes of the mapping (control page and data area): where an AUX area may start.
  std::size_t mapped_bytes() const { return map_bytes_; }
  // The records in [data_tail, data_head), the head read with acquire ordering; consume() then
  // publishes data_tail = that head (release) once the caller is done with them.
  Result<std::vector<RingRecord>> records(std::uint64_t& head) const;
  void consume(std::uint64_t head);
  // Bytes written by the kernel and not yet drained.
  std::uint64_t pending() const;
  // Parses and consumes everything pending (see the contract).
  Result<RingBatch> drain(std::uint64_t sample_type);

 private:
  PerfRing(void* base, std::size_t map_bytes, std::size_t data_offset, std::size_t data_size,
           bool owned)
      : base_(base),
        map_bytes_(map_bytes),
        data_offset_(data_offset),
        data_size_(data_size),
        owned_(owned) {}
  void reset();
  std::span<const std::uint8_t> data() const;

  void* base_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::size_t data_offset_ = 0;
  std::size_t data_size_ = 0;
  bool owned_ = false;
};

}  // namespace hwarb::native

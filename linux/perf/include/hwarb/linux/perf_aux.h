// hwarb/linux/perf_aux.h — perf's AUX area, where intel_bts (and intel_pt) put their trace, and
// the BTS records in it: pure decoders and PerfAuxRing, the move-only owner of one event's data
// ring and AUX area.
//
// The protocol (perf_event_open(2), "The mmap layout"; the kernel's perf_aux_output_end):
//   The consumer maps the data ring (1 + data_pages pages) first, then writes aux_offset (a page
//   multiple at or past the end of the data ring) and aux_size into the first page and maps the
//   AUX area there. Mapped writable, the AUX area is a ring the kernel never overwrites: the
//   driver writes trace bytes at aux_head, and each time it hands a stretch over (on a PMI, when
//   the task is scheduled out, when the event stops) it writes a PERF_RECORD_AUX {aux_offset,
//   aux_size, flags} into the data ring: aux_offset is the stretch's position (a byte counter
//   that only grows; the offset in the area is it modulo aux_size), flags say TRUNCATED (the area
//   was full: trace was lost AFTER this stretch), OVERWRITE, PARTIAL, COLLISION. The consumer
//   reads the stretch, then stores aux_tail = aux_offset + aux_size (release) to give the space
//   back, and data_tail as for any ring.
//
// intel_bts records (arch/x86/events/intel/bts.c): the processor's 64-bit BTS records, 24 bytes
// {from, to, flags}, flags bit 4 = the branch was predicted. The AUX area is one contiguous chunk
// (the PMU has AUX_NO_SG) and records start at multiples of 24 from its beginning; its size is
// a power of two pages, so the last (size % 24) bytes can never hold one. When the driver's
// space reaches them it zeroes them (bts_buffer_pad_out) and moves aux_head past them without a
// PERF_RECORD_AUX (perf_aux_output_skip): the next stretch starts after a gap, which the reader
// reports as the stretch's `skipped` bytes. Stretches otherwise hold whole records; the decoder
// still accepts any cut (it carries the bytes of an incomplete record to the next stretch, and
// forgets them after a gap or a truncation) and skips all-zero records as padding, as perf's own
// intel-bts decoder does.
//
// Contract:
//  - BtsStreamDecoder is pure (AuxEvent and decode_aux_event are in perf_ring.h, beside the other
//    record decoders).
//  - PerfAuxRing::map is all or nothing: on error nothing stays mapped. Errors: EINVAL naming
//    `data_pages` / `aux_pages` unless powers of two >= 1 (the kernel's rule); the mmap errors of
//    map_shared, the AUX area's naming `aux` (EOPNOTSUPP: the event has no AUX area, e.g. it is
//    not an itrace PMU's; ENOMEM/EPERM: over perf_event_mlock_kb).
//  - PerfAuxRing::over builds the same reader over memory the caller lays out as the kernel does
//    (a perf_event_mmap_page, the data area, the AUX area), for tests and replay; not owned.
//  - drain() reads data_head (acquire), walks [data_tail, data_head): for each PERF_RECORD_AUX it
//    hands the stretch's bytes to the sink (one or two spans: the stretch may wrap the AUX area)
//    and then publishes aux_tail past it (release); PERF_RECORD_LOST counts are summed; other
//    records are counted and skipped. Then data_tail = data_head (release). aux_head is not
//    consulted: the kernel publishes the AUX record before it updates aux_head. A stretch the
//    consumer may not read (starting behind aux_tail, or ending more than the area's size past
//    it) is EIO naming `aux` with its position; the data ring's own damage is EIO naming `ring`
//    (perf_ring.h). On error the records before the bad one were delivered and are consumed; the
//    rest of the data ring is consumed too, so that one bad record does not stall the event.
// Thread-safety: the decoders are reentrant; a PerfAuxRing has one reader (one owner). The kernel
// (or a test's producer thread) writes concurrently; the shared fields are read and written with
// atomic acquire/release accesses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "hwarb/base/error.h"
#include "hwarb/linux/perf_ring.h"
#include "hwarb/x86/bts.h"

namespace hwarb::native {

// An intel_bts record is the processor's 64-bit BTS record (x86::BtsRecord; encoded and decoded
// by x86::bts, the one place the layout lives).
inline constexpr std::size_t kBtsRecordBytes = x86::bts::record_size(x86::BtsFormat::k64);

// The stream of 24-byte intel_bts records across stretches.
class BtsStreamDecoder {
 public:
  using Sink = std::function<void(const x86::BtsRecord&)>;
  // Decodes `bytes` appended to the stream: the sink gets each record completed, in order;
  // all-zero records (padding) are counted, not delivered.
  void feed(std::span<const std::uint8_t> bytes, const Sink& sink);
  // Forgets an incomplete record (after a gap or a truncation the next stretch starts a new
  // record).
  void restart() { partial_ = 0; }
  // The stretch boundaries of PerfAuxRing::drain (Sink::begin and Sink::end): restarts before a
  // stretch that follows skipped bytes, and after a truncated one.
  void begin(const AuxEvent& ev) {
    if (ev.skipped != 0) restart();
  }
  void end(const AuxEvent& ev) {
    if (ev.truncated()) restart();
  }
  std::size_t partial() const { return partial_; }
  std::uint64_t records() const { return records_; }
  std::uint64_t padding() const { return padding_; }

 private:
  void take(const std::uint8_t* record, const Sink& sink);

  std::uint8_t carry_[kBtsRecordBytes] = {};
  std::size_t partial_ = 0;
  std::uint64_t records_ = 0;
  std::uint64_t padding_ = 0;
};

// What one drain found.
struct AuxDrain {
  std::uint64_t stretches = 0;    // PERF_RECORD_AUX records
  std::uint64_t bytes = 0;        // AUX bytes handed to the sink
  std::uint64_t truncations = 0;  // stretches flagged TRUNCATED: trace lost after them
  std::uint64_t lost = 0;         // PERF_RECORD_LOST counts (data-ring records dropped)
  std::uint64_t other = 0;        // other records (ITRACE_START, ...), skipped
};

class PerfAuxRing {
 public:
  // Per stretch: `begin` with its event, its `bytes` in order (a wrapping stretch comes as two
  // calls), then `end` with its event. Any of them may be empty.
  struct Sink {
    std::function<void(const AuxEvent&)> begin;
    std::function<void(std::span<const std::uint8_t>)> bytes;
    std::function<void(const AuxEvent&)> end;
  };

  // Maps the data ring and the AUX area of perf event `fd` (see the contract). The descriptor is
  // not owned; the mappings outlive its closing, as mmap's do.
  static Result<PerfAuxRing> map(int fd, std::size_t data_pages, std::size_t aux_pages);
  // A reader over caller-laid-out memory: `meta_and_data` as PerfRing::over takes it; `aux` is
  // the AUX area (its size a power of two). EINVAL naming `meta` / `aux` for sizes that do not
  // fit.
  static Result<PerfAuxRing> over(std::span<std::uint8_t> meta_and_data,
                                  std::span<std::uint8_t> aux);

  PerfAuxRing(PerfAuxRing&& other) noexcept;
  PerfAuxRing& operator=(PerfAuxRing&& other) noexcept;
  PerfAuxRing(const PerfAuxRing&) = delete;
  PerfAuxRing& operator=(const PerfAuxRing&) = delete;
  ~PerfAuxRing();

  std::size_t data_size() const { return ring_.data_size(); }
  std::size_t aux_size() const { return aux_.size(); }
  // Bytes of the data ring not yet drained (AUX records waiting).
  std::uint64_t pending() const { return ring_.pending(); }
  Result<AuxDrain> drain(const Sink& sink);

 private:
  PerfAuxRing(PerfRing ring, std::span<std::uint8_t> aux, bool owned)
      : ring_(std::move(ring)), aux_(aux), owned_(owned) {}
  void reset();

  PerfRing ring_;
  std::span<std::uint8_t> aux_;
  bool owned_ = false;  // aux_ is a mapping to unmap
};

}  // namespace hwarb::native

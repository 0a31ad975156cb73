// hwarb/bts/trace_record.h — what a tracing context holds: branch records in the 64-bit BTS
// layout, and scheduling timestamp records (the 2008 ptrace BTS API's BTS_TASK_ARRIVES /
// BTS_TASK_DEPARTS).
//
// Every context buffer holds 24-byte records, whatever the CPU's format: the tracer transcribes
// each hardware record (12 bytes on a 32-bit CPU) into this form while sorting (the 2008 in-kernel
// BTS interface review: "we are already transcribing each BTS entry into the ABI form anyway").
//
//          63 62 61                          5  4  3  0
//         +-----------------------------------------------+
//   0x00  |  branch: from          | timestamp: task id    |
//         +-----------------------------------------------+
//   0x08  |  branch: to            | timestamp: time (ns)  |
//         +--+--+-----------------------------+--+-------+
//   0x10  |DP|AR|  reserved                   | P|  rsvd  |
//         +--+--+-----------------------------+--+-------+
//
//   P  (bit 4)  branch predicted — exactly the hardware's flags word for a branch record.
//   AR (bit 62) the task arrived on a CPU at `time`; DP (bit 63) it departed. The hardware never
//   sets bits 62/63 (reserved), so the kind is decided by them alone. At most one is set.
//
// Contract: encode/decode are pure and exact inverses (decode(encode(r)) == r). decode is EINVAL
// for a span shorter than one record or with both AR and DP set (the field is named).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"

namespace hwarb::bts {

inline constexpr std::size_t kTraceRecordSize = 24;
inline constexpr std::uint64_t kPredictedFlag = std::uint64_t{1} << 4;
inline constexpr std::uint64_t kArrivesFlag = std::uint64_t{1} << 62;
inline constexpr std::uint64_t kDepartsFlag = std::uint64_t{1} << 63;

enum class RecordKind : std::uint8_t { kBranch, kArrives, kDeparts };
std::string to_string(RecordKind kind);

struct TraceRecord {
  RecordKind kind = RecordKind::kBranch;
  std::uint64_t from = 0;  // kBranch
  std::uint64_t to = 0;    // kBranch
  bool predicted = false;  // kBranch
  TaskId task{};           // kArrives / kDeparts
  std::uint64_t time = 0;  // kArrives / kDeparts, ns

  static TraceRecord branch(std::uint64_t from, std::uint64_t to, bool predicted = false) {
    return {RecordKind::kBranch, from, to, predicted, TaskId{}, 0};
  }
  static TraceRecord sched(RecordKind kind, TaskId task, std::uint64_t time) {
    return {kind, 0, 0, false, task, time};
  }
  friend bool operator==(const TraceRecord&, const TraceRecord&) = default;
};

// Writes exactly kTraceRecordSize bytes; `out` must hold them (EINVAL otherwise).
Result<void> encode(const TraceRecord& record, std::span<std::byte> out);
Result<TraceRecord> decode(std::span<const std::byte> in);

// "from=0x401000 to=0x401020" / "arrives task=3 time=1000" (predicted adds " predicted").
std::string format_record(const TraceRecord& record);

}  // namespace hwarb::bts

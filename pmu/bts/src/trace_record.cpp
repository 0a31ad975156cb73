#include "hwarb/bts/trace_record.h"

#include <cstdio>
#include <string>

#include "hwarb/base/format.h"

namespace hwarb::bts {
namespace {

constexpr std::size_t kWord = 8;

void store_word(std::span<std::byte> out, std::size_t at, std::uint64_t value) {
  for (std::size_t i = 0; i < kWord; ++i) {
    out[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  }
}

std::uint64_t load_word(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < kWord; ++i) {
    value |= std::to_integer<std::uint64_t>(in[at + i]) << (8 * i);
  }
  return value;
}


}  // namespace

std::string to_string(RecordKind kind) {
  switch (kind) {
    case RecordKind::kBranch:
      return "branch";
    case RecordKind::kArrives:
      return "arrives";
    case RecordKind::kDeparts:
      return "departs";
  }
  return "kind(" + std::to_string(static_cast<int>(kind)) + ")";
}

Result<void> encode(const TraceRecord& record, std::span<std::byte> out) {
  if (out.size() < kTraceRecordSize) {
    return make_error(ErrorCode::kInval, "out: " + std::to_string(out.size()) +
                                             " bytes, a record needs " +
                                             std::to_string(kTraceRecordSize));
  }
  switch (record.kind) {
    case RecordKind::kBranch:
      store_word(out, 0, record.from);
      store_word(out, kWord, record.to);
      store_word(out, 2 * kWord, record.predicted ? kPredictedFlag : 0);
      return {};
    case RecordKind::kArrives:
    case RecordKind::kDeparts:
      store_word(out, 0, static_cast<std::uint64_t>(record.task.value()));
      store_word(out, kWord, record.time);
      store_word(out, 2 * kWord, record.kind == RecordKind::kArrives ? kArrivesFlag : kDepartsFlag);
      return {};
  }
  return make_error(ErrorCode::kInval,
                    "kind: " + std::to_string(static_cast<int>(record.kind)) + " is not a kind");
}

Result<TraceRecord> decode(std::span<const std::byte> in) {
  if (in.size() < kTraceRecordSize) {
    return make_error(ErrorCode::kInval, "in: " + std::to_string(in.size()) +
                                             " bytes, a record needs " +
                                             std::to_string(kTraceRecordSize));
  }
  const std::uint64_t first = load_word(in, 0);
  const std::uint64_t second = load_word(in, kWord);
  const std::uint64_t flags = load_word(in, 2 * kWord);
  const bool arrives = (flags & kArrivesFlag) != 0;
  const bool departs = (flags & kDepartsFlag) != 0;
  if (arrives && departs) {
    return make_error(ErrorCode::kInval,
                      "flags: " + hex(flags) + " has both arrives and departs");
  }
  if (arrives || departs) {
    return TraceRecord::sched(arrives ? RecordKind::kArrives : RecordKind::kDeparts,
                              TaskId(static_cast<TaskId::rep_type>(first)), second);
  }
  return TraceRecord::branch(first, second, (flags & kPredictedFlag) != 0);
}

std::string format_record(const TraceRecord& record) {
  if (record.kind == RecordKind::kBranch) {
    std::string out = "from=" + hex(record.from) + " to=" + hex(record.to);
    if (record.predicted) out += " predicted";
    return out;
  }
  return to_string(record.kind) + " task=" + std::to_string(record.task.value()) +
         " time=" + std::to_string(record.time);
}

}  // namespace hwarb::bts

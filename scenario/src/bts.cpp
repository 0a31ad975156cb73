#include "bts.h"

#include <charconv>
#include <vector>

#include "hwarb/base/format.h"
#include "hwarb/ptrace_compat/bts_ptrace.h"

namespace hwarb::scenario::internal {

std::optional<bts::BufferMode> parse_buffer_mode(std::string_view word) {
  if (word == "aux") return bts::BufferMode::kAux;
  if (word == "snapshot") return bts::BufferMode::kSnapshot;
  if (word == "wrap") return bts::BufferMode::kWrap;
  if (word == "signal") return bts::BufferMode::kSignal;
  return std::nullopt;
}

std::string_view buffer_mode_name(bts::BufferMode mode) {
  switch (mode) {
    case bts::BufferMode::kAux:
      return "aux";
    case bts::BufferMode::kSnapshot:
      return "snapshot";
    case bts::BufferMode::kWrap:
      return "wrap";
    case bts::BufferMode::kSignal:
      return "signal";
  }
  return "?";
}

std::string_view context_state_name(bts::ContextState state) {
  switch (state) {
    case bts::ContextState::kStopped:
      return "stopped";
    case bts::ContextState::kInactive:
      return "inactive";
    case bts::ContextState::kActive:
      return "active";
  }
  return "?";
}

namespace {

struct FlagName {
  std::uint64_t bit;
  std::string_view name;
};

constexpr FlagName kPtraceBtsFlags[] = {
    {ptrace_compat::kBtsTrace, "trace"},
    {ptrace_compat::kBtsSched, "sched"},
    {ptrace_compat::kBtsSignal, "signal"},
    {ptrace_compat::kBtsCutSize, "cut-size"},
};

constexpr FlagName kContextFlags[] = {
    {bts::kUser, "user"},
    {bts::kKernel, "kernel"},
    {bts::kSched, "sched"},
};

template <std::size_t N>
std::string flags_text(std::uint64_t flags, const FlagName (&names)[N]) {
  // Appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on `s += sep + name`.
  std::string s;
  for (const FlagName& f : names) {
    if ((flags & f.bit) == 0) continue;
    if (!s.empty()) s += ',';
    s += f.name;
    flags &= ~f.bit;
  }
  if (flags != 0) {
    if (!s.empty()) s += ',';
    s += hex(flags);
  }
  return s.empty() ? "none" : s;
}

}  // namespace

Result<std::uint64_t> parse_ptrace_bts_flags(std::string_view list) {
  std::uint64_t flags = 0;
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    bool known = false;
    for (const FlagName& f : kPtraceBtsFlags) {
      if (item == f.name) {
        flags |= f.bit;
        known = true;
      }
    }
    if (!known) {
      std::uint64_t n = 0;
      const bool is_hex = item.starts_with("0x") || item.starts_with("0X");
      const std::string_view digits = is_hex ? item.substr(2) : std::string_view();
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n, 16);
      if (!is_hex || digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
        return make_error(ErrorCode::kInval,
                          "unknown flag '" + std::string(item) +
                              "' in flags= (expected trace, sched, signal, cut-size or a 0x hex "
                              "number, separated by commas)");
      }
      flags |= n;
    }
    if (comma == std::string_view::npos) return flags;
    list.remove_prefix(comma + 1);
  }
}

std::string ptrace_bts_flags_text(std::uint64_t flags) {
  return flags_text(flags, kPtraceBtsFlags);
}

std::string context_flags_text(std::uint32_t flags) {
  return flags_text(flags, kContextFlags);
}

std::string record_text(const bts::TraceRecord& record, const TaskNamer& task_name) {
  switch (record.kind) {
    case bts::RecordKind::kBranch:
      return "from=" + hex(record.from) + " to=" + hex(record.to) +
             (record.predicted ? " predicted" : "");
    case bts::RecordKind::kArrives:
    case bts::RecordKind::kDeparts:
      return std::string(record.kind == bts::RecordKind::kArrives ? "arrives" : "departs") +
             " task=" + task_name(record.task) + " time=" + std::to_string(record.time);
  }
  return "?";
}

std::string context_status_text(const bts::ContextStatus& status, const TaskNamer& task_name) {
  return "state=" + std::string(context_state_name(status.state)) +
         " mode=" + std::string(buffer_mode_name(status.config.mode)) +
         " task=" + (status.config.task ? task_name(*status.config.task) : std::string("global")) +
         " flags=" + context_flags_text(status.config.flags) +
         " capacity=" + std::to_string(status.capacity) + " held=" + std::to_string(status.held) +
         " lost=" + std::to_string(status.lost);
}

}  // namespace hwarb::scenario::internal

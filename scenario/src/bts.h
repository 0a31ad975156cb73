// bts.h — the BTS parts of the scenario language that need no runner state: the values
// of `bts open` and `ptrace T bts-config`, and the text of records, flags and context status.
// Internal to hwarb_scenario (its parser and runner use them).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/bts/trace_record.h"
#include "hwarb/bts/tracer.h"

namespace hwarb::scenario::internal {

// The AUX area of a `bts NAME` perf event: 4096 records of 24 bytes (96 KiB), the order of a
// perf AUX mmap of a few dozen pages; never read by a scenario.
inline constexpr std::size_t kBtsEventAuxBytes = 4096 * bts::kTraceRecordSize;

// aux, snapshot, wrap, signal; nullopt for anything else.
std::optional<bts::BufferMode> parse_buffer_mode(std::string_view word);
std::string_view buffer_mode_name(bts::BufferMode mode);
std::string_view context_state_name(bts::ContextState state);

// flags=LIST of `ptrace T bts-config`: comma-separated trace, sched, signal, cut-size or 0x hex
// numbers (so that unknown bits can be asked for), OR'ed. EINVAL naming the bad item.
Result<std::uint64_t> parse_ptrace_bts_flags(std::string_view list);
// "trace,signal" (known bits in that order, then any unknown bits as one 0x number); "none".
std::string ptrace_bts_flags_text(std::uint64_t flags);
// "user,kernel,sched" (bts::kUser/kKernel/kSched that are set); "none".
std::string context_flags_text(std::uint32_t flags);

using TaskNamer = std::function<std::string(TaskId)>;

// "from=0x401000 to=0x401020[ predicted]" or "arrives task=T time=N" / "departs task=T time=N",
// T the task's scenario name.
std::string record_text(const bts::TraceRecord& record, const TaskNamer& task_name);

// "state=active mode=aux task=T|global flags=user,kernel capacity=N held=N lost=N".
std::string context_status_text(const bts::ContextStatus& status, const TaskNamer& task_name);

}  // namespace hwarb::scenario::internal

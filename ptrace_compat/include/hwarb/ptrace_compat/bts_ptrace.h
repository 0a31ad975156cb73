// hwarb/ptrace_compat/bts_ptrace.h — the legacy PTRACE_BTS_* requests (the 2008 ptrace BTS API
// patch; the 2007 BTS ptrace patch before it) on the shared BTS facility (docs/architecture.md
// sections 5 and 6).
//
// Model. A traced task has at most one BTS buffer: one task tracing context of the bts::Tracer,
// opened as ContextConfig{task, cpu nullopt, flags kUser (| kSched), mode kWrap or kSignal,
// size, start}. The Tracer owns the hardware, sorts records per context and reserves
// ResourceKind::kBts in the arbiter, so a ptrace user competes with PT/LBR users and other BTS
// contexts by the arbiter's rules (EBUSY while PT or LBR is held).
//
// ptrace traces USER branches only: a ptrace caller is not trusted with kernel addresses (the
// 2008 patch programmed DEBUGCTL without BTS_OFF_OS and handed kernel addresses to any tracer; the
// 2008 in-kernel BTS interface review filters them in software). The context asks for kUser and
// never kKernel, so a branch whose `from` is a kernel address never reaches the buffer.
//
// Requests (the 2008 patch's numbers; errors name the field; every request is all or nothing: all
// checks come before any change, and on error nothing changed):
//  - config(task, {size, flags}) = PTRACE_BTS_CONFIG.
//      flags: kBtsTrace (record branches), kBtsSched (arrives/departs timestamps), kBtsSignal
//      (stop the tracee when full instead of wrapping around), kBtsCutSize (cut a size above the
//      maximum to the maximum instead of failing). Other bits: EINVAL.
//      size: bytes, rounded DOWN to whole 24-byte records (bts::kTraceRecordSize), as
//      ds_allocate. The maximum is options.max_bytes (at most bts::kMaxBufferBytes), rounded
//      down: above it EINVAL, or cut to it with kBtsCutSize.
//      A rounded size of 0 asks for no buffer: an existing buffer is freed (its records too);
//      kBtsTrace, kBtsSched or kBtsSignal with it are ENXIO ("size: 0 leaves no buffer to trace
//      into"), with or without a buffer, and the buffer (if any) is kept.
//      No buffer and a size: Tracer::open (EBUSY from the arbiter, ENOMEM: nothing changes).
//      A buffer and a different rounded size: Tracer::resize first — the new buffer is allocated
//      before the old one is freed, the newest records that fit are kept, ENOMEM keeps the old
//      buffer and every record. Then flags, mode and start/stop, which cannot fail once the
//      context is known to the Tracer and the values are valid (checked before).
//      The same rounded size: no reallocation, no record lost.
//  - status(task) = PTRACE_BTS_STATUS: {size in bytes as rounded, flags as configured: kBtsTrace
//    iff the context is started, kBtsSched, kBtsSignal; never kBtsCutSize}. {0, 0} without a
//    buffer (not an error).
//  - size(task) = PTRACE_BTS_SIZE: records held (after a wrap, the whole ring).
//  - get(task, index) = PTRACE_BTS_GET: index 0 is the newest record, size - 1 the oldest;
//    EINVAL for index < 0 or >= size.
//  - clear(task) = PTRACE_BTS_CLEAR: forgets the records.
//  - drain(task) = PTRACE_BTS_DRAIN: every record held, oldest first, then the buffer is empty.
//  - size/get/clear/drain without a buffer: ENXIO ("bts: no buffer (PTRACE_BTS_CONFIG first)").
//  - release(task): the task exited or its tracer detached for good: the buffer is freed (no-op
//    without one).
//  Which task is stopped and traced by whom is the caller's concern (sim::System checks the
//  ptrace stop before calling); task ids are not validated here beyond having a buffer.
//
// Buffer full (kBtsSignal). The Tracer calls its full handler once per fill; the machine
// (sim::System) installs that handler and asks is_full_context(id): when true, it stops the
// tracee with kBtsFullSignal (SIGIO). Records after the buffer filled are dropped and counted,
// nothing is overwritten, until the tracer drains or clears the buffer; a tracer drains and then
// continues the tracee, and the next fill stops it again.
//
// The 2008 patch's defects and how each is fixed here:
//  1. Same size reallocated: the 2008 patch compared the UNROUNDED request with the rounded buffer
//  size
//     (`bts_size != cfg.size`), so re-configuring with the same size (any size that is not a
//     multiple of the record size) freed and reallocated the buffer and lost the trace. Fixed:
//     the request is rounded first and compared with the current rounded size.
//  2. Free before allocate: the 2008 patch called ds_free and then ds_allocate; an ENOMEM left the
//  task
//     without its buffer and its trace. Fixed: Tracer::resize allocates the new buffer first and
//     keeps the old one on failure.
//  3. Partial application: the 2008 patch reallocated the buffer and then failed on the overflow
//  mode
//     (ds_set_overflow(DS_O_SIGNAL) was EOPNOTSUPP) or on a later step, leaving half a
//     configuration. Fixed: every check (flags, size, buffer) precedes the first change; the
//     changes after it cannot fail.
//  4. Unknown flag bits were silently ignored. Fixed: EINVAL "flags: 0x.. unknown".
//  5. No maximum, and PTRACE_BTS_O_CUT_SIZE declared but never implemented: the 2008 patch removed
//     PTRACE_BTS_BUFFER_MAX ("Opens: memory rlimit"), so any tracer could ask for any size and
//     CUT_SIZE did nothing. Fixed: options.max_bytes; above it EINVAL, or cut with kBtsCutSize.
//  6. Flags without a buffer were silently ignored (`ds && (flags & TRACE)`): a tracer asking to
//     trace with size 0 got success and no trace. Fixed: ENXIO.
//  7. PTRACE_BTS_SIZE returned the write index (ds_get_bts_index), and DRAIN read slots
//     [0, index) in buffer order: after a wrap both missed the older part of the ring and DRAIN
//     was not oldest first. Fixed: SIZE is the records held, DRAIN returns all of them oldest
//     first.
//  8. PTRACE_BTS_GET checked the index against the buffer's capacity (ds_get_bts_end), not the
//     records held: before the first wrap it returned zeroed or stale slots. Fixed: EINVAL for
//     index >= records held.
//  9. SIGNAL overflow was not implemented (EOPNOTSUPP) and its signal an open question ("What
//     would be the right signal to use?"). Fixed: implemented by the Tracer's kSignal mode; the
//     tracee stops with SIGIO (kBtsFullSignal).
// 10. Kernel branches reached the ptrace caller. Fixed: user branches only (above).
//
// Not thread-safe: the caller serialises (sim::System's lock), as the Tracer requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/bts/trace_record.h"
#include "hwarb/bts/tracer.h"

namespace hwarb::ptrace_compat {

// struct ptrace_bts_config.
struct PtraceBtsConfig {
  std::uint64_t size = 0;   // bytes
  std::uint64_t flags = 0;  // kBts* below
  friend bool operator==(const PtraceBtsConfig&, const PtraceBtsConfig&) = default;
};

// PTRACE_BTS_O_*.
inline constexpr std::uint64_t kBtsTrace = 0x1;    // record branches
inline constexpr std::uint64_t kBtsSched = 0x2;    // arrives/departs timestamps
inline constexpr std::uint64_t kBtsSignal = 0x4;   // stop with kBtsFullSignal when full
inline constexpr std::uint64_t kBtsCutSize = 0x8;  // cut a too large size to the maximum
inline constexpr std::uint64_t kBtsKnownFlags = kBtsTrace | kBtsSched | kBtsSignal | kBtsCutSize;

// The 2008 ptrace BTS API patch's request numbers.
inline constexpr int kPtraceBtsConfig = 40;
inline constexpr int kPtraceBtsStatus = 41;
inline constexpr int kPtraceBtsSize = 42;
inline constexpr int kPtraceBtsGet = 43;
inline constexpr int kPtraceBtsClear = 44;
inline constexpr int kPtraceBtsDrain = 45;

// SIGIO: the stop signal when a kBtsSignal buffer fills. Distinct from SIGTRAP, so a debugger
// tells a full trace buffer from a breakpoint hit or a single step; and "I/O possible" is what it
// means: trace data is ready to be read (drained).
inline constexpr int kBtsFullSignal = 29;

struct PtraceBtsOptions {
  // The largest buffer a tracee may get, bytes (the "max available" of kBtsCutSize); values
  // above bts::kMaxBufferBytes are treated as that.
  std::size_t max_bytes = std::size_t{4} << 20;
};

// The tracer must outlive this object; destroying it releases every buffer it holds.
class PtraceBts {
 public:
  explicit PtraceBts(bts::Tracer& tracer, PtraceBtsOptions options = {});
  ~PtraceBts();
  PtraceBts(const PtraceBts&) = delete;
  PtraceBts& operator=(const PtraceBts&) = delete;

  Result<void> config(TaskId task, const PtraceBtsConfig& config);
  Result<PtraceBtsConfig> status(TaskId task);
  Result<std::size_t> size(TaskId task);
  Result<bts::TraceRecord> get(TaskId task, std::int64_t index);
  Result<void> clear(TaskId task);
  Result<std::vector<bts::TraceRecord>> drain(TaskId task);
  void release(TaskId task);

  // The task's tracing context, nullopt without a buffer.
  std::optional<bts::ContextId> context(TaskId task) const;
  // For the machine's full handler: true iff `id` is a buffer of this PtraceBts configured with
  // kBtsSignal (then the machine stops its task with kBtsFullSignal).
  bool is_full_context(bts::ContextId id) const;

  // The maximum buffer size in bytes, rounded down to whole records.
  std::size_t max_bytes() const { return max_bytes_; }

 private:
  struct Buffer {
    bts::ContextId id;
    std::uint64_t flags = 0;  // as configured, without kBtsCutSize
  };
  Result<bts::ContextId> buffer_of(TaskId task) const;
  Result<void> reconfigure(Buffer& buffer, std::size_t bytes, std::uint64_t flags);

  bts::Tracer& tracer_;
  std::size_t max_bytes_;
  std::map<TaskId, Buffer> buffers_;
  std::map<bts::ContextId, TaskId> owners_;
};

}  // namespace hwarb::ptrace_compat

// hwarb/bts/tracer.h — the BTS facility shared through tracing contexts (docs/architecture.md
// section 6, the 2008 in-kernel BTS interface review): one owner programs each CPU's facility; any
// number of contexts — one task or global, user and/or kernel — receive the records meant for them.
//
// Model.
//  - The hardware (BtsHardware) has one BTS facility per CPU: a DS save area, a BTS buffer and
//    the BTS bits of IA32_DEBUGCTL. The Tracer is the facility's only owner: it allocates each
//    CPU's BTS buffer (config.ds_records records, the CPU's format), programs it with BTINT set
//    and the interrupt threshold AT the absolute maximum (the simulated PMI is synchronous, so no
//    margin is needed; a real driver leaves one), and empties it ("flushes") into the contexts.
//  - A context is ACTIVE on CPU c when it is started and wants what c runs now: a task context
//    wants its task, a global context every task (on its CPU, or on all CPUs). Contexts opened
//    through the perf PMU (open_for_event) are instead active exactly between activate() and
//    deactivate(), which the BTS PMU calls from add/del. The facility of c traces the union of the
//    active contexts: BTS on iff any is active; BTS_OFF_OS iff none wants kernel branches,
//    BTS_OFF_USR iff none wants user branches.
//  - Sorting: buffer switching at context switch (the 2008 review's second way, with one
//    hardware buffer per CPU). Chosen over switch markers because every record in a CPU's buffer
//    then belongs to the task running there since the last flush: no marker takes buffer space or
//    has to be parsed, and a global context needs no collection from per-task buffers. The price is
//    one flush per switch of a traced CPU. A flush decodes each record once and appends it to every
//    context active on that CPU whose privilege filter accepts it: a branch is kernel when its
//    `from` is >= config.kernel_start (TASK_SIZE_MAX; the 2008 review: "ip < TASK_SIZE" is user).
//  - When the set of active contexts of a CPU is about to change (switch, open, close, start,
//    stop, set_flags, activate, deactivate), that CPU is flushed FIRST, so records taken before
//    the change go to the contexts of before. Opening or closing a context never loses or moves
//    another's records.
//  - Reads (drain, get, size, status, snapshot) first flush every CPU the context may have
//    records on (its task's CPU; all CPUs for a global context, in CPU order), so they see every
//    branch taken so far. Record order inside a context: per CPU, the branch order; across CPUs,
//    the flush order.
//  - Scheduling timestamps (flag kSched): when a task arrives on a CPU, every started context that
//    wants it and has kSched gets {arrives, task, time} before any branch of that stretch; when it
//    departs, {departs, task, time} after the last one. Timestamps never depend on kUser/kKernel.
//
// Buffers (one per context, 24-byte TraceRecords, size rounded DOWN to whole records):
//   kAux       AuxRing: a flush's records for the context are written as one batch; when it does
//              not fit, record by record, and the ones that do not fit are dropped and counted
//              (the ring's truncation markers carry the count to the consumer).
//   kSnapshot  SnapshotBuffer: overwritten in place, never full; `lost` = records overwritten.
//   kWrap      LegacyBuffer, wrap-around: the oldest record is overwritten; `lost` counts them.
//   kSignal    LegacyBuffer, signal: when full, records are dropped and counted, and the full
//              handler is called once (until the context is drained, cleared or resized).
//   `lost` in Drained and ContextStatus::lost counts records lost since the last drain or clear;
//   total_lost since open.
//
// State machine per context: kStopped (not tracing; buffer kept, readable), kInactive (started;
// nothing it wants runs now), kActive (the facility traces for it on some CPU). open() starts it
// unless config.start is false; start()/stop() move between kStopped and the other two.
//
// Arbitration: open() reserves ResourceKind::kBts in the arbiter (EBUSY while PT or LBR is held):
// a task context as {task, all CPUs}, a global context as one CPU-bound request per CPU it covers
// (reserve_all). open_for_event() does not: the perf core reserved for the event already.
//
// Errors: EINVAL (field named: flags — unknown bits, or neither kUser nor kKernel; size — below one
// record or above kMaxBufferBytes; cpu — out of range; mode — an operation the mode lacks, e.g.
// get/resize on kAux); ENOENT for an unknown context; ENOMEM from an allocation; EBUSY from the
// arbiter. Every operation is all or nothing: on error nothing changed (resize allocates the new
// buffer before the old one is freed).
//
// Thread-safety: none; callers serialise (sim::System's lock). Only a kAux context's AuxRing may
// be read by another thread, through aux_ring(), while the caller keeps flushing (one producer,
// one consumer). The hardware's PMI calls on_interrupt() on the caller's thread.
// Determinism: contexts are visited in id order; same calls, same records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/bts/aux_ring.h"
#include "hwarb/bts/trace_record.h"
#include "hwarb/x86/bts.h"

namespace hwarb::bts {

// One CPU's BTS facility as the tracer programs it (sim::System implements it over the simulated
// CPU; SoftwareBts over software-observed branches).
class BtsHardware {
 public:
  virtual ~BtsHardware() = default;
  // Installs the DS area's BTS fields and the memory they describe (buffer[i] is linear address
  // area.bts_buffer_base + i) and the BTS bits of DEBUGCTL (x86::debugctl::kBtsMask; other bits
  // are the hardware's). debugctl without TR|BTS switches the facility off.
  virtual void program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
                       std::uint64_t debugctl) = 0;
  // The DS area as the CPU left it (bts_index moves as records are stored).
  virtual x86::DsArea ds_area(CpuId cpu) const = 0;
  // Moves bts_index (to the base, after a flush).
  virtual void set_bts_index(CpuId cpu, std::uint64_t index) = 0;
};

inline constexpr std::uint32_t kUser = 1;    // trace branches taken in user space
inline constexpr std::uint32_t kKernel = 2;  // trace branches taken in kernel space
inline constexpr std::uint32_t kSched = 4;   // scheduling timestamps
inline constexpr std::uint32_t kKnownFlags = kUser | kKernel | kSched;

enum class BufferMode : std::uint8_t { kAux, kSnapshot, kWrap, kSignal };
enum class ContextState : std::uint8_t { kStopped, kInactive, kActive };
std::string to_string(BufferMode mode);
std::string to_string(ContextState state);

using ContextId = StrongId<struct ContextIdTag, std::uint64_t>;

struct ContextConfig {
  std::optional<TaskId> task;  // nullopt: global
  std::optional<CpuId> cpu;  // global contexts: one CPU, or nullopt for all; task contexts: nullopt
  std::uint32_t flags = kUser | kKernel;
  BufferMode mode = BufferMode::kAux;
  std::size_t size = 0;  // bytes; rounded down to whole records
  bool start = true;
};

struct ContextStatus {
  ContextConfig config;  // size as rounded
  ContextState state = ContextState::kStopped;
  std::size_t capacity = 0;  // records
  std::size_t held = 0;      // records readable now
  std::uint64_t lost = 0;    // since the last drain or clear
  std::uint64_t total_lost = 0;
  std::uint64_t written = 0;  // records stored since open (lost ones not counted)
  bool full = false;          // kSignal: full and waiting to be drained
};

struct Drained {
  std::vector<TraceRecord> records;  // oldest first
  std::uint64_t lost = 0;            // since the previous drain or clear
};

struct TracerConfig {
  int cpus = 1;
  x86::BtsFormat format = x86::BtsFormat::k64;
  std::uint64_t kernel_start = 0x00007ffffffff000;  // TASK_SIZE_MAX (i386: 0xc0000000)
  std::size_t ds_records = 64;                      // per-CPU BTS buffer, records
};

class Tracer {
 public:
  // EINVAL for cpus < 1 or ds_records < 1, or (field ds_records) when the CPUs' BTS buffers do
  // not fit the format's kernel address space or one exceeds kMaxBufferBytes; ENOMEM. Programs
  // every CPU's area with the facility off. arbiter may be null (no arbitration); when given it
  // must outlive the Tracer. The destructor switches every CPU that is on off (debugctl 0); the
  // area stays installed but describes freed memory, so nothing may switch it on again.
  static Result<std::unique_ptr<Tracer>> create(const TracerConfig& config, BtsHardware& hardware,
                                                arbiter::Arbiter* arbiter);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  const TracerConfig& config() const { return config_; }

  // ---- contexts ----
  Result<ContextId> open(const ContextConfig& config);
  // For the BTS PMU: no arbiter reservation; active only between activate() and deactivate().
  Result<ContextId> open_for_event(const ContextConfig& config);
  // Flushes what the context may still get, then forgets it (its records too).
  Result<void> close(ContextId id);
  Result<void> start(ContextId id);
  Result<void> stop(ContextId id);
  // Replaces kUser/kKernel/kSched (same checks as open).
  Result<void> set_flags(ContextId id, std::uint32_t flags);
  // kWrap <-> kSignal only (EINVAL otherwise); records kept.
  Result<void> set_mode(ContextId id, BufferMode mode);
  // kWrap/kSignal: new size in bytes, rounded down; the same rounded size changes nothing. The new
  // buffer is allocated first (ENOMEM keeps everything); the newest records that fit are kept.
  Result<void> resize(ContextId id, std::size_t bytes);
  Result<ContextStatus> status(ContextId id);
  // Every held record, oldest first, then the buffer is empty.
  Result<Drained> drain(ContextId id);
  // Forgets the held records (lost restarts at 0).
  Result<void> clear(ContextId id);
  // kWrap/kSignal: records held; get(0) is the newest. EINVAL for index >= size.
  Result<std::size_t> size(ContextId id);
  Result<TraceRecord> get(ContextId id, std::size_t index);
  // kAux: the ring, for a consumer thread. nullptr for other modes or unknown ids.
  AuxRing* aux_ring(ContextId id);
  std::vector<ContextId> contexts() const;

  // Called once per context and fill when a flush (or a timestamp) fills a kSignal buffer: at the
  // end of the operation that flushed (so the handler may call back into the Tracer).
  using FullHandler = std::function<void(ContextId, std::optional<TaskId>)>;
  void set_full_handler(FullHandler handler) { full_handler_ = std::move(handler); }

  // ---- the BTS PMU (contexts from open_for_event) ----
  Result<void> activate(ContextId id, CpuId cpu);
  Result<void> deactivate(ContextId id, CpuId cpu);

  // ---- the machine ----
  // A context switch on cpu (flush as prev, departs/arrives timestamps, reprogram). EINVAL for a
  // CPU out of range.
  Result<void> on_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next,
                         std::uint64_t time);
  // The PMI: the CPU's buffer reached the threshold. Flushes it.
  Result<void> on_interrupt(CpuId cpu);
  // Empties the CPU's BTS buffer into the contexts now.
  Result<void> flush(CpuId cpu);
  void flush_all();
  // The task is gone: flushes its CPU; its task contexts stay open and readable, never active.
  void on_exit(TaskId task);
  std::optional<TaskId> current(CpuId cpu) const;
  // The DEBUGCTL BTS bits the tracer last programmed on cpu (0: off).
  std::uint64_t programmed_debugctl(CpuId cpu) const;
  // Records sorted out of the hardware buffers so far (before filtering), for statistics.
  std::uint64_t records_flushed() const { return flushed_; }

 private:
  struct Context;
  struct Cpu;
  // What decides whether a context is active: its own state, with at most one CPU's activation
  // (open_for_event contexts) overridden, so that a change can be judged before it is made.
  struct Want {
    bool started = false;
    bool exited = false;
    std::uint32_t flags = 0;
    int cpu = -1;  // >= 0: this CPU's activation is `activated` instead of the context's
    bool activated = false;
  };
  Tracer(const TracerConfig& config, BtsHardware& hardware, arbiter::Arbiter* arbiter,
         std::vector<Cpu> cpus);

  Result<ContextId> open_context(const ContextConfig& config, bool for_event);
  Result<Context*> find(ContextId id);
  Result<void> check_cpu(CpuId cpu) const;
  static Want want_of(const Context& context);
  bool active_on(const Context& context, const Want& want, int cpu) const;
  bool wants_task(const Context& context, TaskId task, int cpu) const;
  // Flushes every CPU whose active set or filter the change to `next` affects, applies it, then
  // rebuilds and reprograms those CPUs.
  void change(Context& context, const Want& next);
  // change() with the context's Want as `edit` leaves it (ENOENT for an unknown id; EINVAL when
  // event_only and the context is not from open_for_event).
  Result<void> update(ContextId id, bool event_only, const std::function<void(Want&)>& edit);
  void rebuild(int cpu);
  void flush_cpu(int cpu);
  // Flushes the CPUs on which the context is active (where it may have records in hardware).
  void flush_for(const Context& context);
  void store(Context& context, std::span<const std::byte> records);
  // A scheduling timestamp to every started kSched context that wants `task` on `cpu`.
  void timestamp(RecordKind kind, TaskId task, std::uint64_t time, int cpu);
  void reset_lost(Context& context);
  // Calls the full handler for the kSignal buffers that filled since the last call.
  void deliver_full();

  TracerConfig config_;
  BtsHardware& hardware_;
  arbiter::Arbiter* arbiter_;
  std::vector<Cpu> cpus_;
  std::map<ContextId, std::unique_ptr<Context>> contexts_;
  std::uint64_t next_id_ = 1;
  std::uint64_t flushed_ = 0;
  FullHandler full_handler_;
  std::vector<std::pair<ContextId, std::optional<TaskId>>> pending_full_;
};

}  // namespace hwarb::bts

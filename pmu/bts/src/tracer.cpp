#include "hwarb/bts/tracer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "hwarb/base/check.h"
#include "hwarb/base/format.h"
#include "hwarb/bts/legacy_buffer.h"
#include "hwarb/bts/snapshot_buffer.h"

namespace hwarb::bts {
namespace {

constexpr std::size_t kRecord = kTraceRecordSize;
constexpr std::uint32_t kFilter = kUser | kKernel;
// The fake kernel linear addresses of the per-CPU BTS buffers: the vmalloc area of x86-64 and
// the top quarter of an i386 address space, one buffer after the other, cache-line aligned.
constexpr std::uint64_t kBase64 = 0xffffc90000000000;
constexpr std::uint64_t kBase32 = 0xd0000000;
constexpr std::uint64_t kBufferAlign = 64;

Result<void> check_flags(std::uint32_t flags) {
  if ((flags & ~kKnownFlags) != 0) {
    return make_error(ErrorCode::kInval, "flags: unknown bits " + hex(flags & ~kKnownFlags));
  }
  if ((flags & kFilter) == 0) {
    return make_error(ErrorCode::kInval, "flags: neither kUser nor kKernel is set");
  }
  return {};
}

// The context buffer size rounded down to whole records.
Result<std::size_t> checked_size(std::size_t bytes) {
  const std::size_t rounded = bytes / kRecord * kRecord;
  if (rounded == 0) {
    return make_error(ErrorCode::kInval, "size: " + std::to_string(bytes) + " bytes is below one " +
                                             std::to_string(kRecord) + "-byte record");
  }
  if (rounded > kMaxBufferBytes) {
    return make_error(ErrorCode::kInval, "size: " + std::to_string(bytes) +
                                             " bytes exceeds the maximum of " +
                                             std::to_string(kMaxBufferBytes));
  }
  return rounded;
}

bool is_legacy(BufferMode mode) {
  return mode == BufferMode::kWrap || mode == BufferMode::kSignal;
}

OverflowMode overflow_mode(BufferMode mode) {
  return mode == BufferMode::kSignal ? OverflowMode::kSignal : OverflowMode::kWrapAround;
}

Result<void> need_legacy(const ContextConfig& config, const char* operation) {
  if (is_legacy(config.mode)) return {};
  return make_error(ErrorCode::kInval, std::string("mode: ") + operation +
                                           " needs kWrap or kSignal, the context is " +
                                           to_string(config.mode));
}

// One 64-bit branch record in the TraceRecord layout (trace_record.h), little-endian.
inline void put_word(std::byte* out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
inline void put_branch(std::byte* out, const x86::BtsRecord& record) {
  put_word(out, record.from);
  put_word(out + 8, record.to);
  put_word(out + 16, record.predicted ? kPredictedFlag : 0);
}

TraceRecord decode_stored(std::span<const std::byte> bytes) {
  auto record = decode(bytes);
  HWARB_CHECK(record.has_value(), "Tracer: a context buffer holds a record it cannot decode");
  return *record;
}

void decode_all(std::span<const std::byte> bytes, std::vector<TraceRecord>& out) {
  for (std::size_t off = 0; off + kRecord <= bytes.size(); off += kRecord) {
    out.push_back(decode_stored(bytes.subspan(off, kRecord)));
  }
}

}  // namespace

std::string to_string(BufferMode mode) {
  switch (mode) {
    case BufferMode::kAux:
      return "aux";
    case BufferMode::kSnapshot:
      return "snapshot";
    case BufferMode::kWrap:
      return "wrap";
    case BufferMode::kSignal:
      return "signal";
  }
  return "mode(" + std::to_string(static_cast<int>(mode)) + ")";
}

std::string to_string(ContextState state) {
  switch (state) {
    case ContextState::kStopped:
      return "stopped";
    case ContextState::kInactive:
      return "inactive";
    case ContextState::kActive:
      return "active";
  }
  return "state(" + std::to_string(static_cast<int>(state)) + ")";
}

// One CPU's BTS facility as the tracer owns it, and the per-flush transcriptions.
struct Tracer::Cpu {
  ByteBuffer buffer;              // ds_records records in the CPU's format
  x86::DsArea area;               // as programmed: the index at the base
  std::uint64_t debugctl = 0;     // the BTS bits last programmed
  std::optional<TaskId> current;  // nullopt: idle
  std::vector<Context*> active;   // in id order
  bool kernel_only = false;       // some active context takes kernel branches only
  bool user_only = false;         // some active context takes user branches only
  bool dirty = false;             // change(): flushed, to rebuild
  // A flush's records as TraceRecords: all of them, the kernel ones, the user ones.
  ByteBuffer all;
  ByteBuffer kernel;
  ByteBuffer user;
};

struct Tracer::Context {
  // A padding the AuxRing put before a batch: [pos, skip_to), for the `held` count.
  struct Padding {
    std::uint64_t pos = 0;
    std::uint64_t skip_to = 0;
  };

  ContextId id;
  ContextConfig config;  // size rounded, flags current
  bool for_event = false;
  bool started = false;
  bool exited = false;                  // its task is gone
  std::vector<std::uint8_t> activated;  // per CPU; open_for_event contexts only
  std::vector<arbiter::Reservation> reservations;

  std::unique_ptr<AuxRing> aux;            // kAux
  std::optional<SnapshotBuffer> snapshot;  // kSnapshot
  std::optional<LegacyBuffer> legacy;      // kWrap, kSignal
  std::vector<Padding> paddings;           // kAux

  std::uint64_t written = 0;
  std::uint64_t total_lost = 0;
  std::uint64_t lost_mark = 0;  // total_lost at the last drain or clear
  bool full_reported = false;   // kSignal: the full handler was called for this fill
};

// ---- creation ---------------------------------------------------------------------------------

Result<std::unique_ptr<Tracer>> Tracer::create(const TracerConfig& config, BtsHardware& hardware,
                                               arbiter::Arbiter* arbiter) {
  if (config.cpus < 1) {
    return make_error(ErrorCode::kInval,
                      "cpus: " + std::to_string(config.cpus) + ", must be at least 1");
  }
  if (config.format != x86::BtsFormat::k32 && config.format != x86::BtsFormat::k64) {
    return make_error(
        ErrorCode::kInval,
        "format: " + std::to_string(static_cast<int>(config.format)) + " is not a BTS format");
  }
  if (config.ds_records < 1) {
    return make_error(ErrorCode::kInval, "ds_records: must be at least 1");
  }
  const std::size_t rs = x86::bts::record_size(config.format);
  if (config.ds_records > kMaxBufferBytes / kRecord) {
    return make_error(ErrorCode::kInval, "ds_records: " + std::to_string(config.ds_records) +
                                             " records exceed the maximum buffer of " +
                                             std::to_string(kMaxBufferBytes) + " bytes");
  }
  const std::uint64_t bytes = config.ds_records * rs;
  const std::uint64_t stride = (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  const bool k32 = config.format == x86::BtsFormat::k32;
  const std::uint64_t base0 = k32 ? kBase32 : kBase64;
  // Bytes from base0 to the end of the format's address space.
  const std::uint64_t space = k32 ? (std::uint64_t{1} << 32) - base0 : 0 - base0;
  if (stride > space / static_cast<std::uint64_t>(config.cpus)) {
    return make_error(ErrorCode::kInval, "ds_records: " + std::to_string(config.ds_records) +
                                             " records on " + std::to_string(config.cpus) +
                                             " CPUs do not fit the kernel address space of the " +
                                             (k32 ? "32-bit" : "64-bit") + " format");
  }

  std::vector<Cpu> cpus(static_cast<std::size_t>(config.cpus));
  for (std::size_t c = 0; c < cpus.size(); ++c) {
    Cpu& cpu = cpus[c];
    for (auto [buf, size] :
         {std::pair{&cpu.buffer, bytes}, std::pair{&cpu.all, config.ds_records * kRecord},
          std::pair{&cpu.kernel, config.ds_records * kRecord},
          std::pair{&cpu.user, config.ds_records * kRecord}}) {
      auto allocated = ByteBuffer::allocate(size);
      if (!allocated) return std::unexpected(allocated.error());
      *buf = std::move(*allocated);
    }
    const std::uint64_t base = base0 + c * stride;
    cpu.area.bts_buffer_base = base;
    cpu.area.bts_index = base;
    cpu.area.bts_absolute_maximum = base + bytes;
    cpu.area.bts_interrupt_threshold = base + bytes;
    HWARB_CHECK(x86::ds::validate_bts(config.format, cpu.area).has_value(),
                "Tracer: a per-CPU DS area breaks the BTS rules");
  }
  std::unique_ptr<Tracer> tracer(new (std::nothrow)
                                     Tracer(config, hardware, arbiter, std::move(cpus)));
  if (!tracer) return make_error(ErrorCode::kNoMem, "tracer: cannot allocate");
  for (int c = 0; c < config.cpus; ++c) {
    Cpu& cpu = tracer->cpus_[static_cast<std::size_t>(c)];
    hardware.program(CpuId(c), cpu.area, cpu.buffer.span(), 0);
  }
  return tracer;
}

Tracer::Tracer(const TracerConfig& config, BtsHardware& hardware, arbiter::Arbiter* arbiter,
               std::vector<Cpu> cpus)
    : config_(config), hardware_(hardware), arbiter_(arbiter), cpus_(std::move(cpus)) {}

Tracer::~Tracer() {
  for (int c = 0; c < config_.cpus; ++c) {
    Cpu& cpu = cpus_[static_cast<std::size_t>(c)];
    if (cpu.debugctl != 0) hardware_.program(CpuId(c), cpu.area, cpu.buffer.span(), 0);
  }
}

// ---- contexts ---------------------------------------------------------------------------------

Result<ContextId> Tracer::open(const ContextConfig& config) {
  return open_context(config, false);
}

Result<ContextId> Tracer::open_for_event(const ContextConfig& config) {
  return open_context(config, true);
}

Result<ContextId> Tracer::open_context(const ContextConfig& config, bool for_event) {
  if (auto r = check_flags(config.flags); !r) return std::unexpected(r.error());
  auto size = checked_size(config.size);
  if (!size) return std::unexpected(size.error());
  if (config.cpu) {
    if (auto r = check_cpu(*config.cpu); !r) return std::unexpected(r.error());
    if (config.task) {
      return make_error(ErrorCode::kInval,
                        "cpu: a task context follows its task on every CPU; only a global "
                        "context takes a cpu");
    }
  }

  auto context = std::make_unique<Context>();
  context->id = ContextId(next_id_);
  context->config = config;
  context->config.size = *size;
  context->for_event = for_event;
  if (for_event) context->activated.assign(cpus_.size(), 0);
  switch (config.mode) {
    case BufferMode::kAux: {
      auto ring = AuxRing::create({.size = *size, .record_size = kRecord});
      if (!ring) return std::unexpected(ring.error());
      context->aux = std::move(*ring);
      break;
    }
    case BufferMode::kSnapshot: {
      auto snapshot = SnapshotBuffer::create(*size, kRecord);
      if (!snapshot) return std::unexpected(snapshot.error());
      context->snapshot.emplace(std::move(*snapshot));
      break;
    }
    case BufferMode::kWrap:
    case BufferMode::kSignal: {
      auto legacy = LegacyBuffer::create(*size, overflow_mode(config.mode), kRecord);
      if (!legacy) return std::unexpected(legacy.error());
      context->legacy.emplace(std::move(*legacy));
      break;
    }
    default:
      return make_error(ErrorCode::kInval,
                        "mode: " + to_string(config.mode) + " is not a buffer mode");
  }

  if (!for_event && arbiter_ != nullptr) {
    const RequestId request_id(context->id.value());
    if (config.task) {
      auto reservation = arbiter_->reserve({.kind = arbiter::ResourceKind::kBts,
                                            .task = config.task,
                                            .cpu = std::nullopt,
                                            .id = request_id});
      if (!reservation) return std::unexpected(reservation.error());
      context->reservations.push_back(std::move(*reservation));
    } else {
      std::vector<arbiter::Request> requests;
      for (int c = 0; c < config_.cpus; ++c) {
        if (config.cpu && config.cpu->value() != c) continue;
        requests.push_back({.kind = arbiter::ResourceKind::kBts,
                            .task = std::nullopt,
                            .cpu = CpuId(c),
                            .id = request_id});
      }
      auto reservations = arbiter_->reserve_all(requests);
      if (!reservations) return std::unexpected(reservations.error());
      context->reservations = std::move(*reservations);
    }
  }

  const ContextId id = context->id;
  Context& inserted = *contexts_.emplace(id, std::move(context)).first->second;
  ++next_id_;
  if (config.start) {
    Want next = want_of(inserted);
    next.started = true;
    change(inserted, next);
  }
  deliver_full();
  return id;
}

Result<Tracer::Context*> Tracer::find(ContextId id) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) {
    return make_error(ErrorCode::kNoEnt, "context: " + std::to_string(id.value()) + " is not open");
  }
  return it->second.get();
}

Result<void> Tracer::check_cpu(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= config_.cpus) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " is not in [0, " +
                                             std::to_string(config_.cpus) + ")");
  }
  return {};
}

Result<void> Tracer::close(ContextId id) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Want next = want_of(**context);
  next.started = false;
  change(**context, next);
  std::erase_if(pending_full_, [id](const auto& entry) { return entry.first == id; });
  contexts_.erase(id);
  deliver_full();
  return {};
}

Result<void> Tracer::update(ContextId id, bool event_only, const std::function<void(Want&)>& edit) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  if (event_only && !(*context)->for_event) {
    return make_error(ErrorCode::kInval, "context: " + std::to_string(id.value()) +
                                             " was not opened by open_for_event");
  }
  Want next = want_of(**context);
  edit(next);
  change(**context, next);
  deliver_full();
  return {};
}

Result<void> Tracer::start(ContextId id) {
  return update(id, false, [](Want& w) { w.started = true; });
}

Result<void> Tracer::stop(ContextId id) {
  return update(id, false, [](Want& w) { w.started = false; });
}

Result<void> Tracer::set_flags(ContextId id, std::uint32_t flags) {
  if (auto r = check_flags(flags); !r) return r;
  return update(id, false, [flags](Want& w) { w.flags = flags; });
}

Result<void> Tracer::set_mode(ContextId id, BufferMode mode) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  if (auto r = need_legacy(x.config, "set_mode"); !r) return r;
  if (!is_legacy(mode)) {
    return make_error(ErrorCode::kInval,
                      "mode: a context changes between kWrap and kSignal only, "
                      "not to " +
                          to_string(mode));
  }
  flush_for(x);
  x.legacy->set_mode(overflow_mode(mode));
  x.config.mode = mode;
  x.full_reported = false;
  deliver_full();
  return {};
}

Result<void> Tracer::resize(ContextId id, std::size_t bytes) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  if (auto r = need_legacy(x.config, "resize"); !r) return r;
  auto size = checked_size(bytes);
  if (!size) return std::unexpected(size.error());
  if (*size == x.config.size) return {};
  flush_for(x);
  const std::uint64_t overwritten = x.legacy->overwritten();
  if (auto r = x.legacy->resize(*size); !r) {
    deliver_full();
    return r;
  }
  x.total_lost += x.legacy->overwritten() - overwritten;
  x.config.size = *size;
  x.full_reported = false;
  deliver_full();
  return {};
}

Result<ContextStatus> Tracer::status(ContextId id) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  flush_for(x);
  ContextStatus s;
  s.config = x.config;
  s.state = ContextState::kStopped;
  if (x.started) {
    s.state = ContextState::kInactive;
    const Want now = want_of(x);
    for (int c = 0; c < config_.cpus; ++c) {
      if (active_on(x, now, c)) s.state = ContextState::kActive;
    }
  }
  switch (x.config.mode) {
    case BufferMode::kAux: {
      AuxRing& ring = *x.aux;
      const std::uint64_t tail = ring.tail();
      const std::uint64_t head = ring.head();
      std::erase_if(x.paddings, [tail](const Context::Padding& p) { return p.skip_to <= tail; });
      std::uint64_t padding = 0;
      for (const Context::Padding& p : x.paddings) padding += p.skip_to - std::max(p.pos, tail);
      s.capacity = ring.capacity() / kRecord;
      s.held = static_cast<std::size_t>((head - tail - padding) / kRecord);
      break;
    }
    case BufferMode::kSnapshot:
      s.capacity = x.snapshot->capacity() / kRecord;
      s.held = static_cast<std::size_t>(x.snapshot->size());
      break;
    case BufferMode::kWrap:
    case BufferMode::kSignal:
      s.capacity = x.legacy->capacity();
      s.held = x.legacy->size();
      s.full = x.config.mode == BufferMode::kSignal && x.legacy->full();
      break;
  }
  s.lost = x.total_lost - x.lost_mark;
  s.total_lost = x.total_lost;
  s.written = x.written;
  deliver_full();
  return s;
}

Result<Drained> Tracer::drain(ContextId id) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  flush_for(x);
  Drained out;
  switch (x.config.mode) {
    case BufferMode::kAux: {
      AuxView view = x.aux->view();
      AuxChunk chunk;
      while (view.next(chunk)) decode_all(chunk.data, out.records);
      x.aux->release(view);
      break;
    }
    case BufferMode::kSnapshot:
      decode_all(x.snapshot->snapshot(), out.records);
      x.snapshot->clear();
      break;
    case BufferMode::kWrap:
    case BufferMode::kSignal:
      decode_all(x.legacy->drain(), out.records);
      break;
  }
  out.lost = x.total_lost - x.lost_mark;
  reset_lost(x);
  deliver_full();
  return out;
}

Result<void> Tracer::clear(ContextId id) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  flush_for(x);
  switch (x.config.mode) {
    case BufferMode::kAux:
      x.aux->release(x.aux->view());
      break;
    case BufferMode::kSnapshot:
      x.snapshot->clear();
      break;
    case BufferMode::kWrap:
    case BufferMode::kSignal:
      x.legacy->clear();
      break;
  }
  reset_lost(x);
  deliver_full();
  return {};
}

void Tracer::reset_lost(Context& context) {
  context.lost_mark = context.total_lost;
  context.full_reported = false;
}

Result<std::size_t> Tracer::size(ContextId id) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  if (auto r = need_legacy(x.config, "size"); !r) return std::unexpected(r.error());
  flush_for(x);
  deliver_full();
  return x.legacy->size();
}

Result<TraceRecord> Tracer::get(ContextId id, std::size_t index) {
  auto context = find(id);
  if (!context) return std::unexpected(context.error());
  Context& x = **context;
  if (auto r = need_legacy(x.config, "get"); !r) return std::unexpected(r.error());
  flush_for(x);
  deliver_full();
  auto bytes = x.legacy->get(index);
  if (!bytes) return std::unexpected(bytes.error());
  return decode_stored(*bytes);
}

AuxRing* Tracer::aux_ring(ContextId id) {
  auto it = contexts_.find(id);
  return it == contexts_.end() ? nullptr : it->second->aux.get();
}

std::vector<ContextId> Tracer::contexts() const {
  std::vector<ContextId> ids;
  ids.reserve(contexts_.size());
  for (const auto& entry : contexts_) ids.push_back(entry.first);
  return ids;
}

// ---- the BTS PMU ------------------------------------------------------------------------------

Result<void> Tracer::activate(ContextId id, CpuId cpu) {
  if (auto r = check_cpu(cpu); !r) return r;
  return update(id, true, [c = cpu.value()](Want& w) {
    w.cpu = c;
    w.activated = true;
  });
}

Result<void> Tracer::deactivate(ContextId id, CpuId cpu) {
  if (auto r = check_cpu(cpu); !r) return r;
  return update(id, true, [c = cpu.value()](Want& w) {
    w.cpu = c;
    w.activated = false;
  });
}

// ---- the machine ------------------------------------------------------------------------------

Result<void> Tracer::on_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next,
                               std::uint64_t time) {
  if (auto r = check_cpu(cpu); !r) return r;
  const int c = cpu.value();
  flush_cpu(c);
  if (prev) timestamp(RecordKind::kDeparts, *prev, time, c);
  cpus_[static_cast<std::size_t>(c)].current = next;
  if (next) timestamp(RecordKind::kArrives, *next, time, c);
  rebuild(c);
  deliver_full();
  return {};
}

Result<void> Tracer::on_interrupt(CpuId cpu) {
  return flush(cpu);
}

Result<void> Tracer::flush(CpuId cpu) {
  if (auto r = check_cpu(cpu); !r) return r;
  flush_cpu(cpu.value());
  deliver_full();
  return {};
}

void Tracer::flush_all() {
  for (int c = 0; c < config_.cpus; ++c) flush_cpu(c);
  deliver_full();
}

void Tracer::on_exit(TaskId task) {
  for (int c = 0; c < config_.cpus; ++c) {
    if (cpus_[static_cast<std::size_t>(c)].current == task) flush_cpu(c);
  }
  for (auto& entry : contexts_) {
    Context& x = *entry.second;
    if (x.config.task != task || x.exited) continue;
    Want next = want_of(x);
    next.exited = true;
    change(x, next);
  }
  deliver_full();
}

std::optional<TaskId> Tracer::current(CpuId cpu) const {
  if (!check_cpu(cpu)) return std::nullopt;
  return cpus_[static_cast<std::size_t>(cpu.value())].current;
}

std::uint64_t Tracer::programmed_debugctl(CpuId cpu) const {
  if (!check_cpu(cpu)) return 0;
  return cpus_[static_cast<std::size_t>(cpu.value())].debugctl;
}

// ---- activity ---------------------------------------------------------------------------------

Tracer::Want Tracer::want_of(const Context& context) {
  return {.started = context.started, .exited = context.exited, .flags = context.config.flags};
}

bool Tracer::active_on(const Context& context, const Want& want, int cpu) const {
  if (!want.started || want.exited) return false;
  if (context.for_event) {
    return cpu == want.cpu ? want.activated : context.activated[static_cast<std::size_t>(cpu)] != 0;
  }
  const std::optional<TaskId>& running = cpus_[static_cast<std::size_t>(cpu)].current;
  if (!running) return false;
  if (context.config.task) return *context.config.task == *running;
  return !context.config.cpu || context.config.cpu->value() == cpu;
}

bool Tracer::wants_task(const Context& context, TaskId task, int cpu) const {
  if (!context.started || context.exited || (context.config.flags & kSched) == 0) return false;
  if (context.config.task) return *context.config.task == task;
  return !context.config.cpu || context.config.cpu->value() == cpu;
}

void Tracer::change(Context& context, const Want& next) {
  const Want now = want_of(context);
  for (int c = 0; c < config_.cpus; ++c) {
    const bool before = active_on(context, now, c);
    const bool after = active_on(context, next, c);
    if (before != after || (before && (now.flags & kFilter) != (next.flags & kFilter))) {
      flush_cpu(c);
      cpus_[static_cast<std::size_t>(c)].dirty = true;
    }
  }
  context.started = next.started;
  context.exited = next.exited;
  context.config.flags = next.flags;
  if (next.cpu >= 0) context.activated[static_cast<std::size_t>(next.cpu)] = next.activated;
  for (int c = 0; c < config_.cpus; ++c) {
    Cpu& cpu = cpus_[static_cast<std::size_t>(c)];
    if (!cpu.dirty) continue;
    cpu.dirty = false;
    rebuild(c);
  }
}

void Tracer::rebuild(int c) {
  Cpu& cpu = cpus_[static_cast<std::size_t>(c)];
  cpu.active.clear();
  cpu.kernel_only = false;
  cpu.user_only = false;
  bool kernel = false;
  bool user = false;
  for (auto& entry : contexts_) {
    Context& x = *entry.second;
    if (!active_on(x, want_of(x), c)) continue;
    cpu.active.push_back(&x);
    const bool k = (x.config.flags & kKernel) != 0;
    const bool u = (x.config.flags & kUser) != 0;
    kernel = kernel || k;
    user = user || u;
    cpu.kernel_only = cpu.kernel_only || !u;
    cpu.user_only = cpu.user_only || !k;
  }
  const std::uint64_t debugctl =
      cpu.active.empty()
          ? 0
          : x86::debugctl::enable_bts(0, {.kernel = kernel, .user = user, .interrupt = true});
  if (debugctl != cpu.debugctl) {
    hardware_.program(CpuId(c), cpu.area, cpu.buffer.span(), debugctl);
    cpu.debugctl = debugctl;
  }
}

// ---- sorting ----------------------------------------------------------------------------------

void Tracer::flush_cpu(int c) {
  Cpu& cpu = cpus_[static_cast<std::size_t>(c)];
  const x86::DsArea area = hardware_.ds_area(CpuId(c));
  if (area.bts_index == cpu.area.bts_buffer_base) return;
  const std::size_t n = static_cast<std::size_t>(
      std::min<std::uint64_t>(x86::ds::bts_records(config_.format, area), config_.ds_records));
  flushed_ += n;
  if (n != 0 && !cpu.active.empty()) {
    const std::size_t rs = x86::bts::record_size(config_.format);
    const std::span<const std::byte> hw = cpu.buffer.span();
    const bool split = cpu.kernel_only || cpu.user_only;
    std::byte* all = cpu.all.data();
    std::byte* kernel = cpu.kernel.data();
    std::byte* user = cpu.user.data();
    for (std::size_t i = 0; i < n; ++i) {
      const auto record = x86::bts::decode(config_.format, hw.subspan(i * rs, rs));
      put_branch(all, *record);
      if (split) {
        std::byte*& to = record->from >= config_.kernel_start ? kernel : user;
        std::memcpy(to, all, kRecord);
        to += kRecord;
      }
      all += kRecord;
    }
    const std::span<const std::byte> records(cpu.all.data(), n * kRecord);
    const std::span<const std::byte> kernel_records(
        cpu.kernel.data(), static_cast<std::size_t>(kernel - cpu.kernel.data()));
    const std::span<const std::byte> user_records(cpu.user.data(),
                                                  static_cast<std::size_t>(user - cpu.user.data()));
    for (Context* x : cpu.active) {
      const bool k = (x->config.flags & kKernel) != 0;
      const bool u = (x->config.flags & kUser) != 0;
      const std::span<const std::byte> mine = k && u ? records : k ? kernel_records : user_records;
      if (!mine.empty()) store(*x, mine);
    }
  }
  hardware_.set_bts_index(CpuId(c), cpu.area.bts_buffer_base);
}

void Tracer::flush_for(const Context& context) {
  const Want now = want_of(context);
  for (int c = 0; c < config_.cpus; ++c) {
    if (active_on(context, now, c)) flush_cpu(c);
  }
}

void Tracer::timestamp(RecordKind kind, TaskId task, std::uint64_t time, int cpu) {
  std::array<std::byte, kRecord> record{};
  HWARB_CHECK(encode(TraceRecord::sched(kind, task, time), record).has_value(),
              "Tracer: a timestamp record does not encode");
  for (auto& entry : contexts_) {
    if (wants_task(*entry.second, task, cpu)) store(*entry.second, record);
  }
}

void Tracer::store(Context& x, std::span<const std::byte> records) {
  switch (x.config.mode) {
    case BufferMode::kAux: {
      AuxRing& ring = *x.aux;
      const std::uint64_t lost = ring.lost();
      auto put = [&x, &ring](std::span<const std::byte> batch) {
        const std::uint64_t head = ring.head();
        auto r = ring.write(batch);
        HWARB_CHECK(r.has_value(), "Tracer: an AuxRing refused a batch of whole records");
        if (r->padded)
          x.paddings.push_back({head, head + (ring.capacity() - head % ring.capacity())});
        if (r->written) x.written += batch.size() / kRecord;
      };
      if (records.size() <= ring.capacity() && ring.fits(records.size())) {
        put(records);
      } else {
        for (std::size_t off = 0; off < records.size(); off += kRecord) {
          put(records.subspan(off, kRecord));
        }
      }
      x.total_lost += ring.lost() - lost;
      break;
    }
    case BufferMode::kSnapshot: {
      const std::uint64_t overwritten = x.snapshot->overwritten();
      HWARB_CHECK(x.snapshot->write(records).has_value(),
                  "Tracer: a SnapshotBuffer refused a batch of whole records");
      x.total_lost += x.snapshot->overwritten() - overwritten;
      x.written += records.size() / kRecord;
      break;
    }
    case BufferMode::kWrap:
    case BufferMode::kSignal: {
      // One batch, the same effect as one write() per record (LegacyBuffer's contract).
      if (records.empty()) break;
      auto r = x.legacy->write_batch(records);
      HWARB_CHECK(r.has_value(), "Tracer: a LegacyBuffer refused a batch of whole records");
      x.written += r->stored;
      x.total_lost += r->overwritten + r->dropped;
      if (r->dropped != 0 && !x.full_reported) {
        x.full_reported = true;
        pending_full_.emplace_back(x.id, x.config.task);
      }
      break;
    }
  }
}

void Tracer::deliver_full() {
  while (!pending_full_.empty()) {
    auto batch = std::move(pending_full_);
    pending_full_.clear();
    const FullHandler handler = full_handler_;
    if (!handler) continue;
    for (const auto& [id, task] : batch) handler(id, task);
  }
}

}  // namespace hwarb::bts

// The legacy PTRACE_BTS_* requests on a per-task tracing context (bts_ptrace.h states the
// contract and the 2008 patch's defects each step below fixes).
#include "hwarb/ptrace_compat/bts_ptrace.h"

#include <algorithm>
#include <string>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/bts/byte_buffer.h"

namespace hwarb::ptrace_compat {
namespace {

std::uint64_t round_to_records(std::uint64_t bytes) {
  return bytes / bts::kTraceRecordSize * bts::kTraceRecordSize;
}

std::uint32_t tracer_flags(std::uint64_t flags) {
  // User branches only (bts_ptrace.h, fix 10).
  return bts::kUser | ((flags & kBtsSched) != 0 ? bts::kSched : 0);
}

bts::BufferMode tracer_mode(std::uint64_t flags) {
  return (flags & kBtsSignal) != 0 ? bts::BufferMode::kSignal : bts::BufferMode::kWrap;
}

}  // namespace

PtraceBts::PtraceBts(bts::Tracer& tracer, PtraceBtsOptions options)
    : tracer_(tracer),
      max_bytes_(static_cast<std::size_t>(
          round_to_records(std::min(options.max_bytes, bts::kMaxBufferBytes)))) {}

PtraceBts::~PtraceBts() {
  while (!buffers_.empty()) release(buffers_.begin()->first);
}

Result<bts::ContextId> PtraceBts::buffer_of(TaskId task) const {
  auto it = buffers_.find(task);
  if (it == buffers_.end()) {
    return make_error(ErrorCode::kNxio, "bts: no buffer (PTRACE_BTS_CONFIG first)");
  }
  return it->second.id;
}

Result<void> PtraceBts::config(TaskId task, const PtraceBtsConfig& config) {
  // Fix 4: unknown bits are refused, not ignored.
  if (const std::uint64_t unknown = config.flags & ~kBtsKnownFlags; unknown != 0) {
    return make_error(ErrorCode::kInval, "flags: " + hex(unknown) + " unknown");
  }
  // Fix 1: everything below compares ROUNDED sizes.
  std::uint64_t bytes = round_to_records(config.size);
  // Fix 5: a maximum, and kBtsCutSize honoured.
  if (bytes > max_bytes_) {
    if ((config.flags & kBtsCutSize) == 0) {
      return make_error(ErrorCode::kInval,
                        "size: " + std::to_string(config.size) + " bytes above the maximum of " +
                            std::to_string(max_bytes_) + " (kBtsCutSize cuts it)");
    }
    bytes = max_bytes_;
  }
  const std::uint64_t flags = config.flags & ~kBtsCutSize;

  if (bytes == 0) {
    // Fix 6: tracing without a buffer is refused, not ignored; the buffer (if any) is kept.
    if (flags != 0) {
      return make_error(ErrorCode::kNxio, "size: 0 leaves no buffer to trace into");
    }
    release(task);
    return {};
  }

  auto it = buffers_.find(task);
  if (it == buffers_.end()) {
    bts::ContextConfig context;
    context.task = task;
    context.flags = tracer_flags(flags);
    context.mode = tracer_mode(flags);
    context.size = static_cast<std::size_t>(bytes);
    context.start = (flags & kBtsTrace) != 0;
    auto id = tracer_.open(context);
    if (!id) {
      return std::unexpected(id.error());
    }
    buffers_.emplace(task, Buffer{*id, flags});
    owners_.emplace(*id, task);
    return {};
  }
  return reconfigure(it->second, static_cast<std::size_t>(bytes), flags);
}

Result<void> PtraceBts::reconfigure(Buffer& buffer, std::size_t bytes, std::uint64_t flags) {
  // The context's current state is the last check; after it only resize can fail, and it comes
  // first (fix 3).
  auto status = tracer_.status(buffer.id);
  if (!status) {
    return std::unexpected(status.error());
  }
  // Fixes 1 and 2: reallocate only for a different rounded size, allocating before freeing.
  if (status->capacity * bts::kTraceRecordSize != bytes) {
    if (auto r = tracer_.resize(buffer.id, bytes); !r) {
      return r;
    }
  }
  // The context is known and the values are valid: these do not fail (bts/tracer.h).
  const std::uint32_t want_flags = tracer_flags(flags);
  if (status->config.flags != want_flags) {
    if (auto r = tracer_.set_flags(buffer.id, want_flags); !r) {
      return r;
    }
  }
  const bts::BufferMode want_mode = tracer_mode(flags);
  if (status->config.mode != want_mode) {
    if (auto r = tracer_.set_mode(buffer.id, want_mode); !r) {
      return r;
    }
  }
  const bool started = status->state != bts::ContextState::kStopped;
  const bool want_started = (flags & kBtsTrace) != 0;
  if (started != want_started) {
    auto r = want_started ? tracer_.start(buffer.id) : tracer_.stop(buffer.id);
    if (!r) {
      return r;
    }
  }
  buffer.flags = flags;
  return {};
}

Result<PtraceBtsConfig> PtraceBts::status(TaskId task) {
  auto it = buffers_.find(task);
  if (it == buffers_.end()) {
    return PtraceBtsConfig{};
  }
  auto status = tracer_.status(it->second.id);
  if (!status) {
    return std::unexpected(status.error());
  }
  PtraceBtsConfig out;
  out.size = status->capacity * bts::kTraceRecordSize;
  if (status->state != bts::ContextState::kStopped) {
    out.flags |= kBtsTrace;
  }
  if ((status->config.flags & bts::kSched) != 0) {
    out.flags |= kBtsSched;
  }
  if (status->config.mode == bts::BufferMode::kSignal) {
    out.flags |= kBtsSignal;
  }
  return out;
}

Result<std::size_t> PtraceBts::size(TaskId task) {
  auto id = buffer_of(task);
  if (!id) {
    return std::unexpected(id.error());
  }
  // Fix 7: records held, not the write index.
  return tracer_.size(*id);
}

Result<bts::TraceRecord> PtraceBts::get(TaskId task, std::int64_t index) {
  auto id = buffer_of(task);
  if (!id) {
    return std::unexpected(id.error());
  }
  if (index < 0) {
    return make_error(ErrorCode::kInval, "index: " + std::to_string(index) + " is negative");
  }
  // Fix 8: bounded by the records held, not the capacity.
  auto held = tracer_.size(*id);
  if (!held) {
    return std::unexpected(held.error());
  }
  if (static_cast<std::uint64_t>(index) >= *held) {
    return make_error(ErrorCode::kInval, "index: " + std::to_string(index) + " out of range (" +
                                             std::to_string(*held) + " records held)");
  }
  return tracer_.get(*id, static_cast<std::size_t>(index));
}

Result<void> PtraceBts::clear(TaskId task) {
  auto id = buffer_of(task);
  if (!id) {
    return std::unexpected(id.error());
  }
  return tracer_.clear(*id);
}

Result<std::vector<bts::TraceRecord>> PtraceBts::drain(TaskId task) {
  auto id = buffer_of(task);
  if (!id) {
    return std::unexpected(id.error());
  }
  // Fix 7: the whole ring, oldest first.
  auto drained = tracer_.drain(*id);
  if (!drained) {
    return std::unexpected(drained.error());
  }
  return std::move(drained->records);
}

void PtraceBts::release(TaskId task) {
  auto it = buffers_.find(task);
  if (it == buffers_.end()) {
    return;
  }
  const bts::ContextId id = it->second.id;
  buffers_.erase(it);
  owners_.erase(id);
  // Closing a context this object opened cannot fail (its only error is ENOENT); the entry is
  // forgotten either way, so a context someone else closed leaves nothing behind.
  ignore_error(tracer_.close(id), "only ENOENT: someone else closed it; forgotten either way");
}

std::optional<bts::ContextId> PtraceBts::context(TaskId task) const {
  auto it = buffers_.find(task);
  if (it == buffers_.end()) {
    return std::nullopt;
  }
  return it->second.id;
}

bool PtraceBts::is_full_context(bts::ContextId id) const {
  auto owner = owners_.find(id);
  if (owner == owners_.end()) {
    return false;
  }
  auto it = buffers_.find(owner->second);
  return it != buffers_.end() && (it->second.flags & kBtsSignal) != 0;
}

}  // namespace hwarb::ptrace_compat

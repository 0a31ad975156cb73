#include "hwarb/bts/bts_pmu.h"

#include <string>

namespace hwarb::bts {

namespace {

ContextConfig context_config(const pmu::EventAttr& attr, std::optional<TaskId> task,
                             std::optional<CpuId> cpu) {
  ContextConfig c;
  c.task = task;
  c.cpu = task ? std::nullopt : cpu;
  c.flags = (attr.exclude_user ? 0 : kUser) | (attr.exclude_kernel ? 0 : kKernel);
  c.mode = attr.aux_snapshot ? BufferMode::kSnapshot : BufferMode::kAux;
  c.size = attr.aux_size;
  // Activity comes from start/stop (the core's scheduling), not from the context's own state.
  c.start = true;
  return c;
}

}  // namespace

Result<void> BtsPmu::validate(const pmu::EventAttr& attr) const {
  if (attr.exclude_user && attr.exclude_kernel) {
    return make_error(ErrorCode::kInval,
                      "exclude_user: with exclude_kernel too there is nothing to trace");
  }
  return {};
}

Result<void> BtsPmu::event_init(pmu::Event& event) {
  const pmu::EventAttr& attr = event.attr();
  if (auto r = validate(attr); !r) return r;
  const bool per_task = event.task().has_value();
  // Case 3 of the contract: the exclusive PMU rule.
  if (per_task && cpu_wide_ > 0) {
    return make_error(ErrorCode::kBusy, "bts: a per-task BTS event cannot join the " +
                                            std::to_string(cpu_wide_) +
                                            " CPU-wide BTS event(s) open");
  }
  if (!per_task && per_task_ > 0) {
    return make_error(ErrorCode::kBusy, "bts: a CPU-wide BTS event cannot join the " +
                                            std::to_string(per_task_) +
                                            " per-task BTS event(s) open");
  }
  auto id = tracer_.open_for_event(context_config(attr, event.task(), event.cpu()));
  if (!id) return std::unexpected(id.error());
  bound_[event.id()] = Bound{*id, per_task, 0};
  ++(per_task ? per_task_ : cpu_wide_);
  return {};
}

const BtsPmu::Bound* BtsPmu::bound(const pmu::Event& event) const {
  auto it = bound_.find(event.id());
  return it == bound_.end() ? nullptr : &it->second;
}

Result<void> BtsPmu::add(pmu::Event& event, CpuId cpu) {
  if (bound(event) == nullptr) {
    return make_error(ErrorCode::kNoEnt,
                      "event: " + std::to_string(event.id()) + " has no BTS context");
  }
  if (cpu.value() < 0 || cpu.value() >= tracer_.config().cpus) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " out of range");
  }
  return {};
}

void BtsPmu::del(pmu::Event& /*event*/, CpuId /*cpu*/) {}

void BtsPmu::start(pmu::Event& event, CpuId cpu) {
  if (const Bound* b = bound(event))
    ignore_error(tracer_.activate(b->context, cpu),
                 "bound context, the event's own CPU: nothing to refuse");
}

void BtsPmu::stop(pmu::Event& event, CpuId cpu) {
  if (const Bound* b = bound(event))
    ignore_error(tracer_.deactivate(b->context, cpu),
                 "bound context, the event's own CPU: nothing to refuse");
}

void BtsPmu::read(pmu::Event& event) {
  auto it = bound_.find(event.id());
  if (it == bound_.end()) return;
  auto st = tracer_.status(it->second.context);
  if (!st) return;
  event.add_count(st->written - it->second.reported);
  it->second.reported = st->written;
}

void BtsPmu::event_destroy(pmu::Event& event) {
  auto it = bound_.find(event.id());
  if (it == bound_.end()) return;
  ignore_error(tracer_.close(it->second.context),
               "a bound context is open: close has no error to give");
  --(it->second.per_task ? per_task_ : cpu_wide_);
  bound_.erase(it);
}

std::optional<ContextId> BtsPmu::context(pmu::EventId event) const {
  auto it = bound_.find(event);
  if (it == bound_.end()) return std::nullopt;
  return it->second.context;
}

}  // namespace hwarb::bts

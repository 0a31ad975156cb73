// The scenario runner's BTS commands: perf BTS events, tracing contexts, and `run`.
#include "bts.h"
#include "hwarb/sim/branch_walk.h"
#include "runner.h"

namespace hwarb::scenario::internal {

using arbiter::Request;
using arbiter::ResourceKind;

// `bts NAME`: a perf BTS event (the BTS PMU, through the perf core). Its AUX area holds
// kBtsEventAuxBytes; the scenario never reads it.
void Runner::bts_event(const Command& cmd) {
  Held h;
  h.kind = cmd.kind;
  h.request.kind = ResourceKind::kBts;
  h.request.task = task_id(cmd.task);
  if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
  h.request.id = RequestId(kExclusiveIds + cmd.id.value());
  if (h.request.task && h.request.task->value() < 0) {
    refuse(cmd.name, ErrorCode::kSrch, [] { return "task: its fork failed"; });
    keep(cmd, std::move(h));
    return;
  }
  pmu::EventAttr attr;
  attr.type = pmu::EventType::kBts;
  attr.aux_size = kBtsEventAuxBytes;
  attr.aux_snapshot = false;
  auto r = sys_->core().open(attr, pmu::EventOwner{h.request.task, h.request.cpu});
  settle_open(cmd, std::move(h), std::move(r));
}

// The arbiter requests a tracing context stands for (what the Tracer reserves): {task, all
// CPUs}, or one CPU-bound request per possible CPU for a global one.
std::vector<Request> Runner::context_requests(std::optional<TaskId> task) {
  std::vector<Request> requests;
  Request r;
  r.kind = ResourceKind::kBts;
  r.task = task;
  if (task) {
    requests.push_back(r);
    return requests;
  }
  for (int c = 0; c < machine().possible_cpus(); ++c) {
    r.cpu = CpuId(c);
    requests.push_back(r);
  }
  return requests;
}

Result<void> Runner::bts_open(const Command& cmd) {
  bts::ContextConfig config;
  config.task = task_id(cmd.task);
  if (config.task && config.task->value() < 0) {
    refuse(cmd.name, ErrorCode::kSrch, [] { return "task: its fork failed"; });
    return {};
  }
  config.flags = cmd.bts_flags;
  if ((config.flags & (bts::kUser | bts::kKernel)) == 0) {
    config.flags |= bts::kUser | bts::kKernel;  // neither named: both
  }
  config.mode = cmd.mode.value_or(bts::BufferMode::kAux);
  config.size = static_cast<std::size_t>(*cmd.size);
  auto id = sys_->tracer().open(config);
  if (!id) {
    refuse(cmd.name, id.error().code(),
           [&] { return reason_any(context_requests(config.task), id.error()); });
    return {};
  }
  contexts_[cmd.name] = *id;
  ok(cmd.name);
  return {};
}

// The context NAME holds; a NAME whose `bts open` was refused holds none ("NAME ENOENT").
std::optional<bts::ContextId> Runner::context_of(const Command& cmd) {
  auto it = contexts_.find(cmd.name);
  if (it != contexts_.end()) return it->second;
  refuse(cmd.name, ErrorCode::kNoEnt,
         [&] { return cmd.name + " holds no context (its bts open was refused)"; });
  return std::nullopt;
}

Result<void> Runner::bts_close(const Command& cmd) {
  auto it = contexts_.find(cmd.name);
  if (it == contexts_.end()) return {};  // holds nothing: fine, as del
  const bts::ContextId id = it->second;
  contexts_.erase(it);
  return sys_->tracer().close(id);
}

Result<void> Runner::bts_drain(const Command& cmd) {
  auto id = context_of(cmd);
  if (!id) return {};
  auto d = sys_->tracer().drain(*id);
  if (!d) return std::unexpected(d.error());
  const TaskNamer namer = [this](TaskId t) { return task_name(t); };
  for (const bts::TraceRecord& rec : d->records) emit(cmd.name + " " + record_text(rec, namer));
  emit(cmd.name + " drained " + std::to_string(d->records.size()) + " lost " +
       std::to_string(d->lost));
  return {};
}

Result<void> Runner::bts_status(const Command& cmd) {
  auto id = context_of(cmd);
  if (!id) return {};
  auto st = sys_->tracer().status(*id);
  if (!st) return std::unexpected(st.error());
  emit(cmd.name + " " + context_status_text(*st, [this](TaskId t) { return task_name(t); }));
  return {};
}

// `run`: branches of the seeded walk; a SIGNAL-mode buffer that fills stops the task early.
Result<void> Runner::run_walk(const Command& cmd) {
  auto t = live_task(*cmd.task);
  if (!t) return std::unexpected(t.error());
  if (auto s = check_not_stopped(cmd, *t); !s) return s;
  auto walk = sim::BranchWalk::generate(cmd.seed, {.format = machine().bts_format()});
  if (!walk) return std::unexpected(walk.error());
  auto n = machine().run(CpuId(cmd.cpu->index), *t, *walk, cmd.branches);
  if (!n) return std::unexpected(n.error());
  if (*n < cmd.branches) emit(*cmd.task + " stopped after " + std::to_string(*n) + " branches");
  return {};
}

}  // namespace hwarb::scenario::internal

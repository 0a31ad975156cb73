// The scenario runner: executes the commands on a sim::System.
#include "runner.h"

#include <utility>

#include "bts.h"
#include "hwarb/base/format.h"
#include "hwarb/breakpoints/hw_breakpoint.h"

namespace hwarb::scenario {

using arbiter::Request;
using arbiter::ResourceKind;
using arbiter::SlotType;

bool condition_holds(const Command& cmd, std::uint64_t v) {
  const std::string& op = cmd.cond_op;
  const std::uint64_t c = cmd.cond_value;
  if (op.empty()) return true;
  if (op == "==") return v == c;
  if (op == "!=") return v != c;
  if (op == "<") return v < c;
  if (op == "<=") return v <= c;
  if (op == ">") return v > c;
  return v >= c;
}

namespace internal {

Result<std::vector<std::string>> Runner::run() {
  sim::SystemConfig config;
  config.cpus = scenario_.machine.cpus;
  config.arch = scenario_.machine.arch;
  config.flexible = scenario_.machine.flexible;
  auto sys = sim::System::create(config);
  if (!sys) return std::unexpected(sys.error().with_context("machine").with_context(kInternal));
  sys_ = std::move(*sys);
  const std::size_t limit = scenario_.limits.output_bytes;
  for (const Command& cmd : scenario_.commands) {
    const std::string where = scenario_.file + ":" + std::to_string(cmd.line);
    if (auto r = execute(cmd); !r) {
      Error e = r.error().with_context(where);
      return std::unexpected(run_error_ ? e : e.with_context(kInternal));
    }
    if (options_.on_step) record_step(cmd);
    if (out_bytes_ > limit) {
      return make_error(ErrorCode::kNoSpc, where + ": " + std::string(to_string(cmd.kind)) +
                                               ": output over the limit of " +
                                               std::to_string(limit) + " bytes");
    }
  }
  tracees_.clear();  // detach (the tracers go away) ...
  held_.clear();     // ... and release everything before the system goes
  return std::move(out_);
}

Result<void> Runner::execute(const Command& cmd) {
  if (auto g = guest_conflict(cmd); !g) return g;
  switch (cmd.kind) {
    case CommandKind::kTask:
    case CommandKind::kFork:
      return task(cmd);
    case CommandKind::kCpu:
      return machine().set_online(CpuId(cmd.cpu->index), cmd.online);
    case CommandKind::kDel:
      // Handles and reservations release themselves; a watchpoint belongs to the layer.
      if (auto it = held_.find(cmd.name); it != held_.end()) {
        if (it->second.watch) {
          if (auto r = sys_->watchpoints().unwatch(*it->second.watch); !r) return r;
        }
        live_[it->second.request.kind].erase(cmd.id.value());
        held_.erase(it);
      }
      return {};
    case CommandKind::kBp:
      bp(cmd);
      return {};
    case CommandKind::kWide:
      wide(cmd);
      return {};
    case CommandKind::kModify:
      return modify(cmd);
    case CommandKind::kBts:
      bts_event(cmd);
      return {};
    case CommandKind::kPt:
    case CommandKind::kLbr:
      exclusive(cmd);
      return {};
    case CommandKind::kBtsOpen:
      return bts_open(cmd);
    case CommandKind::kBtsClose:
      return bts_close(cmd);
    case CommandKind::kBtsDrain:
      return bts_drain(cmd);
    case CommandKind::kBtsStatus:
      return bts_status(cmd);
    case CommandKind::kBranch: {
      auto t = live_task(*cmd.task);
      if (!t) return std::unexpected(t.error());
      if (auto s = check_not_stopped(cmd, *t); !s) return s;
      auto r = machine().branch(CpuId(cmd.cpu->index), *t, *cmd.from, *cmd.to, cmd.predicted);
      if (!r) return std::unexpected(r.error());
      return {};
    }
    case CommandKind::kRun:
      return run_walk(cmd);
    case CommandKind::kWatch:
      return watch(cmd);
    case CommandKind::kSwitch: {
      const CpuId cpu(cmd.cpu->index);
      if (cmd.idle) return machine().switch_to_idle(cpu);
      auto t = live_task(*cmd.task);
      if (!t) return std::unexpected(t.error());
      return machine().switch_to(cpu, *t);
    }
    case CommandKind::kTick:
      if (cmd.cpu) return machine().tick(CpuId(cmd.cpu->index));
      for (int c = 0; c < machine().possible_cpus(); ++c) {
        if (*machine().is_online(CpuId(c))) {
          if (auto r = machine().tick(CpuId(c)); !r) return r;
        }
      }
      return {};
    case CommandKind::kExit: {
      auto t = live_task(cmd.name);
      if (!t) return std::unexpected(t.error());
      if (auto r = machine().exit(*t); !r) return r;
      tracees_.erase(cmd.name);  // the exit ended the tracing
      return {};
    }
    case CommandKind::kAccess: {
      auto t = live_task(*cmd.task);
      if (!t) return std::unexpected(t.error());
      if (auto s = check_not_stopped(cmd, *t); !s) return s;
      auto r = machine().access(CpuId(cmd.cpu->index), *t,
                                cmd.write ? sim::AccessKind::kWrite : sim::AccessKind::kRead,
                                *cmd.addr, static_cast<int>(*cmd.len), cmd.value.value_or(0));
      if (!r) return std::unexpected(r.error());
      return {};
    }
    case CommandKind::kExec: {
      auto t = live_task(*cmd.task);
      if (!t) return std::unexpected(t.error());
      if (auto s = check_not_stopped(cmd, *t); !s) return s;
      auto r = machine().exec(CpuId(cmd.cpu->index), *t, *cmd.addr);
      if (!r) return std::unexpected(r.error());
      return {};
    }
    case CommandKind::kShow:
      show();
      return {};
    case CommandKind::kInject:
      arbiter().inject_fault_at(cmd.inject_at);
      return {};
    case CommandKind::kSysctl:
      paranoid_ = cmd.paranoid.value_or(paranoid_);
      return {};
    case CommandKind::kPtrace:
      return ptrace(cmd);
    case CommandKind::kGuestEnter:
    case CommandKind::kGuestAccess:
    case CommandKind::kGuestExit:
      return guest(cmd);
    case CommandKind::kKsym:
    case CommandKind::kKallsyms:
    case CommandKind::kKsymTrace:
    case CommandKind::kKsymTraceDel:
    case CommandKind::kKsymStats:
    case CommandKind::kKaccess:
      return ksym(cmd);
    case CommandKind::kMachine:
      return {};
  }
  return {};
}

// A run-time scenario error (scenario.h): what the file alone cannot decide.
std::unexpected<Error> Runner::run_error(ErrorCode code, std::string message) {
  run_error_ = true;
  return make_error(code, std::move(message));
}

// ---- tasks ----

Result<TaskId> Runner::live_task(const std::string& name) {
  auto it = tasks_.find(name);
  if (it == tasks_.end() || !sys_->machine().task_exists(it->second)) {
    return run_error(ErrorCode::kSrch, "task '" + name + "' does not exist (its fork failed)");
  }
  return it->second;
}

std::string Runner::task_name(TaskId id) const {
  auto it = task_names_.find(id);
  return it != task_names_.end() ? it->second : "#" + std::to_string(id.value());
}

void Runner::add_task(const std::string& name, TaskId id) {
  tasks_[name] = id;
  task_names_[id] = name;
}

Result<void> Runner::task(const Command& cmd) {
  if (!cmd.parent) {
    auto t = machine().create_task();
    if (!t) return std::unexpected(t.error());
    add_task(cmd.name, *t);
    return {};
  }
  auto parent = live_task(*cmd.parent);
  if (!parent) return std::unexpected(parent.error());
  auto t = machine().fork(*parent);
  if (!t) {
    refuse(cmd.name, t.error().code(), [&] { return t.error().message(); });
    return {};
  }
  add_task(cmd.name, *t);
  if (cmd.kind == CommandKind::kFork) ok(cmd.name);
  return {};
}

// ---- requests ----

void Runner::keep(const Command& cmd, Held h) {
  if (h.live()) live_[h.request.kind][cmd.id.value()] = cmd.name;
  held_[cmd.name] = std::move(h);
}

std::optional<TaskId> Runner::task_id(const std::optional<std::string>& name) const {
  if (!name) return std::nullopt;
  auto it = tasks_.find(*name);
  if (it == tasks_.end()) return TaskId(-1);  // a failed fork: the request is refused (ESRCH)
  return it->second;
}

pmu::EventAttr Runner::new_attr(const Command& cmd) const {
  const AccessType type = cmd.type.value_or(AccessType::kRw);
  pmu::EventAttr a = breakpoints::breakpoint_attr(
      cmd.addr.value_or(0x1000 * cmd.id.value()),
      cmd.len.value_or(breakpoints::default_len(scenario_.machine.arch, type)), type);
  a.disabled = cmd.disabled.value_or(false);
  a.inherit = cmd.inherit;
  a.pinned = cmd.pinned.value_or(true);
  a.weight = cmd.weight.value_or(1);
  a.exclude_kernel = cmd.exclude_kernel.value_or(false);
  return a;
}

Request Runner::slot_request(const pmu::EventAttr& a, std::optional<TaskId> task,
                             std::optional<CpuId> cpu) const {
  Request r;
  r.kind = ResourceKind::kBreakpoint;
  r.type = a.bp_type == pmu::BpType::kX ? SlotType::kInst : SlotType::kData;
  r.task = task;
  r.cpu = cpu;
  r.weight = a.weight;
  r.pinned = a.pinned;
  return r;
}

void Runner::bp(const Command& cmd) {
  Held h;
  h.kind = cmd.kind;
  pmu::EventAttr attr = new_attr(cmd);
  std::optional<TaskId> task = task_id(cmd.task);
  std::optional<CpuId> cpu;
  if (!cmd.cpu->any) cpu = CpuId(cmd.cpu->index);
  h.request = slot_request(attr, task, cpu);
  breakpoints::HwBreakpoints& api = sys_->breakpoints();
  if (cmd.caller) {
    // perf_event_open by that process (a failed fork's task is ESRCH in its place); without
    // exclude_kernel|include_kernel as perf's tool: kernel included, once more without it after
    // an EACCES that paranoid > 1 explains.
    const int paranoid = cmd.paranoid.value_or(paranoid_);
    auto open = [&](const pmu::EventAttr& a) {
      return api.perf_event_open(a, hit_printer(cmd.name), {task, cpu}, *cmd.caller, paranoid);
    };
    auto r = open(attr);
    if (!r && !cmd.exclude_kernel && pmu::perf_tool_retries_user_only(attr, r.error(), paranoid)) {
      attr.exclude_kernel = true;
      r = open(attr);
    }
    settle_open(cmd, std::move(h), std::move(r));
    return;
  }
  // The slot check comes first (a bad request on a full CPU gets ENOSPC), then the fields.
  auto r =
      task ? (task->value() < 0
                  ? Result<pmu::EventHandle>(make_error(ErrorCode::kSrch, "task: its fork failed"))
                  : api.register_user_hw_breakpoint(attr, hit_printer(cmd.name), *task, cpu))
           : api.register_cpu_hw_breakpoint(attr, hit_printer(cmd.name), *cpu);
  settle_open(cmd, std::move(h), std::move(r));
}

void Runner::wide(const Command& cmd) {
  Held h;
  h.kind = cmd.kind;
  pmu::EventAttr attr = new_attr(cmd);
  h.request = slot_request(attr, std::nullopt, std::nullopt);
  auto r = sys_->breakpoints().register_wide_hw_breakpoint(attr, hit_printer(cmd.name));
  if (!r) {
    refuse(cmd.name, r.error().code(), [&] {
      std::vector<Request> requests;
      for (CpuId cpu : arbiter().online_cpus()) {
        requests.push_back(slot_request(attr, std::nullopt, cpu));
      }
      return reason_any(requests, r.error());
    });
  } else {
    for (auto& e : r->per_cpu) names_[e.id()] = cmd.name;
    h.events = std::move(r->per_cpu);
    ok(cmd.name);
  }
  keep(cmd, std::move(h));
}

Result<void> Runner::modify(const Command& cmd) {
  Held& h = held_.at(cmd.name);
  if (h.events.empty()) {
    refuse(cmd.name, ErrorCode::kNoEnt, [&] { return cmd.name + " holds no reservation"; });
    return {};
  }
  pmu::Core& core = sys_->core();
  std::vector<pmu::EventAttr> old_attrs;
  std::vector<pmu::EventOwner> old_owners;
  for (const pmu::EventHandle& e : h.events) {
    old_attrs.push_back(e.event()->attr());
    old_owners.push_back({e.event()->task(), e.event()->cpu()});
  }
  for (std::size_t i = 0; i < h.events.size(); ++i) {
    pmu::EventAttr next = old_attrs[i];
    if (cmd.type) next.bp_type = *cmd.type;
    if (cmd.len) next.bp_len = *cmd.len;
    if (cmd.addr) next.bp_addr = *cmd.addr;
    if (cmd.disabled) next.disabled = *cmd.disabled;
    if (cmd.weight) next.weight = *cmd.weight;
    if (cmd.pinned) next.pinned = *cmd.pinned;
    pmu::EventOwner owner = old_owners[i];
    if (cmd.cpu) owner.cpu = cmd.cpu->any ? std::nullopt : std::optional(CpuId(cmd.cpu->index));
    if (auto r = core.modify(h.events[i].id(), next, owner); !r) {
      // All or nothing: put back the parts already changed (they held these slots before).
      for (std::size_t j = 0; j < i; ++j) {
        if (auto back = core.modify(h.events[j].id(), old_attrs[j], old_owners[j]); !back) {
          return std::unexpected(back.error().with_context("modify rollback"));
        }
      }
      refuse(cmd.name, r.error().code(),
             [&] { return reason(slot_request(next, owner.task, owner.cpu), r.error()); });
      return {};
    }
  }
  const pmu::Event* e = h.events.front().event();
  h.request =
      slot_request(e->attr(), e->task(), h.kind == CommandKind::kWide ? std::nullopt : e->cpu());
  ok(cmd.name);
  return {};
}

// The outcome of opening one event for `cmd`: "NAME ok" with the handle kept under the name,
// or "NAME ERRNO" (with the reason for --explain).
void Runner::settle_open(const Command& cmd, Held h, Result<pmu::EventHandle> r) {
  if (!r) {
    refuse(cmd.name, r.error().code(), [&] { return reason(h.request, r.error()); });
  } else {
    names_[r->id()] = cmd.name;
    h.events.push_back(std::move(*r));
    ok(cmd.name);
  }
  keep(cmd, std::move(h));
}

void Runner::exclusive(const Command& cmd) {
  Held h;
  h.kind = cmd.kind;
  h.request.kind = cmd.kind == CommandKind::kBts  ? ResourceKind::kBts
                   : cmd.kind == CommandKind::kPt ? ResourceKind::kPt
                                                  : ResourceKind::kLbr;
  h.request.task = task_id(cmd.task);
  if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
  // Request ids of the exclusive kinds live above the event ids.
  h.request.id = RequestId(kExclusiveIds + cmd.id.value());
  auto r = arbiter().reserve(h.request);
  if (!r) {
    refuse(cmd.name, r.error().code(), [&] { return reason(h.request, r.error()); });
  } else {
    names_[h.request.id.value()] = cmd.name;
    h.parts.push_back(std::move(*r));
    ok(cmd.name);
  }
  keep(cmd, std::move(h));
}

Result<void> Runner::watch(const Command& cmd) {
  Held h;
  h.kind = cmd.kind;
  breakpoints::WatchSpec spec;
  spec.task = task_id(cmd.task);
  if (spec.task && spec.task->value() < 0) {
    refuse(cmd.name, ErrorCode::kSrch, [] { return "task: its fork failed"; });
    keep(cmd, std::move(h));
    return {};
  }
  spec.addr = *cmd.addr;
  spec.len = cmd.len.value_or(cmd.type == AccessType::kX ? 1 : 4);
  spec.type = cmd.type.value_or(AccessType::kW);
  if (!cmd.cond_op.empty()) {
    spec.condition = [cmd](std::uint64_t v) { return condition_holds(cmd, v); };
  }
  const std::string name = cmd.name;
  auto r = sys_->watchpoints().watch(spec, [this, name](const breakpoints::WatchHit& hit) {
    std::string line = hit_line(name, hit.sample);
    if (hit.has_value) line += " old=" + hex(hit.old_value) + " new=" + hex(hit.new_value);
    emit(std::move(line));
  });
  if (!r) {
    refuse(cmd.name, r.error().code(), [&] { return r.error().message(); });
  } else {
    h.watch = *r;
    watch_names_[*r] = cmd.name;
    ok(cmd.name);
  }
  keep(cmd, std::move(h));
  return {};
}

}  // namespace internal

Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options) {
  return internal::Runner(scenario, options).run();
}

bool is_internal_error(const Error& error) {
  return error.message().starts_with(std::string(internal::Runner::kInternal) + ": ");
}

}  // namespace hwarb::scenario

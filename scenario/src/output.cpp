// The scenario runner's output: result lines, hits, `show`, and the --explain reasons.
#include <algorithm>
#include <cstdlib>

#include "hwarb/base/format.h"
#include "runner.h"

namespace hwarb::scenario::internal {

using arbiter::Explanation;
using arbiter::Request;
using arbiter::ResourceKind;

namespace {

std::string_view access_name(pmu::AccessKind k) {
  switch (k) {
    case pmu::AccessKind::kRead:
      return "r";
    case pmu::AccessKind::kWrite:
      return "w";
    case pmu::AccessKind::kExecute:
      return "x";
    default:
      return "?";
  }
}

// "a, b, c": `names` as a list.
std::string list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

}  // namespace

void Runner::emit(std::string line) {
  out_bytes_ += line.size() + 1;
  if (out_bytes_ <= scenario_.limits.output_bytes) out_.push_back(std::move(line));
}

void Runner::ok(const std::string& name) {
  emit(name + " ok");
}

void Runner::refuse(const std::string& name, ErrorCode code, const Reason& why) {
  std::string line = name + " " + errno_name(code);
  if (options_.on_step) {
    const std::string reason = why();
    if (options_.explain) line += " — " + reason;
    step_refusals_.push_back({.name = name, .error = errno_name(code), .reason = reason});
  } else if (options_.explain) {
    line += " — " + why();
  }
  emit(std::move(line));
}

// ---- pictures ----

void Runner::record_step(const Command& cmd) {
  SlotStep step;
  step.line = cmd.line;
  step.command = to_string(cmd.kind);
  step.name = cmd.name;
  const int cpus = std::min(machine().possible_cpus(), std::max(options_.step_cpus, 0));
  // The exclusive holders (bts, pt, lbr) of each CPU: requests bound to it or to none.
  std::vector<std::vector<std::string>> exclusive(static_cast<std::size_t>(cpus));
  const auto hold = [&](std::optional<CpuId> cpu, const std::string& label) {
    for (int c = 0; c < cpus; ++c) {
      if (!cpu || cpu->value() == c) exclusive[static_cast<std::size_t>(c)].push_back(label);
    }
  };
  for (const auto& [name, h] : held_) {
    if (!h.live() || h.request.kind == ResourceKind::kBreakpoint) continue;
    const char* kind = h.request.kind == ResourceKind::kBts  ? "bts "
                       : h.request.kind == ResourceKind::kPt ? "pt "
                                                             : "lbr ";
    hold(h.request.cpu, kind + name);
  }
  for (const auto& [name, id] : contexts_) hold(std::nullopt, "bts " + name);
  for (const auto& [name, tracee] : tracees_) {
    if (sys_->ptrace_bts().context(tracee.task())) hold(std::nullopt, "ptrace bts " + name);
  }
  for (int c = 0; c < cpus; ++c) {
    const CpuId cpu(c);
    SlotStep::Cpu out;
    out.online = *machine().is_online(cpu);
    auto cur = *machine().current(cpu);
    out.task = cur ? task_name(*cur) : std::string("idle");
    for (const pmu::Event* e : sys_->bp_pmu().installed(cpu)) {
      out.slots.push_back(e != nullptr ? event_name(*e) : std::string());
    }
    out.exclusive = std::move(exclusive[static_cast<std::size_t>(c)]);
    step.cpus.push_back(std::move(out));
  }
  for (SlotStep::Refusal& r : step_refusals_) {
    if (cmd.cpu && !cmd.cpu->any) {
      r.cpu = cmd.cpu->index;
    } else if (r.reason.starts_with("cpu ")) {
      r.cpu = std::atoi(r.reason.c_str() + 4);
    }
  }
  step.refusals = std::move(step_refusals_);
  step_refusals_.clear();
  options_.on_step(step);
}

// "hit NAME task=T cpu=N ip=HEX addr=HEX access=r|w|x"
std::string Runner::hit_line(const std::string& name, const pmu::Sample& s) const {
  return "hit " + name + " task=" + (s.task ? task_name(*s.task) : "-") +
         " cpu=" + std::to_string(s.cpu.value()) + " ip=" + hex(s.ip) + " addr=" + hex(s.addr) +
         " access=" + std::string(access_name(s.access));
}

pmu::OverflowHandler Runner::hit_printer(const std::string& name) {
  return [this, name](pmu::Event&, const pmu::Sample& s) { emit(hit_line(name, s)); };
}

// ---- show ----

std::string Runner::event_name(const pmu::Event& e) const {
  pmu::EventId origin = e.parent() != 0 ? e.parent() : e.id();
  if (auto it = names_.find(origin); it != names_.end()) return it->second;
  std::vector<breakpoints::WatchId> users = sys_->watchpoints().users_of(origin);
  if (!users.empty()) {
    std::string n;
    for (breakpoints::WatchId w : users) n += (n.empty() ? "" : "+") + watch_names_.at(w);
    return n + "[" + hex(e.attr().bp_addr) + "/" + std::to_string(e.attr().bp_len) + "]";
  }
  if (e.task()) {
    if (const breakpoints::PtraceThread* pt = sys_->breakpoints().find_ptrace_thread(*e.task())) {
      for (int n = 0; n < breakpoints::kPtraceSlots; ++n) {
        const pmu::Event* bp = pt->bps[static_cast<std::size_t>(n)].event();
        if (bp != nullptr && bp->id() == e.id()) {
          return "ptrace:" + task_name(*e.task()) + ":dr" + std::to_string(n);
        }
      }
    }
  }
  return "#" + std::to_string(e.id());
}

void Runner::show() {
  const bool hw = scenario_.machine.arch != Arch::kArm64;
  for (int c = 0; c < machine().possible_cpus(); ++c) {
    const CpuId cpu(c);
    std::string line = "cpu " + std::to_string(c) + (*machine().is_online(cpu) ? "" : " offline");
    if (*machine().in_guest(cpu)) line += " guest";
    auto cur = *machine().current(cpu);
    line += " task=" + (cur ? task_name(*cur) : std::string("idle"));
    if (hw) {
      const sim::DebugRegisters regs = *machine().debug_registers(cpu);
      for (int n = 0; n < 4; ++n) line += " dr" + std::to_string(n) + "=" + hex(regs.dr[n]);
      line += " dr7=" + hex(regs.dr7);
    }
    std::vector<const pmu::Event*> inst = sys_->bp_pmu().installed(cpu);
    line += " installed:";
    bool any = false;
    for (std::size_t n = 0; n < inst.size(); ++n) {
      if (!inst[n]) continue;
      // Appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on the chained form.
      line += hw ? " dr" : " slot";
      line += std::to_string(n);
      line += '=';
      line += event_name(*inst[n]);
      any = true;
    }
    if (!any) line += " none";
    emit(std::move(line));
  }
  // The breakpoint events (a `bts NAME` event holds no debug register and is not shown).
  pmu::Core& core = sys_->core();
  for (pmu::EventId id : core.events()) {
    const pmu::Event* e = core.find(id);
    if (e->attr().type != pmu::EventType::kBreakpoint) continue;
    auto v = core.read(id);
    std::string line = "event " + event_name(*e);
    line += " task=" + (e->task() ? task_name(*e->task()) : std::string("-"));
    line += " cpu=" + (e->cpu() ? std::to_string(e->cpu()->value()) : std::string("any"));
    line += " state=" + std::string(pmu::to_string(e->state()));
    line += " count=" + std::to_string(v->count);
    line += " time_enabled=" + std::to_string(v->time_enabled);
    line += " time_running=" + std::to_string(v->time_running);
    emit(std::move(line));
  }
  // Each traced task: "ptrace T stopped SIGTRAP dr6=0x... dr7=0x..." (or "running ..."),
  // in task order.
  std::map<TaskId, std::string> traced;
  for (const auto& [name, tracee] : tracees_) traced[tracee.task()] = name;
  for (const auto& [task, name] : traced) {
    auto stop = sys_->ptrace_wait(task, ptrace_compat::WaitMode::kNoHang);
    auto dr6 = sys_->ptrace().get_debugreg(task, 6);
    auto dr7 = sys_->ptrace().get_debugreg(task, 7);
    // An exited task has no registers to show (its tracee goes with its exit anyway).
    if (!stop || !dr6 || !dr7 || (*stop && (*stop)->ended())) continue;
    std::string line = "ptrace " + name + " " +
                       (*stop ? "stopped " + signal_name((*stop)->signal) : std::string("running"));
    emit(line + " dr6=" + hex_padded(*dr6, 16) + " dr7=" + hex_padded(*dr7, 16));
  }
}

// ---- explanations ----

std::string Runner::request_name(RequestId id) const {
  if (auto it = names_.find(id.value()); it != names_.end()) return it->second;
  if (const pmu::Event* e = sys_->core().find(id.value())) return event_name(*e);
  return "#" + std::to_string(id.value());
}

// The reason for a refusal of `request` with `error`, built from Arbiter::explain.
std::string Runner::reason(const Request& request, const Error& error) {
  const Explanation ex = arbiter().explain(request);
  if (ex.admitted || ex.code != error.code()) return error.message();
  return format(request, ex);
}

// For a refused set of per-CPU requests: the first one explain refuses.
std::string Runner::reason_any(const std::vector<Request>& requests, const Error& error) {
  for (const Request& r : requests) {
    const Explanation ex = arbiter().explain(r);
    if (!ex.admitted && ex.code == error.code()) return format(r, ex);
  }
  return error.message();
}

std::string Runner::format(const Request& request, const Explanation& ex) {
  switch (ex.code) {
    case ErrorCode::kNoSpc:
      return format_nospc(ex);
    case ErrorCode::kBusy:
      return format_busy(ex);
    case ErrorCode::kNoDev:
      if (request.cpu) return "cpu " + std::to_string(request.cpu->value()) + " is offline";
      return ex.reason;
    default:
      return ex.reason;
  }
}

// The names of what task `task` holds on `cpu`: its pinned, live events there or on all CPUs.
std::vector<std::string> Runner::task_holders(TaskId task, std::optional<CpuId> cpu) const {
  std::vector<std::string> names;
  pmu::Core& core = sys_->core();
  std::vector<pmu::EventId> ids = core.task_events(task);
  std::ranges::sort(ids);  // creation order
  for (pmu::EventId id : ids) {
    const pmu::Event* e = core.find(id);
    if (e == nullptr || e->task() != task || !e->attr().pinned) continue;
    if (e->state() == pmu::EventState::kExit) continue;
    if (cpu && e->cpu() && *e->cpu() != *cpu) continue;
    std::string n = event_name(*e);
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(std::move(n));
  }
  return names;
}

std::string Runner::format_nospc(const Explanation& ex, bool name_task_holders) {
  const arbiter::ArchProfile& profile = arbiter().config().profile;
  std::string s;
  if (ex.cpu) s = "cpu " + std::to_string(ex.cpu->value()) + " ";
  s += std::string(profile.pool_name(profile.pool_of(ex.pool_type))) +
       " pool: " + std::to_string(ex.pool_slots) + " slots";
  std::vector<std::string> held;
  if (ex.cpu_pinned > 0) {
    std::string part = "cpu-bound " + std::to_string(ex.cpu_pinned);
    std::vector<std::string> names;
    for (RequestId id : ex.cpu_holders) {
      std::string n = request_name(id);
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    if (!names.empty()) part += " (" + list(names) + ")";
    held.push_back(part);
  }
  if (ex.heaviest_task && ex.heaviest_task_use > 0) {
    std::string part =
        "task " + task_name(*ex.heaviest_task) + " " + std::to_string(ex.heaviest_task_use);
    if (name_task_holders) {
      std::vector<std::string> names = task_holders(*ex.heaviest_task, ex.cpu);
      if (!names.empty()) part += " (" + list(names) + ")";
    }
    held.push_back(std::move(part));
  }
  if (ex.flexible_reserve > 0) {
    held.push_back("flexible reserve " + std::to_string(ex.flexible_reserve));
  }
  if (!held.empty()) s += "; held: " + list(held);
  return s + "; needs " + std::to_string(ex.weight);
}

std::string Runner::format_busy(const Explanation& ex) const {
  if (!ex.busy_kind) return ex.reason;
  const std::string kind = *ex.busy_kind == ResourceKind::kBts   ? "bts"
                           : *ex.busy_kind == ResourceKind::kPt  ? "pt"
                           : *ex.busy_kind == ResourceKind::kLbr ? "lbr"
                                                                 : "breakpoint";
  std::vector<std::string> holders;
  if (auto it = live_.find(*ex.busy_kind); it != live_.end()) {
    for (const auto& [id, name] : it->second) holders.push_back(name);
  }
  if (*ex.busy_kind == ResourceKind::kBts) {
    // Tracing contexts in the order they were opened, then ptrace BTS buffers in task order.
    std::map<bts::ContextId, std::string> contexts;
    for (const auto& [name, id] : contexts_) contexts[id] = name;
    for (const auto& [id, name] : contexts) holders.push_back(name);
    std::map<TaskId, std::string> traced;
    for (const auto& [name, tracee] : tracees_) traced[tracee.task()] = name;
    for (const auto& [task, name] : traced) {
      if (sys_->ptrace_bts().context(task)) holders.push_back("ptrace:" + name + ":bts");
    }
  }
  std::string s = kind + " in use";
  if (!holders.empty()) s += " by " + list(holders);
  return s;
}

}  // namespace hwarb::scenario::internal

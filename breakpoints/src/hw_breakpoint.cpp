#include "hwarb/breakpoints/hw_breakpoint.h"

#include <string>

namespace hwarb::breakpoints {

pmu::EventAttr breakpoint_attr(std::uint64_t addr, std::uint64_t len, pmu::BpType type) {
  pmu::EventAttr a;
  a.type = pmu::EventType::kBreakpoint;
  a.pinned = true;
  a.sample_period = 1;
  a.bp_addr = addr;
  a.bp_len = len;
  a.bp_type = type;
  return a;
}

pmu::EventAttr HwBreakpoints::as_breakpoint(pmu::EventAttr attr, bool privileged) {
  attr.type = pmu::EventType::kBreakpoint;
  attr.privileged = privileged;
  return attr;
}

Result<void> HwBreakpoints::check_task(TaskId task) const {
  if (task_exists_ && !task_exists_(task)) {
    return make_error(ErrorCode::kSrch, "task: no task " + std::to_string(task.value()));
  }
  return {};
}

Result<BreakpointHandle> HwBreakpoints::register_user_hw_breakpoint(const pmu::EventAttr& attr,
                                                                    pmu::OverflowHandler handler,
                                                                    TaskId task,
                                                                    std::optional<CpuId> cpu) {
  if (auto r = check_task(task); !r) return std::unexpected(r.error());
  return core_.open(as_breakpoint(attr, false), {task, cpu}, std::move(handler));
}

Result<BreakpointHandle> HwBreakpoints::register_cpu_hw_breakpoint(const pmu::EventAttr& attr,
                                                                   pmu::OverflowHandler handler,
                                                                   CpuId cpu) {
  return core_.open(as_breakpoint(attr, true), {std::nullopt, cpu}, std::move(handler));
}

Result<BreakpointHandle> HwBreakpoints::perf_event_open(const pmu::EventAttr& attr,
                                                        pmu::OverflowHandler handler,
                                                        pmu::EventOwner owner, pmu::Credentials who,
                                                        int paranoid) {
  // 1. perf_allow_kernel, before the event exists.
  if (auto r = pmu::check_open_permission(attr, who, paranoid); !r)
    return std::unexpected(r.error());
  // 2. the task.
  if (owner.task) {
    if (auto r = check_task(*owner.task); !r) return std::unexpected(r.error());
  }
  // 3. the event: slots, then fields, with the caller's CAP_SYS_ADMIN for kernel space.
  // 4. perf_allow_cpu, when the event looks for its context: Linux has not installed it yet, so
  // a refused one is opened disabled (its slots and fields checked, never scheduled) and closed.
  pmu::EventAttr a = as_breakpoint(attr, who.sys_admin);
  auto context = pmu::check_context_permission(owner, who, paranoid);
  if (!context) a.disabled = true;
  auto h = core_.open(a, owner, std::move(handler));
  if (!h || context) return h;
  ignore_error(h->close(), "the refusal is the answer; the event just opened closes");
  return std::unexpected(context.error());
}

Result<WideBreakpointHandle> HwBreakpoints::register_wide_hw_breakpoint(
    const pmu::EventAttr& attr, pmu::OverflowHandler handler) {
  std::vector<pmu::Core::OpenRequest> requests;
  for (int c = 0; c < core_.cpus(); ++c) {
    if (!core_.cpu_online(CpuId(c))) continue;
    requests.push_back({as_breakpoint(attr, true), {std::nullopt, CpuId(c)}, handler});
  }
  auto handles = core_.open_all(requests);
  if (!handles) return std::unexpected(handles.error());
  return WideBreakpointHandle{std::move(*handles)};
}

Result<void> HwBreakpoints::modify_user_hw_breakpoint(const BreakpointHandle& bp,
                                                      const pmu::EventAttr& attr) {
  if (!bp.valid()) return make_error(ErrorCode::kInval, "bp: an empty handle");
  return modify_user_hw_breakpoint(bp.id(), attr);
}

Result<void> HwBreakpoints::modify_user_hw_breakpoint(pmu::EventId id, const pmu::EventAttr& attr) {
  const pmu::Event* e = core_.find(id);
  if (!e) return make_error(ErrorCode::kNoEnt, "bp: no breakpoint " + std::to_string(id));
  if (e->attr().type != pmu::EventType::kBreakpoint) {
    return make_error(ErrorCode::kInval, "bp: event " + std::to_string(id) + " is no breakpoint");
  }
  const pmu::EventAttr& old = e->attr();
  pmu::EventAttr next = attr;
  next.type = pmu::EventType::kBreakpoint;
  next.privileged = old.privileged;
  // 1. The new fields.
  if (auto r = pmu_.validate(next); !r) return r;
  // 2. Nothing else may change.
  struct Field {
    const char* name;
    bool same;
  };
  const Field fields[] = {
      {"config", next.config == old.config},
      {"pinned", next.pinned == old.pinned},
      {"exclusive", next.exclusive == old.exclusive},
      {"inherit", next.inherit == old.inherit},
      {"sample_period", next.sample_period == old.sample_period},
      {"exclude_user", next.exclude_user == old.exclude_user},
      {"exclude_kernel", next.exclude_kernel == old.exclude_kernel},
      {"weight", next.weight == old.weight},
      {"ring_capacity", next.ring_capacity == old.ring_capacity},
      {"ring_mode", next.ring_mode == old.ring_mode},
  };
  for (const Field& f : fields) {
    if (!f.same) {
      return make_error(ErrorCode::kInval, std::string(f.name) +
                                               ": modify_user_hw_breakpoint may change only "
                                               "addr, len, type and disabled");
    }
  }
  // 3. The slots, and the change itself (Core::modify is all or nothing).
  return core_.modify(id, next, {e->task(), e->cpu()});
}

Result<pmu::EventId> HwBreakpoints::register_ptrace_hw_breakpoint(const pmu::EventAttr& attr,
                                                                  pmu::OverflowHandler handler,
                                                                  TaskId task, int slot) {
  if (slot < 0 || slot >= kPtraceSlots) {
    return make_error(ErrorCode::kInval, "slot: " + std::to_string(slot) + " is not in 0..3");
  }
  if (auto it = ptrace_.find(task); it != ptrace_.end() && it->second.bps[slot].valid()) {
    return make_error(ErrorCode::kBusy, "slot: " + std::to_string(slot) + " of task " +
                                            std::to_string(task.value()) +
                                            " already has a breakpoint");
  }
  auto h = register_user_hw_breakpoint(attr, std::move(handler), task);
  if (!h) return std::unexpected(h.error());
  pmu::EventId id = h->id();
  ptrace_[task].bps[slot] = std::move(*h);
  return id;
}

const PtraceThread* HwBreakpoints::find_ptrace_thread(TaskId task) const {
  auto it = ptrace_.find(task);
  return it == ptrace_.end() ? nullptr : &it->second;
}

std::vector<pmu::EventId> HwBreakpoints::ptrace_breakpoints(TaskId task) const {
  std::vector<pmu::EventId> out;
  if (const PtraceThread* t = find_ptrace_thread(task)) {
    for (const BreakpointHandle& h : t->bps) {
      if (h.valid()) out.push_back(h.id());
    }
  }
  return out;
}

void HwBreakpoints::flush_ptrace_hw_breakpoint(TaskId task) {
  ptrace_.erase(task);
}

bool HwBreakpoints::is_used() const {
  return core_.arbiter().is_used();
}

}  // namespace hwarb::breakpoints

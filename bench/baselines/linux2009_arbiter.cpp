// bench/baselines/linux2009_arbiter.cpp — see the header for the description it follows.
#include "baselines/linux2009_arbiter.h"

#include <algorithm>
#include <stdexcept>

namespace hwarb::bench {

struct Linux2009Arbiter::Breakpoint {
  BpRequest request;
  TaskContext* ctx = nullptr;  // null: CPU-bound
  std::list<Breakpoint*>::iterator entry;
};

Linux2009Arbiter::Linux2009Arbiter(int cpus, int slots)
    : cpus_(cpus),
      slots_(slots),
      online_(static_cast<std::size_t>(cpus), 1),
      nr_cpu_bp_pinned_(static_cast<std::size_t>(cpus), 0),
      task_bp_pinned_(static_cast<std::size_t>(cpus)) {
  if (cpus < 1 || slots < 1 || slots > kMaxBaselineSlots) {
    throw std::invalid_argument("Linux2009Arbiter: bad cpus or slots");
  }
  for (auto& hist : task_bp_pinned_) hist.fill(0);
}

Linux2009Arbiter::~Linux2009Arbiter() {
  for (auto& [task, ctx] : tasks_) {
    for (Breakpoint* bp : ctx.event_list) delete bp;
  }
}

// Slots the task holds on `cpu`: its breakpoints on that CPU plus those on all CPUs. Walks the
// whole event list, every time.
int Linux2009Arbiter::task_bp_pinned(const TaskContext& ctx, int cpu) const {
  int count = 0;
  for (const Breakpoint* bp : ctx.event_list) {
    if (bp->request.cpu < 0 || bp->request.cpu == cpu) count += bp->request.weight;
  }
  return count;
}

int Linux2009Arbiter::max_task_bp_pinned(int cpu) const {
  const auto& hist = task_bp_pinned_[static_cast<std::size_t>(cpu)];
  for (int i = slots_ - 1; i >= 0; --i) {
    if (hist[static_cast<std::size_t>(i)] > 0) return i + 1;
  }
  return 0;
}

// The pinned load the request would join: on its CPU, or the largest over the online CPUs.
int Linux2009Arbiter::fetch_bp_busy_slots(const BpRequest& request, const TaskContext* ctx) const {
  auto load_on = [&](int cpu) {
    int nr = nr_cpu_bp_pinned_[static_cast<std::size_t>(cpu)];
    nr += ctx != nullptr ? task_bp_pinned(*ctx, cpu) : max_task_bp_pinned(cpu);
    return nr;
  };
  if (request.cpu >= 0) return load_on(request.cpu);
  int pinned = 0;
  for (int cpu = 0; cpu < cpus_; ++cpu) {
    if (online_[static_cast<std::size_t>(cpu)] == 0) continue;
    pinned = std::max(pinned, load_on(cpu));
  }
  return pinned;
}

// Moves the task from bucket `count` to `count +/- weight` in the CPU's histogram. On enable the
// new breakpoint is not in the list yet; on disable it still is.
void Linux2009Arbiter::toggle_bp_task_slot(const TaskContext& ctx, int cpu, int weight,
                                           bool enable) {
  auto& hist = task_bp_pinned_[static_cast<std::size_t>(cpu)];
  const int count = task_bp_pinned(ctx, cpu);
  const int next = enable ? count + weight : count - weight;
  if (count > 0) --hist[static_cast<std::size_t>(count - 1)];
  if (next > 0) ++hist[static_cast<std::size_t>(next - 1)];
}

void Linux2009Arbiter::toggle_bp_slot(const Breakpoint& bp, bool enable) {
  const int weight = bp.request.weight;
  if (bp.ctx != nullptr) {
    if (bp.request.cpu >= 0) {
      toggle_bp_task_slot(*bp.ctx, bp.request.cpu, weight, enable);
      return;
    }
    for (int cpu = 0; cpu < cpus_; ++cpu) {
      if (online_[static_cast<std::size_t>(cpu)] == 0) continue;
      toggle_bp_task_slot(*bp.ctx, cpu, weight, enable);
    }
    return;
  }
  int& nr = nr_cpu_bp_pinned_[static_cast<std::size_t>(bp.request.cpu)];
  nr += enable ? weight : -weight;
}

Linux2009Arbiter::Handle Linux2009Arbiter::reserve(const BpRequest& request) {
  if (request.cpu >= cpus_ || (request.task < 0 && request.cpu < 0) || request.weight < 1) {
    return nullptr;
  }
  std::lock_guard lock(nr_bp_mutex_);
  TaskContext* ctx = request.task >= 0 ? &tasks_[request.task] : nullptr;
  if (fetch_bp_busy_slots(request, ctx) + request.weight > slots_) return nullptr;
  auto* bp = new Breakpoint{request, ctx, {}};
  toggle_bp_slot(*bp, true);
  if (ctx != nullptr) bp->entry = ctx->event_list.insert(ctx->event_list.end(), bp);
  ++live_;
  return bp;
}

void Linux2009Arbiter::release(Handle& handle) {
  if (handle == nullptr) return;
  {
    std::lock_guard lock(nr_bp_mutex_);
    toggle_bp_slot(*handle, false);
    if (handle->ctx != nullptr) handle->ctx->event_list.erase(handle->entry);
    --live_;
  }
  delete handle;
  handle = nullptr;
}

// True while any breakpoint is live or any counter is not back to zero.
bool Linux2009Arbiter::is_used() const {
  std::lock_guard lock(nr_bp_mutex_);
  if (live_ != 0) return true;
  for (int cpu = 0; cpu < cpus_; ++cpu) {
    if (nr_cpu_bp_pinned_[static_cast<std::size_t>(cpu)] != 0) return true;
    for (int count : task_bp_pinned_[static_cast<std::size_t>(cpu)]) {
      if (count != 0) return true;
    }
  }
  return false;
}

}  // namespace hwarb::bench

// bench/baselines/linux_arbiter.cpp — see the header for the description it follows.
#include "baselines/linux_arbiter.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace hwarb::bench {

struct LinuxArbiter::Breakpoint {
  BpRequest request;
};

LinuxArbiter::LinuxArbiter(int cpus, int slots)
    : cpus_(cpus),
      slots_(slots),
      info_(std::make_unique<CpuInfo[]>(static_cast<std::size_t>(cpus))),
      shards_(std::make_unique<TaskShard[]>(kShards)) {
  if (cpus < 1 || slots < 1 || slots > kMaxBaselineSlots) {
    throw std::invalid_argument("LinuxArbiter: bad cpus or slots");
  }
}

LinuxArbiter::~LinuxArbiter() {
  for (std::size_t i = 0; i < kShards; ++i) {
    for (auto& [task, bp] : shards_[i].bps) delete bp;
  }
}

// Moves one owner from the bucket of `old_slots` to that of `old_slots + delta` (bucket k-1 holds
// owners with k slots; 0 slots is not counted).
void LinuxArbiter::histogram_add(Histogram& hist, int old_slots, int delta) const {
  const int old_idx = old_slots - 1;
  const int new_idx = old_idx + delta;
  if (old_idx >= 0)
    hist.count[static_cast<std::size_t>(old_idx)].fetch_sub(1, std::memory_order_relaxed);
  if (new_idx >= 0)
    hist.count[static_cast<std::size_t>(new_idx)].fetch_add(1, std::memory_order_relaxed);
}

int LinuxArbiter::histogram_max(const Histogram& hist) const {
  for (int i = slots_ - 1; i >= 0; --i) {
    if (hist.count[static_cast<std::size_t>(i)].load(std::memory_order_relaxed) > 0) return i + 1;
  }
  return 0;
}

LinuxArbiter::TaskShard& LinuxArbiter::shard_of(std::int64_t task) const {
  return shards_[std::hash<std::int64_t>{}(task) % kShards];
}

int LinuxArbiter::task_bp_pinned(const TaskShard& shard, std::int64_t task, int cpu) const {
  int count = 0;
  auto [begin, end] = shard.bps.equal_range(task);
  for (auto it = begin; it != end; ++it) {
    const BpRequest& r = it->second->request;
    if (cpu < 0 && r.cpu >= 0) return -1;
    if (r.cpu < 0 || r.cpu == cpu) count += r.weight;
  }
  return count;
}

// Needs the write side: tsk_pinned is only stable then.
int LinuxArbiter::max_task_bp_pinned(int cpu) const {
  return std::max(histogram_max(info_[static_cast<std::size_t>(cpu)].tsk_pinned),
                  histogram_max(tsk_pinned_all_));
}

int LinuxArbiter::max_bp_pinned_slots(const BpRequest& request, const TaskShard* shard) const {
  if (shard != nullptr && request.cpu < 0) {
    const int task_slots = task_bp_pinned(*shard, request.task, -1);
    if (task_slots >= 0) {
      // Fast path: the task's slots are the same on every CPU.
      return task_slots + histogram_max(cpu_pinned_);
    }
  }
  auto load_on = [&](int cpu) {
    int nr = info_[static_cast<std::size_t>(cpu)].cpu_pinned;
    nr += shard == nullptr ? max_task_bp_pinned(cpu) : task_bp_pinned(*shard, request.task, cpu);
    return nr;
  };
  if (request.cpu >= 0) return load_on(request.cpu);
  int pinned = 0;
  for (int cpu = 0; cpu < cpus_; ++cpu) pinned = std::max(pinned, load_on(cpu));
  return pinned;
}

// Adds delta slots to the task's bucket on cpu; bp is not in the table at this point.
void LinuxArbiter::toggle_bp_task_slot(const TaskShard& shard, const Breakpoint& bp, int cpu,
                                       int delta) {
  int old_slots = task_bp_pinned(shard, bp.request.task, cpu);
  if (delta < 0) old_slots -= delta;  // disable: bp was already removed from the table
  histogram_add(info_[static_cast<std::size_t>(cpu)].tsk_pinned, old_slots, delta);
}

void LinuxArbiter::toggle_task(TaskShard& shard, Breakpoint* bp, bool enable) {
  const BpRequest& r = bp->request;
  const int weight = enable ? r.weight : -r.weight;
  if (!enable) {
    // Remove first, so that the counts below tell whether it was the last CPU-specific one.
    auto [begin, end] = shard.bps.equal_range(r.task);
    for (auto it = begin; it != end; ++it) {
      if (it->second == bp) {
        shard.bps.erase(it);
        break;
      }
    }
  }
  // Slots of the task's other breakpoints when they are all CPU-independent, else -1.
  int next = task_bp_pinned(shard, r.task, -1);
  if (next >= 0) {
    if (r.cpu < 0) {
      // Case 1: only CPU-independent breakpoints, before and after.
      if (!enable) next += r.weight;
      histogram_add(tsk_pinned_all_, next, weight);
    } else if (enable) {
      // Case 2a: the first CPU-specific breakpoint: move the task to every CPU's histogram.
      for (int cpu = 0; cpu < cpus_; ++cpu) {
        histogram_add(info_[static_cast<std::size_t>(cpu)].tsk_pinned, 0, next);
      }
      toggle_bp_task_slot(shard, *bp, r.cpu, weight);
      histogram_add(tsk_pinned_all_, next, -next);
    } else {
      // Case 2b: the last CPU-specific breakpoint went: move the task back to tsk_pinned_all.
      toggle_bp_task_slot(shard, *bp, r.cpu, weight);
      for (int cpu = 0; cpu < cpus_; ++cpu) {
        histogram_add(info_[static_cast<std::size_t>(cpu)].tsk_pinned, next, -next);
      }
      histogram_add(tsk_pinned_all_, 0, next);
    }
  } else if (r.cpu >= 0) {
    // Case 3: the task has CPU-specific breakpoints; update only the CPUs of bp.
    toggle_bp_task_slot(shard, *bp, r.cpu, weight);
  } else {
    for (int cpu = 0; cpu < cpus_; ++cpu) toggle_bp_task_slot(shard, *bp, cpu, weight);
  }
  if (enable) shard.bps.emplace(r.task, bp);
}

LinuxArbiter::Handle LinuxArbiter::reserve(const BpRequest& request) {
  if (request.cpu >= cpus_ || (request.task < 0 && request.cpu < 0) || request.weight < 1) {
    return nullptr;
  }
  if (request.task >= 0) {
    TaskShard& shard = shard_of(request.task);
    std::lock_guard task_lock(shard.mutex);
    std::shared_lock read_lock(bp_cpuinfo_sem_);
    if (max_bp_pinned_slots(request, &shard) + request.weight > slots_) return nullptr;
    auto* bp = new Breakpoint{request};
    toggle_task(shard, bp, true);
    return bp;
  }
  std::unique_lock write_lock(bp_cpuinfo_sem_);
  if (max_bp_pinned_slots(request, nullptr) + request.weight > slots_) return nullptr;
  CpuInfo& info = info_[static_cast<std::size_t>(request.cpu)];
  histogram_add(cpu_pinned_, info.cpu_pinned, request.weight);
  info.cpu_pinned += request.weight;
  return new Breakpoint{request};
}

void LinuxArbiter::release(Handle& handle) {
  if (handle == nullptr) return;
  const BpRequest& r = handle->request;
  if (r.task >= 0) {
    TaskShard& shard = shard_of(r.task);
    std::lock_guard task_lock(shard.mutex);
    std::shared_lock read_lock(bp_cpuinfo_sem_);
    toggle_task(shard, handle, false);
  } else {
    std::unique_lock write_lock(bp_cpuinfo_sem_);
    CpuInfo& info = info_[static_cast<std::size_t>(r.cpu)];
    histogram_add(cpu_pinned_, info.cpu_pinned, -r.weight);
    info.cpu_pinned -= r.weight;
  }
  delete handle;
  handle = nullptr;
}

// True while any breakpoint is live or any counter is not back to zero.
bool LinuxArbiter::is_used() const {
  for (std::size_t i = 0; i < kShards; ++i) {
    std::lock_guard task_lock(shards_[i].mutex);
    if (!shards_[i].bps.empty()) return true;
  }
  std::unique_lock write_lock(bp_cpuinfo_sem_);
  auto nonzero = [](const Histogram& hist) {
    return std::any_of(hist.count.begin(), hist.count.end(),
                       [](const std::atomic<int>& c) { return c.load() != 0; });
  };
  if (nonzero(cpu_pinned_) || nonzero(tsk_pinned_all_)) return true;
  for (int cpu = 0; cpu < cpus_; ++cpu) {
    const CpuInfo& info = info_[static_cast<std::size_t>(cpu)];
    if (info.cpu_pinned != 0 || nonzero(info.tsk_pinned)) return true;
  }
  return false;
}

}  // namespace hwarb::bench

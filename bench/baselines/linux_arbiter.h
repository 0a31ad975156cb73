// bench/baselines/linux_arbiter.h — the current Linux hw-breakpoint constraint code, as a baseline.
//
// Written from the published description of kernel/events/hw_breakpoint.c after the 2022 rework
// (Marco Elver, "perf/hw_breakpoint: Optimize ..." series), pinned breakpoints only, one shared
// pool of N slots:
//   - task_bps: a hash of the tasks' breakpoints keyed by task (the kernel's rhltable
//     task_bps_ht); a task's slots on a CPU are counted by walking that task's entries;
//   - per CPU: cpu_pinned (weight of CPU-bound breakpoints) and the atomic histogram
//     tsk_pinned[k-1] = number of tasks holding k slots on that CPU;
//   - global: the histogram cpu_pinned of CPUs by their cpu_pinned, and the histogram
//     tsk_pinned_all of tasks whose breakpoints are all CPU-independent (those tasks are not in
//     the per-CPU histograms);
//   - locking: a reader-writer lock (bp_cpuinfo_sem; here a std::shared_mutex). Task-bound
//     operations take the task's mutex (here: a shard of a hashed mutex array) and then the read
//     side; per-CPU histograms are then updated with atomics. CPU-bound operations take the
//     write side, which also stabilises the histograms they read.
// Admission (w = weight):
//   CPU-bound on c:   cpu_pinned[c] + max(max tsk_pinned[c], max tsk_pinned_all) + w <= N
//   task T on c:      cpu_pinned[c] + task_pinned(T, c) + w <= N
//   task T, all CPUs: if T's breakpoints are all CPU-independent: max of the global cpu_pinned
//                     histogram + T's slots + w <= N (O(1) in CPUs); else the task rule on every
//                     CPU (O(CPUs x T's breakpoints)).
// A task going from CPU-independent-only to mixed moves from tsk_pinned_all into every CPU's
// histogram (O(CPUs)), and back when its last CPU-specific breakpoint goes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "baselines/bp_request.h"

namespace hwarb::bench {

class LinuxArbiter {
 public:
  struct Breakpoint;
  // A held breakpoint; nullptr when refused.
  using Handle = Breakpoint*;

  explicit LinuxArbiter(int cpus, int slots = 4);
  ~LinuxArbiter();
  LinuxArbiter(const LinuxArbiter&) = delete;
  LinuxArbiter& operator=(const LinuxArbiter&) = delete;

  // Admits the request (a handle) or refuses it (nullptr: no space, or an invalid request).
  Handle reserve(const BpRequest& request);
  // Gives the slots back and clears the handle. No-op for nullptr.
  void release(Handle& handle);
  bool is_used() const;

 private:
  // bp_slots_histogram: count[k-1] = number of owners holding k slots.
  struct Histogram {
    std::array<std::atomic<int>, kMaxBaselineSlots> count{};
  };
  struct alignas(64) CpuInfo {
    int cpu_pinned = 0;
    Histogram tsk_pinned;
  };
  // One shard of the task table with the mutex that stands for the per-task mutex of its tasks.
  struct alignas(64) TaskShard {
    std::mutex mutex;
    std::unordered_multimap<std::int64_t, Breakpoint*> bps;
  };
  static constexpr std::size_t kShards = 1024;

  void histogram_add(Histogram& hist, int old_slots, int delta) const;
  int histogram_max(const Histogram& hist) const;
  TaskShard& shard_of(std::int64_t task) const;
  // Slots task holds on cpu (its breakpoints there and on all CPUs). For cpu < 0: the slots of a
  // task whose breakpoints are all CPU-independent, or -1 if any is CPU-specific.
  int task_bp_pinned(const TaskShard& shard, std::int64_t task, int cpu) const;
  int max_task_bp_pinned(int cpu) const;
  int max_bp_pinned_slots(const BpRequest& request, const TaskShard* shard) const;
  void toggle_bp_task_slot(const TaskShard& shard, const Breakpoint& bp, int cpu, int delta);
  void toggle_task(TaskShard& shard, Breakpoint* bp, bool enable);

  int cpus_;
  int slots_;
  mutable std::shared_mutex bp_cpuinfo_sem_;
  std::unique_ptr<CpuInfo[]> info_;
  Histogram cpu_pinned_;      // CPUs by cpu_pinned; written under the write side
  Histogram tsk_pinned_all_;  // tasks with only CPU-independent breakpoints, by slots
  std::unique_ptr<TaskShard[]> shards_;
};

}  // namespace hwarb::bench

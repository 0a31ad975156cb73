// bench/baselines/linux2009_arbiter.h — the 2009 hw_breakpoint slot-accounting algorithm,
// as a baseline.
//
// Written from the description in the 2009 hw-breakpoint rewrite on perf events ("hw-breakpoints:
// Arbitrate access to pmu following registers constraints"), pinned breakpoints only, one shared
// pool of N slots:
//   - one global mutex (nr_bp_mutex) serialises every reserve and release;
//   - per CPU: nr_cpu_bp_pinned (weight of CPU-bound breakpoints) and the histogram
//     task_bp_pinned[k-1] = number of tasks holding k slots on that CPU;
//   - a task's count on a CPU is found by walking the task's event list every time (as
//     toggle_bp_task_slot walks ctx->event_list);
//   - a task-on-all-CPUs request loops over the online CPUs, both to check (fetch_bp_busy_slots)
//     and to update (toggle_bp_slot), walking the task's list once per CPU.
// Admission is the rule of docs/architecture.md section 2 (a task is checked against its own count,
// as the series' follow-up fix did; the first posting compared against the largest task of the
// CPU), so that all benchmarked implementations take the same decisions.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "baselines/bp_request.h"

namespace hwarb::bench {

class Linux2009Arbiter {
 public:
  struct Breakpoint;
  // A held breakpoint; nullptr when refused.
  using Handle = Breakpoint*;

  explicit Linux2009Arbiter(int cpus, int slots = 4);
  ~Linux2009Arbiter();
  Linux2009Arbiter(const Linux2009Arbiter&) = delete;
  Linux2009Arbiter& operator=(const Linux2009Arbiter&) = delete;

  // Admits the request (a handle) or refuses it (nullptr: no space, or an invalid request).
  Handle reserve(const BpRequest& request);
  // Gives the slots back and clears the handle. No-op for nullptr.
  void release(Handle& handle);
  bool is_used() const;

 private:
  struct TaskContext {
    std::list<Breakpoint*> event_list;
  };

  int task_bp_pinned(const TaskContext& ctx, int cpu) const;
  int max_task_bp_pinned(int cpu) const;
  int fetch_bp_busy_slots(const BpRequest& request, const TaskContext* ctx) const;
  void toggle_bp_task_slot(const TaskContext& ctx, int cpu, int weight, bool enable);
  void toggle_bp_slot(const Breakpoint& bp, bool enable);

  int cpus_;
  int slots_;
  mutable std::mutex nr_bp_mutex_;
  std::vector<char> online_;
  std::vector<int> nr_cpu_bp_pinned_;
  std::vector<std::array<int, kMaxBaselineSlots>> task_bp_pinned_;
  std::unordered_map<std::int64_t, TaskContext> tasks_;
  std::int64_t live_ = 0;
};

}  // namespace hwarb::bench

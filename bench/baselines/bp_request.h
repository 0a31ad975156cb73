// bench/baselines/bp_request.h — the request shape shared by the benchmark baselines.
//
// The baselines model only what the benchmark workloads need: pinned breakpoints in one shared
// pool of N slots (x86: N = 4). A request is CPU-bound (task < 0, cpu >= 0), task-bound on one CPU
// (task >= 0, cpu >= 0) or task-bound on all CPUs (task >= 0, cpu < 0).
#pragma once

#include <cstdint>

namespace hwarb::bench {

// Histograms are sized by this; a pool may have at most this many slots.
inline constexpr int kMaxBaselineSlots = 16;

struct BpRequest {
  std::int64_t task = -1;  // < 0: CPU-bound
  int cpu = -1;            // < 0: all CPUs (task-bound only)
  int weight = 1;          // slots needed
};

}  // namespace hwarb::bench

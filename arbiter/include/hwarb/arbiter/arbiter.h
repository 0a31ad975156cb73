// hwarb/arbiter/arbiter.h — the slot-constraint arbiter.
//
// The arbiter decides who may hold debug-hardware slots, exactly as Linux's hw_breakpoint
// constraint code does for pinned breakpoints, plus flexible (multiplexed) requests and the
// exclusive facilities BTS / PT / LBR. It is pure accounting: no syscalls, no hardware.
//
// Terms (per CPU c and per pool, N = slots in the pool, w = weight of the new request):
//   CP[c]    weight of CPU-bound pinned requests on c
//   TP(T,c)  weight of task T's pinned requests on c plus those on all CPUs
//   R[c]     flexible reserve on c: the largest weight of a flexible request that can run on c
//            (CPU-bound on c, task-bound on c or on all CPUs); 0 when there is none
// Admission (policy kMultiplexed; all CPUs are the *possible* CPUs, online or not):
//   1. CPU-bound pinned on c:      CP[c] + max_T TP(T,c) + w + R[c] <= N
//   2. task T pinned on c:         CP[c] + TP(T,c) + w + R[c] <= N
//   3. task T pinned on all CPUs:  case 2 holds for every c
//   4. flexible on c (any owner):  CP[c] + max_T TP(T,c) + max(R[c], w) <= N
//   5. flexible task on all CPUs:  case 4 holds for every c
// With all weights 1 this is docs/architecture.md section 2: a flexible request joins when flexible
// ones already exist (R = 1 is already set aside) or when one slot is left after the pinned load,
// and a pinned request must leave that one slot. With policy kAsPinned flexible requests are
// accounted exactly as pinned ones (the Linux behaviour). A refusal is ENOSPC.
// Weight must be >= 1 (EINVAL); a weight larger than the pool can never fit (ENOSPC).
//
// Exclusive kinds: kBts, kPt and kLbr use no slots; any number of requests of one kind may be
// live, and a request of another kind is refused with EBUSY while any are (machine-wide, as
// Linux's x86_add_exclusive).
//
// Validation (EINVAL, message names the field): a request without task and without CPU; a CPU
// outside [0, cpus); a weight below 1. A CPU-bound request on an offline CPU is ENODEV (as
// perf_event_open). The order of checks is: EINVAL, then ENODEV, then EBUSY / ENOSPC.
//
// Atomicity and concurrency:
//   - Every operation is all-or-nothing: on error, nothing it did is observable afterwards, and
//     nothing it did was observable to a concurrent operation's decision either (a failing
//     reserve_all never causes another request to be refused).
//   - Every operation is linearizable and may be called from any thread. Reservations of
//     different tasks do not serialise on one lock; see arbiter.cpp for the numbered locking
//     rules.
//   - A Reservation must be released (or destroyed) before its Arbiter is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hwarb/arbiter/profile.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"

namespace hwarb::arbiter {

enum class ResourceKind : std::uint8_t { kBreakpoint = 0, kBts = 1, kPt = 2, kLbr = 3 };
std::string_view to_string(ResourceKind kind);

enum class FlexiblePolicy : std::uint8_t {
  kMultiplexed,  // flexible requests time-share the slots left by pinned ones (default)
  kAsPinned,     // flexible requests are accounted as pinned (exact Linux behaviour)
};

struct Request {
  ResourceKind kind = ResourceKind::kBreakpoint;
  SlotType type = SlotType::kData;
  std::optional<TaskId> task;  // none: CPU-bound
  std::optional<CpuId> cpu;    // none: all CPUs (task-bound only)
  int weight = 1;              // slots needed
  bool pinned = true;
  RequestId id{};  // the caller's name for this request, reported by explain

  friend bool operator==(const Request&, const Request&) = default;
};
// "bp#3 task 7 cpu all data w1 pinned" — for messages and dumps.
std::string to_string(const Request& r);

struct ArbiterConfig {
  ArchProfile profile = ArchProfile::x86_64();
  int cpus = 2;  // possible CPUs, 1 .. 65536; all start online
  FlexiblePolicy flexible = FlexiblePolicy::kMultiplexed;
};

class Arbiter;
struct ReservationNode;

// A held reservation. Move-only; releases on destruction. An empty (moved-from or released)
// Reservation owns nothing.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

  bool valid() const { return node_ != nullptr; }
  explicit operator bool() const { return valid(); }
  // The request as currently accounted (after any successful modify). Requires valid().
  const Request& request() const;
  // Gives the slots back. No-op when empty. Never fails.
  void release();

 private:
  friend class Arbiter;
  Reservation(Arbiter* arbiter, ReservationNode* node) : arbiter_(arbiter), node_(node) {}
  Arbiter* arbiter_ = nullptr;
  ReservationNode* node_ = nullptr;
};

// Why a request would be refused, or that it would be admitted.
struct Explanation {
  bool admitted = false;
  ErrorCode code = ErrorCode::kNoSpc;  // meaningful when !admitted
  std::string reason;                  // one line, human readable (names of holders by id)
  // For ENOSPC: where and by whom the pool is held.
  std::optional<CpuId> cpu;
  SlotType pool_type = SlotType::kData;
  int pool_slots = 0;
  int cpu_pinned = 0;                   // CP[cpu]
  std::vector<RequestId> cpu_holders;   // CPU-bound requests holding slots on cpu
  std::optional<TaskId> heaviest_task;  // the task with the largest pinned use on cpu
  int heaviest_task_use = 0;
  int flexible_reserve = 0;  // R[cpu]
  int weight = 0;            // the request's weight
  // For EBUSY: the exclusive kind in use.
  std::optional<ResourceKind> busy_kind;
};

// Per CPU and pool, recomputed from the live reservations themselves (not from counters).
struct PoolUsage {
  int cpu_pinned = 0;        // CP[c]
  int max_task_pinned = 0;   // max_T TP(T,c)
  int flexible_reserve = 0;  // R[c]
  int flexible_count = 0;    // flexible requests that can run on c
  int pinned_load() const { return cpu_pinned + max_task_pinned + flexible_reserve; }
};
struct Snapshot {
  // usage[cpu][pool]
  std::vector<std::vector<PoolUsage>> usage;
  int live = 0;                     // live reservations
  int exclusive[4] = {0, 0, 0, 0};  // live requests per ResourceKind (index 0 unused)
};

class Arbiter {
 public:
  // EINVAL naming `cpus` when cpus is outside 1 .. 65536.
  static Result<std::unique_ptr<Arbiter>> create(const ArbiterConfig& config);
  ~Arbiter();
  Arbiter(const Arbiter&) = delete;
  Arbiter& operator=(const Arbiter&) = delete;

  const ArbiterConfig& config() const { return config_; }
  int cpus() const { return config_.cpus; }

  // Admits the request or refuses it (ENOSPC, EBUSY, EINVAL, ENODEV, ENOMEM).
  Result<Reservation> reserve(const Request& request);
  // All requests or none. Every request is validated first (EINVAL); then they are admitted in
  // order, each seeing the ones before it, each checked like reserve (ENODEV, then EBUSY or
  // ENOSPC). On failure the error names the index of the refused request.
  Result<std::vector<Reservation>> reserve_all(std::span<const Request> requests);
  // Changes type, CPU, weight, pinned or id (task and kind cannot change: EINVAL). Release the
  // old, admit the new; if the new is refused the old stays exactly as it was. ENODEV only when
  // a CPU-bound reservation moves to an offline CPU (one that stays on its offline CPU may
  // change).
  Result<void> modify(Reservation& reservation, const Request& next);
  // Gives the reservation's slots back; the Reservation becomes empty.
  void release(Reservation& reservation);

  // Would `request` be admitted now, and if not, why. Changes nothing. Errors only for invalid
  // requests (EINVAL / ENODEV are reported as !admitted with that code, not as errors).
  Explanation explain(const Request& request) const;

  // True iff any reservation is live.
  bool is_used() const;

  // CPU hotplug. Accounting is over possible CPUs and survives offline/online. CPU-bound
  // requests on an offline CPU are refused with ENODEV. EINVAL for a CPU out of range.
  Result<void> set_cpu_online(CpuId cpu, bool online);
  bool cpu_online(CpuId cpu) const;
  std::vector<CpuId> online_cpus() const;

  // A consistent snapshot, recomputed from the live reservations under the exclusive lock.
  Snapshot snapshot() const;
  // Verifies the incremental counters against a recomputation; error names the mismatch.
  Result<void> check_consistency() const;
  // A full, deterministic text dump of the state (counters, histograms, tasks, holders).
  std::string dump() const;

  // Test hook: the k-th (1-based) fallible internal step (allocation, insert into the task
  // table, ...) of the following operations fails with ENOMEM; 0 disables. The count runs
  // across operations until it fires once, then the hook disarms itself.
  void inject_fault_at(int k);

  struct State;  // implementation, in arbiter.cpp

 private:
  explicit Arbiter(const ArbiterConfig& config);
  friend class Reservation;

  ArbiterConfig config_;
  std::unique_ptr<State> state_;
};

}  // namespace hwarb::arbiter

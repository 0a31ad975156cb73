// hwarb/bts/bts_pmu.h — the BTS PMU driver of the perf-event core (Linux's intel_bts, on the
// tracing contexts of tracer.h).
//
// Contract:
//  - Events of type pmu::EventType::kBts. The core reserves them as ResourceKind::kBts (so PT and
//    LBR users get EBUSY, and BTS events get EBUSY while PT or LBR is held).
//  - event_init, in order:
//      1. exclude_user and exclude_kernel both set: EINVAL ("exclude_user: ... nothing to trace");
//      2. aux_size below one record or above kMaxBufferBytes: EINVAL (the Tracer's message);
//      3. per-task and CPU-wide BTS events are never mixed (Linux's exclusive PMU rule,
//         exclusive_event_init): opening a per-task event while a CPU-wide one is open, or the
//         reverse, is EBUSY and names how many of the other kind are open;
//      4. the event's tracing context is opened (Tracer::open_for_event): a task event wants its
//         task (on its CPU, or all), a CPU-wide event every task of its CPU; flags from
//         exclude_user/exclude_kernel; mode kSnapshot if aux_snapshot, else kAux.
//    On error nothing remains.
//  - One facility per CPU, many events: the Tracer owns each CPU's facility and every event on that
//    CPU is multiplexed onto it through its own context (Linux refuses a second exclusive event in
//    a context; the 2008 in-kernel BTS interface review asks for exactly this sharing instead).
//  - start(event, cpu) activates the context on cpu, stop deactivates it; add and del only check
//    that the CPU is in range. read() adds the records stored for the event since the last read
//    to its count. event_destroy closes the context (its records go with it).
//  - context(event_id) gives the event's context, for reading its AUX ring or snapshot.
// Thread-safety: as the Core (callers serialise).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "hwarb/bts/tracer.h"
#include "hwarb/pmu/event.h"
#include "hwarb/pmu/pmu.h"

namespace hwarb::bts {

class BtsPmu final : public pmu::Pmu {
 public:
  explicit BtsPmu(Tracer& tracer) : tracer_(tracer) {}

  std::string_view name() const override { return "intel_bts"; }
  arbiter::ResourceKind resource_kind() const override { return arbiter::ResourceKind::kBts; }

  Result<void> validate(const pmu::EventAttr& attr) const override;
  Result<void> event_init(pmu::Event& event) override;
  Result<void> add(pmu::Event& event, CpuId cpu) override;
  void del(pmu::Event& event, CpuId cpu) override;
  void start(pmu::Event& event, CpuId cpu) override;
  void stop(pmu::Event& event, CpuId cpu) override;
  void read(pmu::Event& event) override;
  void event_destroy(pmu::Event& event) override;

  std::optional<ContextId> context(pmu::EventId event) const;
  int per_task_events() const { return per_task_; }
  int cpu_wide_events() const { return cpu_wide_; }

 private:
  struct Bound {
    ContextId context;
    bool per_task = false;
    std::uint64_t reported = 0;  // records already added to the event's count
  };
  const Bound* bound(const pmu::Event& event) const;

  Tracer& tracer_;
  std::map<pmu::EventId, Bound> bound_;
  int per_task_ = 0;
  int cpu_wide_ = 0;
};

}  // namespace hwarb::bts

// hwarb/pmu/core.h — the perf-event core: contexts, scheduling, inheritance.
//
// Machine-agnostic: a machine (sim, linux/) drives it with sched_in/sched_out on
// context switches, tick on timer ticks, fork and exit; the time comes from a Clock.
//
// Contexts: one per CPU (always active) and one per task (active while the task runs). Each holds
// its events in two Boost.Intrusive lists, pinned and flexible, in insertion order; a CPU's
// schedule visits the events whose CPU is that CPU or "all CPUs" in that order (perf's merged
// {cpu, group_index} walk). Every event is its own group (no group leaders/siblings yet).
//
// Scheduling (perf's ctx_resched): on any change for CPU c the flexible events of c are taken
// off, then pinned events are added (CPU context, then the running task's), a pinned event the
// PMU refuses goes to ERROR; then flexible events are added (CPU context, then task) until the
// PMU first refuses one. sched_out(c, task) takes the task's events off (stop, read, del).
// tick(c): if some flexible event that may run on c is waiting, all flexible events of c are
// taken off, each context moves its first waiting flexible event to the end, and the flexible
// events are added again — so with k flexible events sharing s free counters, each runs s of
// every k ticks.
//
// Slots: open() reserves through the arbiter before the driver's event_init (pinned -> pinned
// request, flexible -> flexible; RequestId = EventId). A refusal is returned and nothing
// remains. Disabled events hold their reservation but are never scheduled. close() and exit()
// release.
//
// Atomicity: every fallible operation is all-or-nothing (open, fork: on error no event, no
// context and no reservation remains). Determinism: same calls, same clock -> same results
// (contexts are kept in ordered maps; no hashing, no addresses in decisions).
// Thread-safety: not thread-safe; callers serialise (the Arbiter itself is thread-safe and may
// be shared with other users). Overflow handlers run inside deliver() and must not call the Core.
// The Arbiter, the Clock and the registered PMUs must outlive the Core; EventHandles must not
// outlive their Core.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/pmu/event.h"
#include "hwarb/pmu/pmu.h"

namespace hwarb::pmu {

// One CPU's or one task's events.
struct Context {
  std::optional<TaskId> task;  // none: the context of CPU `cpu`
  std::optional<CpuId> cpu;
  EventList pinned;
  EventList flexible;
  // The kActive members of `flexible`, in the order they were installed: what a resched takes
  // off, without a walk over every flexible event (so opening n flexible events costs O(n) and
  // not O(n^2)). All of them are on one CPU: a CPU context's own, or the one its task runs on.
  ActiveList active_flexible;
  ~Context() {
    active_flexible.clear();
    pinned.clear();
    flexible.clear();
  }
};

class EventHandle;

class Core {
 public:
  // cpus = arbiter.cpus().
  Core(arbiter::Arbiter& arbiter, const Clock& clock);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  int cpus() const { return static_cast<int>(cpu_ctx_.size()); }
  const arbiter::Arbiter& arbiter() const { return arbiter_; }
  // The PMU for events of `type`. EEXIST when one is registered already.
  Result<void> register_pmu(EventType type, Pmu& pmu);

  // perf_event_open. Errors: EINVAL (no owner; CPU out of range; weight < 1 — the message names
  // the field), ENOENT (no PMU for attr.type), the arbiter's refusal (ENOSPC, EBUSY, ENODEV),
  // the driver's event_init error. On error nothing remains.
  Result<EventHandle> open(const EventAttr& attr, EventOwner owner, OverflowHandler handler = {});
  // Opens several events as one: the slots of all are reserved with Arbiter::reserve_all (no
  // other arbiter user ever sees a part), then each driver's event_init runs. All or nothing:
  // on any error (the first one, in order) no event and no reservation remains. Handles come back
  // in the order of `requests`. Used by register_wide_hw_breakpoint and the Watchpoint layer.
  struct OpenRequest {
    EventAttr attr;
    EventOwner owner;
    OverflowHandler handler;
  };
  Result<std::vector<EventHandle>> open_all(std::span<const OpenRequest> requests);
  // Changes a live event's attributes and CPU (the task and the type cannot change: EINVAL).
  // Order: owner and weight checks, then the driver's validate(attr) (so bad fields are EINVAL
  // even on a full CPU, as Linux's modify_user_hw_breakpoint), then the arbiter's modify when the
  // slot request changes (pinned, weight, CPU, instruction/data type). All or nothing: on error
  // the event is exactly as before, and still installed if it was. On success the event is taken
  // off its CPU, changed and scheduled again (so an active breakpoint is re-installed with the new
  // address); attr.disabled moves it to OFF or back to INACTIVE. ENOENT for an unknown event,
  // EINVAL for an exited one.
  Result<void> modify(EventId id, const EventAttr& attr, EventOwner owner);
  // Releases the event, its reservation and its live inherited copies. ENOENT if unknown.
  Result<void> close(EventId id);
  // OFF <-> INACTIVE (also ERROR -> INACTIVE), then reschedules. ENOENT if unknown; EINVAL on an
  // exited event.
  Result<void> enable(EventId id);
  Result<void> disable(EventId id);
  // Count (own plus exited inherited copies) and times up to clock.now().
  Result<ReadValue> read(EventId id);
  const Event* find(EventId id) const;
  // Ids of the live events, in creation order.
  std::vector<EventId> events() const;
  // Ids of a task's events (inherited copies included), in context order (pinned, flexible).
  std::vector<EventId> task_events(TaskId task) const;

  // Context switch. sched_in: EINVAL (CPU out of range), EBUSY (the CPU runs a task, or the
  // task runs on another CPU). sched_out: EINVAL unless `task` runs on `cpu`.
  Result<void> sched_in(CpuId cpu, TaskId task);
  Result<void> sched_out(CpuId cpu, TaskId task);
  std::optional<TaskId> current(CpuId cpu) const;
  // Timer tick on `cpu`: flexible rotation. EINVAL for a CPU out of range.
  Result<void> tick(CpuId cpu);
  // CPU hotplug. Offline: the CPU must be idle (no task switched in: EBUSY); its CPU-bound events
  // are taken off and stop accruing time_enabled. Online: they are scheduled again. Already in
  // that state: EINVAL. The arbiter's own online set is the caller's business.
  Result<void> set_cpu_online(CpuId cpu, bool online);
  bool cpu_online(CpuId cpu) const;

  // Copies every inherit event of `parent` to `child` (reserve_all: all or nothing). EINVAL if
  // child == parent; EEXIST if `child` already has events or runs. On error nothing of the child
  // remains. A copy starts OFF if its parent event is OFF or ERROR, else INACTIVE; it shares the
  // handler and the ring buffer of the event opened by the user.
  Result<void> fork(TaskId parent, TaskId child);
  // The task is gone: takes it off its CPU; its inherited copies fold their count and times into
  // the user's event and are destroyed; its user-opened events go to EXIT and release their
  // reservation (still readable until closed). Fine for a task without events.
  Result<void> exit(TaskId task);

 private:
  Event* lookup(EventId id);
  Context* context_of(const Event& e);
  Context& task_context(TaskId task);  // creates
  std::optional<CpuId> active_cpu_of(const Context& ctx) const;
  static bool may_run_on(const Event& e, CpuId cpu) { return !e.cpu() || *e.cpu() == cpu; }
  Result<void> check_owner(const EventAttr& attr, EventOwner owner) const;
  Result<Pmu*> pmu_for(const EventAttr& attr) const;
  // Creates an event (not yet in any context) whose slots are reserved; runs event_init.
  Result<std::unique_ptr<Event>> make_event(EventId id, const EventAttr& attr, EventOwner owner,
                                            Pmu& pmu, OverflowHandler handler);
  // Puts a new event into its context and schedules it if it can run now.
  void install_event(std::unique_ptr<Event> ev, arbiter::Reservation reservation);
  arbiter::Request request_for(const EventAttr& attr, EventOwner owner, EventId id,
                               const Pmu& pmu) const;

  bool event_sched_in(Event& e, CpuId cpu);
  void event_sched_out(Event& e);
  void flexible_out(Context* ctx, CpuId cpu);
  void pinned_in(Context* ctx, CpuId cpu);
  void flexible_in(Context* ctx, CpuId cpu, bool& can_add);
  void resched(CpuId cpu);
  void set_context_eligible(Context& ctx, std::optional<CpuId> cpu);
  // Takes the event off the PMU and out of its context; releases the reservation.
  void detach(Event& e);
  void destroy(EventId id);  // detach (if needed) and free, with its children

  arbiter::Arbiter& arbiter_;
  const Clock& clock_;
  std::map<EventType, Pmu*> pmus_;
  std::vector<std::unique_ptr<Context>> cpu_ctx_;
  std::map<TaskId, std::unique_ptr<Context>> task_ctx_;
  std::vector<std::optional<TaskId>> running_;  // per CPU
  std::vector<bool> online_;                    // per CPU
  std::map<TaskId, CpuId> running_on_;
  struct Slot {
    std::unique_ptr<Event> event;
    arbiter::Reservation reservation;
    bool attached = false;  // in a context list
  };
  std::map<EventId, Slot> events_;
  EventId next_id_ = 1;
};

// The user's handle on an opened event. Move-only; closes the event on destruction.
class EventHandle {
 public:
  EventHandle() = default;
  EventHandle(EventHandle&& o) noexcept : core_(o.core_), id_(o.id_) { o.core_ = nullptr; }
  EventHandle& operator=(EventHandle&& o) noexcept {
    if (this != &o) {
      ignore_error(close(), "an event already closed through the Core (ENOENT) holds nothing more");
      core_ = o.core_;
      id_ = o.id_;
      o.core_ = nullptr;
    }
    return *this;
  }
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  ~EventHandle() {
    ignore_error(close(), "a destructor has no error path; ENOENT means already released");
  }

  bool valid() const { return core_ != nullptr; }
  EventId id() const { return id_; }
  const Event* event() const { return core_ ? core_->find(id_) : nullptr; }
  Result<ReadValue> read() const { return core_->read(id_); }
  Result<void> enable() const { return core_->enable(id_); }
  Result<void> disable() const { return core_->disable(id_); }
  // Releases the event; the handle becomes empty. No-op when empty.
  Result<void> close() {
    if (!core_) return {};
    Core* c = core_;
    core_ = nullptr;
    return c->close(id_);
  }

 private:
  friend class Core;
  EventHandle(Core* core, EventId id) : core_(core), id_(id) {}
  Core* core_ = nullptr;
  EventId id_ = 0;
};

}  // namespace hwarb::pmu

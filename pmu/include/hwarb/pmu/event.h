// hwarb/pmu/event.h — a perf event: attributes, owner, state, count and times.
//
// Contract:
//  - Events are created, scheduled and destroyed only by the Core (core.h); users see them
//    through EventHandle and Core::read, drivers through the Pmu callbacks.
//  - States (perf's): kOff (disabled: holds its reservation, never scheduled), kInactive
//    (enabled, not on the PMU), kActive (installed on a CPU's PMU), kError (a pinned event the
//    PMU refused; stays there until re-enabled), kExit (its task exited: reservation released,
//    count and times frozen, still readable until closed).
//  - Times (perf semantics): time_enabled accrues while the event is kInactive or kActive *and*
//    its context is active on a CPU the event may run on (a CPU context is always active; a task
//    context while its task runs on a CPU; a task event bound to CPU c only while the task runs
//    on c). time_running accrues while kActive. So count * enabled / running scales a
//    multiplexed count.
//  - deliver() is the driver's path when the hardware fires: count += 1; every sample_period
//    counts (0 = counting only) the overflow handler is called and the sample is pushed into the
//    event's ring buffer (shared with inherited copies, as perf redirects their output).
//  - Not thread-safe; callers serialise (the Core's caller does).
#pragma once

#include <boost/intrusive/list.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "hwarb/base/bp_type.h"
#include "hwarb/base/ids.h"
#include "hwarb/pmu/ring.h"
#include "hwarb/pmu/sample.h"

namespace hwarb::pmu {

class Pmu;
class Core;

using EventId = std::uint64_t;  // 1, 2, ... in creation order; also the arbiter RequestId

// Which PMU handles the event (perf's attr.type).
enum class EventType : std::uint8_t { kHardware, kSoftware, kRaw, kBreakpoint, kBts };
// Linux's HW_BREAKPOINT_* values (base/bp_type.h: the system-call layer shares it).
using hwarb::BpType;
enum class EventState : std::uint8_t { kExit, kError, kOff, kInactive, kActive };
std::string_view to_string(EventState state);

struct EventAttr {
  EventType type = EventType::kBreakpoint;
  std::uint64_t config = 0;
  bool pinned = false;
  bool disabled = false;
  bool exclusive = false;  // recorded; not enforced by the core yet
  bool inherit = false;
  std::uint64_t sample_period = 0;  // 0: counting only, no overflow handler calls
  bool exclude_user = false;
  bool exclude_kernel = false;
  // The opener's credential (Linux: capable(CAP_SYS_ADMIN)), set by the API that opens the event,
  // not a user choice: it allows breakpoints on kernel addresses.
  bool privileged = false;
  // Breakpoint fields; validated by the breakpoint PMU, not by the core.
  std::uint64_t bp_addr = 0;
  std::uint64_t bp_len = 0;
  BpType bp_type = BpType::kEmpty;
  // Slots the arbiter reserves (a range split across registers needs more).
  int weight = 1;
  // Sample ring buffer: 0 = none.
  std::size_t ring_capacity = 0;
  RingMode ring_mode = RingMode::kStopWhenFull;
  // AUX area (the BTS PMU): its size in bytes and whether it is a snapshot (overwrite) buffer
  // rather than a ring the consumer frees (perf's aux mmap, read-only for snapshots).
  std::size_t aux_size = 0;
  bool aux_snapshot = false;
};

// Who owns an event: a task (on one CPU or, cpu empty, on all CPUs), or a CPU (task empty).
struct EventOwner {
  std::optional<TaskId> task;
  std::optional<CpuId> cpu;
};

// What a user read returns (perf's read_format with TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING);
// includes the counts of inherited copies that have exited.
struct ReadValue {
  std::uint64_t count = 0;
  Time time_enabled = 0;
  Time time_running = 0;
  friend bool operator==(const ReadValue&, const ReadValue&) = default;
};

class Event;
using OverflowHandler = std::function<void(Event&, const Sample&)>;

class Event {
 public:
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() = default;

  EventId id() const { return id_; }
  const EventAttr& attr() const { return attr_; }
  std::optional<TaskId> task() const { return owner_.task; }
  std::optional<CpuId> cpu() const { return owner_.cpu; }
  EventState state() const { return state_; }
  // This event's own count (inherited copies fold in only through ReadValue).
  std::uint64_t count() const { return count_; }
  // Times up to the last scheduling operation; Core::read brings them up to the clock.
  Time time_enabled() const { return enabled_; }
  Time time_running() const { return running_; }
  // The CPU it is installed on while kActive.
  std::optional<CpuId> active_cpu() const { return active_cpu_; }
  // The event it was inherited from (0 = opened by a user).
  EventId parent() const { return parent_; }
  Pmu& pmu() const { return *pmu_; }
  // The sample ring (shared with inherited copies); nullptr when ring_capacity was 0.
  const SampleRing* ring() const { return ring_.get(); }
  SampleRing* ring() { return ring_.get(); }

  // ---- driver API ----
  // Adds hardware counts (from Pmu::read).
  void add_count(std::uint64_t n) { count_ += n; }
  // The hardware fired for this event. Ignored (false) unless kActive.
  bool deliver(const Sample& sample);
  // Driver-private: e.g. the debug register the event is installed in (-1: none).
  int hw_index = -1;

  // ---- core-private ----
  boost::intrusive::list_member_hook<> group_hook;  // in its context's pinned or flexible list
  // In its context's active-flexible list while a flexible event is kActive; unlinks itself
  // when the event is scheduled out or destroyed.
  boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>>
      active_hook;

 private:
  friend class Core;
  Event(EventId id, const EventAttr& attr, EventOwner owner, Pmu* pmu, Time now)
      : id_(id), attr_(attr), owner_(owner), pmu_(pmu), tstamp_(now) {
    period_left_ = attr.sample_period;
  }
  // Accrues the times from tstamp_ to now under the current state / eligibility.
  void update_time(Time now);
  void set_state(EventState s, Time now) {
    update_time(now);
    state_ = s;
  }
  void set_eligible(bool e, Time now) {
    update_time(now);
    eligible_ = e;
  }
  ReadValue read_at(Time now) const;

  EventId id_;
  EventAttr attr_;
  EventOwner owner_;
  Pmu* pmu_;
  EventState state_ = EventState::kInactive;
  std::uint64_t count_ = 0;
  Time enabled_ = 0;
  Time running_ = 0;
  Time tstamp_;
  bool eligible_ = false;  // context active on a CPU this event may run on
  std::optional<CpuId> active_cpu_;
  std::uint64_t period_left_ = 0;
  OverflowHandler handler_;
  std::shared_ptr<SampleRing> ring_;
  EventId parent_ = 0;
  std::vector<EventId> children_;  // live inherited copies (origin events only)
  ReadValue child_total_;          // folded in from exited inherited copies
};

using EventList = boost::intrusive::list<
    Event,
    boost::intrusive::member_hook<Event, boost::intrusive::list_member_hook<>, &Event::group_hook>>;

// The flexible events a context has installed right now (auto-unlinking, so no size kept).
using ActiveList = boost::intrusive::list<
    Event,
    boost::intrusive::member_hook<Event,
                                  boost::intrusive::list_member_hook<
                                      boost::intrusive::link_mode<boost::intrusive::auto_unlink>>,
                                  &Event::active_hook>,
    boost::intrusive::constant_time_size<false>>;

}  // namespace hwarb::pmu

// hwarb/pmu/pmu.h — the driver interface (Linux's struct pmu) and the clock.
//
// Contract for drivers (the breakpoint PMU, the BTS PMU, the test PMU of the unit tests):
//  - event_init(event): validates the fields the driver owns (for breakpoints: bp_addr, bp_len,
//    bp_type) and prepares driver state. Called once, after the core has validated the owner and
//    reserved the event's slots through the arbiter (so, as in Linux, a bad request on a full CPU
//    is ENOSPC). An error is returned to the opener and the reservation is given back.
//  - validate(attr): the driver's attribute checks alone (no state), used by event_init and by
//    Core::modify before anything changes. Default: everything is valid.
//  - check_reservable(attr): the few checks the driver makes BEFORE the slots are counted (Linux's
//    __reserve_bp_slot refuses an empty or invalid breakpoint type first), so that they win over
//    ENOSPC. Core::open and open_all call it before the arbiter. Default: nothing.
//  - add(event, cpu): installs the event on `cpu`'s hardware, stopped. May fail (no free
//    register: any error) — the scheduler treats that as "could not schedule" (a pinned event
//    goes to ERROR, flexible scheduling stops for this pass). On failure nothing is installed.
//  - start/stop(event, cpu): let the installed event count / stop counting.
//  - read(event): folds any hardware count not yet reported into the event (Event::add_count).
//    Called after stop and before del when the core schedules the event out, and on user reads.
//  - del(event, cpu): uninstalls the (stopped) event. Never fails.
//  - event_destroy(event): the event is going away (close, exit, failed open after event_init).
//  - When the hardware fires, the driver calls Event::deliver(sample) on the installed event.
//  - A driver must not call back into the Core from these functions.
// The core calls these from its own (single) thread of control; see core.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/pmu/sample.h"

namespace hwarb::pmu {

class Event;
struct EventAttr;

class Pmu {
 public:
  virtual ~Pmu() = default;
  virtual std::string_view name() const = 0;
  // What the arbiter accounts this PMU's events as (breakpoint slots by default).
  virtual arbiter::ResourceKind resource_kind() const { return arbiter::ResourceKind::kBreakpoint; }

  virtual Result<void> validate(const EventAttr& /*attr*/) const { return {}; }
  virtual Result<void> check_reservable(const EventAttr& /*attr*/) const { return {}; }
  virtual Result<void> event_init(Event& event) = 0;
  virtual Result<void> add(Event& event, CpuId cpu) = 0;
  virtual void del(Event& event, CpuId cpu) = 0;
  virtual void start(Event& event, CpuId cpu) = 0;
  virtual void stop(Event& event, CpuId cpu) = 0;
  virtual void read(Event& event) = 0;
  virtual void event_destroy(Event& /*event*/) {}
};

// The time source of the core. Deterministic machines pass a ManualClock.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time now() const = 0;
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(Time start = 0) : now_(start) {}
  Time now() const override { return now_; }
  void set(Time t) { now_ = t; }
  void advance(Time dt) { now_ += dt; }

 private:
  Time now_;
};

}  // namespace hwarb::pmu

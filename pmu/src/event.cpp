#include "hwarb/pmu/event.h"

namespace hwarb::pmu {

std::string_view to_string(EventState state) {
  switch (state) {
    case EventState::kExit:
      return "EXIT";
    case EventState::kError:
      return "ERROR";
    case EventState::kOff:
      return "OFF";
    case EventState::kInactive:
      return "INACTIVE";
    case EventState::kActive:
      return "ACTIVE";
  }
  return "?";
}

void Event::update_time(Time now) {
  if (now > tstamp_) {
    Time delta = now - tstamp_;
    if (eligible_ && (state_ == EventState::kInactive || state_ == EventState::kActive)) {
      enabled_ += delta;
    }
    if (state_ == EventState::kActive) running_ += delta;
  }
  tstamp_ = now;
}

ReadValue Event::read_at(Time now) const {
  ReadValue v{count_ + child_total_.count, enabled_ + child_total_.time_enabled,
              running_ + child_total_.time_running};
  if (now > tstamp_) {
    Time delta = now - tstamp_;
    if (eligible_ && (state_ == EventState::kInactive || state_ == EventState::kActive)) {
      v.time_enabled += delta;
    }
    if (state_ == EventState::kActive) v.time_running += delta;
  }
  return v;
}

bool Event::deliver(const Sample& sample) {
  if (state_ != EventState::kActive) return false;
  ++count_;
  if (attr_.sample_period == 0) return true;
  if (--period_left_ == 0) {
    period_left_ = attr_.sample_period;
    if (handler_) handler_(*this, sample);
    if (ring_) ring_->push(sample);
  }
  return true;
}

}  // namespace hwarb::pmu

// hwarb/linux/soft_watch_engine.h — SoftWatchEngine, the software watch path (SoftWatch: page
// protection, int3, single-steps) as an Engine of run_target.
//
// Contract:
//  - handle() gives each event to the SoftWatch and every hit it found to the observer, in order,
//    then the watch's notes (WatchObserver::note); it takes what SoftWatch::handle takes.
//    resume_mode() is the watch's.
//  - finish() disarms the watch (every thread stopped, as run_target leaves them): the tracee then
//    runs unmodified, and the watchdog (guard()) is released once that succeeded.
//  - done() is the observer's.
//  - guard() hands the engine a Watchdog (an attached target): the watch's restore plan is
//    published now (its error returned) and again after each event that changed it; a later
//    publish that fails stops publishing, and watchdog_error() says why (the watchdog then holds
//    the last plan it got). The engine keeps a pointer: the watchdog must stay where it is
//    (not moved) until finish().
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/linux/watchdog.h"

namespace hwarb::native {

class SoftWatchEngine final : public Engine {
 public:
  SoftWatchEngine(SoftWatch& watch, WatchObserver& observer) : watch_(watch), observer_(observer) {}

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return watch_.resume_mode(); }
  Result<void> finish() override;
  bool done() const override { return observer_.done(); }

  Result<void> guard(Watchdog& watchdog);
  const std::optional<Error>& watchdog_error() const { return watchdog_error_; }

 private:
  void publish();

  SoftWatch& watch_;
  WatchObserver& observer_;
  std::vector<WatchHit> hits_;
  Watchdog* watchdog_ = nullptr;
  std::uint64_t published_ = 0;  // the plan generation the watchdog has
  std::optional<Error> watchdog_error_;
};

}  // namespace hwarb::native

// hwarb/linux/soft_watch_engine.h — SoftWatchEngine, the software watch path (SoftWatch: page
// protection, int3, single-steps) as an Engine of run_target.
//
// Contract:
//  - handle() gives each event to the SoftWatch and every hit it found to the observer, in order,
//    then the watch's notes (WatchObserver::note); it takes what SoftWatch::handle takes.
//    resume_mode() is the watch's.
//  - finish() disarms the watch (every thread stopped, as run_target leaves them): the tracee then
//    runs unmodified.
//  - done() is the observer's.
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/watch_hit.h"

namespace hwarb::linux {

class SoftWatchEngine final : public Engine {
 public:
  SoftWatchEngine(SoftWatch& watch, WatchObserver& observer) : watch_(watch), observer_(observer) {}

  [[nodiscard]] Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return watch_.resume_mode(); }
  [[nodiscard]] Result<void> finish() override { return watch_.disarm(); }
  bool done() const override { return observer_.done(); }

 private:
  SoftWatch& watch_;
  WatchObserver& observer_;
  std::vector<WatchHit> hits_;
};

}  // namespace hwarb::linux

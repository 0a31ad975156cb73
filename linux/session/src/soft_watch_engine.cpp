#include "hwarb/linux/soft_watch_engine.h"

namespace hwarb::native {

Result<bool> SoftWatchEngine::handle(const Event& event) {
  hits_.clear();
  auto taken = watch_.handle(event, hits_);
  for (const WatchHit& h : hits_) observer_.hit(h);
  for (const SoftWatch::Note& n : watch_.take_notes()) observer_.note(n.id, n.text);
  if (watchdog_ && watch_.plan_generation() != published_) publish();
  return taken;
}

Result<void> SoftWatchEngine::finish() {
  auto r = watch_.disarm();
  if (r && watchdog_) watchdog_->release();
  return r;
}

Result<void> SoftWatchEngine::guard(Watchdog& watchdog) {
  auto r = watchdog.publish(watch_.restore_plan());
  if (!r) return r;
  watchdog_ = &watchdog;
  published_ = watch_.plan_generation();
  // The parachute for the stops of the watch (signal_action.h), published as it goes up.
  auto deployed = watch_.deploy_parachute();
  if (watch_.plan_generation() != published_) publish();
  return deployed;
}

void SoftWatchEngine::publish() {
  if (auto r = watchdog_->publish(watch_.restore_plan()); !r) {
    watchdog_error_ = r.error();
    watchdog_ = nullptr;
    return;
  }
  published_ = watch_.plan_generation();
}

}  // namespace hwarb::native

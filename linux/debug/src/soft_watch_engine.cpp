#include "hwarb/linux/soft_watch_engine.h"

namespace hwarb::linux {

Result<bool> SoftWatchEngine::handle(const Event& event) {
  hits_.clear();
  auto taken = watch_.handle(event, hits_);
  for (const WatchHit& h : hits_) observer_.hit(h);
  for (const SoftWatch::Note& n : watch_.take_notes()) observer_.note(n.id, n.text);
  return taken;
}

}  // namespace hwarb::linux

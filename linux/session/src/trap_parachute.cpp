// trap_parachute.cpp — the hardware path's SIGTRAP parachute (see trap_parachute.h).
#include "hwarb/linux/trap_parachute.h"

#include <signal.h>

namespace hwarb::native {

Result<bool> TrapParachute::raise(Inferior& inferior, pid_t tid) {
  const pid_t process = inferior.process_of(tid);
  if (up_.contains(process)) return true;
  auto program = inject_sigaction(inferior, tid, SIGTRAP, nullptr);
  if (!program) return std::unexpected(program.error());
  if (program->handler == kSigIgnHandler) return false;
  auto action = parachute_action(inferior, process);
  if (!action) {
    if (action.error().code() == ErrorCode::kNoEnt) return false;
    return std::unexpected(action.error());
  }
  if (auto r = inject_sigaction(inferior, tid, SIGTRAP, &*action); !r) {
    return std::unexpected(r.error());
  }
  up_[process] = Up{*program, *action};
  return true;
}

Result<void> TrapParachute::lower(Inferior& inferior, pid_t tid) {
  const auto it = up_.find(inferior.process_of(tid));
  if (it == up_.end()) return {};
  const Up up = it->second;
  up_.erase(it);
  auto now = inject_sigaction(inferior, tid, SIGTRAP, nullptr);
  if (!now) return std::unexpected(now.error());
  if (*now != up.parachute) return {};  // the program's own action since: it stays
  if (auto r = inject_sigaction(inferior, tid, SIGTRAP, &up.program); !r) {
    return std::unexpected(r.error());
  }
  return {};
}

Result<void> TrapParachute::lower_all(Inferior& inferior) {
  Result<void> first;
  for (pid_t tid : inferior.threads()) {
    if (!up(inferior.process_of(tid)) || !inferior.is_stopped(tid)) continue;
    // A vfork child shares its parent's memory but has signal actions of its own, copied at the
    // vfork: the parent's thread is the one whose actions were set.
    if (inferior.group_of(tid) != inferior.process_of(tid)) continue;
    if (auto r = lower(inferior, tid); !r && first) first = r;
  }
  return first;
}

void TrapParachute::fork(pid_t parent, pid_t child) {
  const auto it = up_.find(parent);
  if (it != up_.end()) up_[child] = it->second;
}

std::vector<RestoreSignals> TrapParachute::plan() const {
  std::vector<RestoreSignals> out;
  for (const auto& [process, up] : up_) {
    out.push_back({.process = process, .signals = signal_bit(SIGTRAP), .trap = up.program});
  }
  return out;
}

}  // namespace hwarb::native

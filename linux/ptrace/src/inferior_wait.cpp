#include "hwarb/linux/inferior.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/signals.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::native {

void Inferior::set_spin(int spin_us) {
  // Polling on a machine with one CPU only delays the tracee it waits for.
  const bool worth_it = spin_us > 0 && std::thread::hardware_concurrency() > 1;
  spin_ = SpinWindow(std::chrono::microseconds(worth_it ? spin_us : 0));
}

bool Inferior::ours(pid_t tid) const {
  return threads_.contains(tid) || children_.contains(tid) || announced_.contains(tid) ||
         unreaped_.contains(tid) || ended_leaders_.contains(tid);
}

void Inferior::forget_threads(const std::vector<pid_t>& tids) {
  for (pid_t tid : tids) unreaped_.insert(tid);
}

Result<std::optional<std::pair<pid_t, int>>> Inferior::poll_ours(pid_t also) {
  using Status = std::optional<std::pair<pid_t, int>>;
  // The one waitpid on `tid`: its status, nullopt, or ECHILD (no status will ever come).
  const auto reap = [](pid_t tid) -> Result<Status> {
    auto got = wait_once(tid, true);
    if (!got) return std::unexpected(got.error());
    if (got->pid == 0) return Status();
    return Status(std::pair{got->pid, got->status.raw});
  };
  auto peeked = peek_wait(true);
  if (!peeked) return std::unexpected(peeked.error());
  if (*peeked == 0) return Status();
  if (*peeked == also || ours(*peeked)) {
    auto got = reap(*peeked);
    if (got && *got) return got;
    if (!got && got.error().code() != ErrorCode::kChild) return got;
  }
  // Another's status comes first (or was read meanwhile): each of ours asked in turn.
  std::vector<pid_t> tids;
  for (const auto& [tid, t] : threads_) tids.push_back(tid);
  for (const auto& [tid, t] : children_) tids.push_back(tid);
  for (const auto& [tid, creator] : announced_) tids.push_back(tid);
  tids.insert(tids.end(), unreaped_.begin(), unreaped_.end());
  for (const auto& [tid, t] : ended_leaders_) tids.push_back(tid);
  if (also > 0) tids.push_back(also);
  bool waitable = false;
  for (pid_t tid : tids) {
    auto got = reap(tid);
    if (!got) {
      if (got.error().code() != ErrorCode::kChild) return got;
      unreaped_.erase(tid);  // reaped or detached: nothing will come
      continue;
    }
    waitable = true;
    if (*got) return got;
  }
  if (!waitable) {
    return make_error(ErrorCode::kChild,
                      "pid: no thread of " + std::to_string(pid_) + " can report a status");
  }
  return Status();
}

Result<std::pair<pid_t, int>> Inferior::wait_ours(pid_t also) {
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    auto peeked = peek_wait(false);
    if (!peeked) return std::unexpected(peeked.error());
    if (*peeked == also || ours(*peeked)) {
      auto got = wait_once(*peeked, true);
      if (!got && got.error().code() != ErrorCode::kChild) return std::unexpected(got.error());
      if (got && got->pid != 0) return std::pair{got->pid, got->status.raw};
      continue;
    }
    // Another's status waits unread: ours are polled, with sleeps.
    auto polled = poll_ours(also);
    if (!polled) return std::unexpected(polled.error());
    if (*polled) return **polled;
    const unsigned signals = interrupt_count();
    std::this_thread::sleep_for(nap);
    if (interrupt_count() != signals) return make_error(ErrorCode::kIntr, "pid: interrupted");
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
}

Result<std::optional<std::pair<pid_t, int>>> Inferior::poll_status(
    std::chrono::steady_clock::time_point begin, pid_t also) {
  const unsigned signals = interrupt_count();
  while (std::chrono::steady_clock::now() - begin < spin_.window()) {
    auto got = poll_ours(also);
    if (!got) return std::unexpected(got.error());
    if (*got) return **got;
    if (interrupt_count() != signals) return make_error(ErrorCode::kIntr, "pid: interrupted");
  }
  return std::nullopt;
}

Result<std::pair<pid_t, int>> Inferior::wait_any(pid_t also) {
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  auto polled = poll_status(begin, also);
  if (!polled) return std::unexpected(polled.error());
  if (*polled) {
    spin_.record(Clock::now() - begin);
    return **polled;
  }
  auto got = wait_ours(also);
  if (!got) return std::unexpected(got.error());
  spin_.record(Clock::now() - begin);
  return *got;
}

std::optional<int> Inferior::take_raw(pid_t tid) {
  for (auto it = raw_queue_.begin(); it != raw_queue_.end(); ++it) {
    if (it->first == tid) {
      const int status = it->second;
      raw_queue_.erase(it);
      return status;
    }
  }
  return std::nullopt;
}

Result<int> Inferior::wait_stop(pid_t tid) {
  if (auto kept = take_raw(tid)) return *kept;
  // Never a blocking waitpid on `tid` alone: a dying thread-group leader is reported only once
  // every other thread is reaped, and those zombies are ours to reap. So: `tid`'s status if it
  // has one (ECHILD if it is no tracee of ours), else the next status of anyone, kept for later.
  for (;;) {
    auto own = wait_once(tid, true);
    if (!own) {
      if (own.error().code() == ErrorCode::kIntr) continue;
      return std::unexpected(own.error());
    }
    if (own->pid == tid) return own->status.raw;
    auto any = wait_any(tid);
    if (!any) {
      if (any.error().code() == ErrorCode::kIntr) continue;
      return std::unexpected(any.error());
    }
    if (any->first == tid) return any->second;
    raw_queue_.push_back(*any);
  }
}

bool Inferior::is_group_leader(pid_t tid) const {
  if (tid == pid_) return true;
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.process == tid;
}

namespace {

// Whether /proc says thread-group leader `tid` has ended (a zombie, or being reaped). The state
// follows the command's name, which may itself hold ')'.
bool leader_ended(pid_t tid) {
  auto stat = read_proc_file(tid, "stat");
  if (!stat) return true;  // gone altogether
  const auto close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return false;
  const char state = (*stat)[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

std::vector<pid_t> Inferior::drop_ended_leaders() {
  std::vector<pid_t> ended;
  for (const auto& [tid, t] : threads_) {
    if (t.stopped || t.vfork_child || !is_group_leader(tid)) continue;
    const pid_t group = t.process;  // 0 for this process's leader
    const bool others = std::any_of(threads_.begin(), threads_.end(), [&](const auto& entry) {
      return entry.first != tid && entry.second.process == group && !entry.second.vfork_child;
    });
    if (others && leader_ended(tid)) ended.push_back(tid);
  }
  for (pid_t tid : ended) {
    auto node = threads_.extract(tid);
    node.mapped().interrupt_pending = false;
    ended_leaders_.insert(std::move(node));
  }
  return ended;
}

bool Inferior::exit_due() const {
  return std::any_of(ended_leaders_.begin(), ended_leaders_.end(), [&](const auto& leader) {
    const pid_t group = leader.second.process;
    return std::none_of(threads_.begin(), threads_.end(), [&](const auto& entry) {
      return entry.second.process == group && !entry.second.vfork_child;
    });
  });
}

Result<std::optional<int>> Inferior::wait_leader_stop(pid_t tid) {
  if (auto kept = take_raw(tid)) return *kept;
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    auto own = wait_once(tid, true);
    if (!own && own.error().code() != ErrorCode::kIntr) return std::unexpected(own.error());
    if (own && own->pid == tid) return own->status.raw;
    auto any = poll_ours(tid);
    if (!any) return std::unexpected(any.error());
    if (*any) {
      if ((*any)->first == tid) return (*any)->second;
      raw_queue_.push_back(**any);
      continue;
    }
    // Nothing of anyone's: the leader asleep, on its way to our interrupt, or a zombie. Read
    // before the last poll, an ended state cannot hide a stop (a zombie makes no more).
    if (leader_ended(tid)) {
      auto last = wait_once(tid, true);
      if (last && last->pid == tid) return last->status.raw;
      return std::optional<int>();
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
}

Result<std::optional<Event>> Inferior::next_event(bool block, bool& idle) {
  idle = false;
  if (!queued_.empty()) {
    Event ev = queued_.front();
    queued_.pop_front();
    return ev;
  }
  if (!raw_queue_.empty()) {
    const auto [tid, status] = raw_queue_.front();
    raw_queue_.pop_front();
    return translate(tid, status);
  }
  if (exited_) return make_error(ErrorCode::kSrch, "pid: the process has exited");
  if (block) {
    auto waited = wait_any();
    if (!waited) return std::unexpected(waited.error());
    return translate(waited->first, waited->second);
  }
  auto waited = poll_ours(0);
  if (!waited) return std::unexpected(waited.error());
  if (!*waited) {
    idle = true;
    return std::optional<Event>();
  }
  return translate((*waited)->first, (*waited)->second);
}

Result<std::optional<Event>> Inferior::take_queued() {
  // A status read for another thread may make no event: the next one is tried.
  while (!queued_.empty() || !raw_queue_.empty()) {
    bool idle = false;
    auto ev = next_event(false, idle);
    if (!ev || *ev) return ev;
  }
  return std::optional<Event>();
}

Result<std::optional<Event>> Inferior::take_status(pid_t tid, int status) {
  return translate(tid, status);
}

Result<Event> Inferior::wait() {
  for (;;) {
    bool idle = false;
    auto ev = next_event(true, idle);
    if (!ev) return std::unexpected(ev.error());
    if (*ev) return **ev;
  }
}

namespace {

// The signalfd through which wait_or_poll learns of child status changes (see the header). Made
// once per process; SIGCHLD stays blocked in the thread that made it.
Result<int> sigchld_fd() {
  static const Result<int> fd = []() -> Result<int> {
    auto sigfd = blocked_signal_fd(SIGCHLD);
    if (!sigfd) return std::unexpected(sigfd.error().with_context("sigchld"));
    return sigfd->release();
  }();
  return fd;
}

}  // namespace

Result<std::optional<Event>> Inferior::wait_or_poll(std::span<const int> fds, int timeout_ms) {
  auto sigfd = sigchld_fd();
  if (!sigfd) return std::unexpected(sigfd.error());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  std::vector<int> watched;
  watched.reserve(fds.size() + 1);
  watched.push_back(*sigfd);
  watched.insert(watched.end(), fds.begin(), fds.end());
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  bool spun = false;
  for (;;) {
    // The notification first, then the statuses: a SIGCHLD arriving after the waitpid keeps the
    // signalfd readable, so none is missed.
    ignore_error(drain_signal_fd(*sigfd), "only a wake-up: the waitpid below is the answer");
    auto ev = poll_event();
    if (!ev || *ev) return ev;
    if (!spun) {
      // Polled for a while first, as wait_any does (the rings can wait that long).
      spun = true;
      auto polled = poll_status(begin);
      if (!polled) return std::unexpected(polled.error());
      if (*polled) {
        raw_queue_.push_back(**polled);
        spin_.record(Clock::now() - begin);
        continue;
      }
    }
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::optional<Event>();
      wait_ms = static_cast<int>(left.count());
    }
    auto revents = poll_in_once(watched, wait_ms);
    spin_.record(Clock::now() - begin);
    if (!revents) {
      if (revents.error().code() == ErrorCode::kIntr) {
        return make_error(ErrorCode::kIntr, "pid: interrupted");
      }
      return std::unexpected(revents.error());
    }
    // One of `fds` ready, or the timeout (nothing ready): the caller's turn. Only the signalfd
    // ready: the statuses again.
    const bool fd_ready =
        std::any_of(revents->begin() + 1, revents->end(), [](short r) { return r != 0; });
    if (fd_ready || (*revents)[0] == 0) return std::optional<Event>();
  }
}

Result<int> Inferior::status_fd() {
  return sigchld_fd();
}

Result<void> Inferior::drain_status_fd() {
  auto sigfd = sigchld_fd();
  if (!sigfd) return std::unexpected(sigfd.error());
  auto drained = drain_signal_fd(*sigfd);
  if (!drained) return std::unexpected(drained.error());
  return {};
}

Result<std::optional<Event>> Inferior::poll_event() {
  for (;;) {
    bool idle = false;
    auto ev = next_event(false, idle);
    if (!ev) return ev;
    if (*ev) return ev;
    if (!idle) continue;  // a status that made no event
    // No status: a leader may have ended while other threads of its group run on (its zombie
    // reports nothing until they are gone, its SIGCHLD may have come with another's status).
    for (pid_t leader : drop_ended_leaders()) {
      Event gone;
      gone.kind = EventKind::kLeaderEnded;
      gone.tid = leader;
      queued_.push_back(gone);
    }
    if (queued_.empty()) return std::optional<Event>();
  }
}

Result<Event> Inferior::wait_for(pid_t tid) {
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    if (it->tid == tid) {
      Event ev = *it;
      queued_.erase(it);
      return ev;
    }
  }
  for (;;) {
    auto status = wait_stop(tid);
    if (!status) return std::unexpected(status.error());
    auto ev = translate(tid, *status);
    if (!ev) return std::unexpected(ev.error());
    if (!*ev) continue;
    // A clone stop of `tid` (a step over a clone's syscall) tells of the new thread: its event,
    // queued for wait(); `tid` itself goes on (translate resumed it as it was).
    if ((*ev)->tid != tid) {
      queued_.push_back(**ev);
      continue;
    }
    return **ev;
  }
}

}  // namespace hwarb::native

// hwarb/linux/spin_window.h — SpinWindow: how long a tracer polls for a tracee's next stop
// before it sleeps in waitpid(2).
//
// Why: on these VMs a tracer that sleeps in waitpid is woken across CPUs by each stop of its
// tracee, and that wake-up is most of a stop's cost (a PTRACE_SYSCALL round trip measured 38-47 us
// sleeping, 13 us polling with WNOHANG, 7 us with both pinned to one CPU). A tracer that polls
// for a while first catches the stops that come soon; one that polls too long burns a CPU the
// program may need. The window adapts as cpuidle's haltpoll governor does:
//  1. The stop came while polling (waited <= window): the window stays.
//  2. It came after the tracer slept, but within `max` (window < waited <= max): polling a little
//     longer would have caught it; the window grows to 1.5 x waited (at most `max`).
//  3. It came later than `max`: polling was spent on nothing; the window halves (below 1 us it
//     is 0: the tracer sleeps at once until a stop comes within `max` again).
// A window of 0 with max 0 never polls.
// Contract: pure (no clock, no system call: the caller measures `waited`). Thread-safety: none.
#pragma once

#include <algorithm>
#include <chrono>

namespace hwarb::native {

class SpinWindow {
 public:
  explicit SpinWindow(std::chrono::nanoseconds max) : max_(max), window_(max) {}

  [[nodiscard]] std::chrono::nanoseconds window() const { return window_; }
  [[nodiscard]] std::chrono::nanoseconds max() const { return max_; }

  // A wait for a stop ended `waited` after it began (polling first for window()).
  void record(std::chrono::nanoseconds waited) {
    if (waited <= window_) return;  // case 1
    if (waited <= max_) {           // case 2
      window_ = std::min(max_, waited + waited / 2);
      return;
    }
    window_ /= 2;  // case 3
    if (window_ < std::chrono::microseconds(1)) window_ = std::chrono::nanoseconds(0);
  }

 private:
  std::chrono::nanoseconds max_;
  std::chrono::nanoseconds window_;
};

}  // namespace hwarb::native

// hwarb/linux/watch_hit.h — what a watch on a real process reports, whichever path found it
// (SoftWatch's page protection, int3 and single-steps; the hardware engines' perf breakpoints):
// the ranges watched, each hit, and the observer that receives the hits.
//
// Contract:
//  - A hit's values are the whole watched range before and after the access, in memory order.
//    An empty value is unknown: the range could not be read then (it was not mapped), or the
//    path does not read values (counting without stopping the thread).
//  - WatchObserver::hit() is called in the order the hits are found, on the Inferior's thread;
//    note() likewise, in order with the hits.
// Thread-safety: plain data; the observer is called from one thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hwarb::native {

// Access bits of a watch.
inline constexpr unsigned kWatchRead = 1;
inline constexpr unsigned kWatchWrite = 2;
inline constexpr unsigned kWatchExec = 4;

struct WatchRange {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  unsigned access = kWatchRead | kWatchWrite;
  std::size_t id = 0;  // the caller's expression index, echoed in hits
  // 0: every thread's. A thread id: that thread's own (a thread-local variable's copy): the
  // hardware path places it in that thread's debug registers alone; the software path watches
  // its pages for every thread, and its caller drops the other threads' hits.
  pid_t thread = 0;
};

struct WatchHit {
  std::size_t id = 0;
  pid_t tid = -1;
  std::uint64_t time_ns = 0;  // since the watch began
  std::uint64_t ip = 0;       // the accessing instruction (for a system call: the `syscall`)
  std::uint64_t addr = 0;     // first watched byte the access touched
  unsigned access = 0;        // kWatchRead / kWatchWrite (both for read-modify-write) / kWatchExec
  std::vector<std::uint8_t> old_value;  // the whole watched range before the access
  std::vector<std::uint8_t> new_value;  // and after it
  std::string syscall;                  // non-empty when the kernel made the access
};

// Receives the hits of a watch engine.
class WatchObserver {
 public:
  virtual ~WatchObserver() = default;
  virtual void hit(const WatchHit& hit) = 0;
  // A remark about range `id` (WatchRange::id) that is not a hit, e.g. its memory was unmapped
  // or mapped again. Ignored unless overridden.
  virtual void note(std::size_t id, const std::string& text) {
    (void)id;
    (void)text;
  }
  // True when no more hits are wanted: the session then undoes the watch and lets the process
  // run on.
  virtual bool done() const { return false; }
};

}  // namespace hwarb::native

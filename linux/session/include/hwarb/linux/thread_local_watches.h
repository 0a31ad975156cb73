// hwarb/linux/thread_local_watches.h — ThreadLocalWatches, thread-local variables watched in a
// WatchSession: one watch per thread on that thread's own copy (found by ThreadLocals), for the
// threads there are and those created later; and ThreadLocalEngine, which follows the threads as
// a run_target engine.
//
// Contract:
//  - open(inferior, session, wanted) finds each variable's module in the process's link_map
//    chain (the executable's entry, else the library loaded at the symbol's bias: ENOENT naming
//    `module` when none is) and opens ThreadLocals on the process (its errors: libc must be
//    loaded, see find_thread_local in session.h).
//  - arm() watches, in every thread of the process (all stopped, as WatchSession::insert needs),
//    each wanted variable's copy: [copy + offset, + len) with its access and mode. All or none
//    (the watches inserted so far are removed on an error). The copies watched, in order.
//  - follow(event) takes every event of the process after the session has: at a new thread
//    (kNewThread, the thread still stopped at its first instruction: pthread_create has set its
//    thread-local blocks up by then) the other threads are stopped, its copies watched, and the
//    threads it stopped resumed (in the session's resume_mode() after the change: a copy on a
//    thread's stack makes the software path step every thread); at a thread's end (kThreadExit) its
//    watches are removed the same way (its copies' memory goes back to the thread library, which
//    gives it to a later thread; a new thread's copy where an ended thread's still is replaces
//    it). At an exec, the copies are forgotten (the session has dropped the watches of the old
//    image). The copies added by that event. A thread gone meanwhile (ESRCH), or the whole
//    process at a thread's end (ESRCH, or ENOENT: its /proc entry gone), is no error.
//  - A copy is its thread's own watch (WatchSpec::thread): in hardware, a debug register of
//    that thread alone (so any number of threads each have their copy in a register: a thread
//    holds the session's watches of every thread and its own copies); on the software path, its
//    page, the other threads' accesses dropped by the session. Under WatchMode::kHardware, a
//    thread whose copies and the session's other watches need more registers than it has is an
//    error (ENOSPC) at that thread.
//  - copy_of(id) says whose copy a session watch is; nullopt for the session's other watches.
//  - OwnCopyHits passes on a copy's hits by its own thread only: another thread's access to a
//    copy is no access to that thread's variable (e.g. the thread library reusing the memory of a
//    thread that has ended, before its end is seen, or the kernel's at another thread's mmap).
// Thread-safety: none; the Inferior's thread only. Move-only; the Inferior and the session must
// outlive it and stay where they are.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/thread_locals.h"
#include "hwarb/linux/watch_session.h"

namespace hwarb::native {

// A thread-local variable to watch in every thread: bytes [offset, offset + len) of its copy.
struct ThreadLocalSpec {
  ThreadLocalSymbol symbol;
  std::uint64_t offset = 0;
  std::uint64_t len = 0;
  unsigned access = kWatchWrite;
  WatchMode mode = WatchMode::kAuto;
  std::size_t id = 0;  // the caller's (e.g. its expression's index), in each of its copies
};

// One thread's copy of the variable of ThreadLocalSpec::id `spec`, watched as `id`.
struct ThreadLocalCopy {
  std::size_t spec = 0;
  pid_t tid = 0;
  WatchId id{};
  std::uint64_t addr = 0;
  WatchInfo info;
};

class ThreadLocalWatches {
 public:
  static Result<ThreadLocalWatches> open(Inferior& inferior, WatchSession& session,
                                         std::vector<ThreadLocalSpec> wanted);

  Result<std::vector<ThreadLocalCopy>> arm();
  Result<std::vector<ThreadLocalCopy>> follow(const Event& event);
  [[nodiscard]] std::optional<ThreadLocalCopy> copy_of(WatchId id) const;
  [[nodiscard]] const std::vector<ThreadLocalCopy>& copies() const { return copies_; }

 private:
  ThreadLocalWatches(Inferior& inferior, WatchSession& session, ThreadLocals locals,
                     std::vector<ThreadLocalSpec> wanted, std::vector<std::uint64_t> lms);
  // Watches thread `tid`'s copies (every thread stopped).
  Result<std::vector<ThreadLocalCopy>> watch_thread(pid_t tid);
  Result<void> forget_thread(pid_t tid);

  Inferior* inferior_;
  WatchSession* session_;
  ThreadLocals locals_;
  std::vector<ThreadLocalSpec> wanted_;
  std::vector<std::uint64_t> lms_;  // each wanted variable's module's link_map entry
  std::vector<ThreadLocalCopy> copies_;
  bool following_ = true;  // false after an exec
};

// The hits of the session's watches for `next`, but a copy's by another thread than its own.
class OwnCopyHits final : public WatchObserver {
 public:
  OwnCopyHits(const ThreadLocalWatches& watches, WatchObserver& next)
      : watches_(watches), next_(next) {}
  void hit(const WatchHit& hit) override;
  void note(std::size_t id, const std::string& text) override { next_.note(id, text); }
  bool done() const override { return next_.done(); }

 private:
  const ThreadLocalWatches& watches_;
  WatchObserver& next_;
};

// An engine over `inner` (the session's own engine) that gives every event to `inner` first,
// then to watches.follow(); each copy added goes to `added` (before the thread runs).
class ThreadLocalEngine final : public ForwardingEngine {
 public:
  ThreadLocalEngine(Engine& inner, ThreadLocalWatches& watches,
                    std::function<void(const ThreadLocalCopy&)> added)
      : ForwardingEngine(inner), watches_(watches), added_(std::move(added)) {}

  Result<bool> handle(const Event& event) override;

 private:
  ThreadLocalWatches& watches_;
  std::function<void(const ThreadLocalCopy&)> added_;
};

}  // namespace hwarb::native

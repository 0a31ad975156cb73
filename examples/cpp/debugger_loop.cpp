// debugger_loop: WatchSession as a debugger uses it, with the debugger's own wait loop. PROGRAM's
// global `counter` is watched in software (the path every machine has); each write stops the
// writing thread (stop_at_hits), where the debugger prints it; at the third the watch is removed
// there, and the program runs on to its end unwatched. Every wait status is the debugger's:
// waitpid here, then Inferior::take_status and WatchSession::handle say what it was.
//
// PROGRAM may have any number of threads: a watch changes only while every thread is stopped,
// so at the third write the debugger stops the others (Inferior::stop_all), removes the watch,
// and resumes exactly the threads stop_all stopped. A thread that stopped for an event of its
// own meanwhile (a write that faulted, a signal) was not stopped by stop_all: its event waits in
// the Inferior's queue (take_queued), and the loop hands it in like any other.
//
// Usage: debugger_loop PROGRAM [ARGS...] (PROGRAM must write a global named `counter` at least 3
// times). Exits with 0 when exactly 3 writes were seen and the program exited normally; 1, with
// the error on standard error, when anything fails.
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_session.h"

namespace {

int fail(const char* what, const hwarb::Error& error) {
  std::fprintf(stderr, "debugger_loop: %s: %s\n", what, error.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hwarb::native;
  if (argc < 2) {
    std::fprintf(stderr, "usage: debugger_loop PROGRAM [ARGS...]\n");
    return 2;
  }
  auto inferior = Inferior::spawn(std::vector<std::string>(argv + 1, argv + argc));
  if (!inferior) return fail("spawn", inferior.error());
  auto symbols = SymbolTable::load(inferior->pid());
  if (!symbols) return fail("symbols", symbols.error());
  auto counter = symbols->find("counter");
  if (!counter) return fail("symbols", counter.error());
  // Declared after the Inferior it borrows: destroyed first, it undoes its watches on any early
  // return (then the Inferior kills the program).
  WatchSession session(*inferior, {.hardware = false,
                                   .no_hardware = "the debugger asked for software",
                                   .slots = 4,
                                   .stop_at_hits = true});
  auto watch = session.insert({.addr = counter->address, .len = 8, .access = kWatchWrite});
  if (!watch) return fail("insert", watch.error());
  int hits = 0;
  if (auto r = inferior->resume_all(session.resume_mode()); !r) return fail("resume", r.error());
  for (;;) {
    // Events the Inferior already holds come first; then the debugger's own waitpid.
    auto queued = inferior->take_queued();
    if (!queued) return fail("take_queued", queued.error());
    std::optional<Event> ev = *queued;
    if (!ev) {
      int status = 0;
      const pid_t tid = ::waitpid(-1, &status, __WALL);
      if (tid < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "debugger_loop: waitpid: %s\n", std::strerror(errno));
        return 1;
      }
      auto taken = inferior->take_status(tid, status);
      if (!taken) return fail("take_status", taken.error());
      if (!*taken) continue;
      ev = **taken;
    }
    auto verdict = session.handle(*ev);
    if (!verdict) return fail("handle", verdict.error());
    for (const WatchHit& h : verdict->hits) {
      std::uint64_t value = 0;
      std::memcpy(&value, h.new_value.data(), std::min<std::size_t>(h.new_value.size(), 8));
      std::printf("%s: tid %d wrote %llu at ip 0x%llx\n", verdict->stopped ? "stopped" : "hit",
                  static_cast<int>(h.tid), static_cast<unsigned long long>(value),
                  static_cast<unsigned long long>(h.ip));
      ++hits;
    }
    if (verdict->stopped) {
      // The thread is stopped right after its write: the debugger's moment.
      if (hits >= 3 && session.find(watch->id)) {
        // Every other thread stopped for the change; resumed after it, exactly those.
        auto stopped = inferior->stop_all(ev->tid);
        if (!stopped) return fail("stop_all", stopped.error());
        if (auto r = session.remove(watch->id); !r) return fail("remove", r.error());
        std::printf("watch removed\n");
        for (pid_t tid : *stopped) {
          if (auto r = inferior->resume(tid, session.resume_mode()); !r) {
            return fail("resume", r.error());
          }
        }
      }
      if (auto r = inferior->resume(ev->tid, session.resume_mode(), verdict->signal); !r) {
        return fail("resume", r.error());
      }
      continue;
    }
    if (verdict->handled) continue;
    // Not the session's: as a debugger does without it.
    hwarb::Result<void> step;
    switch (ev->kind) {
      case EventKind::kExited:
        if (ev->tid != inferior->pid()) break;  // a process the session followed
        std::printf("%d writes seen; exit status %d\n", hits, ev->status);
        return hits == 3 ? 0 : 1;
      case EventKind::kKilled:
        std::fprintf(stderr, "debugger_loop: the program was killed by signal %d\n", ev->signal);
        return 1;
      case EventKind::kThreadExit:
      case EventKind::kLeaderEnded:
        break;
      case EventKind::kFork:
        step = ev->vfork ? inferior->resume(ev->child, session.resume_mode())
                         : inferior->release(ev->child);
        break;
      case EventKind::kSignal:
        step = inferior->resume(ev->tid, session.resume_mode(), ev->signal);
        break;
      default:
        step = inferior->resume(ev->tid, session.resume_mode());
        break;
    }
    // A thread that ended meanwhile (ESRCH) reports its end next.
    if (!step && step.error().code() != hwarb::ErrorCode::kSrch)
      return fail("resume", step.error());
  }
}

// debugger_loop: WatchSession as a debugger uses it, with the debugger's own wait loop. PROGRAM's
// global `counter` is watched in software (the path every machine has); each write stops the
// writing thread (stop_at_hits), where the debugger prints it; at the third the watch is removed
// there, and the program runs on to its end unwatched. Every wait status is the debugger's:
// waitpid here, then Inferior::take_status and WatchSession::handle say what it was.
// Usage: debugger_loop PROGRAM [ARGS...] (PROGRAM must write a global named `counter` at least 3
// times). Exits with 0 when exactly 3 writes were seen and the child exited normally.
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_session.h"

int main(int argc, char** argv) {
  using namespace hwarb::native;
  if (argc < 2) {
    std::fprintf(stderr, "usage: debugger_loop PROGRAM [ARGS...]\n");
    return 2;
  }
  auto inferior = Inferior::spawn(std::vector<std::string>(argv + 1, argv + argc));
  if (!inferior) {
    std::fprintf(stderr, "%s\n", inferior.error().to_string().c_str());
    return 1;
  }
  auto symbols = SymbolTable::load(inferior->pid());
  auto counter = symbols ? symbols->find("counter") : std::unexpected(symbols.error());
  if (!counter) {
    std::fprintf(stderr, "%s\n", counter.error().to_string().c_str());
    return 1;
  }
  WatchSession session(*inferior, {.hardware = false,
                                   .no_hardware = "the debugger asked for software",
                                   .slots = 4,
                                   .stop_at_hits = true});
  auto watch = session.insert({.addr = counter->address, .len = 8, .access = kWatchWrite});
  if (!watch) {
    std::fprintf(stderr, "%s\n", watch.error().to_string().c_str());
    return 1;
  }
  int hits = 0;
  if (!inferior->resume_all(session.resume_mode())) return 1;
  for (;;) {
    // Events the Inferior already holds come first; then the debugger's own waitpid.
    auto queued = inferior->take_queued();
    if (!queued) return 1;
    std::optional<Event> ev = *queued;
    if (!ev) {
      int status = 0;
      const pid_t tid = ::waitpid(-1, &status, __WALL);
      if (tid < 0) return 1;
      auto taken = inferior->take_status(tid, status);
      if (!taken) return 1;
      if (!*taken) continue;
      ev = **taken;
    }
    auto verdict = session.handle(*ev);
    if (!verdict) {
      std::fprintf(stderr, "%s\n", verdict.error().to_string().c_str());
      return 1;
    }
    if (verdict->stopped) {
      // The thread is stopped right after its write: the debugger's moment.
      for (const WatchHit& h : verdict->hits) {
        std::uint64_t value = 0;
        std::memcpy(&value, h.new_value.data(), std::min<std::size_t>(h.new_value.size(), 8));
        std::printf("stopped: tid %d wrote %llu at ip 0x%llx\n", static_cast<int>(h.tid),
                    static_cast<unsigned long long>(value), static_cast<unsigned long long>(h.ip));
        ++hits;
      }
      if (hits == 3 && session.find(watch->id)) {
        if (auto r = session.remove(watch->id); !r) return 1;
        std::printf("watch removed\n");
      }
      if (!inferior->resume(ev->tid, session.resume_mode(), verdict->signal)) return 1;
      continue;
    }
    if (verdict->handled) continue;
    // Not the session's: as a debugger does without it.
    if (ev->kind == EventKind::kExited) {
      std::printf("%d writes seen; exit status %d\n", hits, ev->status);
      return hits == 3 ? 0 : 1;
    }
    if (ev->kind == EventKind::kKilled) return 1;
    if (ev->kind == EventKind::kThreadExit) continue;
    if (ev->kind == EventKind::kFork) {
      (void)(ev->vfork ? inferior->resume(ev->child, session.resume_mode())
                       : inferior->release(ev->child));
      continue;
    }
    const int signal = ev->kind == EventKind::kSignal ? ev->signal : 0;
    (void)inferior->resume(ev->tid, session.resume_mode(), signal);
  }
}

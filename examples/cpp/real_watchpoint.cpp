// real_watchpoint: a watchpoint on a real child process through WatchSession, the one watch API:
// the child is started stopped, its global `counter` found by symbol and watched — with a debug
// register where this machine delivers breakpoint hits, else in software (page protection): the
// placement and its reason are printed — and every write reported with the instruction and its
// new value, under run_target's event loop. Usage: real_watchpoint PROGRAM [ARGS...] (PROGRAM
// must have a global named `counter`). Exits with 0 when the child exited normally and at least
// one write was seen.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/linux/watch_session.h"

namespace {

struct Printer final : hwarb::native::WatchObserver {
  int hits = 0;
  void hit(const hwarb::native::WatchHit& h) override {
    ++hits;
    std::uint64_t value = 0;
    std::memcpy(&value, h.new_value.data(), std::min<std::size_t>(h.new_value.size(), 8));
    std::printf("tid %d ip 0x%llx wrote %llu at 0x%llx\n", static_cast<int>(h.tid),
                static_cast<unsigned long long>(h.ip), static_cast<unsigned long long>(value),
                static_cast<unsigned long long>(h.addr));
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace hwarb::native;
  if (argc < 2) {
    std::fprintf(stderr, "usage: real_watchpoint PROGRAM [ARGS...]\n");
    return 2;
  }
  auto inferior = Inferior::spawn(std::vector<std::string>(argv + 1, argv + argc));
  if (!inferior) {
    std::fprintf(stderr, "%s\n", inferior.error().to_string().c_str());
    return 1;
  }
  auto symbols = SymbolTable::load(inferior->pid());
  if (!symbols) return 1;
  auto counter = symbols->find("counter");
  if (!counter) {
    std::fprintf(stderr, "%s\n", counter.error().to_string().c_str());
    return 1;
  }
  // What this machine really does decides the placement (the probe's canary).
  auto report = probe();
  WatchSession session(*inferior, report ? session_options(*report) : WatchSessionOptions{});
  auto watch = session.insert({.addr = counter->address, .len = 8, .access = kWatchWrite});
  if (!watch) {
    std::fprintf(stderr, "%s\n", watch.error().to_string().c_str());
    return 1;
  }
  std::fprintf(stderr, "counter: %s (%s)\n", placement_name(watch->placement), watch->why.c_str());
  Printer printer;
  WatchSessionEngine engine(session, printer);
  auto end = run_target(*inferior, engine);
  if (!end) {
    std::fprintf(stderr, "%s\n", end.error().to_string().c_str());
    return 1;
  }
  std::printf("%d writes; exit status %d\n", printer.hits, end->status);
  return end->exited && end->signal == 0 && printer.hits > 0 ? 0 : 1;
}

// real_watchpoint: a watchpoint on a real child process with hwarb's software watch (no debug
// register needed): the child is started stopped, its global `counter` found by symbol, every
// write reported with the instruction and old -> new. Usage: real_watchpoint PROGRAM [ARGS...]
// (PROGRAM must have a global named `counter`). Exits with 0 when the child exited normally and
// at least one write was seen.
#include <cstdio>
#include <string>
#include <vector>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/soft_watch_engine.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_hit.h"

namespace {

struct Printer final : hwarb::native::WatchObserver {
  int hits = 0;
  void hit(const hwarb::native::WatchHit& h) override {
    ++hits;
    std::printf("tid %d ip 0x%llx wrote %zu bytes at 0x%llx\n", static_cast<int>(h.tid),
                static_cast<unsigned long long>(h.ip), h.new_value.size(),
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
  auto watch = SoftWatch::arm(*inferior, {{counter->address, 8, kWatchWrite, 0}});
  if (!watch) {
    std::fprintf(stderr, "%s\n", watch.error().to_string().c_str());
    return 1;
  }
  Printer printer;
  SoftWatchEngine engine(*watch, printer);
  auto end = run_target(*inferior, engine);
  if (!end) {
    std::fprintf(stderr, "%s\n", end.error().to_string().c_str());
    return 1;
  }
  std::printf("%d writes; exit status %d\n", printer.hits, end->status);
  return end->exited && end->signal == 0 && printer.hits > 0 ? 0 : 1;
}

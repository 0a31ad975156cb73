// SoftWatch against a model, on a real process: prog_random_access makes random loads, stores and
// read-modify-write adds (1/2/4/8 bytes, any offset, unaligned too) to a 64-byte array and prints
// each one before making it. The model replays the printed accesses on a copy of the array and
// predicts, for a random watched range and access kind, exactly which accesses are hits, in
// order, with their access kind and the range's bytes before and after. The watcher must agree
// on every one, and the program's printed sum (its reads) must be what the model computes: the
// watch changed nothing it read.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/symbols.h"

namespace hwarb::native {
namespace {

struct Access {
  char op = 'r';
  unsigned off = 0, size = 0;
  std::uint64_t value = 0;
};

struct ModelHit {
  unsigned access = 0;
  std::vector<std::uint8_t> before, after;
};

// The model: the hits a watch of [woff, woff+wlen) with `bits` must report for `accesses`, and
// the sum of the loads.
std::vector<ModelHit> model(const std::vector<Access>& accesses, unsigned woff, unsigned wlen,
                            unsigned bits, std::uint64_t* sum) {
  std::array<std::uint8_t, 64> area{};
  std::vector<ModelHit> hits;
  *sum = 0;
  for (const Access& a : accesses) {
    std::vector<std::uint8_t> before(area.begin() + woff, area.begin() + woff + wlen);
    std::uint64_t old = 0;
    std::memcpy(&old, area.data() + a.off, a.size);
    unsigned did = 0;
    if (a.op == 'r') {
      *sum += old;
      did = kWatchRead;
    } else if (a.op == 'w') {
      std::memcpy(area.data() + a.off, &a.value, a.size);
      did = kWatchWrite;
    } else {
      std::uint64_t v = old + a.value;
      std::memcpy(area.data() + a.off, &v, a.size);
      did = kWatchRead | kWatchWrite;
    }
    const bool overlaps = a.off < woff + wlen && woff < a.off + a.size;
    if (overlaps && (did & bits) != 0) {
      hits.push_back(
          ModelHit{did & bits, before,
                   std::vector<std::uint8_t>(area.begin() + woff, area.begin() + woff + wlen)});
    }
  }
  return hits;
}

RC_GTEST_PROP(SoftWatchModel, EveryAccessToTheRangeIsReportedExactly, ()) {
  const auto seed = *rc::gen::inRange<std::uint64_t>(1, 1000000);
  const int n = *rc::gen::inRange(1, 60);
  const unsigned woff = *rc::gen::inRange(0u, 64u);
  const unsigned wlen = *rc::gen::inRange(1u, 65u - woff);
  const unsigned bits = *rc::gen::element(kWatchRead, kWatchWrite, kWatchRead | kWatchWrite);
  FILE* out = std::tmpfile();
  RC_ASSERT(out != nullptr);
  auto inf = Inferior::spawn({std::string(HWARB_PROGRAMS_DIR) + "/prog_random_access",
                              std::to_string(seed), std::to_string(n)},
                             {.stdout_fd = fileno(out)});
  RC_ASSERT(inf.has_value());
  auto table = SymbolTable::load(inf->pid());
  RC_ASSERT(table.has_value());
  auto area = table->find("area");
  RC_ASSERT(area.has_value());
  auto watch = SoftWatch::arm(*inf, {{area->address + woff, wlen, bits, 0}});
  RC_ASSERT(watch.has_value());
  std::vector<WatchHit> hits;
  RC_ASSERT(inf->resume_all(watch->resume_mode()).has_value());
  int status = -1;
  for (;;) {
    auto ev = inf->wait();
    RC_ASSERT(ev.has_value());
    auto mine = watch->handle(*ev, hits);
    RC_ASSERT(mine.has_value());
    if (*mine) continue;
    if (ev->kind == EventKind::kExited) {
      status = ev->status;
      break;
    }
    RC_ASSERT(ev->kind != EventKind::kKilled);
    if (ev->kind == EventKind::kThreadExit) continue;
    const int sig = ev->kind == EventKind::kSignal ? ev->signal : 0;
    RC_ASSERT(inf->resume(ev->tid, watch->resume_mode(), sig).has_value());
  }
  RC_ASSERT(status == 0);
  // The program's log: its accesses, then its sum.
  std::string text;
  char buf[4096];
  std::size_t got;
  std::rewind(out);
  while ((got = std::fread(buf, 1, sizeof(buf), out)) > 0) text.append(buf, got);
  std::fclose(out);
  std::istringstream lines(text);
  std::vector<Access> accesses;
  std::uint64_t printed_sum = 0;
  std::string op;
  while (lines >> op) {
    if (op == "sum") {
      lines >> std::hex >> printed_sum >> std::dec;
      break;
    }
    Access a;
    a.op = op[0];
    lines >> a.off >> a.size >> std::hex >> a.value >> std::dec;
    accesses.push_back(a);
  }
  RC_ASSERT(accesses.size() == static_cast<std::size_t>(n));
  std::uint64_t sum = 0;
  const std::vector<ModelHit> expected = model(accesses, woff, wlen, bits, &sum);
  RC_ASSERT(printed_sum == sum);
  RC_ASSERT(hits.size() == expected.size());
  for (std::size_t i = 0; i < hits.size(); ++i) {
    RC_ASSERT(hits[i].access == expected[i].access);
    RC_ASSERT(hits[i].old_value == expected[i].before);
    RC_ASSERT(hits[i].new_value == expected[i].after);
    RC_ASSERT(hits[i].tid == inf->pid());
  }
}

}  // namespace
}  // namespace hwarb::native

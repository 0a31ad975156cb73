// mem_latency — the cost of one dependent load that misses the caches, on this machine, in the
// same run as its in-cache baseline (bench/README.md, "the thread workload's floor").
//
// A random cyclic permutation of 64-byte lines is walked, each load's address coming from the
// previous load (no memory-level parallelism, no prefetching): the time per step is the latency
// of a load from wherever a working set of that size lives. Sizes from 16 KiB (L1) to 256 MiB
// (memory); the median of --reps repetitions of about --time seconds each is printed per size,
// with its ratio to the 16 KiB walk.
//
//   mem_latency [--reps N] [--time S] [--quick]
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct alignas(64) Line {
  Line* next;
};

// Nanoseconds per dependent load over `lines` (already linked), walking for about `seconds`.
double walk_ns(std::vector<Line>& lines, double seconds) {
  using Clock = std::chrono::steady_clock;
  Line* p = &lines[0];
  std::uint64_t steps = 0;
  const auto start = Clock::now();
  auto now = start;
  const std::uint64_t chunk = 1 << 16;
  while (std::chrono::duration<double>(now - start).count() < seconds) {
    for (std::uint64_t i = 0; i < chunk; ++i) p = p->next;
    steps += chunk;
    now = Clock::now();
  }
  // The walk's end is used, so the loads cannot be dropped.
  if (p == nullptr) std::abort();
  return std::chrono::duration<double, std::nano>(now - start).count() / static_cast<double>(steps);
}

void link_randomly(std::vector<Line>& lines, std::mt19937_64& rng) {
  std::vector<std::size_t> order(lines.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin() + 1, order.end(), rng);
  for (std::size_t i = 0; i < order.size(); ++i) {
    lines[order[i]].next = &lines[order[(i + 1) % order.size()]];
  }
}

int usage() {
  std::fprintf(stderr, "usage: mem_latency [--reps N] [--time S] [--quick]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  double seconds = 0.2;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
      if (reps < 1) {
        std::fprintf(stderr, "mem_latency: --reps: must be at least 1\n");
        return 2;
      }
    } else if (a == "--time" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0)) {
        std::fprintf(stderr, "mem_latency: --time: must be a positive number of seconds\n");
        return 2;
      }
    } else {
      return usage();
    }
  }
  if (quick) {
    reps = 1;
    seconds = 0.01;
  }
  std::vector<std::size_t> sizes_kib = {16, 256, 4096, 32768, 262144};
  if (quick) sizes_kib = {16, 4096};

  std::mt19937_64 rng(0x6d656d6c6174ULL);
  std::vector<std::vector<Line>> sets;
  for (std::size_t kib : sizes_kib) {
    sets.emplace_back(kib * 1024 / sizeof(Line));
    link_randomly(sets.back(), rng);
  }
  // Repetitions interleaved over the sizes, so that a change in load hits them alike.
  std::vector<std::vector<double>> ns(sizes_kib.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t s = 0; s < sets.size(); ++s) ns[s].push_back(walk_ns(sets[s], seconds));
  }
  std::printf("| working set | ns per dependent load (median of %d) | vs 16 KiB |\n", reps);
  std::printf("|---:|---:|---:|\n");
  double base = 0;
  for (std::size_t s = 0; s < sets.size(); ++s) {
    std::sort(ns[s].begin(), ns[s].end());
    const double median = ns[s][ns[s].size() / 2];
    if (s == 0) base = median;
    std::printf("| %zu KiB | %.1f | %.1fx |\n", sizes_kib[s], median, median / base);
    if (!(median > 0)) return 1;
  }
  return 0;
}

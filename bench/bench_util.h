// bench/bench_util.h — what every benchmark driver in bench/ shares: the clock, deterministic
// randomness and the formatting of rates and ratios in the result tables.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hwarb::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// SplitMix64: a fixed seed gives the same sequence on every run and machine.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

// A rate per second: "1.23M", "45.6k" or "789".
inline std::string format_rate(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

// a / b as "1.23x" ("123x" from 100 on); "0.00x" when b is 0.
inline std::string ratio(double a, double b) {
  char buf[32];
  const double r = b > 0 ? a / b : 0;
  std::snprintf(buf, sizeof buf, r >= 100 ? "%.0fx" : "%.2fx", r);
  return buf;
}

}  // namespace hwarb::bench

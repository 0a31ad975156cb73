// bench/bench_util.h — what every benchmark driver in bench/ shares: the clock, the median, the
// calibrated timing loop, deterministic randomness and the formatting of rates and ratios in the
// result tables.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hwarb::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// SplitMix64: a fixed seed gives the same sequence on every run and machine.
// The median of `v` (the upper one for an even count); 0 when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A measured loop: run(units) does `units` units and returns how many it did. Calibration
// (doubling the units until a run takes calib_seconds) doubles as warm-up; each repetition then
// runs about rep_seconds and records its rate in units per second.
class Timed {
 public:
  Timed(std::function<std::int64_t(std::int64_t)> run, double calib_seconds, double rep_seconds)
      : run_(std::move(run)) {
    std::int64_t units = 1;
    double t = 0;
    for (;;) {
      const auto t0 = Clock::now();
      run_(units);
      t = seconds_since(t0);
      if (t >= calib_seconds) break;
      units *= 2;
    }
    units_ = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(rep_seconds * static_cast<double>(units) / t));
  }
  void rep() {
    const auto t0 = Clock::now();
    const std::int64_t done = run_(units_);
    rates_.push_back(static_cast<double>(done) / seconds_since(t0));
  }
  double median_rate() const { return median(rates_); }
  double min_rate() const { return rates_.empty() ? 0 : *std::ranges::min_element(rates_); }
  double max_rate() const { return rates_.empty() ? 0 : *std::ranges::max_element(rates_); }

 private:
  std::function<std::int64_t(std::int64_t)> run_;
  std::int64_t units_ = 1;
  std::vector<double> rates_;
};

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

// "median [min-max]" of rates, e.g. "26.79M [26.71M-26.84M]"; "0 [0-0]" for no values.
inline std::string rate_range(const std::vector<double>& rates) {
  if (rates.empty()) return "0 [0-0]";
  return format_rate(median(rates)) + " [" + format_rate(*std::ranges::min_element(rates)) + "-" +
         format_rate(*std::ranges::max_element(rates)) + "]";
}

// The benchmarks' command lines: `--quick` sets *quick; every other argument is `--NAME VALUE`,
// given to on_option(name, value), which returns false for an unknown name or a bad value. False
// when an argument is refused or a value is missing.
inline bool parse_args(int argc, char** argv, bool* quick,
                       const std::function<bool(std::string_view, const std::string&)>& on_option) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--quick") {
      *quick = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    if (!on_option(a, argv[++i])) return false;
  }
  return true;
}

}  // namespace hwarb::bench

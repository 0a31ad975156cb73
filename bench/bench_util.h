// bench/bench_util.h — what every benchmark driver in bench/ shares: the clock, the median, the
// calibrated timing loop, deterministic randomness and the formatting of rates and ratios in the
// result tables.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hwarb::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

// "median [min-max]" of rates, e.g. "26.79M [26.71M-26.84M]"; "0 [0-0]" for no values.
inline std::string rate_range(const std::vector<double>& rates) {
  if (rates.empty()) return "0 [0-0]";
  return format_rate(median(rates)) + " [" + format_rate(*std::ranges::min_element(rates)) + "-" +
         format_rate(*std::ranges::max_element(rates)) + "]";
}

// A benchmark driver's command line, declared once per option: `--quick` is always known; every
// other option is `--NAME VALUE`, parsed into a typed target with its bounds. parse() refuses an
// unknown option, a missing value, a value that is not a whole number of the target's type or is
// out of bounds, naming the option and the reason, then prints the usage generated from the
// declarations. A refused command line leaves the targets partly set: the driver exits.
class Args {
 public:
  explicit Args(std::string program) : program_(std::move(program)) {}

  // An integer (int, std::uint64_t, std::size_t ...) or a double, in [lo, hi].
  template <typename T>
  Args& number(std::string name, std::string metavar, T* out, T lo,
               T hi = std::numeric_limits<T>::max()) {
    return add(std::move(name), std::move(metavar),
               [out, lo, hi](const std::string& v) { return read_number(v, lo, hi, out); });
  }
  // The same, remembered as given (the driver then overrides --quick's presets with it).
  template <typename T>
  Args& number(std::string name, std::string metavar, std::optional<T>* out, T lo,
               T hi = std::numeric_limits<T>::max()) {
    return add(std::move(name), std::move(metavar), [out, lo, hi](const std::string& v) {
      T value{};
      std::string why = read_number(v, lo, hi, &value);
      if (why.empty()) *out = value;
      return why;
    });
  }
  // One of `choices`.
  Args& choice(std::string name, std::string* out, std::vector<std::string> choices) {
    std::string metavar;
    for (const auto& c : choices) metavar += (metavar.empty() ? "" : "|") + c;
    return add(std::move(name), metavar, [out, choices](const std::string& v) -> std::string {
      if (std::ranges::find(choices, v) == choices.end()) return "'" + v + "' is not one of them";
      *out = v;
      return {};
    });
  }
  // Any text (a file name).
  Args& text(std::string name, std::string metavar, std::string* out) {
    return add(std::move(name), std::move(metavar), [out](const std::string& v) {
      *out = v;
      return std::string();
    });
  }

  // "usage: NAME [--quick] [--reps N] ...".
  [[nodiscard]] std::string usage() const {
    std::string out = "usage: " + program_ + " [--quick]";
    for (const auto& o : options_) out += " [" + o.name + " " + o.metavar + "]";
    return out;
  }

  // True when every argument was taken; else the reason and the usage on stderr.
  [[nodiscard]] bool parse(int argc, char** argv, bool* quick) const {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--quick") {
        *quick = true;
        continue;
      }
      const auto it = std::ranges::find(options_, a, &Option::name);
      std::string why;
      if (it == options_.end()) {
        why = std::string(a) + ": unknown option";
      } else if (i + 1 >= argc) {
        why = std::string(a) + ": needs a value (" + it->metavar + ")";
      } else if (std::string reason = it->set(argv[++i]); !reason.empty()) {
        why = std::string(a) + ": " + reason;
      }
      if (!why.empty()) {
        std::fprintf(stderr, "%s: %s\n%s\n", program_.c_str(), why.c_str(), usage().c_str());
        return false;
      }
    }
    return true;
  }

 private:
  struct Option {
    std::string name;  // "--reps"
    std::string metavar;
    std::function<std::string(const std::string&)> set;  // empty string: taken; else the reason
  };

  Args& add(std::string name, std::string metavar,
            std::function<std::string(const std::string&)> set) {
    options_.push_back({"--" + std::move(name), std::move(metavar), std::move(set)});
    return *this;
  }

  template <typename T>
  static std::string read_number(const std::string& v, T lo, T hi, T* out) {
    T value{};
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size()) return "'" + v + "' is not a number";
    if (value < lo || value > hi) {
      return "'" + v + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    }
    *out = value;
    return {};
  }

  std::string program_;
  std::vector<Option> options_;
};

// A driver's main(): parse the command line (exit 2 when it is refused), then run.
template <typename Options>
int driver_main(int argc, char** argv, std::optional<Options> (*parse)(int, char**),
                int (*run)(const Options&)) {
  const std::optional<Options> options = parse(argc, argv);
  if (!options) return 2;
  return run(*options);
}

}  // namespace hwarb::bench

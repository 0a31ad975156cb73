#include "hwarb/gdb/gdb_signals.h"

#include <array>

namespace hwarb::gdb {
namespace {

// gdb's number for each Linux signal 0..31 (the table in the header).
constexpr std::array<int, 32> kToGdb = {
    0,  1,  2,  3,  4,  5,  6,  10, 8,  9,  30, 11, 31, 13, 14, 15, kGdbSignalUnknown,
    20, 19, 17, 18, 21, 22, 16, 24, 25, 26, 27, 28, 23, 32, 12,
};

}  // namespace

int gdb_signal_from_linux(int signal) {
  if (signal >= 0 && signal < static_cast<int>(kToGdb.size())) {
    return kToGdb[static_cast<std::size_t>(signal)];
  }
  if (signal == 32) return 77;
  if (signal >= 33 && signal <= 63) return 45 + (signal - 33);
  if (signal == 64) return 78;
  return kGdbSignalUnknown;
}

std::optional<int> linux_signal_from_gdb(int signal) {
  if (signal == 33) return 29;  // SIGPOLL: Linux's SIGIO
  if (signal == 77) return 32;
  if (signal >= 45 && signal <= 75) return 33 + (signal - 45);
  if (signal == 78) return 64;
  for (std::size_t i = 0; i < kToGdb.size(); ++i) {
    if (kToGdb[i] == signal && signal != kGdbSignalUnknown) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace hwarb::gdb

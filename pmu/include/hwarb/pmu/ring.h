// hwarb/pmu/ring.h — a bounded ring buffer of samples.
//
// Contract:
//  - Fixed capacity, chosen at creation (>= 1). No allocation after construction.
//  - Overflow policy (RingMode):
//      kOverwrite     the oldest sample is dropped to make room for the new one (perf's
//                     overwrite / snapshot mode); every dropped sample counts as lost.
//      kStopWhenFull  the new sample is dropped while the ring is full (perf's default: the
//                     producer never overruns the reader); every dropped sample counts as lost.
//  - lost() counts dropped samples since creation (or the last clear()).
//  - Deterministic; not thread-safe (callers serialise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "hwarb/pmu/sample.h"

namespace hwarb::pmu {

enum class RingMode : std::uint8_t { kOverwrite, kStopWhenFull };

class SampleRing {
 public:
  // capacity 0 is treated as 1.
  SampleRing(std::size_t capacity, RingMode mode);

  std::size_t capacity() const { return buf_.size(); }
  RingMode mode() const { return mode_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == buf_.size(); }
  std::uint64_t lost() const { return lost_; }
  // Samples pushed and kept (not counting lost ones) since creation or clear().
  std::uint64_t pushed() const { return pushed_; }

  // Returns false when the sample (kStopWhenFull) or the oldest one (kOverwrite) was dropped.
  bool push(const Sample& s);
  // Oldest first; nullopt when empty.
  std::optional<Sample> pop();
  // i-th sample, 0 = oldest. Requires i < size().
  const Sample& at(std::size_t i) const;
  // All held samples, oldest first, and empties the ring.
  std::vector<Sample> drain();
  void clear();

 private:
  std::vector<Sample> buf_;
  RingMode mode_;
  std::size_t head_ = 0;  // index of the oldest
  std::size_t size_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t pushed_ = 0;
};

}  // namespace hwarb::pmu

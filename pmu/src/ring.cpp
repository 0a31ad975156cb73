#include "hwarb/pmu/ring.h"

#include "hwarb/base/check.h"

namespace hwarb::pmu {

SampleRing::SampleRing(std::size_t capacity, RingMode mode)
    : buf_(capacity == 0 ? 1 : capacity), mode_(mode) {}

bool SampleRing::push(const Sample& s) {
  if (full()) {
    ++lost_;
    if (mode_ == RingMode::kStopWhenFull) return false;
    buf_[head_] = s;  // overwrite the oldest
    head_ = (head_ + 1) % buf_.size();
    ++pushed_;
    return false;
  }
  buf_[(head_ + size_) % buf_.size()] = s;
  ++size_;
  ++pushed_;
  return true;
}

std::optional<Sample> SampleRing::pop() {
  if (empty()) return std::nullopt;
  Sample s = buf_[head_];
  head_ = (head_ + 1) % buf_.size();
  --size_;
  return s;
}

const Sample& SampleRing::at(std::size_t i) const {
  HWARB_CHECK(i < size_, "SampleRing::at out of range");
  return buf_[(head_ + i) % buf_.size()];
}

std::vector<Sample> SampleRing::drain() {
  std::vector<Sample> out;
  out.reserve(size_);
  while (auto s = pop()) out.push_back(*s);
  return out;
}

void SampleRing::clear() {
  head_ = size_ = 0;
  lost_ = pushed_ = 0;
}

}  // namespace hwarb::pmu

#include "hwarb/sim/branch_walk.h"

#include <string>

namespace hwarb::sim {

namespace {

constexpr std::uint64_t kMaxBlockBytes = 64;
constexpr std::uint32_t kPredictedPercent = 90;

}  // namespace

std::uint64_t BranchWalk::draw() {
  state_ += 0x9e3779b97f4a7c15;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

std::uint32_t BranchWalk::below(std::uint32_t bound) {
  return static_cast<std::uint32_t>(((draw() >> 32) * bound) >> 32);
}

Result<BranchWalk> BranchWalk::generate(std::uint64_t seed, const WalkConfig& config) {
  if (config.user_blocks < 1) {
    return make_error(ErrorCode::kInval,
                      "user_blocks: " + std::to_string(config.user_blocks) + " is below 1");
  }
  if (config.kernel_blocks < 0) {
    return make_error(ErrorCode::kInval,
                      "kernel_blocks: " + std::to_string(config.kernel_blocks) + " is negative");
  }
  if (config.user_blocks > kMaxWalkBlocks - config.kernel_blocks) {
    return make_error(ErrorCode::kInval, "kernel_blocks: " + std::to_string(config.kernel_blocks) +
                                             " with " + std::to_string(config.user_blocks) +
                                             " user blocks exceeds the " +
                                             std::to_string(kMaxWalkBlocks) + " blocks of a walk");
  }
  if (config.format != x86::BtsFormat::k32 && config.format != x86::BtsFormat::k64) {
    return make_error(ErrorCode::kInval, "format: is neither k32 nor k64");
  }
  const auto users = static_cast<std::uint32_t>(config.user_blocks);
  const auto kernels = static_cast<std::uint32_t>(config.kernel_blocks);
  BranchWalk w;
  w.format_ = config.format;
  w.state_ = seed;
  w.user_blocks_ = users;
  w.blocks_.resize(users + kernels);
  w.stack_.reserve(kWalkMaxCallDepth);

  // Kinds and targets first, block by block, then the length that fits the kind.
  std::uint64_t addr = kWalkUserBase;
  for (std::uint32_t i = 0; i < users + kernels; ++i) {
    WalkBlock& b = w.blocks_[i];
    const bool kernel = i >= users;
    // This block's space: [first, last] block indices.
    const std::uint32_t first = kernel ? users : 0;
    const std::uint32_t last = kernel ? users + kernels - 1 : users - 1;
    if (i == users) {
      addr = config.format == x86::BtsFormat::k64 ? kWalkKernelBase64 : kWalkKernelBase32;
    }
    b.kernel = kernel;
    b.taken_percent = 100;
    if (i == 0) {
      b.kind = BranchKind::kIndirect;
    } else if (i == last) {
      b.kind = kernel ? BranchKind::kSysret : BranchKind::kJump;
    } else if (i == users - 2 && kernels > 0) {
      b.kind = BranchKind::kSyscall;
    } else {
      const std::uint32_t roll = w.below(100);
      if (kernel) {
        b.kind = roll < 60   ? BranchKind::kConditional
                 : roll < 85 ? BranchKind::kJump
                             : BranchKind::kSysret;
      } else {
        b.kind = roll < 45     ? BranchKind::kConditional
                 : roll < 60   ? BranchKind::kJump
                 : roll < 75   ? BranchKind::kCall
                 : roll < 90   ? BranchKind::kReturn
                 : kernels > 0 ? BranchKind::kSyscall
                               : BranchKind::kConditional;
      }
    }
    switch (b.kind) {
      case BranchKind::kConditional:
        b.target = first + w.below(last - first + 1);
        b.taken_percent = static_cast<std::uint8_t>(10 + w.below(81));
        break;
      case BranchKind::kJump:
      case BranchKind::kCall:
        // Forward only (the last user block's jump back to the entry excepted).
        b.target = i == last ? 0 : i + 1 + w.below(last - i);
        break;
      case BranchKind::kReturn:
      case BranchKind::kIndirect:
      case BranchKind::kSyscall:
      case BranchKind::kSysret:
        b.target = 0;
        break;
    }
    const std::uint64_t size = branch_instruction_size(b.kind);
    const std::uint64_t length =
        size + w.below(static_cast<std::uint32_t>(kMaxBlockBytes - size + 1));
    b.start = addr;
    b.branch = addr + length - size;
    b.end = addr + length;
    addr = b.end;
  }
  return w;
}

TakenBranch BranchWalk::next() {
  for (;;) {
    const WalkBlock& b = blocks_[current_];
    TakenBranch t{b.branch, 0, true, b.kind};
    std::uint32_t to = 0;
    switch (b.kind) {
      case BranchKind::kConditional:
        if (below(100) >= b.taken_percent) {
          ++current_;  // not taken: falls through, no record
          continue;
        }
        to = b.target;
        t.predicted = below(100) < kPredictedPercent;
        break;
      case BranchKind::kJump:
        to = b.target;
        break;
      case BranchKind::kCall:
        if (stack_.size() < kWalkMaxCallDepth) stack_.push_back(current_ + 1);
        to = b.target;
        break;
      case BranchKind::kReturn:
        if (stack_.empty()) {
          t.predicted = false;
        } else {
          to = stack_.back();
          stack_.pop_back();
        }
        break;
      case BranchKind::kIndirect:
        to = user_blocks_ == 1 ? 0 : 1 + below(user_blocks_ - 1);
        t.predicted = to == last_indirect_;
        last_indirect_ = to;
        break;
      case BranchKind::kSyscall:
        sysret_to_ = current_ + 1;
        to = user_blocks_;
        break;
      case BranchKind::kSysret:
        to = sysret_to_;
        break;
    }
    current_ = to;
    t.to = blocks_[to].start;
    ++branches_;
    return t;
  }
}

}  // namespace hwarb::sim

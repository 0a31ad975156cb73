// hwarb/sim/branch_walk.h — a deterministic random walk over a generated control-flow graph: the
// taken branches of a made-up program, for driving Machine::branch()/run() in volume.
//
// Contract:
//  - generate(seed, config) builds the graph from the seed alone with a SplitMix64 generator of
//    its own (no <random> distributions: they differ between standard libraries), and the walk
//    draws from the same generator. The same seed and config give the same blocks and the same
//    branch sequence, always and everywhere.
//  - Every address fits the format (32 bits for k32): user blocks from kWalkUserBase; kernel blocks
//    from kWalkKernelBase64 (k64) or kWalkKernelBase32 (k32), both at or above the format's kernel
//    start (Machine::kernel_start()), user blocks below it.
//  - next() never fails and never ends: the graph has no dead end.
//
// The graph's shape. Blocks lie back to back (a block's end is the next block's start); each is
// 1..64 bytes long and ends with one branch instruction at its last instruction address
// (`branch`), whose size depends on its kind (branch_instruction_size: conditional 2, jump 5, call
// 5, return 1, indirect jump 2, syscall 2, sysret 3 bytes; a block may be the branch alone).
//  - User blocks 0 .. user_blocks-1. Block 0, the entry block, is a dispatcher: an indirect jump
//    to a pseudo-random user block other than itself (to itself when it is the only one),
//    predicted when it goes where it went last time (not the first time). The last user block jumps
//    back to the entry block. With kernel blocks and at least three user blocks, the one before the
//    last is a syscall, so the kernel is always reachable. The others end in:
//      conditional (taken with a per-block probability of 10..90 %, to any user block, itself
//        included; not taken it falls through to the next block and produces no record),
//      jump (to a later user block, so jumps alone never loop),
//      call (to a later user block; pushes the next block as the return address, unless the
//        call stack already holds kWalkMaxCallDepth addresses: then it acts as a jump),
//      return (pops the return address; with an empty stack it jumps to the entry block),
//      syscall (only when kernel_blocks > 0: to the kernel entry block, the first kernel block;
//        the next user block is where the sysret goes).
//  - Kernel blocks user_blocks .. user_blocks+kernel_blocks-1 end in conditionals (within the
//    kernel blocks, falling through to the next kernel block), jumps (to a later kernel block) or
//    sysret (back to the user block after the syscall); the last kernel block is a sysret. There
//    is no kernel call stack.
//  - No loop escapes randomness: jumps and calls only go forward, so every cycle of the graph
//    goes back through a conditional or through the dispatcher.
//  - Predicted: a pseudo-random 90 % of taken conditionals; a return when it popped an address
//    (not for the empty-stack fallback); always for jumps, calls, syscalls and sysrets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/x86/bts.h"

namespace hwarb::sim {

inline constexpr std::uint64_t kWalkUserBase = 0x400000;
inline constexpr std::uint64_t kWalkKernelBase64 = 0xffffffff81000000;
inline constexpr std::uint64_t kWalkKernelBase32 = 0xc1000000;
inline constexpr int kMaxWalkBlocks = 1 << 16;  // user + kernel blocks
inline constexpr std::size_t kWalkMaxCallDepth = 64;

struct WalkConfig {
  int user_blocks = 64;    // >= 1
  int kernel_blocks = 16;  // >= 0; user_blocks + kernel_blocks <= kMaxWalkBlocks
  x86::BtsFormat format = x86::BtsFormat::k64;
};

enum class BranchKind : std::uint8_t {
  kConditional,
  kJump,
  kCall,
  kReturn,
  kIndirect,
  kSyscall,
  kSysret,
};

// Bytes of the branch instruction that ends a block of this kind, in BranchKind order: jcc rel8,
// jmp rel32, call rel32, ret, jmp *%rax, syscall, sysretq.
constexpr std::uint64_t branch_instruction_size(BranchKind kind) {
  constexpr std::array<std::uint8_t, 7> kBytes = {2, 5, 5, 1, 2, 2, 3};
  return kBytes[static_cast<std::size_t>(kind)];
}

// One generated basic block.
struct WalkBlock {
  std::uint64_t start = 0;   // first byte
  std::uint64_t branch = 0;  // address of the terminating branch instruction
  std::uint64_t end = 0;     // one past the last byte: the next block's start
  BranchKind kind = BranchKind::kJump;
  std::uint32_t target = 0;        // block index: conditional, jump and call; 0 otherwise
  std::uint8_t taken_percent = 0;  // conditional: chance of being taken; 100 for the others
  bool kernel = false;
};

// One taken branch.
struct TakenBranch {
  std::uint64_t from = 0;  // the branch instruction's address
  std::uint64_t to = 0;    // the block it goes to
  bool predicted = false;
  BranchKind kind = BranchKind::kJump;
  friend bool operator==(const TakenBranch&, const TakenBranch&) = default;
};

class BranchWalk {
 public:
  // EINVAL for user_blocks < 1, kernel_blocks < 0, more than kMaxWalkBlocks blocks, or a format
  // that is neither k32 nor k64.
  static Result<BranchWalk> generate(std::uint64_t seed, const WalkConfig& config = {});

  // The next taken branch (not-taken conditionals are walked through silently).
  TakenBranch next();

  std::uint64_t entry() const { return blocks_.front().start; }
  std::size_t blocks() const { return blocks_.size(); }
  std::uint64_t branches() const { return branches_; }  // taken so far
  x86::BtsFormat format() const { return format_; }
  // The generated blocks: user blocks first, in address order, then the kernel blocks.
  std::span<const WalkBlock> layout() const { return blocks_; }

 private:
  BranchWalk() = default;
  std::uint64_t draw();                      // SplitMix64
  std::uint32_t below(std::uint32_t bound);  // in [0, bound), bound >= 1

  std::vector<WalkBlock> blocks_;
  std::uint32_t user_blocks_ = 0;  // the kernel entry block's index (== blocks() without kernel)
  std::uint32_t last_indirect_ = UINT32_MAX;  // the dispatcher's last target; none yet
  x86::BtsFormat format_ = x86::BtsFormat::k64;
  std::uint64_t state_ = 0;
  std::uint32_t current_ = 0;
  std::uint32_t sysret_to_ = 0;
  std::vector<std::uint32_t> stack_;  // return block indices
  std::uint64_t branches_ = 0;
};

}  // namespace hwarb::sim

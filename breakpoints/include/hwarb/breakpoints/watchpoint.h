// hwarb/breakpoints/watchpoint.h — watchpoints as debugger users ask for them (beyond what
// Linux offers), built on the hw_breakpoint API.
//
//  - A watchpoint is a byte range [addr, addr+len) of any length and alignment, watched for
//    writes (w), reads and writes (rw) or execution (x: one instruction at addr, len 1). It is
//    either a task's (on every CPU) or wide (every online CPU, any task).
//  - split_range() covers the range with the fewest naturally aligned 1/2/4/8-byte pieces (greedy
//    from the low end: the largest aligned size that still fits). Each piece is one breakpoint.
//    Its cost is linear in the pieces (at most len/max_len + 2*log2(max_len)); count_pieces()
//    gives their number without making them, in O(log max_len). A watchpoint is at most
//    kMaxWatchLen bytes, so watch() makes at most kMaxWatchLen/8 + 6 pieces, and its cost is
//    O(pieces * log) (times the online CPUs for a wide one).
//  - Sharing: identical pieces (same owner, address, length and type) share one breakpoint,
//    reference counted; the breakpoint goes with its last user.
//  - watch() is all or nothing: the pieces that are not shared yet are opened together with
//    Core::open_all. Not enough registers: ENOSPC, and the message says why (the arbiter's
//    explanation for the registers still needed).
//  - Hits: one report per access per watchpoint, however many of its pieces the access touched,
//    with the value before and after the access (see WatchHit); an optional condition on the new
//    value filters reports. Reports of one access come in the order the hardware reports the
//    registers (DR0 first), and for a shared register in WatchId order.
// Not thread-safe: the Core's caller serialises.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/hw_breakpoint.h"

namespace hwarb::breakpoints {

struct Piece {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  friend bool operator==(const Piece&, const Piece&) = default;
};
// Fewest aligned pieces of at most max_len bytes (a power of two) covering [addr, addr+len)
// exactly. len >= 1 and the range must not wrap (the caller checks); the caller bounds len (the
// result holds about len/max_len pieces).
std::vector<Piece> split_range(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len = 8);
// split_range(addr, len, max_len).size(), without making the pieces.
std::uint64_t count_pieces(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len = 8);

// The longest watchpoint, bytes (1 MiB, as the CLI's watch expressions): watch() refuses longer
// ones with EINVAL. Anything longer than 8 * the debug registers never fits anyway.
inline constexpr std::uint64_t kMaxWatchLen = std::uint64_t{1} << 20;

using WatchId = std::uint64_t;  // 1, 2, ... never reused

struct WatchSpec {
  std::optional<TaskId> task;  // none: wide (all online CPUs)
  std::uint64_t addr = 0;
  std::uint64_t len = 4;
  pmu::BpType type = pmu::BpType::kW;
  // Reports only hits whose new value satisfies it (data watchpoints only).
  std::function<bool(std::uint64_t)> condition;
};

struct WatchHit {
  WatchId id = 0;
  pmu::Sample sample;
  // Data watchpoints: the watched value before and after the access (reads: both the value).
  // For a watchpoint of at most 8 bytes that is the whole range, little-endian; for a longer one
  // the bytes of the access that fall into the range. has_value is false when the sample carries
  // no value of the range (size 0, or its bytes miss the range): the values are 0 then.
  bool has_value = false;
  std::uint64_t old_value = 0;
  std::uint64_t new_value = 0;
};
using WatchHandler = std::function<void(const WatchHit&)>;
// Reads a task's memory (after the access) to complete the watched value. May be empty: then the
// values are the access's bytes that fall into the range.
using MemoryReader = std::function<Result<std::uint64_t>(TaskId, std::uint64_t addr, int size)>;

class Watchpoints {
 public:
  Watchpoints(HwBreakpoints& api, const arbiter::Arbiter& arbiter, MemoryReader reader = {})
      : api_(api), arbiter_(arbiter), reader_(std::move(reader)) {}
  ~Watchpoints();
  Watchpoints(const Watchpoints&) = delete;
  Watchpoints& operator=(const Watchpoints&) = delete;

  // Errors: EINVAL naming the field (len 0 or above kMaxWatchLen, wrap, x with len != 1, a
  // condition on x, r on x86 ...), the arbiter's refusal (ENOSPC with the reason), a piece's
  // validation error.
  Result<WatchId> watch(const WatchSpec& spec, WatchHandler handler);
  Result<void> unwatch(WatchId id);  // ENOENT if unknown
  // Drops the task's watchpoints (its breakpoints are gone with it).
  void forget_task(TaskId task);

  // The pieces of a watchpoint and the breakpoint events behind each (one per CPU for wide).
  std::vector<Piece> pieces(WatchId id) const;
  std::vector<pmu::EventId> events(WatchId id) const;
  // Users of the breakpoint behind `event` (several when shared), ascending; empty if none.
  std::vector<WatchId> users_of(pmu::EventId event) const;
  std::size_t shared_pieces() const { return shared_.size(); }
  std::size_t size() const { return watches_.size(); }

 private:
  struct Key {
    std::int64_t task;  // -1: wide
    std::uint64_t addr;
    std::uint64_t len;
    pmu::BpType type;
    auto operator<=>(const Key&) const = default;
  };
  struct Shared {
    std::vector<BreakpointHandle> handles;  // one, or one per CPU for wide
    std::set<WatchId> users;                // ascending
  };
  struct Watch {
    WatchSpec spec;
    WatchHandler handler;
    std::vector<Key> keys;
    // The last access reported (dedup of several pieces hit by one access).
    std::optional<pmu::Sample> last;
  };

  void on_hit(const Key& key, const pmu::Sample& sample);
  WatchHit make_hit(WatchId id, const Watch& w, const pmu::Sample& s) const;
  void release_keys(WatchId id, const std::vector<Key>& keys);

  HwBreakpoints& api_;
  const arbiter::Arbiter& arbiter_;
  MemoryReader reader_;
  std::map<Key, Shared> shared_;
  std::map<pmu::EventId, Key> key_of_;  // the piece behind each of shared_'s events
  std::map<WatchId, Watch> watches_;
  std::map<std::int64_t, std::set<WatchId>> by_owner_;  // Key::task -> its watchpoints
  WatchId next_id_ = 1;
};

}  // namespace hwarb::breakpoints

// hwarb/arbiter/profile.h — which slot pools a CPU has.
//
// An arch profile names the breakpoint slot pools of one CPU. Every CPU of a machine has the same
// profile. A breakpoint's pool follows its type: execute breakpoints use the instruction pool,
// read/write/read-write ones the data pool. On a shared profile (x86) both names refer to the
// same single pool.
//
//   profile   pools                         notes
//   x86_64    one shared pool of 4          data len 1, 2, 4, 8
//   i386      one shared pool of 4          data len 1, 2, 4 (no 8-byte length)
//   arm64     6 instruction + 4 data        separate pools
//   custom    inst_slots + data_slots       shared (then inst_slots == data_slots) or separate
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::arbiter {

// The largest pool any profile may have. Histograms are sized by it.
inline constexpr int kMaxSlots = 32;

// Linux's bp_type_idx: which pool a breakpoint draws from.
enum class SlotType : std::uint8_t { kInst = 0, kData = 1 };
std::string_view to_string(SlotType type);

class ArchProfile {
 public:
  static ArchProfile x86_64();
  static ArchProfile i386();
  static ArchProfile arm64();
  // EINVAL (naming the field) unless 1 <= slots <= kMaxSlots, and, when shared,
  // inst_slots == data_slots.
  static Result<ArchProfile> custom(int inst_slots, int data_slots, bool shared);
  // "x86_64", "i386", "arm64"; anything else is EINVAL naming `arch`.
  static Result<ArchProfile> by_name(std::string_view name);

  const std::string& name() const { return name_; }
  bool shared() const { return shared_; }
  // Number of distinct pools: 1 when shared, else 2.
  int pool_count() const { return shared_ ? 1 : 2; }
  // Pool index of a slot type: always 0 when shared; kInst -> 0, kData -> 1 otherwise.
  int pool_of(SlotType type) const { return shared_ ? 0 : static_cast<int>(type); }
  // Slots in the pool of `type`.
  int slots(SlotType type) const { return slots_[pool_of(type)]; }
  int pool_slots(int pool) const { return slots_[pool]; }
  // "shared", "inst" or "data".
  std::string_view pool_name(int pool) const;
  // Largest data breakpoint length in bytes (8 on 64-bit, 4 on i386).
  int max_data_len() const { return max_data_len_; }

  friend bool operator==(const ArchProfile&, const ArchProfile&) = default;

 private:
  ArchProfile(std::string name, int inst, int data, bool shared, int max_data_len)
      : name_(std::move(name)), slots_{inst, data}, shared_(shared), max_data_len_(max_data_len) {}

  std::string name_;
  int slots_[2];
  bool shared_;
  int max_data_len_;
};

}  // namespace hwarb::arbiter

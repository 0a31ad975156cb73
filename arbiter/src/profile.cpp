#include "hwarb/arbiter/profile.h"

namespace hwarb::arbiter {

std::string_view to_string(SlotType type) {
  return type == SlotType::kInst ? "inst" : "data";
}

ArchProfile ArchProfile::x86_64() {
  return ArchProfile("x86_64", 4, 4, true, 8);
}
ArchProfile ArchProfile::i386() {
  return ArchProfile("i386", 4, 4, true, 4);
}
ArchProfile ArchProfile::arm64() {
  return ArchProfile("arm64", 6, 4, false, 8);
}

Result<ArchProfile> ArchProfile::custom(int inst_slots, int data_slots, bool shared) {
  if (inst_slots < 1 || inst_slots > kMaxSlots) {
    return make_error(ErrorCode::kInval, "inst_slots: must be in 1.." + std::to_string(kMaxSlots) +
                                             ", got " + std::to_string(inst_slots));
  }
  if (data_slots < 1 || data_slots > kMaxSlots) {
    return make_error(ErrorCode::kInval, "data_slots: must be in 1.." + std::to_string(kMaxSlots) +
                                             ", got " + std::to_string(data_slots));
  }
  if (shared && inst_slots != data_slots) {
    return make_error(ErrorCode::kInval,
                      "data_slots: a shared pool needs inst_slots == data_slots, got " +
                          std::to_string(inst_slots) + " and " + std::to_string(data_slots));
  }
  return ArchProfile("custom", inst_slots, data_slots, shared, 8);
}

Result<ArchProfile> ArchProfile::by_name(std::string_view name) {
  if (name == "x86_64") return x86_64();
  if (name == "i386") return i386();
  if (name == "arm64") return arm64();
  return make_error(ErrorCode::kInval,
                    "arch: unknown profile '" + std::string(name) + "' (x86_64, i386, arm64)");
}

std::string_view ArchProfile::pool_name(int pool) const {
  if (shared_) return "shared";
  return pool == 0 ? "inst" : "data";
}

}  // namespace hwarb::arbiter

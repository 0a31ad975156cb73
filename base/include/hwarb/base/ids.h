// hwarb/base/ids.h — strong ids.
//
// TaskId, CpuId and RequestId are distinct types so that a CPU can never be passed where a task
// is expected. "All CPUs" is std::optional<CpuId>{} — never -1.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace hwarb {

template <typename Tag, typename Rep>
class StrongId {
 public:
  using rep_type = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  constexpr Rep value() const { return value_; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

 private:
  Rep value_{};
};

struct TaskIdTag {};
struct CpuIdTag {};
struct RequestIdTag {};

// A schedulable task (a thread on Linux, a simulated task on sim).
using TaskId = StrongId<TaskIdTag, std::int64_t>;
// A CPU index in [0, possible CPUs).
using CpuId = StrongId<CpuIdTag, std::int32_t>;
// The caller's name for a request, used by explanations ("held by request 7"); 0 = anonymous.
using RequestId = StrongId<RequestIdTag, std::uint64_t>;

inline std::string to_string(TaskId t) {
  return "task " + std::to_string(t.value());
}
inline std::string to_string(CpuId c) {
  return "cpu " + std::to_string(c.value());
}

}  // namespace hwarb

template <typename Tag, typename Rep>
struct std::hash<hwarb::StrongId<Tag, Rep>> {
  std::size_t operator()(hwarb::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};

// tests/property/model.h — a plain sequential model of the arbiter, used as the test oracle.
//
// The model keeps the list of live requests and decides every admission by recomputing each
// CPU's usage from that list (no incremental counters), applying the rules of the comment in
// hwarb/arbiter/arbiter.h literally. It is deliberately slow and simple: it is the oracle.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"

namespace hwarb::model {

using arbiter::ArbiterConfig;
using arbiter::FlexiblePolicy;
using arbiter::Request;
using arbiter::ResourceKind;

// The model's name for a live reservation. Never reused within one Model.
using Handle = std::uint64_t;

struct LiveRequest {
  Handle handle = 0;
  Request request;
};

// Usage of one pool on one CPU, recomputed by the model from its live list, in the arbiter's
// own reporting type.
using Usage = arbiter::PoolUsage;

bool is_exclusive(ResourceKind kind);

class Model {
 public:
  explicit Model(const ArbiterConfig& config);

  const ArbiterConfig& config() const { return config_; }
  int cpus() const { return config_.cpus; }

  // Why `request` would be refused now; nullopt when it would be admitted. Changes nothing.
  // EINVAL when the request is malformed (checked for every request of a batch first).
  std::optional<ErrorCode> invalid(const Request& request) const;
  // placing: the request is being placed on its CPU (reserve, or a modify that moves it), so an
  // offline CPU refuses it with ENODEV.
  std::optional<ErrorCode> refusal(const Request& request, bool placing = true) const;

  std::expected<Handle, ErrorCode> reserve(const Request& request);
  // In order, each seeing the ones before it; all or nothing.
  std::expected<std::vector<Handle>, ErrorCode> reserve_all(std::span<const Request> requests);
  // Task or kind change: EINVAL. Otherwise removes the old request, admits `next`, and puts the
  // old one back unchanged when `next` is refused. `handle` must be live.
  std::expected<void, ErrorCode> modify(Handle handle, const Request& next);
  // Removes the request; no-op for a handle that is not live.
  void release(Handle handle);

  std::expected<void, ErrorCode> set_cpu_online(int cpu, bool online);
  bool cpu_online(int cpu) const { return online_[static_cast<std::size_t>(cpu)]; }

  bool is_used() const { return !live_.empty(); }
  const std::vector<LiveRequest>& live() const { return live_; }
  // nullptr when not live.
  const Request* find(Handle handle) const;

  // Recomputed usage of `pool` on `cpu`, under the configured policy (with kAsPinned every
  // request counts as pinned, so flexible_reserve and flexible_count are 0).
  Usage usage(int cpu, int pool) const;
  // Live requests of an exclusive kind.
  int exclusive_count(ResourceKind kind) const;

  std::string to_string() const;

 private:
  bool counts_pinned(const Request& r) const;
  // Whether the breakpoint request `r` fits on `cpu` in its pool (cases 1, 2 and 4).
  bool fits_on(const Request& r, int cpu) const;

  ArbiterConfig config_;
  std::vector<bool> online_;
  std::vector<LiveRequest> live_;
  Handle next_handle_ = 1;
};

// "bp#3 task 1 cpu all data w1 pinned".
std::string describe(const Request& r);
// "custom(inst 2, data 3) cpus 4 flexible=multiplexed".
std::string describe(const ArbiterConfig& config);

// "ENOSPC" or "ok".
std::string outcome_name(const std::optional<ErrorCode>& error);

// Releases `r` in one of the three ways a caller can (way % 3): Arbiter::release,
// Reservation::release, or destroying the handle.
inline void release_by(arbiter::Arbiter& a, arbiter::Reservation& r, unsigned way) {
  switch (way % 3) {
    case 0:
      a.release(r);
      break;
    case 1:
      r.release();
      break;
    default: {
      arbiter::Reservation gone = std::move(r);
    } break;
  }
}

// The error code of a result (nullopt on success), for comparing the system with the model.
template <typename T>
std::optional<ErrorCode> code_of(const Result<T>& r) {
  if (r) return std::nullopt;
  return r.error().code();
}
template <typename T>
std::optional<ErrorCode> code_of(const std::expected<T, ErrorCode>& r) {
  if (r) return std::nullopt;
  return r.error();
}

}  // namespace hwarb::model

#include "model.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "hwarb/base/check.h"

namespace hwarb::model {

bool is_exclusive(ResourceKind kind) {
  return kind != ResourceKind::kBreakpoint;
}

std::string outcome_name(const std::optional<ErrorCode>& error) {
  return error ? errno_name(*error) : std::string("ok");
}

Model::Model(const ArbiterConfig& config)
    : config_(config), online_(static_cast<std::size_t>(config.cpus), true) {}

bool Model::counts_pinned(const Request& r) const {
  return r.pinned || config_.flexible == FlexiblePolicy::kAsPinned;
}

Usage Model::usage(int cpu, int pool) const {
  Usage u;
  std::map<std::int64_t, int> task_pinned;  // TP(T, cpu)
  for (const LiveRequest& l : live_) {
    const Request& r = l.request;
    if (is_exclusive(r.kind)) continue;
    if (config_.profile.pool_of(r.type) != pool) continue;
    // Can this request run on `cpu`? CPU-bound or task-on-cpu: only there; task-on-all: anywhere.
    const bool on_cpu = !r.cpu || r.cpu->value() == cpu;
    if (!on_cpu) continue;
    if (counts_pinned(r)) {
      if (r.task) {
        task_pinned[r.task->value()] += r.weight;
      } else {
        u.cpu_pinned += r.weight;
      }
    } else {
      u.flexible_reserve = std::max(u.flexible_reserve, r.weight);
      ++u.flexible_count;
    }
  }
  for (const auto& [task, weight] : task_pinned) {
    u.max_task_pinned = std::max(u.max_task_pinned, weight);
  }
  return u;
}

bool Model::fits_on(const Request& r, int cpu) const {
  const int pool = config_.profile.pool_of(r.type);
  const int n = config_.profile.pool_slots(pool);
  const Usage u = usage(cpu, pool);
  const int w = r.weight;
  if (!counts_pinned(r)) {
    // Cases 4 and 5: CP[c] + max_T TP(T,c) + max(R[c], w) <= N.
    return u.cpu_pinned + u.max_task_pinned + std::max(u.flexible_reserve, w) <= n;
  }
  if (!r.task) {
    // Case 1: CP[c] + max_T TP(T,c) + w + R[c] <= N.
    return u.cpu_pinned + u.max_task_pinned + w + u.flexible_reserve <= n;
  }
  // Cases 2 and 3: CP[c] + TP(T,c) + w + R[c] <= N, TP of this request's own task.
  int tp = 0;
  for (const LiveRequest& l : live_) {
    const Request& o = l.request;
    if (is_exclusive(o.kind) || !counts_pinned(o) || o.task != r.task) continue;
    if (config_.profile.pool_of(o.type) != pool) continue;
    if (o.cpu && o.cpu->value() != cpu) continue;
    tp += o.weight;
  }
  return u.cpu_pinned + tp + w + u.flexible_reserve <= n;
}

std::optional<ErrorCode> Model::invalid(const Request& r) const {
  if (r.weight < 1) return ErrorCode::kInval;
  if (!r.task && !r.cpu) return ErrorCode::kInval;
  if (r.cpu && (r.cpu->value() < 0 || r.cpu->value() >= config_.cpus)) return ErrorCode::kInval;
  return std::nullopt;
}

std::optional<ErrorCode> Model::refusal(const Request& r, bool placing) const {
  // 1. Validation.
  if (auto err = invalid(r)) return err;
  // 2. CPU-bound, placed on an offline CPU.
  if (placing && !r.task && !cpu_online(r.cpu->value())) return ErrorCode::kNoDev;
  // 3. Exclusive kinds: machine-wide, no slots.
  if (is_exclusive(r.kind)) {
    for (const LiveRequest& l : live_) {
      if (is_exclusive(l.request.kind) && l.request.kind != r.kind) return ErrorCode::kBusy;
    }
    return std::nullopt;
  }
  // 4. Slots, on the request's CPU or on every possible CPU.
  if (r.cpu) {
    if (!fits_on(r, r.cpu->value())) return ErrorCode::kNoSpc;
  } else {
    for (int c = 0; c < config_.cpus; ++c) {
      if (!fits_on(r, c)) return ErrorCode::kNoSpc;
    }
  }
  return std::nullopt;
}

std::expected<Handle, ErrorCode> Model::reserve(const Request& request) {
  if (auto err = refusal(request)) return std::unexpected(*err);
  const Handle h = next_handle_++;
  live_.push_back({h, request});
  return h;
}

std::expected<std::vector<Handle>, ErrorCode> Model::reserve_all(
    std::span<const Request> requests) {
  // Every request is validated before any is admitted (arbiter.h).
  for (const Request& r : requests) {
    if (auto err = invalid(r)) return std::unexpected(*err);
  }
  std::vector<Handle> added;
  for (const Request& r : requests) {
    auto h = reserve(r);
    if (!h) {
      for (Handle a : added) release(a);
      return std::unexpected(h.error());
    }
    added.push_back(*h);
  }
  return added;
}

std::expected<void, ErrorCode> Model::modify(Handle handle, const Request& next) {
  auto it = std::find_if(live_.begin(), live_.end(),
                         [&](const LiveRequest& l) { return l.handle == handle; });
  HWARB_CHECK(it != live_.end(), "model: modify of a handle that is not live");
  if (it->request.task != next.task || it->request.kind != next.kind) {
    return std::unexpected(ErrorCode::kInval);
  }
  const LiveRequest old = *it;
  const auto pos = it - live_.begin();
  live_.erase(it);
  // ENODEV only for a move onto an offline CPU (arbiter.h).
  if (auto err = refusal(next, next.cpu != old.request.cpu)) {
    live_.insert(live_.begin() + pos, old);
    return std::unexpected(*err);
  }
  live_.insert(live_.begin() + pos, LiveRequest{handle, next});
  return {};
}

void Model::release(Handle handle) {
  std::erase_if(live_, [&](const LiveRequest& l) { return l.handle == handle; });
}

std::expected<void, ErrorCode> Model::set_cpu_online(int cpu, bool online) {
  if (cpu < 0 || cpu >= config_.cpus) return std::unexpected(ErrorCode::kInval);
  online_[static_cast<std::size_t>(cpu)] = online;
  return {};
}

const Request* Model::find(Handle handle) const {
  for (const LiveRequest& l : live_) {
    if (l.handle == handle) return &l.request;
  }
  return nullptr;
}

int Model::exclusive_count(ResourceKind kind) const {
  return static_cast<int>(std::count_if(
      live_.begin(), live_.end(), [&](const LiveRequest& l) { return l.request.kind == kind; }));
}

std::string describe(const Request& r) {
  static constexpr const char* kKinds[] = {"bp", "bts", "pt", "lbr"};
  std::ostringstream os;
  os << kKinds[static_cast<int>(r.kind)] << "#" << r.id.value() << " "
     << (r.task ? "task " + std::to_string(r.task->value()) : std::string("cpu-bound")) << " cpu "
     << (r.cpu ? std::to_string(r.cpu->value()) : std::string("all")) << " "
     << (r.type == arbiter::SlotType::kInst ? "inst" : "data") << " w" << r.weight << " "
     << (r.pinned ? "pinned" : "flexible");
  return os.str();
}

std::string describe(const ArbiterConfig& c) {
  std::ostringstream os;
  os << c.profile.name() << "(";
  if (c.profile.shared()) {
    os << "shared " << c.profile.pool_slots(0);
  } else {
    os << "inst " << c.profile.pool_slots(0) << ", data " << c.profile.pool_slots(1);
  }
  os << ") cpus " << c.cpus
     << " flexible=" << (c.flexible == FlexiblePolicy::kMultiplexed ? "multiplexed" : "as_pinned");
  return os.str();
}

std::string Model::to_string() const {
  std::ostringstream os;
  os << describe(config_) << "\n";
  for (int c = 0; c < config_.cpus; ++c) {
    if (!cpu_online(c)) os << "  cpu " << c << " offline\n";
  }
  for (const LiveRequest& l : live_) os << "  h" << l.handle << ": " << describe(l.request) << "\n";
  return os.str();
}

}  // namespace hwarb::model

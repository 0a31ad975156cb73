#include "hwarb/breakpoints/watchpoint.h"

#include "hwarb/base/format.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace hwarb::breakpoints {

namespace {

// Bytes [from, from+n) of a little-endian value, shifted down to bit 0.
std::uint64_t bytes_of(std::uint64_t v, std::uint64_t from, std::uint64_t n) {
  if (from >= 8) return 0;
  v >>= from * 8;
  return n >= 8 ? v : v & ((std::uint64_t{1} << (n * 8)) - 1);
}

// The greedy step: the largest aligned size of at most max_len that still fits.
std::uint64_t piece_at(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len) {
  std::uint64_t size = max_len;
  while (size > 1 && (addr % size != 0 || size > len)) size /= 2;
  return size;
}

}  // namespace

std::vector<Piece> split_range(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len) {
  std::vector<Piece> out;
  out.reserve(count_pieces(addr, len, max_len));
  while (len > 0) {
    const std::uint64_t size = piece_at(addr, len, max_len);
    out.push_back({addr, size});
    addr += size;
    len -= size;
  }
  return out;
}

std::uint64_t count_pieces(std::uint64_t addr, std::uint64_t len, std::uint64_t max_len) {
  std::uint64_t n = 0;
  // Up to the first max_len boundary, then whole max_len pieces, then the tail: the same steps as
  // split_range, with the middle counted at once.
  while (len > 0 && addr % max_len != 0) {
    const std::uint64_t size = piece_at(addr, len, max_len);
    addr += size;
    len -= size;
    ++n;
  }
  n += len / max_len;
  addr += len / max_len * max_len;
  len %= max_len;
  while (len > 0) {
    const std::uint64_t size = piece_at(addr, len, max_len);
    addr += size;
    len -= size;
    ++n;
  }
  return n;
}

Watchpoints::~Watchpoints() {
  watches_.clear();
  by_owner_.clear();
  key_of_.clear();
  shared_.clear();
}

Result<WatchId> Watchpoints::watch(const WatchSpec& spec, WatchHandler handler) {
  const Arch arch = api_.pmu().arch();
  if (spec.task) {
    if (auto r = api_.check_task(*spec.task); !r) return std::unexpected(r.error());
  }
  // 1. The fields of the watchpoint itself.
  if (spec.len == 0) return make_error(ErrorCode::kInval, "len: must be at least 1");
  if (spec.len > kMaxWatchLen) {
    return make_error(ErrorCode::kInval, "len: " + std::to_string(spec.len) +
                                             " bytes is over the limit of " +
                                             std::to_string(kMaxWatchLen));
  }
  if (spec.addr + (spec.len - 1) < spec.addr) {
    return make_error(ErrorCode::kInval, "len: [" + hex(spec.addr) + ", +" +
                                             std::to_string(spec.len) +
                                             ") wraps around the address space");
  }
  if (spec.type == pmu::BpType::kX) {
    if (spec.len != 1) {
      return make_error(ErrorCode::kInval,
                        "len: an execute watchpoint watches one instruction (len 1)");
    }
    if (spec.condition) {
      return make_error(ErrorCode::kInval, "if: a condition needs a data watchpoint (w or rw)");
    }
  }
  // 2. Its pieces; the ones not shared yet are new breakpoints.
  std::vector<Piece> pieces;
  if (spec.type == pmu::BpType::kX) {
    pieces.push_back({spec.addr, exec_len(arch)});
  } else {
    pieces = split_range(spec.addr, spec.len, arch == Arch::kI386 ? 4 : 8);
  }
  const std::int64_t owner = spec.task ? spec.task->value() : -1;
  std::vector<Key> keys;
  std::vector<Key> fresh;
  keys.reserve(pieces.size());
  for (const Piece& p : pieces) {
    Key k{owner, p.addr, p.len, spec.type};
    keys.push_back(k);
    // The pieces of one range are disjoint, so each new one is new once.
    if (!shared_.contains(k)) fresh.push_back(k);
  }
  pmu::Core& core = api_.core();
  std::vector<CpuId> cpus;
  if (!spec.task) {
    for (int c = 0; c < core.cpus(); ++c) {
      if (core.cpu_online(CpuId(c))) cpus.push_back(CpuId(c));
    }
  }
  std::vector<pmu::Core::OpenRequest> requests;
  for (const Key& k : fresh) {
    pmu::EventAttr attr = breakpoint_attr(k.addr, k.len, k.type);
    attr.privileged = !spec.task;
    auto handler_of = [this, k](pmu::Event&, const pmu::Sample& s) { on_hit(k, s); };
    if (spec.task) {
      requests.push_back({attr, {spec.task, std::nullopt}, handler_of});
    } else {
      for (CpuId c : cpus) requests.push_back({attr, {std::nullopt, c}, handler_of});
    }
  }
  auto opened = core.open_all(requests);
  if (!opened) {
    Error e = opened.error();
    if (e.code() == ErrorCode::kNoSpc) {
      // Why: the registers still needed, as one request of that weight on the same owner.
      arbiter::Request need;
      need.kind = arbiter::ResourceKind::kBreakpoint;
      need.type =
          spec.type == pmu::BpType::kX ? arbiter::SlotType::kInst : arbiter::SlotType::kData;
      need.task = spec.task;
      need.weight = static_cast<int>(fresh.size());
      std::string why = "watch: [" + hex(spec.addr) + ", +" + std::to_string(spec.len) +
                        ") needs " + std::to_string(pieces.size()) + " debug register" +
                        (pieces.size() == 1 ? "" : "s") + " (" +
                        std::to_string(pieces.size() - fresh.size()) + " shared, " +
                        std::to_string(fresh.size()) + " new)";
      if (spec.task) {
        arbiter::Explanation ex = arbiter_.explain(need);
        if (!ex.admitted) why += "; " + ex.reason;
      } else {
        for (CpuId c : cpus) {
          need.cpu = c;
          arbiter::Explanation ex = arbiter_.explain(need);
          if (!ex.admitted) {
            why += "; " + ex.reason;
            break;
          }
        }
      }
      return make_error(ErrorCode::kNoSpc, why);
    }
    return std::unexpected(e);
  }
  // 3. Committed.
  const WatchId id = next_id_++;
  std::size_t next = 0;
  const std::size_t per_key = spec.task ? 1 : cpus.size();
  for (const Key& k : fresh) {
    Shared& s = shared_[k];
    for (std::size_t i = 0; i < per_key; ++i) {
      key_of_.emplace((*opened)[next].id(), k);
      s.handles.push_back(std::move((*opened)[next++]));
    }
  }
  for (const Key& k : keys) shared_.at(k).users.insert(id);
  by_owner_[owner].insert(id);
  watches_[id] = Watch{spec, std::move(handler), std::move(keys), std::nullopt};
  return id;
}

void Watchpoints::release_keys(WatchId id, const std::vector<Key>& keys) {
  for (const Key& k : keys) {
    auto it = shared_.find(k);
    if (it == shared_.end()) continue;
    it->second.users.erase(id);
    if (it->second.users.empty()) {
      for (const BreakpointHandle& h : it->second.handles) key_of_.erase(h.id());
      shared_.erase(it);
    }
  }
}

Result<void> Watchpoints::unwatch(WatchId id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) {
    return make_error(ErrorCode::kNoEnt, "watch: no watchpoint " + std::to_string(id));
  }
  std::vector<Key> keys = std::move(it->second.keys);
  const std::int64_t owner = it->second.spec.task ? it->second.spec.task->value() : -1;
  watches_.erase(it);
  if (auto o = by_owner_.find(owner); o != by_owner_.end()) {
    o->second.erase(id);
    if (o->second.empty()) by_owner_.erase(o);
  }
  release_keys(id, keys);
  return {};
}

void Watchpoints::forget_task(TaskId task) {
  auto it = by_owner_.find(task.value());
  if (it == by_owner_.end()) return;
  const std::set<WatchId> gone = it->second;
  for (WatchId id : gone)
    ignore_error(unwatch(id), "the owner's own ids: unwatch's only error, ENOENT, cannot happen");
}

std::vector<Piece> Watchpoints::pieces(WatchId id) const {
  std::vector<Piece> out;
  if (auto it = watches_.find(id); it != watches_.end()) {
    for (const Key& k : it->second.keys) out.push_back({k.addr, k.len});
  }
  return out;
}

std::vector<pmu::EventId> Watchpoints::events(WatchId id) const {
  std::vector<pmu::EventId> out;
  if (auto it = watches_.find(id); it != watches_.end()) {
    for (const Key& k : it->second.keys) {
      for (const BreakpointHandle& h : shared_.at(k).handles) out.push_back(h.id());
    }
  }
  return out;
}

std::vector<WatchId> Watchpoints::users_of(pmu::EventId event) const {
  auto it = key_of_.find(event);
  if (it == key_of_.end()) return {};
  const std::set<WatchId>& users = shared_.at(it->second).users;
  return {users.begin(), users.end()};
}

WatchHit Watchpoints::make_hit(WatchId id, const Watch& w, const pmu::Sample& s) const {
  WatchHit hit;
  hit.id = id;
  hit.sample = s;
  if (s.access != pmu::AccessKind::kRead && s.access != pmu::AccessKind::kWrite) return hit;
  // A sample of size 0 carries no value (pmu::Sample: the hardware could not tell), and one that
  // misses the range has none of its bytes: no value then, never zeros passed off as one.
  if (s.size <= 0) return hit;
  const std::uint64_t a = s.addr, a_end = s.addr + static_cast<std::uint64_t>(s.size);
  const std::uint64_t wa = w.spec.addr, w_end = w.spec.addr + w.spec.len;
  const std::uint64_t lo = std::max(a, wa), hi = std::min(a_end, w_end);
  if (lo >= hi) return hit;
  hit.has_value = true;
  if (w.spec.len <= 8 && reader_ && s.task) {
    std::optional<std::uint64_t> now = 0;
    for (std::uint64_t b = 0; b < w.spec.len && now; ++b) {
      auto byte = reader_(*s.task, wa + b, 1);
      now = byte ? std::optional(*now | (*byte << (b * 8))) : std::nullopt;
    }
    if (now) {
      // The bytes the access touched come from its old value; the rest did not change.
      std::uint64_t old = *now;
      for (std::uint64_t b = lo; b < hi; ++b) {
        const std::uint64_t shift = (b - wa) * 8;
        old &= ~(std::uint64_t{0xff} << shift);
        old |= bytes_of(s.old_value, b - a, 1) << shift;
      }
      hit.old_value = old;
      hit.new_value = *now;
      return hit;
    }
  }
  hit.old_value = bytes_of(s.old_value, lo - a, hi - lo);
  hit.new_value = bytes_of(s.new_value, lo - a, hi - lo);
  return hit;
}

void Watchpoints::on_hit(const Key& key, const pmu::Sample& sample) {
  auto sit = shared_.find(key);
  if (sit == shared_.end()) return;
  for (WatchId id : sit->second.users) {
    auto wit = watches_.find(id);
    if (wit == watches_.end()) continue;
    Watch& w = wit->second;
    if (w.last && *w.last == sample) continue;  // this access was reported through another piece
    w.last = sample;
    WatchHit hit = make_hit(id, w, sample);
    if (w.spec.condition && !w.spec.condition(hit.new_value)) continue;
    if (w.handler) w.handler(hit);
  }
}

}  // namespace hwarb::breakpoints

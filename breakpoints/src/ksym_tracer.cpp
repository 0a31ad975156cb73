#include "hwarb/breakpoints/ksym_tracer.h"

#include <algorithm>

#include "hwarb/base/format.h"

namespace hwarb::breakpoints {

Result<WideBreakpointHandle> KsymTracer::register_entry(Entry& e, pmu::BpType type) {
  pmu::EventAttr attr = breakpoint_attr(e.info.addr, kLen, type);
  attr.exclude_kernel = false;  // a kernel caller watches kernel accesses
  Entry* entry = &e;
  return api_.register_wide_hw_breakpoint(
      attr, [this, entry](pmu::Event&, const pmu::Sample& s) { on_hit(*entry, s); });
}

Result<void> KsymTracer::trace(std::string_view spec, pmu::BpType type) {
  // 1. The symbol.
  auto addr = symbols_.resolve(spec);
  if (!addr) return std::unexpected(addr.error());
  // 2. The type.
  if (type != pmu::BpType::kW && type != pmu::BpType::kRw) {
    return make_error(ErrorCode::kInval, "type: " + std::string(to_string(type)) +
                                             " (the ksym tracer traces w and rw only)");
  }
  // 3. An entry at that address.
  auto it = std::ranges::find_if(entries_, [&](const auto& e) { return e->info.addr == *addr; });
  if (it != entries_.end()) {
    Entry& e = **it;
    // 3a. The same request again.
    if (e.info.type == type) {
      return make_error(ErrorCode::kInval, "symbol: " + e.info.symbol + " is traced already with " +
                                               std::string(to_string(type)));
    }
    // 3b. A type change.
    return change_type(e, type);
  }
  // 4. The tracer's own limit.
  if (entries_.size() >= static_cast<std::size_t>(kMaxEntries)) {
    return make_error(ErrorCode::kNoSpc, "symbol: the ksym tracer traces at most " +
                                             std::to_string(kMaxEntries) + " symbols");
  }
  // 5. The wide breakpoint; its error leaves nothing behind.
  auto entry = std::make_unique<Entry>();
  entry->info.addr = *addr;
  entry->info.type = type;
  entry->info.len = kLen;
  entry->info.symbol = symbols_.symbolize(*addr).value_or(hex(*addr));
  auto bp = register_entry(*entry, type);
  if (!bp) return std::unexpected(bp.error());
  entry->bp = std::move(*bp);
  entries_.push_back(std::move(entry));
  return {};
}

Result<void> KsymTracer::change_type(Entry& e, pmu::BpType type) {
  const pmu::BpType old = e.info.type;
  api_.unregister_wide_hw_breakpoint(e.bp);
  auto bp = register_entry(e, type);
  if (bp) {
    e.bp = std::move(*bp);
    e.info.type = type;
    return {};
  }
  auto again = register_entry(e, old);
  if (again) {
    e.bp = std::move(*again);
    return std::unexpected(bp.error());
  }
  const std::string symbol = e.info.symbol;
  std::erase_if(entries_, [&](const auto& p) { return p.get() == &e; });
  return make_error(bp.error().code(), bp.error().message() + "; the old " +
                                           std::string(to_string(old)) + " breakpoint of " +
                                           symbol + " could not be registered again (" +
                                           again.error().message() + "): the entry is removed");
}

Result<void> KsymTracer::untrace(std::string_view spec) {
  auto addr = symbols_.resolve(spec);
  if (!addr) return std::unexpected(addr.error());
  auto it = std::ranges::find_if(entries_, [&](const auto& e) { return e->info.addr == *addr; });
  if (it == entries_.end()) {
    return make_error(ErrorCode::kNoEnt,
                      "symbol: " + std::string(spec) + " (" + hex(*addr) + ") is not traced");
  }
  entries_.erase(it);  // the handle's destructor unregisters every CPU's event
  return {};
}

void KsymTracer::on_hit(Entry& e, const pmu::Sample& s) {
  ++e.info.count;
  if (!sink_) return;
  KsymHit hit;
  hit.symbol = e.info.symbol;
  hit.addr = e.info.addr;
  hit.type = e.info.type;
  hit.cpu = s.cpu;
  hit.task = s.task;
  hit.ip = s.ip;
  hit.access_addr = s.addr;
  hit.access = s.access;
  hit.count = e.info.count;
  sink_(hit);
}

KsymEntry KsymTracer::info(const Entry& e) {
  KsymEntry out = e.info;
  for (const BreakpointHandle& h : e.bp.per_cpu) out.events.push_back(h.id());
  return out;
}

std::vector<KsymEntry> KsymTracer::entries() const {
  std::vector<KsymEntry> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(info(*e));
  return out;
}

std::optional<KsymEntry> KsymTracer::find(std::uint64_t addr) const {
  for (const auto& e : entries_) {
    if (e->info.addr == addr) return info(*e);
  }
  return std::nullopt;
}

}  // namespace hwarb::breakpoints

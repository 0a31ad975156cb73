// hwarb/breakpoints/ksym_tracer.h — the ksym tracer (Linux's kernel/trace/trace_ksym.c as the
// hw-breakpoint rewrite left it): a kernel client of the breakpoint API that traces the data
// accesses to kernel symbols named by the user, with one wide breakpoint per symbol
// (register_wide_hw_breakpoint: one event per online CPU, all or nothing), and counts the hits
// of each (the tracer's stats).
//
// Contract:
//  - trace(spec, type): spec is "SYMBOL[+OFF]" (KernelSymbols::resolve). The checks, in the
//    order the 2009 series' ksym_trace_filter_write makes them:
//      1. the symbol: unknown ENOENT, malformed EINVAL (KernelSymbols::resolve);
//      2. the type: w or rw (len 4); r and x are EINVAL (ksym_trace_get_access_type);
//      3. an entry at that address already (matched by address, as the 2009 series' ksym_addr):
//         a. the same type: EINVAL, nothing changes (the 2009 series' malformed request (6));
//         b. another type: the type changes (below);
//      4. a new entry past kMaxEntries (the 2009 series' KSYM_TRACER_MAX = HBP_NUM): ENOSPC;
//      5. register_wide_hw_breakpoint(addr, len 4, type): a kernel caller, so privileged and
//         exclude_kernel = 0; its error (ENOSPC when some online CPU has no free slot, EINVAL
//         for an address not aligned to 4, ENOMEM) is returned as is and leaves NO entry and NO
//         breakpoint on any CPU. (The 2009 series' process_new_ksym_entry cleared the handle before
//         taking PTR_ERR of it, so a failed registration returned 0 with no entry: fixed.)
//  - Type change (3b) is all or nothing, as the 2009 series does it (unregister, then register the
//  new
//    type) with the failure case defined: on success the entry keeps its count and hits are
//    reported with the new type; on failure of the new registration the old breakpoint is
//    registered again and the error is returned, so the entry, its type and its count are
//    exactly as before. (The 2009 series dropped the entry then.) Re-registering the old breakpoint
//    reuses the slots it just released under the caller's serialisation, so it does not fail
//    for slots; should it fail anyway (an injected ENOMEM), the entry is gone and the error says
//    so ("... the entry is removed").
//  - untrace(spec): unregisters the entry's breakpoint on every CPU and removes the entry;
//    ENOENT when no entry has that address (resolve's errors first). reset(): all of them.
//  - Hits: the handler runs inside the debug exception (Event::deliver): it adds one to the
//    entry's count and gives the sink a KsymHit (the traced address as "symbol+0xOFF", the CPU,
//    the task it ran if any, ip, the accessed address and kind, the count after the hit). The
//    sink must not call back into the tracer or the breakpoint API.
//  - entries() in the order they were added.
// Not thread-safe: callers serialise with the Core (sim/system.h does).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/breakpoints/kallsyms.h"

namespace hwarb::breakpoints {

struct KsymEntry {
  std::string symbol;  // the traced address as "name+0xOFF" (its hex when no symbol covers it)
  std::uint64_t addr = 0;
  pmu::BpType type = pmu::BpType::kW;
  std::uint64_t len = 4;
  std::uint64_t count = 0;           // hits since the entry was added
  std::vector<pmu::EventId> events;  // its breakpoint: one event per CPU online when registered
};

struct KsymHit {
  std::string symbol;  // the entry's
  std::uint64_t addr = 0;
  pmu::BpType type = pmu::BpType::kW;
  CpuId cpu{};
  std::optional<TaskId> task;  // what the CPU ran; none when idle
  std::uint64_t ip = 0;
  std::uint64_t access_addr = 0;
  pmu::AccessKind access = pmu::AccessKind::kNone;
  std::uint64_t count = 0;  // the entry's count after this hit
};

class KsymTracer {
 public:
  // Linux's KSYM_TRACER_MAX: as many symbols as there are debug address registers (HBP_NUM).
  static constexpr int kMaxEntries = kPtraceSlots;
  static constexpr std::uint64_t kLen = 4;  // HW_BREAKPOINT_LEN_4

  using HitSink = std::function<void(const KsymHit&)>;

  // Both must outlive the tracer.
  KsymTracer(HwBreakpoints& api, const KernelSymbols& symbols) : api_(api), symbols_(symbols) {}
  KsymTracer(const KsymTracer&) = delete;
  KsymTracer& operator=(const KsymTracer&) = delete;

  void set_hit_sink(HitSink sink) { sink_ = std::move(sink); }

  // Adds an entry, or changes the type of the entry at that address (see the contract).
  Result<void> trace(std::string_view spec, pmu::BpType type);
  Result<void> untrace(std::string_view spec);
  void reset() { entries_.clear(); }

  std::vector<KsymEntry> entries() const;
  // The entry at `addr`, if any.
  std::optional<KsymEntry> find(std::uint64_t addr) const;

 private:
  struct Entry {
    KsymEntry info;
    WideBreakpointHandle bp;
  };

  Result<WideBreakpointHandle> register_entry(Entry& e, pmu::BpType type);
  Result<void> change_type(Entry& e, pmu::BpType type);
  void on_hit(Entry& e, const pmu::Sample& s);
  static KsymEntry info(const Entry& e);

  HwBreakpoints& api_;
  const KernelSymbols& symbols_;
  HitSink sink_;
  std::vector<std::unique_ptr<Entry>> entries_;  // stable addresses: the handlers keep them
};

}  // namespace hwarb::breakpoints

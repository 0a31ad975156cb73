// sim_watchpoint: a debugger's watchpoint on the simulated machine. A 6-byte range needs two
// debug registers (4 + 2 bytes); each write that touches it is reported once, with the watched
// value before and after. Prints the hits; exits 0 when exactly the two writes were seen.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "hwarb/sim/system.h"
#include "hwarb/version.h"

int main() {
  using namespace hwarb;
  std::printf("hwarb %s\n", HWARB_VERSION_STRING);
  auto system = sim::System::create({.cpus = 2});
  if (!system) {
    std::fprintf(stderr, "%s\n", system.error().to_string().c_str());
    return 1;
  }
  sim::Machine& machine = (*system)->machine();
  auto task = machine.create_task();
  if (!task || !machine.switch_to(CpuId(0), *task)) return 1;

  std::vector<breakpoints::WatchHit> hits;
  breakpoints::WatchSpec spec;
  spec.task = *task;
  spec.addr = 0x4000;
  spec.len = 6;
  spec.type = pmu::BpType::kW;
  auto id = (*system)->watchpoints().watch(
      spec, [&](const breakpoints::WatchHit& hit) { hits.push_back(hit); });
  if (!id) {
    std::fprintf(stderr, "watch: %s\n", id.error().to_string().c_str());
    return 1;
  }
  // Two writes into the range, one outside it.
  const struct {
    std::uint64_t addr;
    int size;
    std::uint64_t value;
  } writes[] = {{0x4000, 4, 0x11223344}, {0x4008, 8, 7}, {0x4004, 2, 0xbeef}};
  for (const auto& w : writes) {
    auto r = machine.access(CpuId(0), *task, sim::AccessKind::kWrite, w.addr, w.size, w.value);
    if (!r) {
      std::fprintf(stderr, "access: %s\n", r.error().to_string().c_str());
      return 1;
    }
  }
  for (const auto& hit : hits) {
    std::printf("watch %llu hit: 0x%llx -> 0x%llx\n", static_cast<unsigned long long>(hit.id),
                static_cast<unsigned long long>(hit.old_value),
                static_cast<unsigned long long>(hit.new_value));
  }
  return hits.size() == 2 ? 0 : 1;
}

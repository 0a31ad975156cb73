#include "hwarb/bts/software_bts.h"

#include <algorithm>
#include <string>
#include <utility>

namespace hwarb::bts {

SoftwareBts::SoftwareBts(int cpus, x86::BtsFormat format)
    : format_(format), cpus_(static_cast<std::size_t>(std::max(cpus, 0))) {}

void SoftwareBts::program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
                          std::uint64_t debugctl) {
  if (!valid(cpu)) return;
  Cpu& c = cpus_[static_cast<std::size_t>(cpu.value())];
  c.area = area;
  c.buffer = buffer;
  c.debugctl = (c.debugctl & ~x86::debugctl::kBtsMask) | (debugctl & x86::debugctl::kBtsMask);
}

x86::DsArea SoftwareBts::ds_area(CpuId cpu) const {
  if (!valid(cpu)) return {};
  return cpus_[static_cast<std::size_t>(cpu.value())].area;
}

void SoftwareBts::set_bts_index(CpuId cpu, std::uint64_t index) {
  if (!valid(cpu)) return;
  cpus_[static_cast<std::size_t>(cpu.value())].area.bts_index = index;
}

std::uint64_t SoftwareBts::debugctl(CpuId cpu) const {
  if (!valid(cpu)) return 0;
  return cpus_[static_cast<std::size_t>(cpu.value())].debugctl;
}

Result<x86::BtsStore> SoftwareBts::branch(CpuId cpu, std::uint64_t from, std::uint64_t to,
                                          bool predicted, bool kernel) {
  if (!valid(cpu)) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " is not in [0, " +
                                             std::to_string(cpus()) + ")");
  }
  Cpu& c = cpus_[static_cast<std::size_t>(cpu.value())];
  auto store = x86::store_bts(format_, c.debugctl, c.area, c.buffer,
                              x86::BtsRecord{from, to, predicted}, kernel);
  if (store && store->interrupt && interrupt_) interrupt_(cpu);
  return store;
}

}  // namespace hwarb::bts

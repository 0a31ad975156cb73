#include "hwarb/sim/memory.h"

namespace hwarb::sim {

std::uint8_t SparseMemory::read_byte(std::uint64_t addr) const {
  auto it = pages_.find(addr / kPageSize);
  if (it == pages_.end()) return 0;
  return it->second[addr % kPageSize];
}

void SparseMemory::write_byte(std::uint64_t addr, std::uint8_t value) {
  auto [it, inserted] = pages_.try_emplace(addr / kPageSize);
  if (inserted) it->second.fill(0);
  it->second[addr % kPageSize] = value;
}

std::uint64_t SparseMemory::read(std::uint64_t addr, int size) const {
  std::uint64_t v = 0;
  for (int i = 0; i < size; ++i) {
    v |= static_cast<std::uint64_t>(read_byte(addr + static_cast<std::uint64_t>(i))) << (8 * i);
  }
  return v;
}

void SparseMemory::write(std::uint64_t addr, int size, std::uint64_t value) {
  for (int i = 0; i < size; ++i) {
    write_byte(addr + static_cast<std::uint64_t>(i), static_cast<std::uint8_t>(value >> (8 * i)));
  }
}

}  // namespace hwarb::sim

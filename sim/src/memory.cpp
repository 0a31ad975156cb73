#include "hwarb/sim/memory.h"

namespace hwarb::sim {

const SparseMemory::Page* SparseMemory::find_page(std::uint64_t pn) const {
  if (cached_ && cached_pn_ == pn) return cached_;
  auto it = pages_.find(pn);
  if (it == pages_.end()) return nullptr;
  cached_pn_ = pn;
  cached_ = const_cast<Page*>(&it->second);
  return cached_;
}

SparseMemory::Page& SparseMemory::page_for_write(std::uint64_t pn) {
  if (cached_ && cached_pn_ == pn) return *cached_;
  auto [it, inserted] = pages_.try_emplace(pn);
  if (inserted) it->second.fill(0);
  cached_pn_ = pn;
  cached_ = &it->second;
  return *cached_;
}

std::uint8_t SparseMemory::read_byte(std::uint64_t addr) const {
  const Page* p = find_page(addr / kPageSize);
  return p ? (*p)[addr % kPageSize] : 0;
}

void SparseMemory::write_byte(std::uint64_t addr, std::uint8_t value) {
  page_for_write(addr / kPageSize)[addr % kPageSize] = value;
}

std::uint64_t SparseMemory::read(std::uint64_t addr, int size) const {
  const std::uint64_t off = addr % kPageSize;
  std::uint64_t v = 0;
  if (off + static_cast<std::uint64_t>(size) <= kPageSize) {
    // One page: one lookup.
    const Page* p = find_page(addr / kPageSize);
    if (!p) return 0;
    for (int i = 0; i < size; ++i) {
      v |= static_cast<std::uint64_t>((*p)[off + static_cast<std::uint64_t>(i)]) << (8 * i);
    }
    return v;
  }
  for (int i = 0; i < size; ++i) {
    v |= static_cast<std::uint64_t>(read_byte(addr + static_cast<std::uint64_t>(i))) << (8 * i);
  }
  return v;
}

void SparseMemory::write(std::uint64_t addr, int size, std::uint64_t value) {
  const std::uint64_t off = addr % kPageSize;
  if (off + static_cast<std::uint64_t>(size) <= kPageSize) {
    Page& p = page_for_write(addr / kPageSize);
    for (int i = 0; i < size; ++i) {
      p[off + static_cast<std::uint64_t>(i)] = static_cast<std::uint8_t>(value >> (8 * i));
    }
    return;
  }
  for (int i = 0; i < size; ++i) {
    write_byte(addr + static_cast<std::uint64_t>(i), static_cast<std::uint8_t>(value >> (8 * i)));
  }
}

}  // namespace hwarb::sim

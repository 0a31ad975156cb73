#include "hwarb/sim/memory.h"

namespace hwarb::sim {

const SparseMemory::Page* SparseMemory::find_page(std::uint64_t pn) const {
  TlbEntry* e = tlb_ ? &(*tlb_)[pn % kTlbEntries] : nullptr;
  if (e != nullptr && e->page != nullptr && e->pn == pn) return e->page;
  auto it = pages_.find(pn);
  if (it == pages_.end()) return nullptr;
  if (e != nullptr) *e = {pn, const_cast<Page*>(&it->second)};
  return &it->second;
}

SparseMemory::Page& SparseMemory::page_for_write(std::uint64_t pn) {
  if (!tlb_) tlb_ = std::make_unique<Tlb>();
  TlbEntry& e = (*tlb_)[pn % kTlbEntries];
  if (e.page != nullptr && e.pn == pn) return *e.page;
  auto [it, inserted] = pages_.try_emplace(pn);
  if (inserted) it->second.fill(0);
  e = {pn, &it->second};
  return it->second;
}

std::uint8_t SparseMemory::read_byte(std::uint64_t addr) const {
  const Page* p = find_page(addr / kPageSize);
  return p ? (*p)[addr % kPageSize] : 0;
}

void SparseMemory::write_byte(std::uint64_t addr, std::uint8_t value) {
  page_for_write(addr / kPageSize)[addr % kPageSize] = value;
}

std::uint64_t SparseMemory::read_slow(std::uint64_t addr, int size) const {
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

void SparseMemory::write_slow(std::uint64_t addr, int size, std::uint64_t value) {
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

// hwarb/sim/memory.h — a sparse, byte-addressed 64-bit address space.
//
// Contract:
//  - Every byte of the 2^64 address space exists; a byte never written reads as 0.
//  - Storage is a map of 4 KiB pages created on the first write to them; reads never allocate.
//  - Values are little-endian: read(a, n) returns byte a in bits 0–7, byte a+1 in bits 8–15, ...
//    Sizes are 1, 2, 4 or 8; an access may be unaligned and may straddle pages, but it must not
//    wrap past 2^64 (callers validate this with valid_range; read/write assume it).
//  - SparseMemory is a value type: copying it copies every page (that is what fork does).
//  - Not thread-safe, not even for concurrent const reads (a read caches the last page it found);
//    deterministic (no iteration order is observable).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>

namespace hwarb::sim {

class SparseMemory {
 public:
  static constexpr std::uint64_t kPageSize = 4096;

  SparseMemory() = default;
  SparseMemory(const SparseMemory& o) : pages_(o.pages_) {}
  SparseMemory& operator=(const SparseMemory& o) {
    pages_ = o.pages_;
    cached_ = nullptr;
    return *this;
  }
  // The nodes (and so the cached page) move with the map; the source forgets its cache.
  SparseMemory(SparseMemory&& o) noexcept
      : pages_(std::move(o.pages_)), cached_pn_(o.cached_pn_), cached_(o.cached_) {
    o.cached_ = nullptr;
  }
  SparseMemory& operator=(SparseMemory&& o) noexcept {
    pages_ = std::move(o.pages_);
    cached_pn_ = o.cached_pn_;
    cached_ = o.cached_;
    o.cached_ = nullptr;
    return *this;
  }

  // True when `size` is 1, 2, 4 or 8.
  static constexpr bool valid_size(int size) {
    return size == 1 || size == 2 || size == 4 || size == 8;
  }
  // True when [addr, addr + size) does not wrap past 2^64 (size must already be valid).
  static constexpr bool valid_range(std::uint64_t addr, int size) {
    return addr <= UINT64_MAX - static_cast<std::uint64_t>(size - 1);
  }

  // The `size` bytes at addr, little-endian, zero-extended to 64 bits.
  std::uint64_t read(std::uint64_t addr, int size) const;
  // Stores the low `size` bytes of value at addr, little-endian.
  void write(std::uint64_t addr, int size, std::uint64_t value);

  std::uint8_t read_byte(std::uint64_t addr) const;
  void write_byte(std::uint64_t addr, std::uint8_t value);

  // Pages currently allocated (each kPageSize bytes).
  std::size_t pages() const { return pages_.size(); }

 private:
  using Page = std::array<std::uint8_t, kPageSize>;
  // The page holding page number `pn`, nullptr if never written. Remembers the last one found
  // (elements of an unordered_map keep their address across rehashing; pages are never erased).
  const Page* find_page(std::uint64_t pn) const;
  Page& page_for_write(std::uint64_t pn);

  std::unordered_map<std::uint64_t, Page> pages_;  // key: addr / kPageSize
  mutable std::uint64_t cached_pn_ = 0;
  mutable Page* cached_ = nullptr;
};

}  // namespace hwarb::sim

// hwarb/sim/memory.h — a sparse, byte-addressed 64-bit address space.
//
// Contract:
//  - Every byte of the 2^64 address space exists; a byte never written reads as 0.
//  - Storage is a map of 4 KiB pages created on the first write to them; reads never allocate.
//  - Values are little-endian: read(a, n) returns byte a in bits 0–7, byte a+1 in bits 8–15, ...
//    Sizes are 1, 2, 4 or 8; an access may be unaligned and may straddle pages, but it must not
//    wrap past 2^64 (callers validate this with valid_range; read/write assume it).
//  - SparseMemory is a value type: copying it copies every page (that is what fork does).
//  - Not thread-safe, not even for concurrent const reads (reads fill a cache of page pointers);
//    deterministic (no iteration order is observable).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

namespace hwarb::sim {

class SparseMemory {
 public:
  static constexpr std::uint64_t kPageSize = 4096;

  SparseMemory() = default;
  // A copy has its own page cache (made when it has pages).
  SparseMemory(const SparseMemory& o)
      : pages_(o.pages_), tlb_(pages_.empty() ? nullptr : std::make_unique<Tlb>()) {}
  SparseMemory& operator=(const SparseMemory& o) {
    if (this == &o) return *this;
    pages_ = o.pages_;
    tlb_ = pages_.empty() ? nullptr : std::make_unique<Tlb>();
    return *this;
  }
  // The nodes (and so the cached pages) move with the map, and the cache with them.
  SparseMemory(SparseMemory&& o) noexcept = default;
  SparseMemory& operator=(SparseMemory&& o) noexcept = default;

  // The low `size` bytes (1, 2, 4 or 8) of a 64-bit word, without a branch on size.
  static constexpr std::uint64_t mask_of(int size) {
    return ~std::uint64_t{0} >> (64 - 8 * static_cast<unsigned>(size));
  }
  // True when `size` is 1, 2, 4 or 8.
  static constexpr bool valid_size(int size) {
    return size == 1 || size == 2 || size == 4 || size == 8;
  }
  // True when [addr, addr + size) does not wrap past 2^64 (size must already be valid).
  static constexpr bool valid_range(std::uint64_t addr, int size) {
    return addr <= UINT64_MAX - static_cast<std::uint64_t>(size - 1);
  }

  // The `size` bytes at addr, little-endian, zero-extended to 64 bits. Inline when the page
  // cache holds the page and 8 bytes from addr stay in it (one 8-byte load, masked); otherwise
  // read_slow.
  std::uint64_t read(std::uint64_t addr, int size) const {
    if (const Page* p = cached(addr)) {
      std::uint64_t v;
      std::memcpy(&v, p->data() + addr % kPageSize, 8);
      return v & mask_of(size);
    }
    return read_slow(addr, size);
  }
  // Stores the low `size` bytes of value at addr, little-endian. Inline like read (an 8-byte
  // load and store that keep the bytes past `size`).
  void write(std::uint64_t addr, int size, std::uint64_t value) {
    if (Page* p = cached(addr)) {
      std::uint8_t* at = p->data() + addr % kPageSize;
      std::uint64_t v;
      std::memcpy(&v, at, 8);
      const std::uint64_t m = mask_of(size);
      v = (v & ~m) | (value & m);
      std::memcpy(at, &v, 8);
      return;
    }
    write_slow(addr, size, value);
  }

  // One access: returns the `size` bytes at addr as read() does and, when `write`, then stores
  // the low `size` bytes of value as write() does. Inline like read, and without a branch on
  // `write` when inline.
  std::uint64_t exchange(std::uint64_t addr, int size, bool write, std::uint64_t value) {
    if (Page* p = cached(addr)) {
      std::uint8_t* at = p->data() + addr % kPageSize;
      std::uint64_t v;
      std::memcpy(&v, at, 8);
      const std::uint64_t m = mask_of(size);
      const std::uint64_t keep = write ? ~m : ~std::uint64_t{0};
      const std::uint64_t old = v & m;
      v = (v & keep) | (value & m & ~keep);
      std::memcpy(at, &v, 8);
      return old;
    }
    const std::uint64_t old = read_slow(addr, size);
    if (write) write_slow(addr, size, value);
    return old;
  }

  std::uint8_t read_byte(std::uint64_t addr) const;
  void write_byte(std::uint64_t addr, std::uint8_t value);

  // Pages currently allocated (each kPageSize bytes).
  std::size_t pages() const { return pages_.size(); }

 private:
  using Page = std::array<std::uint8_t, kPageSize>;
  static_assert(std::endian::native == std::endian::little, "read/write assume little-endian");
  std::uint64_t read_slow(std::uint64_t addr, int size) const;
  void write_slow(std::uint64_t addr, int size, std::uint64_t value);
  // The page holding page number `pn`, nullptr if never written. Both enter the page they find
  // into the page cache.
  const Page* find_page(std::uint64_t pn) const;
  Page& page_for_write(std::uint64_t pn);

  // The page cache: direct-mapped (entry pn % kTlbEntries), made with the first page. Only pages
  // that exist are entered; pages are never erased and elements of an unordered_map keep their
  // address across rehashing, so an entry stays valid as long as the map it came from.
  struct TlbEntry {
    std::uint64_t pn = 0;
    Page* page = nullptr;
  };
  static constexpr std::size_t kTlbEntries = 64;
  using Tlb = std::array<TlbEntry, kTlbEntries>;
  // The cached page of addr when 8 bytes from addr stay in that page, else nullptr.
  Page* cached(std::uint64_t addr) const {
    if (!tlb_ || addr % kPageSize > kPageSize - 8) return nullptr;
    const std::uint64_t pn = addr / kPageSize;
    const TlbEntry& e = (*tlb_)[pn % kTlbEntries];
    return e.page != nullptr && e.pn == pn ? e.page : nullptr;
  }

  std::unordered_map<std::uint64_t, Page> pages_;  // key: addr / kPageSize
  mutable std::unique_ptr<Tlb> tlb_;
};

}  // namespace hwarb::sim

// hwarb/linux/page.h — the page the real backend protects, plants and caches by: x86_64's base
// page, 4 KiB, the page holding an address, and the pages a range touches. Pure, constexpr.
#pragma once

#include <cstdint>

namespace hwarb::native {

inline constexpr std::uint64_t kPage = 4096;

constexpr std::uint64_t page_of(std::uint64_t addr) {
  return addr & ~(kPage - 1);
}

// The pages [addr, addr + len) touches, in order, as a range for a range-for. A length of 0
// touches the page of addr; a range that runs past the end of the address space stops at its
// last page (the walk never wraps to page 0).
class PageSpan {
 public:
  class Iterator {
   public:
    constexpr std::uint64_t operator*() const { return page_; }
    constexpr Iterator& operator++() {
      page_ += kPage;
      --left_;
      return *this;
    }
    constexpr bool operator==(const Iterator& o) const { return left_ == o.left_; }

   private:
    friend class PageSpan;
    constexpr Iterator(std::uint64_t page, std::uint64_t left) : page_(page), left_(left) {}
    std::uint64_t page_;
    std::uint64_t left_;
  };

  constexpr PageSpan(std::uint64_t addr, std::uint64_t len) : first_(page_of(addr)) {
    const std::uint64_t extra = len == 0 ? 0 : len - 1;
    const std::uint64_t last = addr > ~std::uint64_t{0} - extra ? ~std::uint64_t{0} : addr + extra;
    count_ = (page_of(last) - first_) / kPage + 1;
  }
  constexpr Iterator begin() const { return Iterator(first_, count_); }
  constexpr Iterator end() const { return Iterator(0, 0); }
  constexpr std::uint64_t size() const { return count_; }

 private:
  std::uint64_t first_;
  std::uint64_t count_;
};

constexpr PageSpan pages_of(std::uint64_t addr, std::uint64_t len) {
  return PageSpan(addr, len);
}

}  // namespace hwarb::native

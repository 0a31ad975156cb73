// hwarb/linux/page.h — the page the real backend protects, plants and caches by: x86_64's base
// page, 4 KiB, and the page holding an address. Pure, constexpr.
#pragma once

#include <cstdint>

namespace hwarb::native {

inline constexpr std::uint64_t kPage = 4096;

constexpr std::uint64_t page_of(std::uint64_t addr) {
  return addr & ~(kPage - 1);
}

}  // namespace hwarb::native

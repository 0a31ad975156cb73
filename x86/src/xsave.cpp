#include "hwarb/x86/xsave.h"

#include <cpuid.h>

#include <algorithm>

namespace hwarb::x86 {
namespace {

constexpr std::uint64_t kHeader = 512;
constexpr std::uint64_t kExtended = 576;

// XGETBV(0); only where CPUID says the OS enabled XSAVE (CR4.OSXSAVE), else 0.
std::uint64_t read_xcr0() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_OSXSAVE) == 0) return 0;
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

void add(std::vector<AreaSpan>& out, std::uint64_t offset, std::uint64_t size) {
  if (size != 0) out.push_back(AreaSpan{offset, size});
}

}  // namespace

const XsaveLayout& host_xsave_layout() {
  static const XsaveLayout layout = [] {
    XsaveLayout l;
    l.xcr0 = read_xcr0();
    if (l.xcr0 == 0) return l;
    for (unsigned i = 2; i < l.components.size(); ++i) {
      unsigned a = 0, b = 0, c = 0, d = 0;
      if (!__get_cpuid_count(0xd, i, &a, &b, &c, &d)) continue;
      l.components[i] = XsaveComponent{b, a, (c & 2u) != 0};
    }
    return l;
  }();
  return layout;
}

std::vector<AreaSpan> xsave_written(XsaveForm form, std::uint64_t rfbm, std::uint64_t xstate_bv,
                                    const XsaveLayout& layout) {
  std::vector<AreaSpan> out;
  if (form == XsaveForm::kNone) return out;
  const auto has = [](std::uint64_t bits, unsigned i) { return ((bits >> i) & 1u) != 0; };
  // Case 1 writes every requested component; cases 2 and 3 those XSTATE_BV says were saved.
  const std::uint64_t saved = form == XsaveForm::kStandard ? rfbm : rfbm & xstate_bv;
  if (has(saved, 0)) {
    add(out, 0, 24);
    add(out, 32, 128);
  }
  const bool mxcsr = form == XsaveForm::kCompacted ? has(saved, 1) : has(rfbm, 1) || has(rfbm, 2);
  if (mxcsr) add(out, 24, 8);
  if (has(saved, 1)) add(out, 160, 256);
  add(out, kHeader, form == XsaveForm::kCompacted ? 16 : 8);
  std::uint64_t packed = kExtended;  // case 3: where the next component in XCOMP_BV goes
  for (unsigned i = 2; i < layout.components.size(); ++i) {
    const XsaveComponent& c = layout.components[i];
    if (!has(rfbm, i) || c.size == 0) continue;
    std::uint64_t at = c.offset;
    if (form == XsaveForm::kCompacted) {
      if (c.align64) packed = (packed + 63) & ~std::uint64_t{63};
      at = packed;
      packed += c.size;  // XCOMP_BV = RFBM: the space is kept whether it is written or not
    }
    if (has(saved, i)) add(out, at, c.size);
  }
  std::sort(out.begin(), out.end(),
            [](const AreaSpan& a, const AreaSpan& b) { return a.offset < b.offset; });
  std::vector<AreaSpan> merged;
  for (const AreaSpan& s : out) {
    if (!merged.empty() && merged.back().offset + merged.back().size >= s.offset) {
      merged.back().size = std::max(merged.back().offset + merged.back().size, s.offset + s.size) -
                           merged.back().offset;
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

std::vector<AreaSpan> xsave_read(XsaveForm form) {
  if (form == XsaveForm::kStandard || form == XsaveForm::kOptimized) return {{kHeader, 8}};
  return {};
}

}  // namespace hwarb::x86

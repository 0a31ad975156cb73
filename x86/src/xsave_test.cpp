// Tests of xsave_written(): the layout rules against a synthetic processor, and against this
// processor itself (XSAVE and XSAVEC run here over a patterned buffer: exactly the bytes the
// rules name change).
#include "hwarb/x86/xsave.h"

#include <cpuid.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "hwarb/x86/insn.h"

namespace hwarb::x86 {
namespace {

// AVX (2) at 576, the three AVX-512 components (5, 6, 7) and PKRU (9), as a Skylake-X lays them
// out; ZMM_Hi256 and Hi16_ZMM aligned to 64 in the compacted form.
XsaveLayout skylake() {
  XsaveLayout l;
  l.xcr0 = 0x2e7;  // x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM, PKRU
  l.components[2] = {576, 256, false};
  l.components[5] = {1088, 64, false};
  l.components[6] = {1152, 512, true};
  l.components[7] = {1664, 1024, true};
  l.components[9] = {2688, 8, false};
  return l;
}

TEST(XsaveWritten, StandardFormWritesEveryRequestedComponent) {
  const XsaveLayout l = skylake();
  // XSTATE_BV says only x87 is in use: XSAVE writes SSE and AVX all the same.
  const auto got = xsave_written(XsaveForm::kStandard, 0x7, 0x1, l);
  const std::vector<AreaSpan> want = {{0, 416}, {512, 8}, {576, 256}};
  EXPECT_EQ(got, want);
}

TEST(XsaveWritten, MxcsrGoesWithAvxInTheStandardForms) {
  const XsaveLayout l = skylake();
  // RFBM = AVX only: MXCSR (24..31) is written, the XMM registers are not.
  const auto got = xsave_written(XsaveForm::kStandard, 0x4, 0x4, l);
  const std::vector<AreaSpan> want = {{24, 8}, {512, 8}, {576, 256}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(xsave_written(XsaveForm::kOptimized, 0x4, 0x0, l),
            (std::vector<AreaSpan>{{24, 8}, {512, 8}}));
}

TEST(XsaveWritten, OptimizedFormSkipsComponentsInTheirInitialConfiguration) {
  const XsaveLayout l = skylake();
  const auto got = xsave_written(XsaveForm::kOptimized, 0x7, 0x2, l);
  const std::vector<AreaSpan> want = {{24, 8}, {160, 256}, {512, 8}};
  EXPECT_EQ(got, want);
}

TEST(XsaveWritten, CompactedFormPacksRequestedComponentsAndWritesOnlyThoseInUse) {
  const XsaveLayout l = skylake();
  // RFBM = everything; in use: SSE, AVX, ZMM_Hi256, PKRU. Packed: AVX 576..831, opmask 832..895,
  // ZMM_Hi256 at 896 (aligned), Hi16_ZMM at 1408 (aligned), PKRU at 2432.
  const auto got = xsave_written(XsaveForm::kCompacted, 0x2e7, 0x246, l);
  const std::vector<AreaSpan> want = {{24, 8},    {160, 256}, {512, 16},
                                      {576, 256}, {896, 512}, {2432, 8}};
  EXPECT_EQ(got, want);
  // Nothing in use: the header alone (x87 and MXCSR need their components).
  EXPECT_EQ(xsave_written(XsaveForm::kCompacted, 0x2e7, 0, l), (std::vector<AreaSpan>{{512, 16}}));
  // A component outside RFBM takes no space: PKRU right after AVX.
  EXPECT_EQ(xsave_written(XsaveForm::kCompacted, 0x204, 0x204, l),
            (std::vector<AreaSpan>{{512, 16}, {576, 264}}));
}

TEST(XsaveWritten, NotAnXsaveWritesNothing) {
  EXPECT_TRUE(xsave_written(XsaveForm::kNone, 0x7, 0x7, skylake()).empty());
  EXPECT_TRUE(xsave_read(XsaveForm::kCompacted).empty());
  EXPECT_EQ(xsave_read(XsaveForm::kStandard), (std::vector<AreaSpan>{{512, 8}}));
}

TEST(XsaveWritten, DecodeTellsTheForm) {
  const std::vector<std::pair<std::vector<std::uint8_t>, XsaveForm>> cases = {
      {{0x0f, 0xae, 0x64, 0x24, 0x40}, XsaveForm::kStandard},         // xsave [rsp+0x40]
      {{0x48, 0x0f, 0xae, 0x74, 0x24, 0x40}, XsaveForm::kOptimized},  // xsaveopt64 [rsp+0x40]
      {{0x0f, 0xc7, 0x64, 0x24, 0x40}, XsaveForm::kCompacted},        // xsavec [rsp+0x40]
      {{0x89, 0x07}, XsaveForm::kNone},                               // mov [rdi], eax
  };
  for (const auto& [bytes, form] : cases) {
    auto insn = decode(bytes, 0x1000);
    ASSERT_TRUE(insn) << insn.error().to_string();
    EXPECT_EQ(insn->xsave, form) << insn->text;
  }
}

// Runs `form` (XSAVE or XSAVEC) with every enabled component requested over a buffer filled
// with `fill`; returns the area (its XSTATE_BV in `bv`).
std::vector<std::uint8_t> run_xsave(XsaveForm form, std::uint8_t fill, std::uint64_t& bv) {
  alignas(64) static std::uint8_t area[16384];
  std::memset(area, fill, sizeof(area));
  const std::uint32_t lo = 0xffffffff, hi = 0xffffffff;
  if (form == XsaveForm::kCompacted) {
    __asm__ volatile("xsavec64 (%0)" : : "r"(area), "a"(lo), "d"(hi) : "memory");
  } else {
    __asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(lo), "d"(hi) : "memory");
  }
  std::memcpy(&bv, area + 512, sizeof(bv));
  return std::vector<std::uint8_t>(area, area + sizeof(area));
}

bool in(const std::vector<AreaSpan>& spans, std::size_t at) {
  for (const AreaSpan& s : spans) {
    if (at >= s.offset && at < s.offset + s.size) return true;
  }
  return false;
}

// On this processor: no byte outside the spans changes (a write is never missed), and each span
// has bytes that changed under one of two fills (a written byte cannot equal both). A processor
// may leave part of a saved component as it was (this Xeon VM's XSAVEC skips the first 32 bytes
// of Hi16_ZMM): within a saved component the spans may be larger than the bytes written.
void check_on_this_processor(XsaveForm form) {
  const XsaveLayout& l = host_xsave_layout();
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::uint64_t bv_a = 0, bv_b = 0;
    const auto a = run_xsave(form, 0xa5, bv_a);
    const auto b = run_xsave(form, 0x5a, bv_b);
    // XSAVE keeps the fill's bits outside RFBM: only the enabled ones are the processor's.
    bv_a &= l.xcr0;
    bv_b &= l.xcr0;
    if (bv_a != bv_b) continue;  // the registers' state changed in between: again
    const auto spans = xsave_written(form, l.xcr0, bv_a, l);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!in(spans, i)) {
        ASSERT_TRUE(a[i] == 0xa5 && b[i] == 0x5a)
            << "byte " << i << " written outside the spans (XSTATE_BV " << bv_a << ")";
      }
    }
    for (const AreaSpan& s : spans) {
      bool changed = false;
      for (std::size_t i = s.offset; i < s.offset + s.size; ++i) {
        changed = changed || a[i] != 0xa5 || b[i] != 0x5a;
      }
      EXPECT_TRUE(changed) << "span at " << s.offset << " (" << s.size
                           << " bytes) never written (XSTATE_BV " << bv_a << ")";
    }
    return;
  }
  FAIL() << "XSTATE_BV differed between every pair of runs";
}

TEST(XsaveWritten, XsaveOnThisProcessorWritesExactlyTheSpans) {
  if (host_xsave_layout().xcr0 == 0)
    GTEST_SKIP() << "this processor has no XSAVE enabled (CR4.OSXSAVE)";
  check_on_this_processor(XsaveForm::kStandard);
}

TEST(XsaveWritten, XsavecOnThisProcessorWritesExactlyTheSpans) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (host_xsave_layout().xcr0 == 0 || !__get_cpuid_count(0xd, 1, &a, &b, &c, &d) ||
      (a & 2u) == 0) {
    GTEST_SKIP() << "this processor has no XSAVEC (CPUID 0xD.1 EAX bit 1)";
  }
  check_on_this_processor(XsaveForm::kCompacted);
}

}  // namespace
}  // namespace hwarb::x86

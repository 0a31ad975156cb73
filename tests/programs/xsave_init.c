// xsave_init: XSAVEC with only AVX requested (RFBM = 4) into a 64-byte-aligned area, three times:
// with the AVX upper halves in their initial state (after vzeroupper), in use (ymm0 all ones),
// and initial again. The processor writes the AVX component (bytes 576..831 of the compacted
// area; `area.avx`) only when it saves it, which the XSTATE_BV it writes tells.
// Prints "saved=N" (N: the executions that saved AVX, from their XSTATE_BV) and exits 0;
// "saved=-1" when the processor has no AVX or no XSAVEC.
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct xarea {
  uint8_t legacy[512];
  uint64_t xstate_bv;
  uint64_t xcomp_bv;
  uint8_t header_rest[48];
  uint64_t avx[32];
} __attribute__((aligned(64)));

struct xarea area;

static int usable(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 2)) return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6) == 6;
}

__attribute__((noinline)) static int save(void) {
  __asm__ volatile("xsavec64 %0" : "=m"(area) : "a"(4), "d"(0) : "memory");
  return (int)(area.xstate_bv & 4) >> 2;
}

int main(void) {
  if (!usable()) {
    puts("saved=-1");
    return 0;
  }
  int saved = 0;
  __asm__ volatile("vzeroupper" ::: "memory");
  saved += save();
  __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0" ::: "xmm0", "memory");
  saved += save();
  __asm__ volatile("vzeroupper" ::: "memory");
  saved += save();
  printf("saved=%d\n", saved);
  return 0;
}

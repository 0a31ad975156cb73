// strings: string instructions and xsave writing an 8-byte `watched` word that sits inside the
// buffer they cover. Each instruction writes `watched` once, whatever else it writes:
//   4 x rep stosq over buf (8 words; `watched` is word 3),
//   4 x rep movsq from src over buf,
//   1 x xsave of the x87/SSE state into an area whose bytes 24..31 are `watched` (the FPU
//       instruction pointer field of the legacy region), when the CPU has xsave.
// Prints "writes=W" (9, or 8 without xsave) and exits 0. The hardware counts one hit per
// instruction for each of them; so must the software watch.
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>

struct layout {
  uint64_t before[3];
  uint64_t watched;
  uint64_t after[4];
} __attribute__((aligned(64)));

struct xarea {
  union {
    struct layout words;
    unsigned char bytes[4096];
  } u;
} __attribute__((aligned(64)));

struct xarea area;
static uint64_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static int has_xsave(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_XSAVE) && (c & bit_OSXSAVE);
}

int main(void) {
  int writes = 0;
  for (int round = 0; round < 4; ++round) {
    void* dst = &area.u.words;
    uint64_t count = 8;
    const uint64_t value = 0x1111111111111111ULL * (uint64_t)(round + 1);
    __asm__ volatile("rep stosq" : "+D"(dst), "+c"(count) : "a"(value) : "memory");
    ++writes;
  }
  for (int round = 0; round < 4; ++round) {
    void* dst = &area.u.words;
    const void* from = src;
    uint64_t count = 8;
    src[3] = (uint64_t)round + 100;
    __asm__ volatile("rep movsq" : "+D"(dst), "+S"(from), "+c"(count) : : "memory");
    ++writes;
  }
  if (has_xsave()) {
    __asm__ volatile("xsave %0" : "=m"(area) : "a"(3), "d"(0) : "memory");
    ++writes;
  }
  printf("writes=%d\n", writes);
  return 0;
}

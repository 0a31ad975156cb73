// random_access SEED N: N accesses to the 64-byte `area`, each chosen by a fixed LCG from SEED:
// a load, a store or an add (read-modify-write) of 1, 2, 4 or 8 bytes at any offset (unaligned
// too). Each access is printed as "OP OFFSET SIZE VALUE" (OP r, w or a; VALUE the stored value
// or the added amount, hex) before it is made, so a test can replay it against a model.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

unsigned char area[64] __attribute__((aligned(64)));

static uint64_t state;

static uint64_t next(void) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return state >> 17;
}

__attribute__((noinline)) static uint64_t load(unsigned off, unsigned size) {
  volatile unsigned char* p = area + off;
  switch (size) {
    case 1: return *(volatile uint8_t*)p;
    case 2: return *(volatile uint16_t*)p;
    case 4: return *(volatile uint32_t*)p;
    default: return *(volatile uint64_t*)p;
  }
}

__attribute__((noinline)) static void store(unsigned off, unsigned size, uint64_t v) {
  volatile unsigned char* p = area + off;
  switch (size) {
    case 1: *(volatile uint8_t*)p = (uint8_t)v; break;
    case 2: *(volatile uint16_t*)p = (uint16_t)v; break;
    case 4: *(volatile uint32_t*)p = (uint32_t)v; break;
    default: *(volatile uint64_t*)p = v; break;
  }
}

__attribute__((noinline)) static void add(unsigned off, unsigned size, uint64_t v) {
  unsigned char* p = area + off;
  switch (size) {
    case 1: __atomic_fetch_add((uint8_t*)p, (uint8_t)v, __ATOMIC_RELAXED); break;
    case 2: __atomic_fetch_add((uint16_t*)p, (uint16_t)v, __ATOMIC_RELAXED); break;
    case 4: __atomic_fetch_add((uint32_t*)p, (uint32_t)v, __ATOMIC_RELAXED); break;
    default: __atomic_fetch_add((uint64_t*)p, v, __ATOMIC_RELAXED); break;
  }
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  state = strtoull(argv[1], NULL, 10);
  int n = atoi(argv[2]);
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    unsigned size = 1u << (next() % 4);
    unsigned off = (unsigned)(next() % (64 - size + 1));
    unsigned op = (unsigned)(next() % 3);
    uint64_t v = next();
    if (size < 8) v &= (1ULL << (8 * size)) - 1;
    printf("%c %u %u %llx\n", "rwa"[op], off, size, (unsigned long long)v);
    fflush(stdout);
    if (op == 0) sum += load(off, size);
    if (op == 1) store(off, size, v);
    if (op == 2) add(off, size, v);
  }
  printf("sum %llx\n", (unsigned long long)sum);
  return 0;
}

// bench_rare: the "rare writes" program of the software-watch benchmark (bench/gdb_bench.sh).
// The watched global `rare` is a page-aligned, page-sized struct, so nothing else lives in its
// page; main writes rare.value exactly 10 times (values 1..10), once at the start of each of 10
// phases, and in every phase does UNITS units of memory-heavy work that never touches that page
// (one unit: 1024 pseudo-random read-modify-writes of a 4 MiB heap array mixed with a 4 KiB stack
// array). Prints "checksum=C rare=10" and exits 0.
//   prog_bench_rare [UNITS]     default 1200 (about 55 ms natively on the 2-core AMD VM)
#include <stdio.h>
#include <stdlib.h>

#define BENCH_RARE_PHASES 10
#define BENCH_RARE_HEAP_WORDS (1u << 20)
#define BENCH_RARE_STACK_WORDS 1024u
#define BENCH_RARE_UNIT_STEPS 1024u

struct rare_page {
  volatile int value;
  char rest[4096 - sizeof(int)];
};

__attribute__((aligned(4096))) struct rare_page rare;

static unsigned next_random(unsigned* state) {
  unsigned x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

__attribute__((noinline)) static unsigned work_unit(unsigned* heap, unsigned* local,
                                                    unsigned* state) {
  unsigned acc = 0;
  for (unsigned j = 0; j < BENCH_RARE_UNIT_STEPS; ++j) {
    unsigned x = next_random(state);
    unsigned* slot = &heap[x & (BENCH_RARE_HEAP_WORDS - 1)];
    *slot += local[j & (BENCH_RARE_STACK_WORDS - 1)];
    local[j & (BENCH_RARE_STACK_WORDS - 1)] ^= x;
    acc += *slot;
  }
  return acc;
}

int main(int argc, char** argv) {
  long units = argc > 1 ? atol(argv[1]) : 1200;
  if (units < 0) units = 0;
  unsigned* heap = calloc(BENCH_RARE_HEAP_WORDS, sizeof(unsigned));
  if (heap == NULL) return 1;
  unsigned local[BENCH_RARE_STACK_WORDS];
  for (unsigned k = 0; k < BENCH_RARE_STACK_WORDS; ++k) local[k] = k * 2654435761u;
  unsigned state = 2463534242u;
  unsigned checksum = 0;
  for (int phase = 1; phase <= BENCH_RARE_PHASES; ++phase) {
    rare.value = phase;
    for (long u = 0; u < units; ++u) checksum = checksum * 31u + work_unit(heap, local, &state);
  }
  free(heap);
  printf("checksum=%u rare=%d\n", checksum, rare.value);
  return 0;
}

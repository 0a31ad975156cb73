// bench_watch: the program of the gdbserver benchmark (bench/gdbserver_bench.sh).
//   prog_bench_watch counter|block WRITES [WORK]
// counter: main writes the global int `counter` WRITES times, with the values 1, 2, ..., WRITES.
// block:   main writes the 64-byte global `block` (eight longs, 64-byte aligned) WRITES times; write
//          i stores i into element i % 8, so every write changes the 64-byte value.
// Between two writes, WORK rounds (default 1) of arithmetic on a small array on the stack (another
// page than the globals; 15 instructions a round at -O1, about 16 more per write), so that a
// debugger that single-steps has instructions to step besides the writes. Prints
// "checksum=C writes=WRITES last=L" and exits 0; exit status 2 on bad arguments.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int counter;
volatile long block[8] __attribute__((aligned(64)));

static unsigned mix(volatile unsigned *scratch, int i, long work) {
  unsigned sum = 0;
  for (long r = 0; r < work; ++r) {
    scratch[r & 3] = (scratch[(r + 1) & 3] ^ (unsigned)i) * 16777619u;
    sum = sum * 31u + scratch[r & 3];
  }
  return sum;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4 || (strcmp(argv[1], "counter") != 0 && strcmp(argv[1], "block") != 0)) {
    fprintf(stderr, "usage: prog_bench_watch counter|block WRITES [WORK]\n");
    return 2;
  }
  int use_block = strcmp(argv[1], "block") == 0;
  long writes = strtol(argv[2], NULL, 10);
  long work = argc == 4 ? strtol(argv[3], NULL, 10) : 1;
  if (writes < 0 || work < 0) {
    fprintf(stderr, "prog_bench_watch: WRITES and WORK must be >= 0\n");
    return 2;
  }
  volatile unsigned scratch[4] = {1u, 2u, 3u, 4u};
  unsigned checksum = 0;
  for (long i = 1; i <= writes; ++i) {
    checksum = checksum * 31u + mix(scratch, (int)i, work);
    if (use_block)
      block[i & 7] = i;
    else
      counter = (int)i;
  }
  long last = use_block ? block[writes & 7] : counter;
  printf("checksum=%u writes=%ld last=%ld\n", checksum, writes, last);
  return 0;
}

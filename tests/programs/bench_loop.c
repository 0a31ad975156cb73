// bench_loop: the software-watch benchmark's loop (bench/gdb_bench.sh). main writes the global
// `counter` exactly 14 300 times, each time with a new value (1, 2, ..., 14 300), and between two
// writes mixes a small array on its stack (another page than counter's); prints
// "checksum=C counter=14300" and exits 0. Runs in about 2 ms natively, start-up included.
//   prog_bench_loop
#include <stdio.h>

#define BENCH_LOOP_WRITES 14300

volatile int counter;

int main(void) {
  volatile unsigned scratch[4] = {1u, 2u, 3u, 4u};
  unsigned checksum = 0;
  for (int i = 1; i <= BENCH_LOOP_WRITES; ++i) {
    scratch[i & 3] = (scratch[(i + 1) & 3] ^ (unsigned)i) * 16777619u;
    checksum = checksum * 31u + scratch[i & 3];
    counter = i;
  }
  printf("checksum=%u counter=%d\n", checksum, counter);
  return 0;
}

// bench_trace: the branch-tracing benchmark's program (bench/gdb_bench.sh): deterministic control
// flow of about 216 000 instructions from main to exit, about a fifth of them taken branches
// (calls, returns, a loop, if/else and a switch). main runs step() over 0..N-1 with N = 5320,
// prints "checksum=C" and exits 0; no input changes the path. The line is formatted by hand and
// written with write(2): printf's vectorised string functions (AVX2/EVEX on this machine) are
// instructions gdb's `record full` cannot record.
//   prog_bench_trace
#include <unistd.h>

#define BENCH_TRACE_ROUNDS 5320

__attribute__((noinline)) static unsigned mix(unsigned v) {
  if (v & 4u) return v * 3u + 1u;
  return v >> 1;
}

__attribute__((noinline)) static unsigned step(unsigned acc, unsigned i) {
  if (i & 1u) {
    acc += mix(i);
  } else {
    acc ^= i << 3;
  }
  switch (i % 5u) {
    case 0:
      acc += 11u;
      break;
    case 1:
      acc = acc * 7u;
      break;
    case 2:
      acc -= i;
      break;
    case 3:
      acc ^= 0x5a5au;
      break;
    default:
      acc += mix(acc);
      break;
  }
  return acc;
}

int main(void) {
  unsigned acc = 1;
  for (unsigned i = 0; i < BENCH_TRACE_ROUNDS; ++i) acc = step(acc, i);
  char line[32] = "checksum=";
  char digits[10];
  int count = 0;
  do {
    digits[count++] = (char)('0' + acc % 10u);
    acc /= 10u;
  } while (acc != 0);
  int len = 9;
  while (count > 0) line[len++] = digits[--count];
  line[len++] = '\n';
  return write(1, line, (size_t)len) == len ? 0 : 1;
}

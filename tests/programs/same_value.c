// same_value: stores the same value into `cell` again and again and never reads it, so every
// access to `cell` is a write, though none changes its value.
//   prog_same_value [N]   N stores of 7 into `cell` (default 10), through store_seven; prints
//                         "stores=N" and exits 0.
#include <stdio.h>
#include <stdlib.h>

volatile long cell = 7;

__attribute__((noinline)) void store_seven(void) {
  cell = 7;  // the one store to cell, always the value it already holds
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 10;
  for (long i = 0; i < n; ++i) store_seven();
  printf("stores=%ld\n", n);
  return 0;
}

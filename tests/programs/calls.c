// calls: calls work() N times (default 7) and prints the total; exits 0.
//   prog_calls [N]
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int work(int x) {
  return x * 3 + 1;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 7;
  long total = 0;
  for (int i = 0; i < n; ++i) total += work(i);
  printf("total=%ld\n", total);
  return 0;
}

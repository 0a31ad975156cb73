// ticker: writes its pid to the file named by its argument, then writes `ticks` every PERIOD
// microseconds (default 1000), N times (default 3000), prints "ticks=N" and exits with STATUS
// (default 0). For job control and for attaching (-p) while it runs: a stopped ticker writes
// nothing.
//   prog_ticker PIDFILE [N [STATUS [PERIOD]]]
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile long ticks;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long n = argc > 2 ? atol(argv[2]) : 3000;
  FILE* f = fopen(argv[1], "w");
  if (f == NULL) return 2;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  const long period_us = argc > 4 ? atol(argv[4]) : 1000;
  struct timespec ms = {period_us / 1000000, (period_us % 1000000) * 1000};
  for (long i = 1; i <= n; ++i) {
    ticks = i;
    nanosleep(&ms, NULL);
  }
  printf("ticks=%ld\n", ticks);
  return argc > 3 ? atoi(argv[3]) : 0;
}

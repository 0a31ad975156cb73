// spin: runs until killed, writing `ticks` about every millisecond and calling tick(); prints
// "ready" once. For attach (-p) and detach tests.
#include <stdio.h>
#include <time.h>

volatile long ticks;

__attribute__((noinline)) void tick(void) {
  ticks = ticks + 1;
}

int main(void) {
  puts("ready");
  fflush(stdout);
  struct timespec ms = {0, 1000000};
  for (;;) {
    tick();
    nanosleep(&ms, NULL);
  }
}

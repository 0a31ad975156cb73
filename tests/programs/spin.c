// spin [SIGNAL]: runs until killed, writing `ticks` about every millisecond and calling tick();
// prints "ready" once. With SIGNAL (a number), it blocks that signal first. For attach (-p) and
// detach tests, and signals held by the mask.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long ticks;

__attribute__((noinline)) void tick(void) {
  ticks = ticks + 1;
}

int main(int argc, char** argv) {
  if (argc > 1) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, atoi(argv[1]));
    sigprocmask(SIG_BLOCK, &set, NULL);
  }
  puts("ready");
  fflush(stdout);
  struct timespec ms = {0, 1000000};
  for (;;) {
    tick();
    nanosleep(&ms, NULL);
  }
}

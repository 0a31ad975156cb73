// fork_threads: one thread forks N children (each exits 0 at once; the thread waits for it)
// while the main thread calls tick() N times, so that a debugger stopping at tick() often holds
// the forking thread inside fork(). Prints "forks=N ticks=N" and exits 0.
//   prog_fork_threads [N]   (default 100)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int n = 100;
static volatile int ticks;

__attribute__((noinline)) void tick(void) {
  ++ticks;
}

static void* forker(void* arg) {
  int* forks = arg;
  for (int i = 0; i < n; ++i) {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || status != 0) exit(3);
    ++*forks;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) n = atoi(argv[1]);
  if (n < 0) return 2;
  int forks = 0;
  pthread_t t;
  if (pthread_create(&t, NULL, forker, &forks) != 0) return 2;
  for (int i = 0; i < n; ++i) {
    tick();
    usleep(200);
  }
  pthread_join(t, NULL);
  printf("forks=%d ticks=%d\n", forks, ticks);
  return 0;
}

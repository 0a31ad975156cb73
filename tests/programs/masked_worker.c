// masked_worker N [PAUSE_US]: a worker thread that blocks every signal (as many servers' workers
// do) adds 1 to `counter` N times with a locked add (an instruction the software watch has the
// CPU make, stepped, rather than one it performs itself), sleeping PAUSE_US microseconds after
// each add (default 0: none); the program has a SIGTRAP handler of its own. At
// the end it says whether that handler is still its own and whether the worker still blocks
// SIGTRAP: "counter=N handler=own worker-blocks-trap=yes" when nothing changed them.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile long counter;
static long rounds = 1000;
static long pause_us;
static int worker_blocks_trap;

static void on_trap(int sig) {
  (void)sig;
}

static void* worker(void* arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (long i = 0; i < rounds; ++i) {
    __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST);
    if (pause_us > 0) usleep((useconds_t)pause_us);
  }
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  worker_blocks_trap = sigismember(&now, SIGTRAP);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) rounds = atol(argv[1]);
  if (argc > 2) pause_us = atol(argv[2]);
  if (rounds < 0 || pause_us < 0) return 2;
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = on_trap;
  sigaction(SIGTRAP, &act, NULL);
  pthread_t id;
  pthread_create(&id, NULL, worker, NULL);
  pthread_join(id, NULL);
  struct sigaction now;
  sigaction(SIGTRAP, NULL, &now);
  printf("counter=%ld handler=%s worker-blocks-trap=%s\n", counter,
         now.sa_handler == on_trap ? "own" : "changed", worker_blocks_trap ? "yes" : "no");
  return 0;
}

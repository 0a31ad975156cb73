// prog_canary THREADS WRITES [LATE]: a target for the hardware watch path (perf_watch_test).
// Starts THREADS-1 more threads, prints the address of `canary_value` ("0x...\n") on stdout and
// stops itself with SIGSTOP (every thread stops). Once continued, it starts LATE more threads
// (default 0), and every thread writes canary_value WRITES times (values 1..WRITES); then it
// prints "stray traps: N\n" and exits 0. Exit 2 on bad arguments, 3 when a thread cannot start.
// A SIGTRAP that reaches it is a debug trap the kernel could not put down to a breakpoint: a hit
// whose debug status the hypervisor lost (seen now and then on KVM guests, whatever the
// breakpoint's owner), which no breakpoint counted. Its handler counts it and returns, so a test
// can tell the machine's lost hits (the N printed) from its own breakpoints' misses.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kMaxThreads = 64 };

static volatile uint64_t canary_value __attribute__((aligned(8)));
static pthread_barrier_t start;
static long writes;

static void write_canary(void) {
  for (long i = 1; i <= writes; ++i) {
    __atomic_store_n(&canary_value, (uint64_t)i, __ATOMIC_RELAXED);
  }
}

// Started before the stop: waits for the main thread to be continued.
static void* early_worker(void* arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  write_canary();
  return NULL;
}

static void* late_worker(void* arg) {
  (void)arg;
  write_canary();
  return NULL;
}

static volatile long stray_traps;

static void stray_trap(int sig) {
  (void)sig;
  __atomic_add_fetch(&stray_traps, 1, __ATOMIC_RELAXED);
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  signal(SIGTRAP, stray_trap);
  const long threads = strtol(argv[1], NULL, 10);
  writes = strtol(argv[2], NULL, 10);
  const long late = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
  if (threads < 1 || late < 0 || threads + late > kMaxThreads || writes < 0) return 2;
  pthread_barrier_init(&start, NULL, (unsigned)threads);
  pthread_t ids[kMaxThreads];
  for (long t = 1; t < threads; ++t) {
    if (pthread_create(&ids[t], NULL, early_worker, NULL) != 0) return 3;
  }
  printf("%p\n", (void*)&canary_value);
  fflush(stdout);
  raise(SIGSTOP);
  for (long t = threads; t < threads + late; ++t) {
    if (pthread_create(&ids[t], NULL, late_worker, NULL) != 0) return 3;
  }
  pthread_barrier_wait(&start);
  write_canary();
  for (long t = 1; t < threads + late; ++t) pthread_join(ids[t], NULL);
  printf("stray traps: %ld\n", __atomic_load_n(&stray_traps, __ATOMIC_RELAXED));
  fflush(stdout);
  return 0;
}

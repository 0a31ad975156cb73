// gdb_threads: threads for a debugger's thread and signal requests (gdbserver_threads_test.sh).
//   prog_gdb_threads trap   main handles SIGTRAP (on_trap counts it) and starts one thread
//                           that calls worker_started and ends; main joins it, prints
//                           "traps=N", exits N.
//   prog_gdb_threads bump [N]  N threads (default 2: main and one more; at most 16) count up
//                           forever on the line marked bump_line, each its own counter.
//   prog_gdb_threads count [R]  four threads each call counted(who, n) for n = 0..R-1
//                           (default R 1000; who: the thread's index 0-3); main joins them,
//                           prints "calls=N" (N the calls counted, 4R) and exits 0.
//   prog_gdb_threads spin   two threads spin until killed (SIGALRM ends a run left behind
//                           after 5 minutes): spinner 0 counts spins[0] up; spinner 1
//                           counts spins[1] up and, every 2^20 spins, calls tick() and adds
//                           one to tick_page.ticks, alone on its page (for a breakpoint and a
//                           watchpoint of either kind that stop one thread while the other
//                           runs on, in non-stop mode).
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int traps;
enum { kBumpers = 16 };
static volatile unsigned counters[kBumpers];

__attribute__((noinline)) void on_trap(int sig) {
  (void)sig;
  traps = traps + 1;
}

__attribute__((noinline)) void worker_started(void) {
  __asm__ volatile("" ::: "memory");
}

static void* trap_worker(void* arg) {
  worker_started();
  return arg;
}

static volatile int calls;
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void counted(int who, int n) {
  (void)who;
  (void)n;
  pthread_mutex_lock(&calls_lock);
  calls = calls + 1;
  pthread_mutex_unlock(&calls_lock);
}

static int rounds = 1000;

static void* counter(void* arg) {
  for (int n = 0; n < rounds; ++n) counted((int)(long)arg, n);
  return arg;
}

static void* bumper(void* arg) {
  volatile unsigned* mine = &counters[(long)arg];
  for (;;) {
    *mine = *mine + 1; /* bump_line */
  }
  return arg;
}

static volatile unsigned spins[2];
static struct {
  volatile int ticks;
  char pad[4092];
} tick_page __attribute__((aligned(4096)));

__attribute__((noinline)) void tick(void) {
  __asm__ volatile("" ::: "memory");
}

static void* spinner(void* arg) {
  const long me = (long)arg;
  for (;;) {
    spins[me] = spins[me] + 1;
    if (me == 1 && (spins[me] & 0xfffff) == 0) {
      tick();
      tick_page.ticks = tick_page.ticks + 1;
    }
  }
  return arg;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  pthread_t id;
  if (strcmp(mode, "trap") == 0) {
    signal(SIGTRAP, on_trap);
    pthread_create(&id, NULL, trap_worker, NULL);
    pthread_join(id, NULL);
    printf("traps=%d\n", traps);
    return traps;
  }
  if (strcmp(mode, "count") == 0) {
    if (argc > 2) rounds = atoi(argv[2]);
    pthread_t ids[4];
    for (long i = 0; i < 4; ++i) pthread_create(&ids[i], NULL, counter, (void*)i);
    for (int i = 0; i < 4; ++i) pthread_join(ids[i], NULL);
    printf("calls=%d\n", calls);
    return 0;
  }
  if (strcmp(mode, "spin") == 0) {
    alarm(300);
    pthread_t ids[2];
    for (long i = 0; i < 2; ++i) pthread_create(&ids[i], NULL, spinner, (void*)i);
    pthread_join(ids[0], NULL);
  }
  if (strcmp(mode, "bump") == 0) {
    const long n = argc > 2 ? strtol(argv[2], NULL, 10) : 2;
    if (n < 1 || n > kBumpers) return 2;
    for (long i = 1; i < n; ++i) pthread_create(&id, NULL, bumper, (void*)i);
    bumper((void*)0L);
  }
  return 2;
}

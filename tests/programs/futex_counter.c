// futex_counter: T threads (default 2) each add 1 to `counter` K times (default 1000) under one
// pthread mutex, so that they block on futexes; prints "counter=N" (N = T*K) and exits 0, or
// exits 1 if a lock call failed or the sum is wrong. With `crash-report`, a SIGSEGV handler of
// its own first, as a server's crash reporter: it prints "crashed" and exits 9.
//   prog_futex_counter [T] [K] [crash-report]
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>

volatile long counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int rounds = 1000;
static volatile int failures;

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < rounds; ++i) {
    if (pthread_mutex_lock(&lock) != 0) failures = failures + 1;
    counter = counter + 1;
    if (pthread_mutex_unlock(&lock) != 0) failures = failures + 1;
  }
  return NULL;
}

static void crash_report(int sig) {
  (void)sig;
  static const char kText[] = "crashed\n";
  (void)!write(1, kText, sizeof kText - 1);
  _exit(9);
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2;
  if (argc > 2) rounds = atoi(argv[2]);
  if (argc > 3 && strcmp(argv[3], "crash-report") == 0) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = crash_report;
    sigaction(SIGSEGV, &act, NULL);
  }
  if (threads < 1 || threads > 16 || rounds < 0) return 2;
  pthread_t ids[16];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, worker, NULL);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  printf("counter=%ld\n", counter);
  return failures == 0 && counter == (long)threads * rounds ? 0 : 1;
}

// tls_counter: T threads (default 4), created after the program starts, each write their own
// copy of the thread-local `tls_counter` N times (default 100) with values 1..N; prints "done"
// and exits 0. The main thread's copy is never written.
//   prog_tls_counter [T] [N] [count|errno|hold]
// errno: each write is followed by a failing close(-1) (libc writes the thread's errno, EBADF).
// hold: thread I (1..T) sets its copy to I, prints "tls TID ADDR" (its thread id and its copy's
// address), sets its errno to 100 + I and waits; the main thread prints "ready" once every
// thread has (the line marked ready_line), then waits too.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__thread volatile int tls_counter;

static int rounds = 100;
static int mode_errno;
static int mode_hold;
static pthread_barrier_t printed;

static void* worker(void* arg) {
  const int index = (int)(long)arg;
  if (mode_hold) {
    tls_counter = index;
    printf("tls %d %p\n", gettid(), (void*)&tls_counter);
    fflush(stdout);
    errno = 100 + index;
    pthread_barrier_wait(&printed);
    for (;;) pause();
  }
  for (int i = 1; i <= rounds; ++i) {
    tls_counter = i;
    if (mode_errno) close(-1);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  if (argc > 2) rounds = atoi(argv[2]);
  const char* mode = argc > 3 ? argv[3] : "count";
  mode_errno = strcmp(mode, "errno") == 0;
  mode_hold = strcmp(mode, "hold") == 0;
  if (threads < 1 || threads > 8) return 2;
  pthread_barrier_init(&printed, NULL, (unsigned)threads + 1);
  pthread_t ids[8];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, worker, (void*)(long)(i + 1));
  if (mode_hold) {
    pthread_barrier_wait(&printed);
    puts("ready"); /* ready_line */
    fflush(stdout);
    for (;;) pause();
  }
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  puts("done");
  return 0;
}

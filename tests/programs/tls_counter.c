// tls_counter: T threads (default 4), created after the program starts, each write their own
// copy of the thread-local `tls_counter` N times (default 100) with values 1..N; prints "done"
// and exits 0. The main thread's copy is never written. The threads start writing once all of
// them exist, and end once all of them have written: no thread is created or ends while one
// writes (a watch that changes at each thread's start and end then sees every write).
//   prog_tls_counter [T] [N] [count|errno|hold] [DELAY]
// DELAY (count, errno): once every thread exists, the main thread prints "ready" and sleeps
// DELAY seconds before the threads start writing (time to attach).
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
static pthread_barrier_t printed;  // hold: every thread has printed
static pthread_barrier_t started;  // every thread exists
static pthread_barrier_t written;  // every thread has written

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
  pthread_barrier_wait(&started);
  for (int i = 1; i <= rounds; ++i) {
    tls_counter = i;
    if (mode_errno) close(-1);
  }
  pthread_barrier_wait(&written);
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  if (argc > 2) rounds = atoi(argv[2]);
  const char* mode = argc > 3 ? argv[3] : "count";
  const int delay = argc > 4 ? atoi(argv[4]) : 0;
  mode_errno = strcmp(mode, "errno") == 0;
  mode_hold = strcmp(mode, "hold") == 0;
  if (threads < 1 || threads > 8) return 2;
  pthread_barrier_init(&printed, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&started, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&written, NULL, (unsigned)threads);
  pthread_t ids[8];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, worker, (void*)(long)(i + 1));
  if (mode_hold) {
    pthread_barrier_wait(&printed);
    puts("ready"); /* ready_line */
    fflush(stdout);
    for (;;) pause();
  }
  if (delay > 0) {
    puts("ready");
    fflush(stdout);
    sleep((unsigned)delay);
  }
  pthread_barrier_wait(&started);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  puts("done");
  return 0;
}

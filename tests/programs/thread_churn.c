// thread_churn: C creator threads (default 2) each create and join R short-lived threads
// (default 500), so that some thread is inside clone() at almost any moment; prints
// "threads=N" (N = C * R, the threads that ran) and exits 0.
//   prog_thread_churn [C] [R]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rounds = 500;
static volatile int ran[8];

static void* child(void* arg) {
  ++ran[(long)arg];
  return NULL;
}

static void* creator(void* arg) {
  for (int i = 0; i < rounds; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, child, arg) != 0) exit(3);
    pthread_join(t, NULL);
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int creators = argc > 1 ? atoi(argv[1]) : 2;
  if (argc > 2) rounds = atoi(argv[2]);
  if (creators < 1 || creators > 8 || rounds < 0) return 2;
  pthread_t ids[8];
  for (long i = 0; i < creators; ++i) pthread_create(&ids[i], NULL, creator, (void*)i);
  int total = 0;
  for (int i = 0; i < creators; ++i) {
    pthread_join(ids[i], NULL);
    total += ran[i];
  }
  printf("threads=%d\n", total);
  return 0;
}

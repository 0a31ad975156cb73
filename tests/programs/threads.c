// threads: T threads (default 4), created after the program starts, each write their own
// slot of `slots` K times (default 50) with values 1..K; prints "done" and exits 0.
//   prog_threads [T] [K]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

volatile int slots[8];
static int rounds = 50;

static void* worker(void* arg) {
  int index = (int)(long)arg;
  for (int i = 1; i <= rounds; ++i) slots[index] = i;
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  if (argc > 2) rounds = atoi(argv[2]);
  if (threads < 1 || threads > 8) return 2;
  pthread_t ids[8];
  for (int i = 0; i < threads; ++i) pthread_create(&ids[i], NULL, worker, (void*)(long)i);
  for (int i = 0; i < threads; ++i) pthread_join(ids[i], NULL);
  puts("done");
  return 0;
}

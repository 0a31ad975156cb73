// thread_churn: C creator threads (default 2) each create and join R short-lived threads
// (default 500), so that some thread is inside clone() at almost any moment; prints
// "threads=N" (N = C * R, the threads that ran) and exits 0.
//   prog_thread_churn [C] [R] [chain]
// With "chain", each of the C creators starts a chain instead: every link makes the next link
// and ends (a detached thread), R links a chain, so that a chain's one live thread is a new
// thread at every moment and its creator is gone.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rounds = 500;
static volatile int ran[8];
static pthread_mutex_t chains_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chains_done = PTHREAD_COND_INITIALIZER;
static int chains_left;

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

static void* link_fn(void* arg) {
  const long chain = (long)arg;
  if (++ran[chain] < rounds) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t next;
    if (pthread_create(&next, &attr, link_fn, arg) != 0) exit(3);
    pthread_attr_destroy(&attr);
    return NULL;
  }
  pthread_mutex_lock(&chains_lock);
  if (--chains_left == 0) pthread_cond_signal(&chains_done);
  pthread_mutex_unlock(&chains_lock);
  return NULL;
}

int main(int argc, char** argv) {
  const int creators = argc > 1 ? atoi(argv[1]) : 2;
  if (argc > 2) rounds = atoi(argv[2]);
  const int chain = argc > 3 && strcmp(argv[3], "chain") == 0;
  if (creators < 1 || creators > 8 || rounds < 1) return 2;
  pthread_t ids[8];
  chains_left = creators;
  for (long i = 0; i < creators; ++i) {
    if (chain) {
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      pthread_create(&ids[i], &attr, link_fn, (void*)i);
      pthread_attr_destroy(&attr);
    } else {
      pthread_create(&ids[i], NULL, creator, (void*)i);
    }
  }
  int total = 0;
  if (chain) {
    pthread_mutex_lock(&chains_lock);
    while (chains_left > 0) pthread_cond_wait(&chains_done, &chains_lock);
    pthread_mutex_unlock(&chains_lock);
  }
  for (int i = 0; i < creators; ++i) {
    if (!chain) pthread_join(ids[i], NULL);
    total += ran[i];
  }
  printf("threads=%d\n", total);
  return 0;
}

// two_pages: `near` and `far` each fill a page of their own. Writes near.value N times (values
// 1..N), then far.value N times (values 101..100+N), then, in one thread created for it, near.value
// once more (value 1000). Prints "near=1000 far=F" and exits 5. Watches on the two can take
// different paths (a debug register, page protection) without sharing a page.
//   prog_two_pages [N]     (default 6)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct page {
  volatile int value;
  char rest[4096 - sizeof(int)];
} __attribute__((aligned(4096)));
struct page near;
struct page far;

__attribute__((noinline)) static void set(struct page* p, int v) {
  p->value = v;
}

static void* late_writer(void* arg) {
  (void)arg;
  set(&near, 1000);
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 6;
  for (int i = 1; i <= n; ++i) set(&near, i);
  for (int i = 1; i <= n; ++i) set(&far, 100 + i);
  pthread_t t;
  if (pthread_create(&t, NULL, late_writer, NULL) != 0) return 1;
  pthread_join(t, NULL);
  printf("near=%d far=%d\n", near.value, far.value);
  return 5;
}

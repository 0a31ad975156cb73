// gdb_target: a program for debuggers driving hwarb gdbserver (gdb, lldb). In order:
//   bump() writes `counter` N times (values 1..N);
//   fill() writes the 64-byte `block` element by element (v[i] = 100 + i);
//   arr[3] is written 3 times (values 7, 8, 9), arr[4] once (value 4);
//   peek() reads `secret` twice;
//   two threads write their own slot of `slots` 3 times each (values 1..3).
// Prints "total=T" (T the sum of everything written) and exits 7.
//   prog_gdb_target [N]     (default 5)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

volatile long counter;
struct block {
  long v[8];
};
volatile struct block block;
volatile int arr[10];
volatile int secret = 42;
volatile int slots[2];

__attribute__((noinline)) void bump(long v) {
  counter = v;
}

__attribute__((noinline)) void fill(void) {
  for (int i = 0; i < 8; ++i) block.v[i] = 100 + i;
}

__attribute__((noinline)) int peek(void) {
  return secret;
}

static void* worker(void* arg) {
  const int slot = (int)(long)arg;
  for (int i = 1; i <= 3; ++i) slots[slot] = i;
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 5;
  for (int i = 1; i <= n; ++i) bump(i);
  fill();
  for (int v = 7; v <= 9; ++v) arr[3] = v;
  arr[4] = 4;
  int r = peek() + peek();
  pthread_t t[2];
  for (long i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  long total = counter + arr[3] + arr[4] + slots[0] + slots[1] + r;
  for (int i = 0; i < 8; ++i) total += block.v[i];
  printf("total=%ld\n", total);
  return 7;
}

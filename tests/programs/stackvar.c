// stackvar: writes a local variable on the stack 5 times (values 1..5) through a pointer it
// prints ("addr=0x..."), then exits 0. A watch on it needs the single-step method.
#include <stdio.h>

__attribute__((noinline)) void store(volatile int* p, int v) {
  *p = v;
}

int main(void) {
  volatile int local = 0;
  printf("addr=%p\n", (void*)&local);
  fflush(stdout);
  for (int i = 1; i <= 5; ++i) store(&local, i);
  return local == 5 ? 0 : 1;
}

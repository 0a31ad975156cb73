// writer: writes the global `target` a known number of times with known values, reads it a
// known number of times, and writes a 16-byte struct field by field.
//   prog_writer [N]     N writes of 1..N through set_target (default 10), then N reads through
//                       get_target, then the struct writes; prints "sum=S" and exits with 3.
#include <stdio.h>
#include <stdlib.h>

volatile int target;
volatile int neighbour;  // same page as target: its accesses are false sharing for a watch
struct record {
  int a;
  int b;
  int c;
  int d;
};
volatile struct record rec;

__attribute__((noinline)) void set_target(int v) {
  target = v;  // the one store to target
}

__attribute__((noinline)) int get_target(void) {
  return target;  // the one load of target
}

__attribute__((noinline)) void fill_record(int v) {
  rec.a = v;
  rec.b = v + 1;
  rec.c = v + 2;
  rec.d = v + 3;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  for (int i = 1; i <= n; ++i) {
    set_target(i);
    neighbour = i;
  }
  long sum = 0;
  for (int i = 0; i < n; ++i) sum += get_target();
  fill_record(10);
  printf("sum=%ld\n", sum);
  return 3;
}

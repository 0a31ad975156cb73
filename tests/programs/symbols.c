// symbols: known globals and functions for the symbol-table and watch tests. main() calls bump()
// a few times (each call writes counter, count, table and record), prints "done" and exits 0.
// With the argument "wait" it then sleeps forever instead, so that a test can inspect it while it
// runs (the test kills it). The "marker:" comments let tests find source lines.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile int counter;
volatile int count;
struct rec {
  int a;
  char pad[3];
  long b;
} record;
int table[16];

__attribute__((noinline)) int bump(int by) {  // marker: bump-begin
  counter += by;
  count = counter / 2;
  table[by & 15] += by;
  record.a = by;
  record.b += by;
  return counter;
}  // marker: bump-end

int main(int argc, char** argv) {
  for (int i = 1; i <= 3; ++i) bump(i);
  puts("done");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "wait") == 0) {
    for (;;) sleep(1);
  }
  return 0;
}

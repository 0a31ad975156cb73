// late_map [N]: maps a page at a fixed address (0x7e0000000000, MAP_FIXED_NOREPLACE) only after
// it starts, and writes the int at its start N times (values 1..N). Prints "late counter=N" and
// exits 0 (1 when the page could not be mapped there). A watch of that address set before the
// page exists must see all N writes.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define LATE_PAGE ((void*)0x7e0000000000ul)

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 20;
  volatile int* counter = mmap(LATE_PAGE, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if ((void*)counter != LATE_PAGE) return 1;
  for (int i = 1; i <= n; ++i) *counter = i;
  printf("late counter=%d\n", *counter);
  return 0;
}

// remap: `area` fills one page of its own. Writes area.counter N times (values 1..N), unmaps the
// page and maps a fresh zero page at the same address, then writes area.counter N more times
// (values 1..N). Prints "remapped counter=N" and exits 0 (1 if the page did not come back there).
// A watch on area.counter must see all 2N writes and values.
//   prog_remap [N]     (default 20)
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

struct area {
  volatile int counter;
  char rest[4096 - sizeof(int)];
} __attribute__((aligned(4096)));
struct area area;

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 20;
  for (int i = 1; i <= n; ++i) area.counter = i;
  if (munmap(&area, sizeof area) != 0) return 1;
  void* again = mmap(&area, sizeof area, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (again != (void*)&area) return 1;
  for (int i = 1; i <= n; ++i) area.counter = i;
  printf("remapped counter=%d\n", area.counter);
  return 0;
}

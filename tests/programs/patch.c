// patch [N]: rewrites its own code between calls. Two bytes at one address of an executable page
// are first a store to `cell` (mov %esi,(%rdi)) and then a load of it (mov (%rdi),%eax), N times
// each, alternating: a tool that kept what it once decoded at an address would take the loads for
// stores. Prints sum=<the sum of the values loaded> (N(N+1)/2) and exits with status 3.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

volatile uint32_t cell;

typedef void (*StoreFn)(volatile uint32_t*, uint32_t);
typedef uint32_t (*LoadFn)(volatile uint32_t*);

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 3;
  unsigned char* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 1;
  memset(page, 0xcc, 4096);  // int3 around the code: the 15 bytes before it are mapped
  unsigned char* code = page + 64;
  static const unsigned char store[] = {0x89, 0x37, 0xc3};  // mov %esi,(%rdi); ret
  static const unsigned char load[] = {0x8b, 0x07, 0xc3};   // mov (%rdi),%eax; ret
  uint32_t sum = 0;
  for (int i = 1; i <= n; ++i) {
    memcpy(code, store, sizeof(store));
    ((StoreFn)(void*)code)(&cell, (uint32_t)i);
    memcpy(code, load, sizeof(load));
    sum += ((LoadFn)(void*)code)(&cell);
  }
  printf("sum=%u\n", sum);
  return 3;
}

// libdata: writes a variable of the C library N times through its address: libc's own
// program_invocation_short_name (found with dlsym, so that the executable holds no copy of it),
// which the dynamic loader maps only after the program's first instruction. Prints "at=ADDR n=N"
// and exits 0.
//   prog_libdata [N]     (default 5)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 5;
  static const char* const names[] = {"even", "odd"};
  const char** name = dlsym(RTLD_DEFAULT, "program_invocation_short_name");
  if (name == NULL) return 1;
  for (int i = 0; i < n; ++i) *(const char* volatile*)name = names[i % 2];
  printf("at=%p n=%d\n", (void*)name, n);
  return 0;
}

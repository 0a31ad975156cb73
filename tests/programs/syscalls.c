// syscalls: the kernel writes and reads a watched global: read(2) from a pipe into `buffer`,
// write(2) of it to stdout, and clock_gettime into `stamp`; exits 0.
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char buffer[16];
struct timespec stamp;

int main(void) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  if (write(fds[1], "kernel!", 7) != 7) return 1;
  if (read(fds[0], buffer, sizeof(buffer)) != 7) return 1;
  if (write(1, buffer, 7) != 7) return 1;
  if (write(1, "\n", 1) != 1) return 1;
  clock_gettime(CLOCK_MONOTONIC, &stamp);
  return strcmp(buffer, "kernel!") == 0 ? 0 : 1;
}

// reread: the kernel writes the same bytes into a watched global again and again: N reads of
// the first 16 bytes of the program's own file into `buffer`, pread64 and preadv(2) in turn.
// Prints "reads=N" and exits 0 (1 when a read comes up short).
//   prog_reread [N]     (default 10)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

char buffer[16];

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 10;
  const int fd = open("/proc/self/exe", O_RDONLY);
  if (fd < 0) return 1;
  for (int i = 0; i < n; ++i) {
    struct iovec iov = {buffer, sizeof buffer};
    const ssize_t got = i % 2 == 0 ? pread(fd, buffer, sizeof buffer, 0) : preadv(fd, &iov, 1, 0);
    if (got != (ssize_t)sizeof buffer) return 1;
  }
  printf("reads=%d\n", n);
  return 0;
}

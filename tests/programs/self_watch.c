// prog_self_watch N: a program that watches itself with a perf breakpoint, as a profiler or a
// program's own instrumentation does. It opens a user-space write breakpoint (perf_event_open,
// PERF_TYPE_BREAKPOINT) on `neighbour`, then writes `neighbour` and `target` (the same page)
// N times each, and prints "breakpoint counted C of N". `target` is the variable a test watches
// with hwarb: whatever hwarb does, C must be what the program counts without it.
// Exit 0; 2 on bad arguments; 3 when the kernel refuses the breakpoint (its errno printed).
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

volatile long target __attribute__((aligned(64)));
volatile long neighbour;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const long n = strtol(argv[1], NULL, 10);
  if (n < 0) return 2;
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.size = sizeof attr;
  attr.bp_type = HW_BREAKPOINT_W;
  attr.bp_addr = (uint64_t)(uintptr_t)&neighbour;
  attr.bp_len = HW_BREAKPOINT_LEN_8;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd < 0) {
    printf("perf_event_open: %s\n", strerror(errno));
    return 3;
  }
  for (long i = 1; i <= n; ++i) {
    neighbour = i;
    target = i;
  }
  uint64_t count = 0;
  if (read((int)fd, &count, sizeof count) != (ssize_t)sizeof count) return 3;
  printf("breakpoint counted %llu of %ld\n", (unsigned long long)count, n);
  return 0;
}

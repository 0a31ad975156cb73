// prog_self_watch N [K [fork]]: a program that watches itself with perf breakpoints, as a
// profiler or a program's own instrumentation does. It opens K (1 to 4, default 1) user-space
// write breakpoints (perf_event_open, PERF_TYPE_BREAKPOINT), one on each of `neighbour[0..K-1]`,
// then writes each of them and `target` (the same page) N times, and prints "breakpoint counted C
// of N" for each breakpoint. `target` is the variable a test watches with hwarb: whatever hwarb
// does, each C must be what the program counts without it — all K registers included.
// With "fork", a child does all that (after 300 ms) while the parent calls parent_stop() (a
// debugger's breakpoint: the parent stops there while its child runs), then says whether the child
// had ended by then ("child ended before the parent went on: yes|no"), waits for it, writes
// `target` N times itself and exits with the child's status. Exit 0; 2 on bad arguments; 3 when the
// kernel refuses a breakpoint or its count (which one, and why, printed).
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long target __attribute__((aligned(64)));
volatile long neighbour[4];

__attribute__((noinline)) void parent_stop(void) {
  __asm__ volatile("" ::: "memory");
}

static int watch_self(long n, long k);

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) return 2;
  const long n = strtol(argv[1], NULL, 10);
  const long k = argc >= 3 ? strtol(argv[2], NULL, 10) : 1;
  if (n < 0 || k < 1 || k > 4) return 2;
  if (argc == 4 && strcmp(argv[3], "fork") != 0) return 2;
  if (argc < 4) return watch_self(n, k);
  fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    // Late enough that a debugger has the parent stopped at parent_stop by then.
    usleep(300 * 1000);
    const int rc = watch_self(n, k);
    fflush(stdout);
    _exit(rc);
  }
  parent_stop();
  int status = 0;
  const pid_t ended = waitpid(child, &status, WNOHANG);
  printf("child ended before the parent went on: %s\n", ended == child ? "yes" : "no");
  fflush(stdout);
  if (ended == 0 && waitpid(child, &status, 0) != child) return 3;
  for (long i = 1; i <= n; ++i) target = i;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

static int watch_self(long n, long k) {
  long fds[4];
  for (long b = 0; b < k; ++b) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.size = sizeof attr;
    attr.bp_type = HW_BREAKPOINT_W;
    attr.bp_addr = (uint64_t)(uintptr_t)&neighbour[b];
    attr.bp_len = HW_BREAKPOINT_LEN_8;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fds[b] = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fds[b] < 0) {
      printf("perf_event_open of breakpoint %ld: %s\n", b + 1, strerror(errno));
      return 3;
    }
  }
  for (long i = 1; i <= n; ++i) {
    for (long b = 0; b < k; ++b) neighbour[b] = i;
    target = i;
  }
  for (long b = 0; b < k; ++b) {
    uint64_t count = 0;
    const ssize_t got = read((int)fds[b], &count, sizeof count);
    if (got != (ssize_t)sizeof count) {
      // 0 bytes: the kernel put the event in its error state (it could not be scheduled).
      printf("read of breakpoint %ld: %s\n", b + 1, got < 0 ? strerror(errno) : "0 bytes");
      return 3;
    }
    printf("breakpoint counted %llu of %ld\n", (unsigned long long)count, n);
  }
  return 0;
}

// branches: a function of known control flow for the branch tracer's tests. classify(n) runs a
// loop over 0..n-1 with an if/else on the parity of i, a call of the noinline helper weigh() for
// the multiples of 3, and a switch on i % 4; it returns a checksum. main calls classify once
// with N (default 100), prints "classify(N)=RESULT" and exits 0. Optional MODE, for tracing a
// program that receives a signal or forks (classify is still called once by this process):
//   signal  raise(SIGUSR1) first; the handler calls weigh() and main prints "signal=VALUE"
//   fork    a child prints "child=classify(N/2)" and exits 0, the parent waits for it first
//   prog_branches [N [signal|fork]]
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int weigh(int v) {
  if (v > 50) return v / 2;
  return v * 3 + 1;
}

__attribute__((noinline)) int classify(int n) {
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    if (i & 1) {
      acc += i;
    } else {
      acc -= 2;
    }
    if (i % 3 == 0) acc += weigh(i);
    switch (i % 4) {
      case 0:
        acc ^= 5;
        break;
      case 1:
        acc += 7;
        break;
      case 2:
        acc *= 3;
        break;
      default:
        acc -= i;
        break;
    }
  }
  return acc;
}

static volatile sig_atomic_t from_handler;

static void on_usr1(int sig) {
  from_handler = weigh(sig + 60);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  const char* mode = argc > 2 ? argv[2] : "";
  if (strcmp(mode, "signal") == 0) {
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    printf("signal=%d\n", (int)from_handler);
  } else if (strcmp(mode, "fork") == 0) {
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      printf("child=%d\n", classify(n / 2));
      exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return 1;
    }
  }
  printf("classify(%d)=%d\n", n, classify(n));
  return 0;
}

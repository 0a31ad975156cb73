// forker: writes `counter` in a parent and in children made by fork, vfork + exec, or exec.
//   prog_forker child N   write `counter` N times (values 1..N), exit 3
//   prog_forker fork N    fork: the child writes N times and exits 3; the parent waits, prints
//                         "child exit 3", then writes N times; exit 0
//   prog_forker vfork N   vfork + exec of `prog_forker child N`; the parent waits, prints
//                         "child exit 3", then writes N times; exit 0
//   prog_forker exec N    writes N times, then execs `prog_forker child N` (exit 3)
//   prog_forker outlive N fork: the parent writes N times and exits 0 at once; the child waits
//                         for the parent's end (EOF on a pipe), writes N times, then prints
//                         "child wrote N" (so 2N writes, N of them after the parent's end)
//   prog_forker loop      until killed: vfork + exec of `prog_forker child 1`, wait, write
//                         `counter`; a SIGSEGV reaching its handler prints "SIGSEGV in loop" and
//                         exits 4 (a program that fights back: its handler must never run)
// Every mode but loop makes 2N writes of `counter` in all. A child killed by a signal prints
// "child killed by signal S" and the parent exits 1.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long counter;

static void write_counter(int n) {
  for (int i = 1; i <= n; ++i) counter = i;
}

static int report(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  if (WIFSIGNALED(status)) {
    printf("child killed by signal %d\n", WTERMSIG(status));
    return 1;
  }
  printf("child exit %d\n", WEXITSTATUS(status));
  fflush(stdout);
  return WEXITSTATUS(status) == 3 ? 0 : 1;
}

static void on_segv(int sig) {
  (void)sig;
  static const char kText[] = "SIGSEGV in loop\n";
  if (write(1, kText, sizeof kText - 1) < 0) _exit(5);
  _exit(4);
}

static int vfork_loop(const char* self) {
  signal(SIGSEGV, on_segv);
  // A static count: vfork's child shares this frame, and a local would be clobbered.
  static long round;
  for (round = 1;; ++round) {
    const pid_t pid = vfork();
    if (pid < 0) return 1;
    if (pid == 0) {
      execl("/proc/self/exe", self, "child", "1", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 3) {
      printf("round %ld: child status %#x\n", round, status);
      return 1;
    }
    counter = round;
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "loop") == 0) return vfork_loop(argv[0]);
  if (argc != 3) return 2;
  const int n = atoi(argv[2]);
  if (strcmp(argv[1], "child") == 0) {
    write_counter(n);
    return 3;
  }
  fflush(stdout);
  if (strcmp(argv[1], "fork") == 0) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      write_counter(n);
      _exit(3);
    }
    const int rc = report(pid);
    write_counter(n);
    return rc;
  }
  if (strcmp(argv[1], "vfork") == 0) {
    const pid_t pid = vfork();
    if (pid < 0) return 1;
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "child", argv[2], (char*)NULL);
      _exit(127);
    }
    const int rc = report(pid);
    write_counter(n);
    return rc;
  }
  if (strcmp(argv[1], "outlive") == 0) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      close(fds[1]);
      char c;
      while (read(fds[0], &c, 1) > 0) {
      }
      write_counter(n);
      printf("child wrote %d\n", n);
      fflush(stdout);
      _exit(0);
    }
    close(fds[0]);
    write_counter(n);
    return 0;
  }
  if (strcmp(argv[1], "exec") == 0) {
    write_counter(n);
    execl("/proc/self/exe", argv[0], "child", argv[2], (char*)NULL);
    return 127;
  }
  return 2;
}

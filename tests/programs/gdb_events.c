// gdb_events: a program for debugger tests of stops that come together and of a process's
// life-cycle events (threads hitting one breakpoint at once, a forked child running code with a
// breakpoint in it, an exec):
//   prog_gdb_events threads [N]  4 threads call in_worker() N times each (default 2000), then
//                                main prints "sum=S" (S = 4 * N * (N + 1) / 2) and exits 0
//   prog_gdb_events fork         a forked child calls in_child() and exits 3; the parent waits and
//                                prints "child status=3" (what waitpid said), exits 0
//   prog_gdb_events vfork        as fork, with vfork: the child calls in_child() and _exits 3
//                                while the parent waits in the kernel
//   prog_gdb_events exec PROG    calls before_exec(), then execs PROG (no arguments)
//   prog_gdb_events vfork-exec PROG  a vforked child execs PROG; the parent waits and prints
//                                "child status=S"
//   prog_gdb_events fork-watch [FILE]  sets `watched` to 1, forks; the child sets it to 100 and
//                                exits 3, the parent sets it to 10, waits and prints "child
//                                status=3" and "parent watched=10" (what it reads back) on
//                                stdout or into FILE (a parent a debugger let go may outlive
//                                the reader of its stdout), exits 0
//   prog_gdb_events clone        4 raw clones (CLONE_VM | CLONE_FILES, no CLONE_THREAD: each a
//                                thread group of its own sharing the memory) each count down
//                                `pending`; main waits for 0 (at most 20 s) and prints "clones=4"
//   prog_gdb_events leader-exit [held] [PROG]  main starts a thread and ends itself
//                                (pthread_exit); the thread joins it, waits for SIGUSR1 if
//                                `held`, calls alone(), then execs PROG if given (the thread takes
//                                the leader's id) or prints "alone" and exits 0
//   prog_gdb_events late-thread  main starts a thread and ends itself (pthread_exit); that thread
//                                starts another and ends too; the last one, the only thread
//                                left, sleeps 200 ms, prints "late" and exits 0
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long per_thread;
static long sums[4];

__attribute__((noinline)) long in_worker(long acc, long i) {
  return acc + i;
}

static void* worker(void* arg) {
  const long slot = (long)arg;
  long acc = 0;
  for (long i = 1; i <= per_thread; ++i) acc = in_worker(acc, i);
  sums[slot] = acc;
  return NULL;
}

__attribute__((noinline)) int in_child(int v) {
  return v + 2;
}

static volatile int pending;
static volatile int watched;

static int count_down(void* arg) {
  (void)arg;
  __atomic_sub_fetch(&pending, 1, __ATOMIC_SEQ_CST);
  return 0;
}

__attribute__((noinline)) void before_exec(const char* prog) {
  printf("exec %s\n", prog);
  fflush(stdout);
}

__attribute__((noinline)) void alone(void) {
  __asm__ volatile("" ::: "memory");
}

static pthread_t leader;
static const char* leader_exit_prog;
static int leader_exit_held;

static void* outlive_leader(void* arg) {
  (void)arg;
  pthread_join(leader, NULL);
  if (leader_exit_held) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    int sig = 0;
    sigwait(&usr1, &sig);
  }
  alone();
  if (leader_exit_prog != NULL) {
    execl(leader_exit_prog, leader_exit_prog, (char*)NULL);
    _exit(127);
  }
  printf("alone\n");
  exit(0);
}

static void* last_thread(void* arg) {
  (void)arg;
  const struct timespec nap = {0, 200 * 1000 * 1000};
  nanosleep(&nap, NULL);
  printf("late\n");
  exit(0);
}

static void* first_thread(void* arg) {
  (void)arg;
  pthread_t t;
  if (pthread_create(&t, NULL, last_thread, NULL) != 0) exit(1);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  if (strcmp(mode, "threads") == 0) {
    per_thread = argc > 2 ? atol(argv[2]) : 2000;
    pthread_t t[4];
    for (long i = 0; i < 4; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
    long sum = 0;
    for (int i = 0; i < 4; ++i) {
      pthread_join(t[i], NULL);
      sum += sums[i];
    }
    printf("sum=%ld\n", sum);
    return 0;
  }
  if (strcmp(mode, "clone") == 0) {
    enum { kClones = 4, kStack = 64 * 1024 };
    pending = kClones;
    alarm(20);
    for (int i = 0; i < kClones; ++i) {
      char* stack = malloc(kStack);
      if (clone(count_down, stack + kStack, CLONE_VM | CLONE_FILES, NULL) < 0) return 1;
    }
    while (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) != 0) sched_yield();
    printf("clones=%d\n", kClones);
    return 0;
  }
  if (strcmp(mode, "fork-watch") == 0) {
    watched = 1;
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      watched = 100;
      _exit(in_child(1));
    }
    watched = 10;
    int status = 0;
    waitpid(child, &status, 0);
    FILE* out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (out == NULL) return 1;
    fprintf(out, "child status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fprintf(out, "parent watched=%d\n", watched);
    return fclose(out) == 0 ? 0 : 1;
  }
  if (strcmp(mode, "late-thread") == 0) {
    fflush(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, first_thread, NULL) != 0) return 1;
    pthread_exit(NULL);
  }
  if (strcmp(mode, "leader-exit") == 0) {
    int next = 2;
    leader_exit_held = argc > next && strcmp(argv[next], "held") == 0;
    if (leader_exit_held) {
      ++next;
      sigset_t usr1;
      sigemptyset(&usr1);
      sigaddset(&usr1, SIGUSR1);
      pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    }
    leader_exit_prog = argc > next ? argv[next] : NULL;
    leader = pthread_self();
    fflush(stdout);
    pthread_t t;
    if (pthread_create(&t, NULL, outlive_leader, NULL) != 0) return 1;
    pthread_exit(NULL);
  }
  const int vfork_exec = strcmp(mode, "vfork-exec") == 0 && argc > 2;
  if (strcmp(mode, "fork") == 0 || strcmp(mode, "vfork") == 0 || vfork_exec) {
    fflush(stdout);
    const pid_t child = strcmp(mode, "fork") == 0 ? fork() : vfork();
    if (child == 0 && vfork_exec) {
      execl(argv[2], argv[2], (char*)NULL);
      _exit(127);
    }
    if (child == 0) _exit(in_child(1));
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status)) {
      printf("child status=%d\n", WEXITSTATUS(status));
    } else {
      printf("child signal=%d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    }
    return 0;
  }
  if (strcmp(mode, "exec") == 0 && argc > 2) {
    before_exec(argv[2]);
    execl(argv[2], argv[2], (char*)NULL);
    perror("execl");
    return 127;
  }
  fprintf(stderr,
          "usage: prog_gdb_events threads [N] | fork | vfork | fork-watch [FILE] | exec PROG | "
          "vfork-exec PROG | clone | leader-exit [held] [PROG]\n");
  return 2;
}

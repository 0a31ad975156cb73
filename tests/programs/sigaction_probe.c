// sigaction_probe: what a program sees of its own SIGSEGV and SIGTRAP actions, and how it ends
// by one of them, while something may be attached to it. Waits until it is traced (TracerPid in
// /proc/self/status, at most WAIT seconds, default 10; then goes on anyway), writing `counter`
// every millisecond meanwhile and for 100 ms more; prints its actions as it reads them and
// sets them (the same lines whether traced or not), then ends as END says:
//   prog_sigaction_probe END [WAIT]
//   END: exit (status 0), trap (raise(SIGTRAP)), segv (a store through a null pointer).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile long counter;
static volatile int handled;

static void on_segv(int sig) {
  (void)sig;
  handled = 1;
}

static int traced(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  int pid = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "TracerPid:", 10) == 0) pid = atoi(line + 10);
  }
  fclose(f);
  return pid != 0;
}

static void tick(void) {
  const struct timespec ms = {0, 1000000};
  counter = counter + 1;
  nanosleep(&ms, NULL);
}

static const char* name_of(void (*handler)(int)) {
  if (handler == SIG_DFL) return "default";
  if (handler == SIG_IGN) return "ignored";
  if (handler == on_segv) return "on_segv";
  return "other";
}

static void show(const char* what, int sig) {
  struct sigaction now;
  sigaction(sig, NULL, &now);
  printf("%s: %s flags=%#lx\n", what, name_of(now.sa_handler), (unsigned long)now.sa_flags);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int wait_s = argc > 2 ? atoi(argv[2]) : 10;
  for (int i = 0; i < wait_s * 1000 && !traced(); ++i) tick();
  for (int i = 0; i < 100; ++i) tick();
  show("SIGTRAP", SIGTRAP);
  show("SIGSEGV", SIGSEGV);
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = on_segv;
  sigaction(SIGSEGV, &act, &old);
  printf("old SIGSEGV: %s\n", name_of(old.sa_handler));
  show("SIGSEGV", SIGSEGV);
  act.sa_handler = SIG_DFL;
  sigaction(SIGSEGV, &act, &old);
  printf("old SIGSEGV: %s\n", name_of(old.sa_handler));
  show("SIGSEGV", SIGSEGV);
  for (int i = 0; i < 20; ++i) tick();
  fflush(stdout);
  if (strcmp(argv[1], "trap") == 0) raise(SIGTRAP);
  if (strcmp(argv[1], "segv") == 0) *(volatile int*)(long)atoi("0") = 1;
  printf("handled=%d\n", handled);
  return 0;
}

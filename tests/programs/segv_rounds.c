// segv_rounds: a program whose own SIGSEGV handler writes the page it protected, ROUNDS times.
// Each round writes page.value = 10 * round, makes the page read-only and writes
// page.value = 10 * round + 1: that store faults; the handler makes the page writable, counts the
// fault in page.handled (a store on the same page, made while SIGSEGV is blocked in the handler)
// and returns, so that the store restarts and completes. Then, with SIGSEGV blocked by
// sigprocmask, it writes page.value = 1000 and raises SIGSEGV, which must stay pending (blocked)
// and be taken by the handler once unblocked; with SIGSEGV ignored it writes page.value = 2000
// and raises SIGSEGV, which must be ignored. Prints
// "handled=ROUNDS+1 value=2000 pending=1" and exits 5; any deviation exits 90-99 (or dies).
//   prog_segv_rounds [ROUNDS]     (default 3)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct page {
  volatile int value;
  volatile int handled;
  char rest[4096 - 2 * sizeof(int)];
} __attribute__((aligned(4096)));
struct page page;

static void on_segv(int sig) {
  (void)sig;
  if (mprotect(&page, sizeof page, PROT_READ | PROT_WRITE) != 0) _exit(98);
  page.handled = page.handled + 1;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 3;
  // A plain handler (no SA_SIGINFO), SIGSEGV blocked while it runs (no SA_NODEFER).
  const struct sigaction sa = {.sa_handler = on_segv};
  if (sigaction(SIGSEGV, &sa, NULL) != 0) return 97;
  for (int r = 1; r <= rounds; ++r) {
    page.value = 10 * r;
    if (mprotect(&page, sizeof page, PROT_READ) != 0) return 96;
    page.value = 10 * r + 1;
    if (page.handled != r) return 95;
  }
  // Blocked: the write must leave SIGSEGV blocked and the handler in place.
  sigset_t segv, pending;
  sigemptyset(&segv);
  sigaddset(&segv, SIGSEGV);
  if (sigprocmask(SIG_BLOCK, &segv, NULL) != 0) return 94;
  page.value = 1000;
  raise(SIGSEGV);
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return 93;
  const int was_pending = sigismember(&pending, SIGSEGV);
  if (sigprocmask(SIG_UNBLOCK, &segv, NULL) != 0) return 92;  // the handler runs here
  if (page.handled != rounds + 1) return 91;
  // Ignored: the write must leave it ignored.
  if (signal(SIGSEGV, SIG_IGN) == SIG_ERR) return 90;
  page.value = 2000;
  raise(SIGSEGV);
  printf("handled=%d value=%d pending=%d\n", page.handled, page.value, was_pending);
  return page.handled == rounds + 1 && page.value == 2000 && was_pending == 1 ? 5 : 99;
}

// own_segv: a program with its own SIGSEGV handler on the page that holds `area.counter`.
// It writes area.counter N times (values 1..N), makes the page read-only, then writes
// area.spare: the fault goes to its handler, which checks the siginfo (SEGV_ACCERR at the address
// of area.spare), makes the page writable again, writes area.counter once more (N + 1) and
// returns, so that the faulting write is restarted and completes. Prints
// "handled=1 code_ok=1 addr_ok=1 spare=7 counter=N+1" and exits 4; any deviation exits 99.
//   prog_own_segv [N]     (default 5)
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct area {
  volatile int counter;
  volatile int spare;
  char rest[4096 - 2 * sizeof(int)];
} __attribute__((aligned(4096)));
struct area area;

static volatile int handled, code_ok, addr_ok;

static void on_segv(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)context;
  handled = handled + 1;
  code_ok = info->si_code == SEGV_ACCERR;
  addr_ok = info->si_addr == (void*)&area.spare;
  if (mprotect(&area, sizeof area, PROT_READ | PROT_WRITE) != 0) _exit(98);
  area.counter = area.counter + 1;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 5;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, NULL) != 0) return 97;
  for (int i = 1; i <= n; ++i) area.counter = i;
  if (mprotect(&area, sizeof area, PROT_READ) != 0) return 96;
  area.spare = 7;
  printf("handled=%d code_ok=%d addr_ok=%d spare=%d counter=%d\n", handled, code_ok, addr_ok,
         area.spare, area.counter);
  return handled == 1 && code_ok && addr_ok && area.spare == 7 && area.counter == n + 1 ? 4 : 99;
}

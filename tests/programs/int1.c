// int1 [N]: N times, stores i into `cell` and runs INT1 (icebp, 0xf1) right after the store; its
// own SIGTRAP handler counts the traps. Prints cell=N traps=N. Linux reports an INT1 as a SIGTRAP
// with si_code TRAP_BRKPT at the ip after it, the same signal it sends for a debug exception
// whose status names nothing (a breakpoint hit whose status a hypervisor lost): a watcher must
// report every store and pass every INT1 on to the handler. After the INT1 come two NOPs, so
// that a test can look at a stop right after the store, after the INT1 and after a NOP.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int cell;
static volatile sig_atomic_t traps;

static void on_trap(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)context;
  if (info->si_code == 1) ++traps;  // TRAP_BRKPT
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 3;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGTRAP, &sa, NULL);
  for (int i = 1; i <= n; ++i) {
    __asm__ volatile("movl %1, %0\n\tint1\n\tnop\n\tnop" : "=m"(cell) : "r"(i) : "memory");
  }
  printf("cell=%d traps=%d\n", cell, (int)traps);
  return 0;
}

// alarm_storm: a SIGALRM every P microseconds (setitimer; default 100) while the main loop writes
// `counter` N times (values 1..N, default 2000) with a little work between writes; the handler
// counts the alarms in `ticks`. Stops the timer, prints "counter=N ticks_ok=1" and exits 0 (1 if
// no alarm arrived or a write was lost).
//   prog_alarm_storm [N] [P]
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

volatile long counter;
static volatile sig_atomic_t ticks;

static void on_alarm(int sig) {
  (void)sig;
  ticks = ticks + 1;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2000;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  const long period = argc > 2 ? atol(argv[2]) : 100;
  struct itimerval every = {{0, period}, {0, period}};
  setitimer(ITIMER_REAL, &every, NULL);
  volatile unsigned spin = 0;
  for (int i = 1; i <= n; ++i) {
    counter = i;
    for (int k = 0; k < 2000; ++k) spin = spin + 1;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  printf("counter=%ld ticks_ok=%d\n", counter, ticks > 0);
  return counter == n && ticks > 0 ? 0 : 1;
}

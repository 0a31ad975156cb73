// rseq_page: the page of this thread's rseq area, which glibc registers for every thread and the
// kernel writes (its cpu_id) at each return to user space. A page protection there makes that
// write fail, and the kernel kills the process with SIGSEGV.
//   prog_rseq_page [N]   prints "addr=ADDR" (the area; "addr=none" without one), makes N system
//                        calls (default 200; each return writes the area) and prints "calls=N".
#include <stdio.h>
#include <stdlib.h>
#include <sys/rseq.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 200;
  if (__rseq_size == 0) {
    puts("addr=none");
    return 0;
  }
  printf("addr=%p\n", (void*)((char*)__builtin_thread_pointer() + __rseq_offset));
  fflush(stdout);
  for (int i = 0; i < n; ++i) getppid();
  printf("calls=%d\n", n);
  return 0;
}

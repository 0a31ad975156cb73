// hello: prints one line and exits 0 (the smallest target for spawn and attach tests).
#include <stdio.h>

int main(void) {
  puts("hello");
  return 0;
}

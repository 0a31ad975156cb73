// names: C++ globals spelt as the source spells them, for the source-level watch tests
// (qualified names, static members, an anonymous namespace, templates, struct and array members,
// a pointer to a global, a local and a thread_local).
//   prog_names [N] [wait]  N rounds (default 10); each round writes, once each:
//                          ns::g_cfg.limits[2].max (= round), ns::g_cfg.limits[1].min (= -round),
//                          ns::Counter::total (+1, in ns::Counter::bump()), ns::Box<int>::count
//                          (+2), the anonymous namespace's `hidden` (+3), g_matrix[1][2] (= round),
//                          g_shape.ratio (= round / 2.0), g_shape.on (toggled), g_shape.mode
//                          (cycles through the enum), g_shape.delta (= -round); round 1 also sets
//                          ns::g_cfg.name to "names". Then 4 threads each write t_local N times.
//                          Prints "total=T" and exits with 0. With "wait": prints "ready" first and
//                          waits for SIGUSR1 before the rounds (a test attaches meanwhile).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace ns {

struct Limit {
  int min;
  int max;
};

struct Config {
  char name[16];
  Limit limits[4];
  long flags;
};

Config g_cfg;

class Counter {
 public:
  static long total;
  void bump();
  int value = 0;
};

long Counter::total;

__attribute__((noinline)) void Counter::bump() {
  ++value;
  ++total;
}

template <typename T>
struct Box {
  static T count;
};

template <typename T>
T Box<T>::count;

template struct Box<int>;

}  // namespace ns

namespace {

volatile int hidden;

namespace inner {
volatile int twin = 1;  // inner::twin, spelt without its anonymous namespace: ambiguous
}  // namespace inner

int first_twin() {
  return inner::twin;
}

}  // namespace

namespace inner {
namespace {
volatile int twin = 2;
}  // namespace
int second_twin() {
  return twin;
}
}  // namespace inner

enum class Mode { kOff, kOn, kAuto };

struct Shape {
  double ratio;
  bool on;
  Mode mode;
  short delta;
};

Shape g_shape;
ns::Config* g_cfg_ptr = &ns::g_cfg;
ns::Counter g_counter;
int g_matrix[3][4];
thread_local int t_local;

static volatile sig_atomic_t go;

extern "C" void on_usr1(int) {
  go = 1;
}

__attribute__((noinline)) void round_writes(int round) {
  ns::g_cfg.limits[2].max = round;
  ns::g_cfg.limits[1].min = -round;
  g_counter.bump();
  ns::Box<int>::count += 2;
  hidden = hidden + 3;
  g_matrix[1][2] = round;
  g_shape.ratio = round / 2.0;
  g_shape.on = !g_shape.on;
  g_shape.mode = static_cast<Mode>(round % 3);
  g_shape.delta = static_cast<short>(-round);
  if (round == 1) std::strcpy(ns::g_cfg.name, "names");
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void thread_writes(int n) {
  for (int i = 1; i <= n; ++i) {
    t_local = i;
    asm volatile("" ::: "memory");
  }
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  if (argc > 2 && std::strcmp(argv[2], "wait") == 0) {
    signal(SIGUSR1, on_usr1);
    std::puts("ready");
    std::fflush(stdout);
    while (!go) pause();
  }
  volatile int local_rounds = 0;  // a local: not watchable by name
  for (int i = 1; i <= rounds; ++i) {
    round_writes(i);
    local_rounds = local_rounds + 1;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(thread_writes, rounds);
  for (std::thread& t : threads) t.join();
  std::printf("total=%ld rounds=%d\n", ns::Counter::total,
              static_cast<int>(local_rounds) + first_twin() + ::inner::second_twin() - 3);
  return 0;
}

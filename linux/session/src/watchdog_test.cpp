// Tests of Watchdog on real processes: a program whose software watch's owner is SIGKILLed runs
// on with its page restored (a SoftWatchEngine given a watchdog, and a WatchSession that guards
// an attached program by itself); a released watchdog touches nothing; a plan past the capacity
// is refused; a WatchSession with the guard off has no watchdog.
#include "hwarb/linux/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "hwarb/linux/inferior.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/soft_watch_engine.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_session.h"
#include "test_programs.h"

namespace hwarb::native {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct NoHits final : WatchObserver {
  void hit(const WatchHit&) override {}
};

// How the watcher ends.
enum class End {
  kNormally,   // disarm, release, detach after 200 ms
  kRunning,    // SIGKILLed after 200 ms, as the program enters a system call
  kAtFault,    // SIGKILLed with a thread in a protection fault's stop it has not collected
  kInjecting,  // SIGKILLed with a thread in the trap of an injected call's step, not collected
};

// A watcher's start: its standard error to `errors`, attached to `target`, and the address of
// its `ticks` (the watcher exits with 10-13 where one fails).
struct Attached {
  std::optional<Inferior> inf;
  std::uint64_t ticks = 0;
};
Attached attach_ticker(pid_t target, const std::string& errors) {
  const int fd = ::open(errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::dup2(fd, 2) < 0) ::_exit(10);
  auto inf = Inferior::attach(target);
  if (!inf) ::_exit(11);
  auto table = SymbolTable::load(target);
  if (!table) ::_exit(12);
  auto ticks = table->find("ticks");
  if (!ticks) ::_exit(13);
  return {std::move(*inf), ticks->address};
}

// The watcher: a forked copy of this test that attaches to `target`, watches its `ticks` in
// software with a watchdog (its standard error to `errors`), handles events for 200 ms, then
// ends as `end` says.
[[noreturn]] void watcher(pid_t target, const std::string& errors, End end) {
  auto [inf, ticks] = attach_ticker(target, errors);
  auto watch = SoftWatch::arm(*inf, {{ticks, 8, kWatchWrite, 0}});
  if (!watch) ::_exit(14);
  NoHits observer;
  SoftWatchEngine engine(*watch, observer);
  auto dog = Watchdog::start();
  if (!dog || !engine.guard(*dog)) ::_exit(15);
  if (!inf->resume_all(engine.resume_mode())) ::_exit(16);
  const bool killed = end != End::kNormally;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    const bool late = std::chrono::steady_clock::now() >= until;
    if (late && !killed) break;
    auto ev = inf->wait();
    if (!ev) ::_exit(17);
    if (late && watch->is_fault(*ev) && (end == End::kAtFault || end == End::kInjecting)) {
      // The stop hwarb is killed in: one of its own, raised and not collected yet (its signal
      // still held), with the trap flag of a step set.
      if (end == End::kAtFault) {
        // The faulting store stepped on the page still protected: the same fault again.
        if (!inf->resume(ev->tid, Resume::kStep)) ::_exit(23);
      } else {
        // An injected getpid half-way, as Inferior::inject_syscall runs one: told to the
        // watchdog, registers set, the `syscall` instruction stepped.
        auto regs = inf->get_regs(ev->tid);
        constexpr std::uint8_t kSyscall[] = {0x0f, 0x05};
        auto gadget = inf->find_code(target, kSyscall);
        if (!regs || !gadget) ::_exit(24);
        dog->injecting(ev->tid, &*regs);
        x86::Regs injected = *regs;
        injected.rip = *gadget;
        injected.rax = SYS_getpid;
        injected.orig_rax = ~0ULL;
        if (!inf->set_regs(ev->tid, injected) || !inf->resume(ev->tid, Resume::kStep)) {
          ::_exit(25);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ::raise(SIGKILL);
    }
    auto mine = engine.handle(*ev);
    if (!mine) ::_exit(18);
    if (!*mine) {
      if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) ::_exit(19);
      const int sig = ev->kind == EventKind::kSignal ? ev->signal : 0;
      if (!inf->resume(ev->tid, engine.resume_mode(), sig)) ::_exit(20);
    }
    // Killed while the program runs (here: as it enters its 1 ms sleep), the common case.
    if (late && end == End::kRunning && ev->kind == EventKind::kSyscallEnter) ::raise(SIGKILL);
  }
  if (killed) ::_exit(22);
  if (!inf->stop_all() || !engine.finish() || !inf->detach()) ::_exit(21);
  dog->release();
  ::_exit(0);
}

// The watcher as an embedder writes it: a WatchSession on the attached target with a software
// watch of `ticks`, and not a word about a watchdog. Ends as `end` says (kNormally or kRunning).
[[noreturn]] void session_watcher(pid_t target, const std::string& errors, End end) {
  auto [inf, ticks] = attach_ticker(target, errors);
  WatchSession session(*inf, WatchSessionOptions{});
  if (session.watchdog() == nullptr) ::_exit(14);
  auto w = session.insert(
      {.addr = ticks, .len = 8, .access = kWatchWrite, .mode = WatchMode::kSoftware});
  if (!w) ::_exit(15);
  if (!inf->resume_all(session.resume_mode())) ::_exit(16);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    const bool late = std::chrono::steady_clock::now() >= until;
    if (late && end == End::kNormally) break;
    auto ev = inf->wait();
    if (!ev) ::_exit(17);
    auto v = session.handle(*ev);
    if (!v) ::_exit(18);
    if (!v->handled) {
      if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) ::_exit(19);
      const int sig = ev->kind == EventKind::kSignal ? ev->signal : 0;
      if (!inf->resume(ev->tid, session.resume_mode(), sig)) ::_exit(20);
    }
    // No uninstall, no detach: killed as the program enters its 1 ms sleep.
    if (late && ev->kind == EventKind::kSyscallEnter) ::raise(SIGKILL);
  }
  if (!inf->stop_all() || !session.uninstall() || !inf->detach()) ::_exit(21);
  ::_exit(0);
}

using Watcher = void (*)(pid_t, const std::string&, End);

struct TickerRun {
  int target_status = -1;
  int watcher_status = -1;
  std::string target_output, watcher_errors;
};

// The ticker (1 ms per tick, 600 ticks) as a plain child of this test, watched by a watcher.
TickerRun watched_ticker(End end, Watcher watch = watcher) {
  TickerRun run;
  const std::string out = ::testing::TempDir() + "watchdog_ticker.out";
  const std::string errors = ::testing::TempDir() + "watchdog_watcher.err";
  const std::string ticker = testing::program("ticker");
  std::error_code ec;
  const pid_t target = ::fork();
  if (target == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, 1) < 0) ::_exit(30);
    ::execl(ticker.c_str(), ticker.c_str(), "/dev/null", "600", static_cast<char*>(nullptr));
    ::_exit(31);
  }
  // The watcher looks `ticks` up in the target's image: not before the exec (under load it can
  // take longer than any fixed sleep), at most 10 s.
  const std::string exe = "/proc/" + std::to_string(target) + "/exe";
  const std::filesystem::path image = std::filesystem::canonical(ticker, ec);
  for (int i = 0; i < 1000 && std::filesystem::read_symlink(exe, ec) != image; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t w = ::fork();
  if (w == 0) watch(target, errors, end);
  ::waitpid(w, &run.watcher_status, 0);
  ::waitpid(target, &run.target_status, 0);
  // The watchdog writes its line after the restore, before the target can end.
  run.target_output = slurp(out);
  run.watcher_errors = slurp(errors);
  return run;
}

// The ticker ran to its end with its own output after its watcher was SIGKILLed, and the
// watchdog restored it.
void expect_survived(const TickerRun& run) {
  ASSERT_TRUE(WIFSIGNALED(run.watcher_status)) << "watcher status " << run.watcher_status;
  EXPECT_EQ(WTERMSIG(run.watcher_status), SIGKILL);
  EXPECT_TRUE(WIFEXITED(run.target_status) && WEXITSTATUS(run.target_status) == 0)
      << "target status " << run.target_status
      << (WIFSIGNALED(run.target_status)
              ? " (signal " + std::to_string(WTERMSIG(run.target_status)) + ")"
              : "");
  EXPECT_EQ(run.target_output, "ticks=600\n");
  EXPECT_NE(run.watcher_errors.find("restored 1 page protection(s) and 0 byte(s) in 1 of 1"),
            std::string::npos)
      << run.watcher_errors;
}

// The watcher ended normally: the ticker ran to its end and the watchdog said nothing.
void expect_untouched(const TickerRun& run) {
  ASSERT_TRUE(WIFEXITED(run.watcher_status)) << "watcher status " << run.watcher_status;
  EXPECT_EQ(WEXITSTATUS(run.watcher_status), 0);
  EXPECT_TRUE(WIFEXITED(run.target_status) && WEXITSTATUS(run.target_status) == 0)
      << "target status " << run.target_status;
  EXPECT_EQ(run.target_output, "ticks=600\n");
  EXPECT_EQ(run.watcher_errors, "");
}

// The parachute takes the fault's SIGSEGV the kernel delivers as it detaches the thread (and
// the retries of the store until the watchdog restores the page); the watchdog drops the one
// left pending.
TEST(Watchdog, AThreadInAnUncollectedFaultStopSurvives) {
  expect_survived(watched_ticker(End::kAtFault));
}

// The parachute takes the step's SIGTRAP; the watchdog puts back the registers the injection
// had replaced.
TEST(Watchdog, AThreadInTheMiddleOfAnInjectedCallSurvives) {
  expect_survived(watched_ticker(End::kInjecting));
}

TEST(Watchdog, AnAttachedProgramRunsOnWhenItsWatcherIsKilled) {
  const TickerRun run = watched_ticker(End::kRunning);
  ASSERT_TRUE(WIFSIGNALED(run.watcher_status)) << "watcher status " << run.watcher_status;
  EXPECT_EQ(WTERMSIG(run.watcher_status), SIGKILL);
  EXPECT_TRUE(WIFEXITED(run.target_status) && WEXITSTATUS(run.target_status) == 0)
      << "target status " << run.target_status;
  EXPECT_EQ(run.target_output, "ticks=600\n");
  EXPECT_NE(run.watcher_errors.find("restored 1 page protection(s) and 0 byte(s) in 1 of 1"),
            std::string::npos)
      << run.watcher_errors;
}

// The session guards the attached program by itself: its owner killed without uninstall, the
// program runs on with its page restored.
TEST(Watchdog, AnAttachedSessionGuardsItsProgramByItself) {
  expect_survived(watched_ticker(End::kRunning, session_watcher));
}

TEST(Watchdog, AnAttachedSessionThatEndsNormallyLeavesTheWatchdogNothing) {
  expect_untouched(watched_ticker(End::kNormally, session_watcher));
}

// Guard on: the plan of the watch is published, withdrawn once uninstalled; guard off: no
// watchdog at all.
TEST(Watchdog, ASessionGuardsAsItsOptionsSay) {
  const std::string ticker = testing::program("ticker");
  for (const Guard guard : {Guard::kAuto, Guard::kOff}) {
    SCOPED_TRACE(guard == Guard::kAuto ? "auto" : "off");
    // The ticker writes its pid file from main(): once it is there, the exec is over (its
    // /proc/PID/exe changes inside execve, and a seize there would meet the exec's own stop).
    std::string pid_file = ::testing::TempDir();
    pid_file += "watchdog_guard_ticker.pid";
    std::filesystem::remove(pid_file);
    const pid_t target = ::fork();
    if (target == 0) {
      ::execl(ticker.c_str(), ticker.c_str(), pid_file.c_str(), "100000",
              static_cast<char*>(nullptr));
      ::_exit(31);
    }
    // Killed and reaped however the checks below end (a failed ASSERT returns at once): a ticker
    // left running would hold the test's output open until ctest's timeout.
    struct Reaper {
      pid_t pid;
      ~Reaper() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    } reaper{target};
    std::error_code ec;
    for (int i = 0; i < 1000; ++i) {
      const auto size = std::filesystem::file_size(pid_file, ec);
      if (!ec && size > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    {
      auto inf = Inferior::attach(target);
      ASSERT_TRUE(inf) << inf.error().to_string();
      auto table = SymbolTable::load(target);
      ASSERT_TRUE(table) << table.error().to_string();
      auto ticks = table->find("ticks");
      ASSERT_TRUE(ticks);
      WatchSessionOptions options;
      options.guard = guard;
      WatchSession session(*inf, options);
      EXPECT_FALSE(session.guard_error());
      auto w = session.insert(
          {.addr = ticks->address, .len = 8, .access = kWatchWrite, .mode = WatchMode::kSoftware});
      ASSERT_TRUE(w) << w.error().to_string();
      if (guard == Guard::kOff) {
        EXPECT_EQ(session.watchdog(), nullptr);
      } else {
        ASSERT_NE(session.watchdog(), nullptr);
        const RestorePlan plan = session.watchdog()->published_plan();
        EXPECT_EQ(plan.processes, std::vector<pid_t>{target});
        ASSERT_EQ(plan.pages.size(), 1U);
        EXPECT_EQ(plan.pages[0].addr, ticks->address & ~std::uint64_t{4095});
        EXPECT_EQ(plan, session.restore_plan());
      }
      auto undone = session.uninstall();
      ASSERT_TRUE(undone) << undone.error().to_string();
      if (guard == Guard::kAuto) {
        ASSERT_NE(session.watchdog(), nullptr);
        EXPECT_EQ(session.watchdog()->published_plan(), RestorePlan{});
      }
      ASSERT_TRUE(inf->detach());
    }
  }
}

TEST(Watchdog, AReleasedWatchdogTouchesNothing) {
  expect_untouched(watched_ticker(End::kNormally));
}

TEST(Watchdog, APlanPastTheCapacityIsRefused) {
  auto dog = Watchdog::start();
  ASSERT_TRUE(dog) << dog.error().to_string();
  RestorePlan plan;
  plan.processes = {::getpid()};
  plan.pages.resize(Watchdog::kMaxPages + 1);
  auto r = dog->publish(plan);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(r.error().to_string().find("plan: 1 processes, 4097 pages"), std::string::npos)
      << r.error().to_string();
  plan.pages.resize(1);
  EXPECT_TRUE(dog->publish(plan));
  dog->release();
  EXPECT_FALSE(dog->publish(plan));
}

}  // namespace
}  // namespace hwarb::native

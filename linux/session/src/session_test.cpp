// Tests of the session (run_target and its helpers) on real processes (tests/programs): the end of
// the process as it really was (status, signal), signals passed through unchanged, an engine that
// has seen enough lets the process run on to its own end, run_to stops exactly at its address and
// leaves the text as it was, symbols of libraries found after running to the entry point.
#include "hwarb/linux/session.h"

#include <signal.h>
#include <sys/syscall.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

// An engine that takes nothing: run_target alone decides everything.
class Passive : public Engine {
 public:
  Result<bool> handle(const Event& event) override {
    events.push_back(event);
    return false;
  }
  Resume resume_mode() const override { return how; }
  Result<void> finish() override {
    ++finished;
    return {};
  }
  bool done() const override { return stop_after != 0 && events.size() >= stop_after; }

  Resume how = Resume::kCont;
  std::size_t stop_after = 0;
  std::vector<Event> events;
  int finished = 0;
};

TEST(RunTarget, ReportsTheExitStatusOfTheProcess) {
  Capture out;
  SPAWN_OR_SKIP(inf, {program("writer")}, out);
  const pid_t pid = inf->pid();
  Passive engine;
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->status, 3);
  EXPECT_EQ(end->signal, 0);
  EXPECT_FALSE(end->interrupted);
  EXPECT_EQ(end->pid, pid);
  EXPECT_EQ(engine.finished, 0);  // nothing to undo: the process ended by itself
  ASSERT_FALSE(engine.events.empty());
  EXPECT_EQ(engine.events.back().kind, EventKind::kExited);
  EXPECT_EQ(out.text(), "sum=100\n");
  EXPECT_FALSE(inf->alive());
}

// A signal of the program goes to the engine first, then to the program unchanged: SIGTERM kills
// it, and run_target says so.
class Terminator : public Passive {
 public:
  Result<bool> handle(const Event& event) override {
    if (!sent && event.kind == EventKind::kSyscallEnter) {
      sent = true;
      EXPECT_EQ(::kill(event.tid, SIGTERM), 0);
    }
    if (event.kind == EventKind::kSignal) signals.push_back(event.signal);
    return Passive::handle(event);
  }
  bool sent = false;
  std::vector<int> signals;
};

TEST(RunTarget, PassesSignalsThroughAndReportsTheKillingSignal) {
  Capture out;
  SPAWN_OR_SKIP(inf, {program("writer")}, out);
  Terminator engine;
  engine.how = Resume::kSyscall;
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_TRUE(engine.sent);
  EXPECT_EQ(engine.signals, std::vector<int>{SIGTERM});
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->signal, SIGTERM);
  EXPECT_EQ(end->status, 0);
}

TEST(RunTarget, AnEngineThatIsDoneLetsTheProcessRunOnToItsEnd) {
  Capture out;
  SPAWN_OR_SKIP(inf, {program("writer")}, out);
  Passive engine;
  engine.how = Resume::kSyscall;  // one event per system call
  engine.stop_after = 2;
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_EQ(engine.events.size(), 2u);
  EXPECT_EQ(engine.finished, 1);  // undone before the detach
  // Detached, then waited for: its own status, its output complete.
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->status, 3);
  EXPECT_EQ(out.text(), "sum=100\n");
}

TEST(RunTo, StopsAtTheAddressAndRestoresTheByte) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("writer"), "4"}), out);
  auto table = SymbolTable::load(inf->pid());
  ASSERT_TRUE(table) << table.error().to_string();
  auto setter = table->find("set_target");
  ASSERT_TRUE(setter) << setter.error().to_string();
  std::uint8_t before = 0;
  ASSERT_TRUE(inf->read_memory(setter->address, std::span(&before, 1)));
  ASSERT_TRUE(run_to(*inf, setter->address));
  auto regs = inf->get_regs(inf->pid());
  ASSERT_TRUE(regs) << regs.error().to_string();
  EXPECT_EQ(regs->rip, setter->address);
  std::uint8_t after = 0;
  ASSERT_TRUE(inf->read_memory(setter->address, std::span(&after, 1)));
  EXPECT_EQ(after, before);
  // set_target has not run yet: the rest of the program is unchanged.
  Passive engine;
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_EQ(end->status, 3);
  EXPECT_EQ(out.text(), "sum=16\n");
}

TEST(RunTo, IsEsrchWhenTheProcessEndsFirst) {
  Capture out;
  SPAWN_OR_SKIP(inf, {program("writer")}, out);
  // An address the program never executes: its own `target` variable (data).
  auto table = SymbolTable::load(inf->pid());
  ASSERT_TRUE(table);
  auto target = table->find("target");
  ASSERT_TRUE(target);
  auto r = run_to(*inf, target->address);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kSrch);
}

TEST(FindSymbol, RunsToTheEntryPointOnceForLibrarySymbols) {
  Capture out;
  SPAWN_OR_SKIP(inf, {program("writer")}, out);
  auto table = SymbolTable::load(inf->pid());
  ASSERT_TRUE(table) << table.error().to_string();
  ASSERT_FALSE(table->find("puts"));  // libc is not mapped at the first instruction
  bool ran = false;
  auto sym = find_symbol(*inf, *table, ran, "puts");
  ASSERT_TRUE(sym) << sym.error().to_string();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(sym->function);
  auto regs = inf->get_regs(inf->pid());
  ASSERT_TRUE(regs);
  EXPECT_EQ(regs->rip, *table->entry());
  // An unknown name now: no second run, near matches.
  auto unknown = find_symbol(*inf, *table, ran, "set_targte");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code(), ErrorCode::kNoEnt);
  EXPECT_NE(unknown.error().message().find("set_target"), std::string::npos);
  auto regs_after = inf->get_regs(inf->pid());
  ASSERT_TRUE(regs_after);
  EXPECT_EQ(regs_after->rip, regs->rip);
}

TEST(OpenTarget, SpawnsAttachesAndNamesAMissingCommand) {
  auto missing = open_target(Target{.command = {"/nonexistent/prog"}});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kNoEnt);
  EXPECT_NE(missing.error().message().find("command"), std::string::npos);

  auto spawned = open_target(Target{.command = {program("calls"), "2"}});
  if (!spawned && testing::refused(spawned.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", spawned.error());
  }
  ASSERT_TRUE(spawned) << spawned.error().to_string();
  EXPECT_TRUE(spawned->spawned());
  // Its thread: the process of that thread.
  Target thread;
  thread.tid = spawned->pid();
  auto by_tid = open_target(thread);
  ASSERT_FALSE(by_tid);  // traced already by this process: EPERM
  EXPECT_EQ(by_tid.error().code(), ErrorCode::kPerm);
}

TEST(WaitEnd, RecordsHowAChildEndedOnce) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(7);
  RunResult result;
  EXPECT_TRUE(wait_end(child, false, result));
  EXPECT_TRUE(result.exited);
  EXPECT_EQ(result.status, 7);
  EXPECT_EQ(result.signal, 0);
  // Reaped already: nothing more to say.
  RunResult again;
  EXPECT_FALSE(wait_end(child, false, again));
  EXPECT_FALSE(again.exited);

  const pid_t killed = ::fork();
  ASSERT_GE(killed, 0);
  if (killed == 0) {
    ::raise(SIGKILL);
    ::_exit(0);
  }
  RunResult by_signal;
  EXPECT_TRUE(wait_end(killed, false, by_signal));
  EXPECT_TRUE(by_signal.exited);
  EXPECT_EQ(by_signal.signal, SIGKILL);
}

}  // namespace
}  // namespace hwarb::native

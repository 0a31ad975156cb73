// Tests of Inferior on real processes (tests/programs): spawn and exit, memory, registers,
// injected system calls from every kind of stop, threads, forks, attach and detach.
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"
#include "test_programs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

// Runs the inferior to its end, passing signals through and resuming everything with `how`;
// returns the last event (kExited or kKilled).
Event run_to_end(Inferior& inf, Resume how) {
  EXPECT_TRUE(inf.resume_all(how));
  for (;;) {
    auto ev = inf.wait();
    EXPECT_TRUE(ev) << ev.error().to_string();
    if (!ev) return Event{};
    switch (ev->kind) {
      case EventKind::kExited:
      case EventKind::kKilled:
        return *ev;
      case EventKind::kSignal:
        EXPECT_TRUE(inf.resume(ev->tid, how, ev->signal));
        break;
      case EventKind::kThreadExit:
        break;
      case EventKind::kFork:
        EXPECT_TRUE(inf.release(ev->child));
        break;
      default:
        EXPECT_TRUE(inf.resume(ev->tid, how));
        break;
    }
  }
}

// A temporary file that receives a child's standard output.
TEST(Inferior, SpawnRunsToExitWithItsStatusAndOutput) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "4"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  EXPECT_EQ(inf->threads().size(), 1u);
  EXPECT_TRUE(inf->is_stopped(inf->pid()));
  Event end = run_to_end(*inf, Resume::kCont);
  EXPECT_EQ(end.kind, EventKind::kExited);
  EXPECT_EQ(end.status, 3);
  EXPECT_EQ(out.text(), "sum=16\n");
  EXPECT_FALSE(inf->alive());
}

TEST(Inferior, SpawnOfAMissingCommandNamesIt) {
  auto inf = Inferior::spawn({"/nonexistent/prog"});
  ASSERT_FALSE(inf);
  EXPECT_NE(inf.error().message().find("command"), std::string::npos);
  auto bare = Inferior::spawn({"no-such-command-hwarb"});
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().code(), ErrorCode::kNoEnt);
  EXPECT_NE(bare.error().message().find("no-such-command-hwarb"), std::string::npos);
}

TEST(Inferior, InjectedSyscallAtTheExecStopLeavesRegistersUnchanged) {
  auto inf = Inferior::spawn({program("hello")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf) << inf.error().to_string();
  const pid_t pid = inf->pid();
  auto before = inf->get_regs(pid);
  ASSERT_TRUE(before);
  auto got = inf->inject_syscall(pid, SYS_getpid, {});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(*got, pid);
  auto after = inf->get_regs(pid);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->rip, before->rip);
  EXPECT_EQ(after->rsp, before->rsp);
  EXPECT_EQ(after->rax, before->rax);
  EXPECT_EQ(run_to_end(*inf, Resume::kCont).status, 0);
}

// `prog_forker MODE 3` with its forks held (hold_forks), run to its end: `at_fork` is called at
// the fork's event stop (the parent stopped in it), then the child goes on. The program must
// end as unwatched: exit 0, its child's exit 3 seen.
void run_forker_held(const char* mode,
                     const std::function<void(Inferior&, const Event&)>& at_fork) {
  Capture out;
  auto inf = Inferior::spawn({program("forker"), mode, "3"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  inf->hold_forks(true);
  ASSERT_TRUE(inf->resume(inf->pid(), Resume::kCont));
  int forks = 0;
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      EXPECT_EQ(ev->kind, EventKind::kExited);
      EXPECT_EQ(ev->status, 0);
      break;
    }
    if (ev->kind == EventKind::kFork) {
      ++forks;
      ASSERT_NO_FATAL_FAILURE(at_fork(*inf, *ev));
      EXPECT_TRUE(ev->vfork ? inf->resume(ev->child, Resume::kCont) : inf->release(ev->child));
    }
    const bool signal = ev->kind == EventKind::kSignal;
    if (ev->kind != EventKind::kThreadExit && inf->is_stopped(ev->tid)) {
      EXPECT_TRUE(inf->resume(ev->tid, Resume::kCont, signal ? ev->signal : 0));
    }
  }
  EXPECT_EQ(forks, 1);
  EXPECT_EQ(out.text(), "child exit 3\n");
}

// A parent held at its fork's event stop is still inside fork: the call returns the child's id
// as it leaves the stop, over registers set in it. A call injected there keeps that result.
TEST(Inferior, InjectedSyscallAtAForkStopKeepsTheForksResult) {
  run_forker_held("fork", [](Inferior& inf, const Event& ev) {
    for (int i = 0; i < 2; ++i) {
      auto got = inf.inject_syscall(ev.tid, SYS_getpid, {});
      ASSERT_TRUE(got) << got.error().to_string();
      EXPECT_EQ(*got, inf.pid());
    }
    auto regs = inf.get_regs(ev.tid);
    ASSERT_TRUE(regs);
    EXPECT_EQ(static_cast<pid_t>(regs->rax), ev.child);  // fork's own result, returned
  });
}

// A vfork's parent held at its vfork stop would sleep, resumed for a call, until its child execs
// or ends: a call on the memory runs in the stopped child (one memory), any other is EBUSY; the
// program runs on as it would.
TEST(Inferior, AVforkParentsCallsOnTheMemoryRunInItsChild) {
  run_forker_held("vfork", [](Inferior& inf, const Event& ev) {
    ASSERT_TRUE(ev.vfork);
    auto regs = inf.get_regs(ev.tid);
    ASSERT_TRUE(regs);
    const std::uint64_t page = regs->rsp & ~std::uint64_t{0xfff};
    auto same = inf.inject_syscall(ev.tid, SYS_mprotect, {page, 4096, 3, 0, 0, 0});
    ASSERT_TRUE(same) << same.error().to_string();
    EXPECT_EQ(*same, 0);
    auto other = inf.inject_syscall(ev.tid, SYS_getpid, {});
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().code(), ErrorCode::kBusy);
  });
}

TEST(Inferior, InjectedSyscallAtSyscallStopsKeepsTheProgramsCall) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "3"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const pid_t pid = inf->pid();
  int enters = 0, exits = 0;
  ASSERT_TRUE(inf->resume(pid, Resume::kSyscall));
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited) {
      EXPECT_EQ(ev->status, 3);
      break;
    }
    if (ev->kind == EventKind::kSyscallEnter && ev->syscall != SYS_exit_group) {
      ++enters;
      auto got = inf->inject_syscall(pid, SYS_getpid, {});
      ASSERT_TRUE(got) << got.error().to_string();
      EXPECT_EQ(*got, pid);
    } else if (ev->kind == EventKind::kSyscallExit) {
      ++exits;
      auto got = inf->inject_syscall(pid, SYS_gettid, {});
      ASSERT_TRUE(got) << got.error().to_string();
      EXPECT_EQ(*got, pid);
      auto regs = inf->get_regs(pid);
      ASSERT_TRUE(regs);
      EXPECT_EQ(static_cast<std::int64_t>(regs->rax), ev->ret);
    }
    ASSERT_TRUE(
        inf->resume(pid, Resume::kSyscall, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  EXPECT_GT(enters, 5);
  EXPECT_GE(exits, enters - 1);
  // The program's own calls were unaffected: same output as without injection.
  EXPECT_EQ(out.text(), "sum=9\n");  // 3 writes of 1..3, then 3 reads of 3
}

// A call interrupted by stop_all (futex waits of a contended mutex) reaches its syscall-exit
// stop with a restart code (-ERESTARTSYS...): an injected call there must leave the program's call
// restarted, as it would be without the injection (glibc aborts on a futex that returns -512),
// and so must a second call injected in the same stop (a software watch's disarm and arm inject
// one each: rewound twice, the thread ran the bytes before its `syscall` and faulted for ever).
// One run of prog_futex_counter 4 20000 under PTRACE_SYSCALL, every other thread interrupted at
// each event and gettid injected twice at every syscall-exit stop; adds the interrupted calls
// seen to `restarts`.
void run_interrupting_everything(int& restarts) {
  Capture out;
  auto inf = Inferior::spawn({program("futex_counter"), "4", "20000"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  ASSERT_TRUE(inf->resume_all(Resume::kSyscall));
  Event end;
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      end = *ev;
      break;
    }
    if (ev->kind == EventKind::kThreadExit) continue;
    if (ev->kind == EventKind::kSyscallExit) {
      if (ev->ret <= -512 && ev->ret >= -516) ++restarts;
      for (int call = 0; call < 2; ++call) {
        auto got = inf->inject_syscall(ev->tid, SYS_gettid, {});
        ASSERT_TRUE(got) << got.error().to_string();
        EXPECT_EQ(*got, ev->tid) << "call " << call;
      }
    }
    // Interrupt the other threads (some are blocked in futex waits), then let them go on.
    auto stopped = inf->stop_all(ev->tid);
    ASSERT_TRUE(stopped) << stopped.error().to_string();
    for (pid_t tid : *stopped) ASSERT_TRUE(inf->resume_as_before(tid));
    if (ev->kind == EventKind::kFork) {
      ASSERT_TRUE(inf->release(ev->child));
      continue;
    }
    ASSERT_TRUE(
        inf->resume(ev->tid, Resume::kSyscall, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  EXPECT_EQ(end.kind, EventKind::kExited) << "killed by signal " << end.signal;
  EXPECT_EQ(end.status, 0);
  EXPECT_EQ(out.text(), "counter=80000\n");
}

TEST(Inferior, InjectedSyscallAtAnInterruptedCallsExitLeavesItRestarted) {
  int restarts = 0;
  for (int round = 0; round < 4 && !HasFailure(); ++round) run_interrupting_everything(restarts);
  EXPECT_GT(restarts, 0) << "no call was interrupted: the test did not exercise the restart";
}

TEST(Inferior, MemoryReadsAndWritesIgnoreProtection) {
  auto inf = Inferior::spawn({program("hello")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf);
  auto regs = inf->get_regs(inf->pid());
  ASSERT_TRUE(regs);
  // The first instruction's bytes are text (read-only): write them and restore them.
  std::uint8_t original[4];
  ASSERT_TRUE(inf->read_memory(regs->rip, original));
  const std::uint8_t patch[4] = {0x90, 0x90, 0x90, 0x90};
  ASSERT_TRUE(inf->write_memory(regs->rip, patch));
  auto word = inf->read_word(regs->rip, 4);
  ASSERT_TRUE(word);
  EXPECT_EQ(*word, 0x90909090u);
  ASSERT_TRUE(inf->write_memory(regs->rip, original));
  auto bad = inf->read_word(8, 4);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("addr"), std::string::npos);
  EXPECT_EQ(run_to_end(*inf, Resume::kCont).status, 0);
}

TEST(Inferior, ThreadsCreatedLaterAreReportedAndTraced) {
  Capture out;
  auto inf = Inferior::spawn({program("threads"), "3", "5"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  std::set<pid_t> fresh;
  int thread_exits = 0;
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited) {
      EXPECT_EQ(ev->status, 0);
      break;
    }
    if (ev->kind == EventKind::kNewThread) {
      fresh.insert(ev->tid);
      EXPECT_TRUE(inf->is_stopped(ev->tid));
      ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont));
    } else if (ev->kind == EventKind::kThreadExit) {
      ++thread_exits;
    } else if (ev->kind == EventKind::kSignal) {
      ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont, ev->signal));
    }
  }
  EXPECT_EQ(fresh.size(), 3u);
  EXPECT_EQ(thread_exits, 3);
  EXPECT_EQ(out.text(), "done\n");
}

// A new thread is reported (and in threads()) before anything later of the thread that made
// it: here, before that thread returns from clone. The kernel hands a tracer its own child's
// statuses before a traced thread's, so read in arrival order the creator would come first.
TEST(Inferior, ANewThreadIsKnownBeforeItsCreatorReturnsFromClone) {
  auto inf =
      Inferior::spawn({program("threads"), "8", "5"}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf);
  const pid_t leader = inf->pid();
  ASSERT_TRUE(inf->resume(leader, Resume::kSyscall));
  std::set<pid_t> fresh;
  std::set<pid_t> returned;  // by the creator's clone
  int clones = 0;
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited) break;
    if (ev->kind == EventKind::kThreadExit) continue;
    if (ev->kind == EventKind::kNewThread) {
      fresh.insert(ev->tid);  // held in its first stop until its creator's clone returns
      if (returned.contains(ev->tid)) {
        ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont));
      }
      continue;
    }
    const bool clone_exit = ev->kind == EventKind::kSyscallExit && ev->tid == leader &&
                            (ev->syscall == SYS_clone || ev->syscall == SYS_clone3);
    if (clone_exit && ev->ret > 0) {
      ++clones;
      const auto tid = static_cast<pid_t>(ev->ret);
      returned.insert(tid);
      EXPECT_TRUE(fresh.contains(tid)) << "thread " << tid << " not reported yet";
      const auto now = inf->threads();
      EXPECT_NE(std::find(now.begin(), now.end(), tid), now.end()) << tid;
      EXPECT_TRUE(inf->is_stopped(tid)) << tid;
      if (fresh.contains(tid)) {
        ASSERT_TRUE(inf->resume(tid, Resume::kCont));
      }
    }
    ASSERT_TRUE(inf->resume(ev->tid, ev->tid == leader ? Resume::kSyscall : Resume::kCont,
                            ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  EXPECT_EQ(clones, 8);
}

// A signal passed to a thread in a stop that is no signal-delivery stop (here a new thread's
// first stop) is still delivered, once, with no event of its own: the program's SIGTRAP handler
// runs (gdb's `signal SIGTRAP` to a thread that another thread's breakpoint stopped).
TEST(Inferior, ResumeDeliversASignalFromAnyStop) {
  Capture out;
  auto inf = Inferior::spawn({program("gdb_threads"), "trap"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  int signals = 0;
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (ev->kind == EventKind::kExited) {
      EXPECT_EQ(ev->status, 1);  // the handler's count
      break;
    }
    if (ev->kind == EventKind::kNewThread) {
      ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont, SIGTRAP));
    } else if (ev->kind == EventKind::kSignal) {
      ++signals;
      ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont, ev->signal));
    }
  }
  EXPECT_EQ(signals, 0);
  EXPECT_EQ(out.text(), "traps=1\n");
}

// PTRACE_INTERRUPT is consumed by whatever trap comes next: a thread interrupted just before
// its clone event stop reports that event and no interrupt stop after it. stop_all must still
// return with every thread stopped (it hung there: gdb's `continue` to a breakpoint in a new
// thread never came back). Two creators churn threads; every new thread's stop interrupts the
// rest, often while the other creator is inside clone(). A hung stop_all is ended by a kill
// after 60 s and fails the test.
TEST(Inferior, StopAllEndsWhenACloneEventTakesTheInterrupt) {
  Capture out;
  auto inf = Inferior::spawn({program("thread_churn"), "2", "400"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  const pid_t pid = inf->pid();
  std::atomic<bool> done{false};
  std::atomic<bool> killed{false};
  std::thread guard([&] {
    for (int i = 0; i < 300 && !done; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!done) {
      killed = true;
      ::kill(pid, SIGKILL);
    }
  });
  int fresh = 0;
  int stops = 0;
  Event end;
  const auto drive = [&] {
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    for (;;) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
        end = *ev;
        return;
      }
      if (ev->kind == EventKind::kThreadExit) continue;
      if (ev->kind == EventKind::kNewThread) ++fresh;
      auto stopped = inf->stop_all(ev->tid);
      ASSERT_TRUE(stopped) << stopped.error().to_string();
      ASSERT_FALSE(killed) << "stop_all hung after " << stops << " calls";
      ++stops;
      for (pid_t tid : inf->threads()) {
        if (tid != ev->tid && !inf->has_queued(tid)) {
          ASSERT_TRUE(inf->is_stopped(tid)) << "thread " << tid << " runs after stop_all";
        }
      }
      for (pid_t tid : *stopped) ASSERT_TRUE(inf->resume_as_before(tid));
      ASSERT_TRUE(
          inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
    }
  };
  drive();
  done = true;
  guard.join();
  if (HasFatalFailure()) return;
  EXPECT_EQ(end.kind, EventKind::kExited) << "killed by signal " << end.signal;
  EXPECT_EQ(end.status, 0);
  EXPECT_EQ(fresh, 2 + 2 * 400);
  EXPECT_EQ(out.text(), "threads=800\n");
}

TEST(Inferior, StopAllHoldsEveryThreadUntilResumed) {
  auto inf = Inferior::spawn({program("threads"), "2", "300000000"},
                             {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf);
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  int seen = 0;
  while (seen < 2) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev);
    if (ev->kind == EventKind::kNewThread) ++seen;
    if (ev->kind == EventKind::kThreadExit) continue;
    ASSERT_TRUE(
        inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0))
        << "event " << static_cast<int>(ev->kind) << " of " << ev->tid << " signal " << ev->signal;
  }
  auto stopped = inf->stop_all();
  ASSERT_TRUE(stopped) << stopped.error().to_string();
  for (pid_t tid : inf->threads()) EXPECT_TRUE(inf->is_stopped(tid)) << tid;
  for (pid_t tid : *stopped) ASSERT_TRUE(inf->resume_as_before(tid));
  for (;;) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev);
    if (ev->kind == EventKind::kExited) break;
    if (ev->kind == EventKind::kThreadExit) continue;
    ASSERT_TRUE(
        inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
}

// Runs `body` in a forked child (it becomes the tracer) and fails when it has not ended after
// `seconds` (a hang: the child is killed) or ended with a status other than 0.
void bounded(int seconds, void (*body)()) {
  const pid_t runner = ::fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    body();
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  for (int waited = 0; waited < seconds * 100; ++waited) {
    if (::waitpid(runner, &status, WNOHANG) == runner) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
      return;
    }
    ::usleep(10'000);
  }
  ::kill(runner, SIGKILL);
  ::waitpid(runner, &status, 0);
  ADD_FAILURE() << "still running after " << seconds << " s (a hang)";
}

// A process killed while its threads run: stop_all returns (the threads' exits are reaped in
// whatever order they come; waiting for the leader first must not block on the others' zombies).
TEST(Inferior, StopAllOnAProcessThatDiesReturns) {
  bounded(20, [] {
    for (int round = 0; round < 5; ++round) {
      auto inf = Inferior::spawn({program("threads"), "3", "300000000"},
                                 {.stdout_fd = ::open("/dev/null", O_WRONLY)});
      ASSERT_TRUE(inf) << inf.error().to_string();
      ASSERT_TRUE(inf->resume_all(Resume::kCont));
      for (int seen = 0; seen < 3;) {
        auto ev = inf->wait();
        ASSERT_TRUE(ev) << ev.error().to_string();
        if (ev->kind == EventKind::kNewThread) ++seen;
        ASSERT_TRUE(
            inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
      }
      ASSERT_EQ(::kill(inf->pid(), SIGKILL), 0);
      auto stopped = inf->stop_all();
      ASSERT_TRUE(stopped) << stopped.error().to_string();
      for (;;) {
        auto ev = inf->wait();
        ASSERT_TRUE(ev) << ev.error().to_string();
        if (ev->kind == EventKind::kKilled) break;
        ASSERT_EQ(ev->kind, EventKind::kThreadExit);
      }
      EXPECT_FALSE(inf->alive());
    }
  });
}

// Runs prog_gdb_events leader-exit held [PROG] until its leader has ended (pthread_exit); its
// one other thread then waits for SIGUSR1 to go on. Returns the Inferior then.
std::optional<Inferior> run_until_the_leader_ends(const std::vector<std::string>& argv, int out) {
  auto inf = Inferior::spawn(argv, {.stdout_fd = out});
  EXPECT_TRUE(inf) << inf.error().to_string();
  if (!inf) return std::nullopt;
  EXPECT_TRUE(inf->resume_all(Resume::kCont));
  for (bool created = false; !created;) {
    auto ev = inf->wait();
    EXPECT_TRUE(ev) << ev.error().to_string();
    if (!ev) return std::nullopt;
    created = ev->kind == EventKind::kNewThread;
    EXPECT_TRUE(
        inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  const std::string stat = "/proc/" + std::to_string(inf->pid()) + "/stat";
  for (int tries = 0; tries < 1000; ++tries) {
    std::ifstream in(stat);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z') {
      return std::move(*inf);
    }
    ::usleep(10'000);
  }
  ADD_FAILURE() << "the leader of " << inf->pid() << " did not end";
  return std::nullopt;
}

// A leader that ended while another thread lives is a zombie that never stops: stop_all holds
// the thread that is left and returns, the leader leaves threads(), and the group's exit is
// still reported under the leader's id.
TEST(Inferior, StopAllLeavesOutALeaderThatEndedFirst) {
  bounded(20, [] {
    Capture out;
    auto inf = run_until_the_leader_ends({program("gdb_events"), "leader-exit", "held"}, out.fd());
    ASSERT_TRUE(inf);
    auto stopped = inf->stop_all();
    ASSERT_TRUE(stopped) << stopped.error().to_string();
    ASSERT_EQ(stopped->size(), 1u);
    EXPECT_NE(stopped->front(), inf->pid());
    EXPECT_EQ(inf->threads(), *stopped);
    ASSERT_TRUE(inf->resume_as_before(stopped->front()));
    ASSERT_EQ(::kill(inf->pid(), SIGUSR1), 0);
    Event end = run_to_end(*inf, Resume::kCont);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(end.tid, inf->pid());
    EXPECT_EQ(end.status, 0);
    EXPECT_EQ(out.text(), "alone\n");
  });
}

// The thread that outlived its leader execs: the exec is reported under the leader's id, which
// the thread now has, and that thread is the process's only one.
TEST(Inferior, AnExecAfterTheLeaderEndedIsReportedUnderTheLeadersId) {
  bounded(20, [] {
    Capture out;
    auto inf = run_until_the_leader_ends(
        {program("gdb_events"), "leader-exit", "held", program("hello")}, out.fd());
    ASSERT_TRUE(inf);
    auto stopped = inf->stop_all();
    ASSERT_TRUE(stopped) << stopped.error().to_string();
    ASSERT_EQ(stopped->size(), 1u);
    ASSERT_TRUE(inf->resume_as_before(stopped->front()));
    ASSERT_EQ(::kill(inf->pid(), SIGUSR1), 0);
    bool exec_seen = false;
    for (;;) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      if (ev->kind == EventKind::kExited) {
        EXPECT_EQ(ev->status, 0);
        break;
      }
      if (ev->kind == EventKind::kThreadExit) continue;
      if (ev->kind == EventKind::kExec) {
        exec_seen = true;
        EXPECT_EQ(ev->tid, inf->pid());
        EXPECT_EQ(inf->threads(), std::vector<pid_t>{inf->pid()});
      }
      ASSERT_TRUE(
          inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
    }
    EXPECT_TRUE(exec_seen);
    EXPECT_EQ(out.text(), "hello\n");
  });
}

// In non-stop use (no stop_all), drop_ended_leaders takes a leader that ended out of threads()
// while the thread left runs on; the group's exit still comes under the leader's id.
TEST(Inferior, DropEndedLeadersTakesOutALeaderThatEndedWhileTheRestRuns) {
  bounded(20, [] {
    Capture out;
    auto inf = run_until_the_leader_ends({program("gdb_events"), "leader-exit", "held"}, out.fd());
    ASSERT_TRUE(inf);
    ASSERT_EQ(inf->threads().size(), 2u);
    inf->drop_ended_leaders();
    const auto left = inf->threads();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(left.front(), inf->pid());
    EXPECT_FALSE(inf->is_stopped(left.front()));
    ASSERT_EQ(::kill(inf->pid(), SIGUSR1), 0);
    Event end = run_to_end(*inf, Resume::kCont);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(end.tid, inf->pid());
    EXPECT_EQ(out.text(), "alone\n");
  });
}

// wait_or_poll reports a leader's end (pthread_exit, its thread left running), though the kernel
// gives no status for it until the group is gone.
TEST(Inferior, WaitOrPollReportsTheEndOfALeaderWhoseThreadsRunOn) {
  bounded(20, [] {
    Capture out;
    auto inf =
        Inferior::spawn({program("gdb_events"), "leader-exit", "held"}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf) << inf.error().to_string();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    bool leader_gone = false;
    while (!leader_gone) {
      auto ev = inf->wait_or_poll({}, 10'000);
      ASSERT_TRUE(ev) << ev.error().to_string();
      ASSERT_TRUE(*ev) << "no event in 10 s";
      if ((*ev)->kind == EventKind::kLeaderEnded) {
        EXPECT_EQ((*ev)->tid, inf->pid());
        leader_gone = true;
        continue;
      }
      ASSERT_TRUE(inf->resume((*ev)->tid, Resume::kCont,
                              (*ev)->kind == EventKind::kSignal ? (*ev)->signal : 0));
    }
    ASSERT_EQ(inf->threads().size(), 1u);
    EXPECT_NE(inf->threads().front(), inf->pid());
    ASSERT_EQ(::kill(inf->pid(), SIGUSR1), 0);
    Event end = run_to_end(*inf, Resume::kCont);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(out.text(), "alone\n");
  });
}

// A fork's child whose event was read but not handed on yet (held, as a stop_all holds it) is
// let go with its parent at a detach: held, it would never run, and its parent would wait for
// it forever.
TEST(Inferior, DetachLetsGoTheChildOfAForkEventNotHandedOn) {
  bounded(20, [] {
    Capture out;
    auto inf = Inferior::spawn({program("forker"), "fork", "3"}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf) << inf.error().to_string();
    inf->hold_forks(true);
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    for (;;) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      if (ev->kind == EventKind::kFork) {
        inf->requeue(*ev);
        break;
      }
      ASSERT_TRUE(
          inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
    }
    const pid_t pid = inf->pid();
    ASSERT_TRUE(inf->detach());
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(out.text(), "child exit 3\n");
  });
}

// A vfork parent sleeps in the kernel until its child execs or exits; it cannot stop. stop_all
// while the child is held returns (the parent is left blocked), and the program runs to its end.
TEST(Inferior, StopAllDuringAVforkReturns) {
  bounded(20, [] {
    Capture out;
    auto inf = Inferior::spawn({program("forker"), "vfork", "3"}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf) << inf.error().to_string();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    Event end;
    bool stopped_during_vfork = false;
    for (;;) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
        end = *ev;
        break;
      }
      if (ev->kind == EventKind::kThreadExit) continue;
      if (ev->kind == EventKind::kFork) {
        ASSERT_TRUE(ev->vfork);
        auto stopped = inf->stop_all(ev->child);
        ASSERT_TRUE(stopped) << stopped.error().to_string();
        stopped_during_vfork = true;
        for (pid_t tid : *stopped) ASSERT_TRUE(inf->resume_as_before(tid));
        ASSERT_TRUE(inf->resume(ev->child, Resume::kCont));
        continue;
      }
      ASSERT_TRUE(
          inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
    }
    EXPECT_TRUE(stopped_during_vfork);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(end.status, 0);
    EXPECT_EQ(out.text(), "child exit 3\n");
  });
}

// A fork event that stop_all read in place of its interrupt waits in the queue; resume_all
// leaves its vfork child stopped (and a thread with an event to report) for the event's handler,
// which resumes them as if the event had come first.
TEST(Inferior, ResumeAllLeavesWhatAQueuedEventHoldsStopped) {
  bounded(20, [] {
    Capture out;
    auto inf = Inferior::spawn({program("forker"), "vfork", "3"}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf) << inf.error().to_string();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    std::optional<Event> fork;
    while (!fork) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      ASSERT_NE(ev->kind, EventKind::kExited);
      if (ev->kind == EventKind::kFork) {
        fork = *ev;
      } else {
        ASSERT_TRUE(
            inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
      }
    }
    ASSERT_TRUE(fork->vfork);
    ASSERT_TRUE(inf->is_stopped(fork->child));
    inf->requeue(*fork);
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    EXPECT_TRUE(inf->is_stopped(fork->child)) << "the queued vfork's child was resumed";
    auto again = inf->wait();
    ASSERT_TRUE(again) << again.error().to_string();
    ASSERT_EQ(again->kind, EventKind::kFork);
    EXPECT_EQ(again->child, fork->child);
    auto resumed = inf->resume(fork->child, Resume::kCont);
    EXPECT_TRUE(resumed) << resumed.error().to_string();
    Event end = run_to_end(*inf, Resume::kCont);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(end.status, 0);
    EXPECT_EQ(out.text(), "child exit 3\n");
  });
}

// tests/programs' NAME with ARGS, a child of the test's own (not traced), its standard output
// to `out_fd`: its pid (-1: no fork).
pid_t run_untraced(const char* name, std::vector<std::string> args, int out_fd) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out_fd, 1);
    std::string path = program(name);
    std::vector<char*> argv{path.data()};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  return child;
}

TEST(Inferior, AttachStopsARunningProcessAndDetachLetsItRun) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t child = run_untraced("spin", {}, pipefd[1]);
  ASSERT_GE(child, 0);
  ::close(pipefd[1]);
  char ready[6] = {};
  ASSERT_EQ(::read(pipefd[0], ready, 6), 6);
  {
    auto inf = Inferior::attach(child);
    ASSERT_TRUE(inf) << inf.error().to_string();
    EXPECT_EQ(inf->threads().size(), 1u);
    EXPECT_TRUE(inf->is_stopped(child));
    auto got = inf->inject_syscall(child, SYS_getpid, {});
    ASSERT_TRUE(got) << got.error().to_string();
    EXPECT_EQ(*got, child);
    ASSERT_TRUE(inf->detach());
  }
  // Untraced and still running: a signal 0 probe succeeds and it is not a zombie.
  ::usleep(20000);
  EXPECT_EQ(::kill(child, 0), 0);
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find(") Z"), std::string::npos);
  EXPECT_EQ(text.find(") t"), std::string::npos) << text;
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(pipefd[0]);
}

// Attaches to a program that makes threads all the time, 40 times, each followed by a detach:
// every attach succeeds, and once attached every thread of the program is ours (an untraced
// one would die of the first breakpoint it ran into). The program is killed at the end, having
// run on through all of it.
void attach_again_and_again(const std::vector<std::string>& args) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t child = run_untraced("thread_churn", args, pipefd[1]);
  ASSERT_GE(child, 0);
  ::close(pipefd[1]);
  ::usleep(50000);
  int attached = 0;
  int untraced = 0;
  constexpr int kAttaches = 40;
  for (int i = 0; i < kAttaches; ++i) {
    auto inf = Inferior::attach(child);
    EXPECT_TRUE(inf) << "attach " << i << ": " << inf.error().to_string();
    if (!inf) continue;
    ++attached;
    auto tids = list_threads(child);
    ASSERT_TRUE(tids);
    for (pid_t tid : *tids) {
      auto tracer = tracer_of(tid);
      if (tracer && *tracer != ::getpid()) ++untraced;
    }
    EXPECT_TRUE(inf->detach());
  }
  EXPECT_EQ(attached, kAttaches);
  EXPECT_EQ(untraced, 0) << "threads left untraced by an attach";
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the program ended by itself";
  ::close(pipefd[0]);
}

// Creators that make and join threads: a thread a clone made after its creator was seized is
// traced already (PTRACE_O_TRACECLONE) and its seize fails with EPERM, and a creator seized
// inside its clone makes an untraced thread that shows in the listing only after the seize.
TEST(InferiorAttach, AProgramThatMakesThreadsAllTheTimeIsAttachedEveryTime) {
  attach_again_and_again({"4", "200000"});
}

// Chains of threads, each making the next and ending: a listed thread is often gone at its
// seize (ESRCH), and the one its creator left is new to the listing.
TEST(InferiorAttach, ChainsOfThreadsThatMakeTheNextAndEndAreAttachedWhole) {
  attach_again_and_again({"4", "100000000", "chain"});
}

// The embedding program's own children are its own: an Inferior's waits (wait() through a
// multi-threaded program, a forking one, wait_or_poll, kill()) leave their statuses for its own
// waitpid, one that ended before the Inferior ran and one that ends while it waits.
TEST(Inferior, WaitsLeaveTheCallersOwnChildrenAlone) {
  const pid_t early = ::fork();
  ASSERT_GE(early, 0);
  if (early == 0) ::_exit(7);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(early), &info, WEXITED | WNOWAIT), 0);  // a zombie
  const pid_t late = ::fork();
  ASSERT_GE(late, 0);
  if (late == 0) {
    ::usleep(30000);
    ::_exit(9);
  }
  const int quiet = ::open("/dev/null", O_WRONLY);
  // New threads (clone events), then a forked child (fork events), each run to its end.
  const std::vector<std::vector<std::string>> runs = {{program("threads"), "4", "200"},
                                                      {program("forker"), "fork", "3"}};
  for (const std::vector<std::string>& argv : runs) {
    SCOPED_TRACE(argv[0]);
    auto inf = Inferior::spawn(argv, {.stdout_fd = quiet});
    ASSERT_TRUE(inf) << inf.error().to_string();
    const Event end = run_to_end(*inf, Resume::kCont);
    EXPECT_EQ(end.kind, EventKind::kExited);
    EXPECT_EQ(end.status, 0);
  }
  {
    auto inf = Inferior::spawn({program("spin")}, {.stdout_fd = quiet});
    ASSERT_TRUE(inf) << inf.error().to_string();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    // The late child ends meanwhile: 50 ms of waits with nothing of the program to report.
    auto polled = inf->wait_or_poll({}, 50);
    ASSERT_TRUE(polled) << polled.error().to_string();
    EXPECT_FALSE(*polled);
    ASSERT_TRUE(inf->kill());
  }
  ::close(quiet);
  int status = 0;
  ASSERT_EQ(::waitpid(early, &status, WNOHANG), early) << "the early child was reaped by hwarb";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
  ASSERT_EQ(::waitpid(late, &status, 0), late) << "the late child was reaped by hwarb";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9);
}

// The blocked-signal mask of process `pid` (/proc/PID/status SigBlk).
std::uint64_t blocked_signals(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  ADD_FAILURE() << "no SigBlk line for " << pid;
  return ~0ull;
}

TEST(Inferior, WaitOrPollWakesForEventsReadableDescriptorsAndTimeouts) {
  auto inf = Inferior::spawn({program("spin")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf) << inf.error().to_string();
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const std::vector<int> fds{pipefd[0]};
  using Clock = std::chrono::steady_clock;

  // Nothing happens: the timeout.
  auto t0 = Clock::now();
  auto got = inf->wait_or_poll(fds, 150);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_FALSE(got->has_value());
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(140));

  // A readable descriptor ends the wait at once, with no event.
  ASSERT_EQ(::write(pipefd[1], "x", 1), 1);
  t0 = Clock::now();
  got = inf->wait_or_poll(fds, 10'000);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_FALSE(got->has_value());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  char c;
  ASSERT_EQ(::read(pipefd[0], &c, 1), 1);

  // An event of the process ends it too, and comes back as the event.
  ASSERT_EQ(::kill(inf->pid(), SIGUSR1), 0);
  t0 = Clock::now();
  got = inf->wait_or_poll(fds, 10'000);
  ASSERT_TRUE(got) << got.error().to_string();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->kind, EventKind::kSignal);
  EXPECT_EQ((*got)->signal, SIGUSR1);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));

  // SIGCHLD is blocked in this thread now, and a program spawned afterwards does not inherit it.
  sigset_t mine;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, nullptr, &mine), 0);
  EXPECT_TRUE(sigismember(&mine, SIGCHLD));
  auto later = Inferior::spawn({program("spin")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(later) << later.error().to_string();
  EXPECT_EQ(blocked_signals(later->pid()) & (1ull << (SIGCHLD - 1)), 0u);
  ASSERT_TRUE(later->kill());

  // The signal is passed on (killing the program), and the exit arrives through the same wait.
  ASSERT_TRUE(inf->resume((*got)->tid, Resume::kCont, SIGUSR1));
  for (;;) {
    got = inf->wait_or_poll({}, 10'000);
    ASSERT_TRUE(got) << got.error().to_string();
    ASSERT_TRUE(got->has_value()) << "no exit within 10 s";
    if ((*got)->kind == EventKind::kKilled) break;
  }
  EXPECT_EQ((*got)->signal, SIGUSR1);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

// A signal that the running thread blocks waits in its queue: surface_blocked stops the thread
// and makes it take the signal when its si_code is the one asked for, the program's mask kept; a
// signal of another code, or none, leaves the thread running as it was.
TEST(Inferior, ABlockedSignalOfTheCodeAskedForSurfacesAndTheMaskStays) {
  auto inf = Inferior::spawn({program("spin"), std::to_string(SIGUSR1)},
                             {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf) << inf.error().to_string();
  const pid_t pid = inf->pid();
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  ::usleep(20'000);  // past its sigprocmask
  auto none = inf->surface_blocked(pid, SIGUSR1, SI_TKILL);
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_FALSE(*none);
  EXPECT_FALSE(inf->is_stopped(pid));
  ASSERT_EQ(::syscall(SYS_tgkill, pid, pid, SIGUSR1), 0);
  ::usleep(10'000);
  auto other = inf->surface_blocked(pid, SIGUSR1, SI_QUEUE);
  ASSERT_TRUE(other) << other.error().to_string();
  EXPECT_FALSE(*other);
  EXPECT_FALSE(inf->is_stopped(pid));
  auto got = inf->surface_blocked(pid, SIGUSR1, SI_TKILL);
  ASSERT_TRUE(got) << got.error().to_string();
  ASSERT_TRUE(*got);
  EXPECT_EQ((*got)->kind, EventKind::kSignal);
  EXPECT_EQ((*got)->signal, SIGUSR1);
  EXPECT_EQ((*got)->code, SI_TKILL);
  EXPECT_TRUE(inf->is_stopped(pid));
  // Taken out of the queue, and the program's mask as it set it.
  auto mask = ptrace_getsigmask(pid);
  ASSERT_TRUE(mask) << mask.error().to_string();
  EXPECT_NE(*mask & (1ull << (SIGUSR1 - 1)), 0u);
  std::array<siginfo_t, 4> queued{};
  auto n = ptrace_peeksiginfo(pid, false, queued);
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 0u);
  // Resumed without it, the program runs on, and on after the detach.
  ASSERT_TRUE(inf->resume(pid, Resume::kCont));
  ASSERT_TRUE(inf->detach());
  ::usleep(20'000);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
}

// A signal raised while a thread is stopped is pending, not reported: surface_pending makes it
// report; dropped, it is never delivered; requeued, detach delivers it.
TEST(Inferior, PendingSignalsSurfaceAndAreDroppedOrDelivered) {
  for (const bool keep : {false, true}) {
    auto inf = Inferior::spawn({program("spin")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
    ASSERT_TRUE(inf) << inf.error().to_string();
    const pid_t pid = inf->pid();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    ::usleep(20'000);
    ASSERT_TRUE(inf->stop_all());
    ASSERT_EQ(::syscall(SYS_tgkill, pid, pid, SIGUSR1), 0);
    ASSERT_EQ(::syscall(SYS_tgkill, pid, pid, SIGUSR2), 0);
    // Only the signals asked for surface.
    auto got = inf->surface_pending(pid, 1ull << (SIGUSR1 - 1));
    ASSERT_TRUE(got) << got.error().to_string();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].kind, EventKind::kSignal);
    EXPECT_EQ((*got)[0].signal, SIGUSR1);
    auto again = inf->surface_pending(pid, 1ull << (SIGUSR1 - 1));
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->empty());
    // SIGUSR2 is dropped the same way (both kill spin when delivered).
    auto second = inf->surface_pending(pid, 1ull << (SIGUSR2 - 1));
    ASSERT_TRUE(second);
    ASSERT_EQ(second->size(), 1u);
    if (keep) inf->requeue((*got)[0]);
    ASSERT_TRUE(inf->detach());
    ::usleep(50'000);
    int status = 0;
    const pid_t waited = ::waitpid(pid, &status, WNOHANG);
    if (keep) {
      ASSERT_EQ(waited, pid) << "the requeued SIGUSR1 was not delivered";
      EXPECT_TRUE(WIFSIGNALED(status));
      EXPECT_EQ(WTERMSIG(status), SIGUSR1);
    } else {
      EXPECT_EQ(waited, 0) << "a dropped signal was delivered";
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
}

// Detached straight after a single step, the step's trap (reported while stop_all waits for its
// interrupt) is hwarb's: the program runs on instead of dying of SIGTRAP.
TEST(Inferior, DetachRightAfterAStepDoesNotDeliverTheStepsTrap) {
  for (int round = 0; round < 20; ++round) {
    auto inf = Inferior::spawn({program("spin")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
    ASSERT_TRUE(inf) << inf.error().to_string();
    const pid_t pid = inf->pid();
    ASSERT_TRUE(inf->resume_all(Resume::kCont));
    ::usleep(5'000);
    ASSERT_TRUE(inf->stop_all());
    ASSERT_TRUE(inf->resume_all(Resume::kStep));
    ASSERT_TRUE(inf->detach());
    ::usleep(20'000);
    int status = 0;
    const pid_t waited = ::waitpid(pid, &status, WNOHANG);
    EXPECT_EQ(waited, 0) << "round " << round << ": the program ended, signal "
                         << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    if (waited != 0) break;
  }
}

TEST(Inferior, AttachRefusesBadPids) {
  auto self = Inferior::attach(::getpid());
  ASSERT_FALSE(self);
  EXPECT_EQ(self.error().code(), ErrorCode::kInval);
  auto none = Inferior::attach(0x3ffffff0);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), ErrorCode::kSrch);
}

}  // namespace
}  // namespace hwarb::native

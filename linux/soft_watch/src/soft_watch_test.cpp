// Tests of SoftWatch on real processes (tests/programs): every write, read and execution is
// found exactly once with the right thread, instruction and values; the program's output and
// exit status never change; disarm leaves nothing behind.
#include "hwarb/linux/soft_watch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "hwarb/linux/page.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/symbols.h"
#include "test_programs.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

std::uint64_t value_of(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(bytes.size(), 8));
  return v;
}

struct Outcome {
  std::vector<WatchHit> hits;
  Event end;
};

// An event the watcher did not take, passed through: its thread resumed (a signal delivered),
// an ended thread or process left as it is.
void pass_through(Inferior& inf, const SoftWatch& watch, const Event& ev) {
  switch (ev.kind) {
    case EventKind::kExited:
    case EventKind::kKilled:
    case EventKind::kThreadExit:
      break;
    case EventKind::kSignal:
      EXPECT_TRUE(inf.resume(ev.tid, watch.resume_mode(), ev.signal));
      break;
    default:
      EXPECT_TRUE(inf.resume(ev.tid, watch.resume_mode()));
      break;
  }
}

// The event loop a user of SoftWatch writes: the watcher first, then pass-through.
Outcome run(Inferior& inf, SoftWatch& watch) {
  Outcome out;
  EXPECT_TRUE(inf.resume_all(watch.resume_mode()));
  for (;;) {
    auto ev = inf.wait();
    EXPECT_TRUE(ev) << ev.error().to_string();
    if (!ev) return out;
    auto mine = watch.handle(*ev, out.hits);
    EXPECT_TRUE(mine) << mine.error().to_string();
    if (!mine) return out;
    if (*mine) continue;
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      out.end = *ev;
      return out;
    }
    pass_through(inf, watch, *ev);
  }
}

Symbol symbol(pid_t pid, const char* name) {
  auto table = SymbolTable::load(pid);
  EXPECT_TRUE(table) << table.error().to_string();
  auto sym = table->find(name);
  EXPECT_TRUE(sym) << sym.error().to_string();
  return *sym;
}

// `argv` spawned (its output in `out`), `len` bytes at symbol `name` plus `offset` watched for
// `access` (range 0), run to its end; `at`, when given, gets the symbol's address.
Outcome watch_to_end(const std::vector<std::string>& argv, Capture& out, const char* name,
                     std::uint64_t offset, std::uint64_t len, unsigned access,
                     std::uint64_t* at = nullptr) {
  auto inf = Inferior::spawn(argv, {.stdout_fd = out.fd()});
  EXPECT_TRUE(inf) << inf.error().to_string();
  if (!inf) return {};
  const Symbol sym = symbol(inf->pid(), name);
  if (at != nullptr) *at = sym.address;
  auto watch = SoftWatch::arm(*inf, {{sym.address + offset, len, access, 0}});
  EXPECT_TRUE(watch) << watch.error().to_string();
  if (!watch) return {};
  return run(*inf, *watch);
}

TEST(SoftWatch, FindsEveryWriteWithIpAndValues) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "10"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  const Symbol target = symbol(inf->pid(), "target");
  const Symbol setter = symbol(inf->pid(), "set_target");
  auto watch = SoftWatch::arm(*inf, {{target.address, 4, kWatchWrite, 7}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  EXPECT_EQ(watch->method(0), WatchMethod::kPageProtect);
  Outcome got = run(*inf, *watch);
  ASSERT_EQ(got.hits.size(), 10u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    const WatchHit& h = got.hits[i];
    EXPECT_EQ(h.id, 7u);
    EXPECT_EQ(h.tid, inf->pid());
    EXPECT_EQ(h.access, kWatchWrite);
    EXPECT_EQ(h.addr, target.address);
    EXPECT_EQ(value_of(h.old_value), i);
    EXPECT_EQ(value_of(h.new_value), i + 1);
    EXPECT_GE(h.ip, setter.address);
    EXPECT_LT(h.ip, setter.address + setter.size);
    EXPECT_TRUE(h.syscall.empty());
  }
  EXPECT_EQ(got.end.kind, EventKind::kExited);
  EXPECT_EQ(got.end.status, 3);
  EXPECT_EQ(out.text(), "sum=100\n");
  // The neighbour on the same page faulted too, without a hit.
  EXPECT_GE(watch->stats().false_sharing, 10u);
}

// With cpu_accesses every access to the protected page, the watched variable's and its
// neighbour's, is made by the CPU (stepped with the page open), none by the watcher: the same
// hits, the same values, and the program's own breakpoints would see each store.
TEST(SoftWatch, CpuAccessesStepEveryFaultAndFindTheSameHits) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "10"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf) << inf.error().to_string();
  const Symbol target = symbol(inf->pid(), "target");
  auto watch = SoftWatch::arm(*inf, {{target.address, 4, kWatchWrite, 7}}, {.cpu_accesses = true});
  ASSERT_TRUE(watch) << watch.error().to_string();
  Outcome got = run(*inf, *watch);
  ASSERT_EQ(got.hits.size(), 10u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(value_of(got.hits[i].old_value), i);
    EXPECT_EQ(value_of(got.hits[i].new_value), i + 1);
  }
  EXPECT_EQ(got.end.kind, EventKind::kExited);
  EXPECT_EQ(got.end.status, 3);
  EXPECT_EQ(out.text(), "sum=100\n");
  EXPECT_EQ(watch->stats().emulated, 0u);
  EXPECT_GE(watch->stats().false_sharing, 10u);
  EXPECT_EQ(watch->stats().stepped, watch->stats().faults);
}

TEST(SoftWatch, ReadsAreCountedExactlyAndSeparatelyFromWrites) {
  for (unsigned access : {kWatchRead, kWatchRead | kWatchWrite}) {
    Capture out;
    auto inf = Inferior::spawn({program("writer"), "6"}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf);
    const Symbol target = symbol(inf->pid(), "target");
    const Symbol getter = symbol(inf->pid(), "get_target");
    auto watch = SoftWatch::arm(*inf, {{target.address, 4, access, 0}});
    ASSERT_TRUE(watch) << watch.error().to_string();
    Outcome got = run(*inf, *watch);
    int reads = 0, writes = 0;
    for (const WatchHit& h : got.hits) {
      if (h.access == kWatchRead) {
        ++reads;
        EXPECT_GE(h.ip, getter.address);
        EXPECT_LT(h.ip, getter.address + getter.size);
        EXPECT_EQ(value_of(h.new_value), 6u);
        EXPECT_EQ(h.old_value, h.new_value);
      } else {
        ++writes;
        EXPECT_EQ(h.access, kWatchWrite);
      }
    }
    EXPECT_EQ(reads, 6);
    EXPECT_EQ(writes, access == kWatchRead ? 0 : 6);
    EXPECT_EQ(got.end.status, 3);
    EXPECT_EQ(out.text(), "sum=36\n");
  }
}

TEST(SoftWatch, AnUnalignedTwelveByteRangeSeesEachFieldWrite) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "1"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol rec = symbol(inf->pid(), "rec");
  ASSERT_EQ(rec.size, 16u);
  // Bytes 2..13: the upper half of a, all of b and c, the lower half of d.
  auto watch = SoftWatch::arm(*inf, {{rec.address + 2, 12, kWatchWrite, 0}});
  ASSERT_TRUE(watch);
  Outcome got = run(*inf, *watch);
  ASSERT_EQ(got.hits.size(), 4u);
  const std::uint64_t first[] = {rec.address + 2, rec.address + 4, rec.address + 8,
                                 rec.address + 12};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got.hits[i].addr, first[i]);
    ASSERT_EQ(got.hits[i].new_value.size(), 12u);
  }
  // After the last store the range holds a's high half (0), b = 11, c = 12, d's low half 13.
  const std::vector<std::uint8_t>& last = got.hits[3].new_value;
  std::uint32_t b = 0, c = 0;
  std::memcpy(&b, last.data() + 2, 4);
  std::memcpy(&c, last.data() + 6, 4);
  EXPECT_EQ(b, 11u);
  EXPECT_EQ(c, 12u);
  EXPECT_EQ(last[10], 13);
  EXPECT_EQ(got.end.status, 3);
}

TEST(SoftWatch, EveryThreadsWritesAreFound) {
  Capture out;
  auto inf = Inferior::spawn({program("threads"), "4", "50"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol slots = symbol(inf->pid(), "slots");
  auto watch = SoftWatch::arm(*inf, {{slots.address, 16, kWatchWrite, 0}});
  ASSERT_TRUE(watch);
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.hits.size(), 200u);
  std::set<pid_t> tids;
  std::map<std::uint64_t, int> per_slot;
  for (const WatchHit& h : got.hits) {
    tids.insert(h.tid);
    ++per_slot[h.addr];
    EXPECT_NE(h.tid, inf->pid());
  }
  EXPECT_EQ(tids.size(), 4u);
  ASSERT_EQ(per_slot.size(), 4u);
  for (const auto& [addr, n] : per_slot) EXPECT_EQ(n, 50) << addr;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "done\n");
}

TEST(SoftWatch, ExecutionBreakpointsHitOncePerCallAndLeaveTheProgramAlone) {
  Capture out;
  auto inf = Inferior::spawn({program("calls"), "7"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol work = symbol(inf->pid(), "work");
  auto watch = SoftWatch::arm(*inf, {{work.address, 1, kWatchExec, 0}});
  ASSERT_TRUE(watch);
  EXPECT_EQ(watch->method(0), WatchMethod::kInt3);
  Outcome got = run(*inf, *watch);
  ASSERT_EQ(got.hits.size(), 7u);
  for (const WatchHit& h : got.hits) EXPECT_EQ(h.ip, work.address);
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "total=70\n");
}

TEST(SoftWatch, KernelWritesAndReadsNameTheSystemCall) {
  Capture out;
  auto inf = Inferior::spawn({program("syscalls")}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol buffer = symbol(inf->pid(), "buffer");
  const Symbol stamp = symbol(inf->pid(), "stamp");
  auto watch = SoftWatch::arm(*inf, {{buffer.address, 16, kWatchRead | kWatchWrite, 0},
                                     {stamp.address, 16, kWatchWrite, 1}});
  ASSERT_TRUE(watch);
  Outcome got = run(*inf, *watch);
  std::vector<std::string> seen;
  for (const WatchHit& h : got.hits) {
    if (h.id == 0 && !h.syscall.empty()) seen.push_back(h.syscall + ":" + std::to_string(h.access));
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "read:" + std::to_string(kWatchWrite));
  EXPECT_EQ(seen[1], "write:" + std::to_string(kWatchRead));
  const WatchHit& kernel_write = *std::find_if(
      got.hits.begin(), got.hits.end(), [](const WatchHit& h) { return h.syscall == "read"; });
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(kernel_write.new_value.data()), 7),
            "kernel!");
  // clock_gettime (vDSO: a user-space store, no system call) wrote `stamp`.
  EXPECT_TRUE(
      std::any_of(got.hits.begin(), got.hits.end(), [](const WatchHit& h) { return h.id == 1; }));
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "kernel!\n");
}

// Threads that block on a mutex next to the watched word (the same page): their futex calls run
// as unwatched (no glibc abort on an unexpected futex error), and no other thread's write is
// taken for the kernel's while a call runs: exactly one hit per write of the program.
TEST(SoftWatch, FutexCallsOnTheWatchedPageRunAsUnwatchedAndCountExactly) {
  Capture out;
  Outcome got =
      watch_to_end({program("futex_counter"), "3", "2000"}, out, "counter", 0, 8, kWatchWrite);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "counter=6000\n");
  EXPECT_EQ(got.hits.size(), 6000u);
  for (const WatchHit& h : got.hits) {
    ASSERT_EQ(h.syscall, "") << "a write taken for the kernel's: " << value_of(h.new_value);
  }
}

// The same with a read-write watch: the page is inaccessible, so each futex call on it runs with
// the page open, and several threads' calls overlap. One call's exit leaves the page open while
// another's has it open (else the other call fails with EFAULT and glibc aborts the program).
TEST(SoftWatch, OverlappingFutexCallsOnAnInaccessibleWatchedPageEachRunWithItOpen) {
  Capture out;
  auto inf = Inferior::spawn({program("futex_counter"), "8", "2000"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol counter = symbol(inf->pid(), "counter");
  auto watch = SoftWatch::arm(*inf, {{counter.address, 8, kWatchRead | kWatchWrite, 0}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "counter=16000\n");
  EXPECT_GE(watch->stats().syscalls_opened, 1u);
}

// A thread the caller steps while a system-call stop of it is still to handle (a debugger's
// step of a thread that a stop of every thread left at a call's stop): the watch handles the
// call as usual, then steps the thread on from the call's exit stop, so the next stop of the
// thread is the step's trap one instruction after the call, not a later fault or call.
TEST(SoftWatch, ACallerStepFromASystemCallStopEndsOneInstructionAfterTheCall) {
  Capture out;
  auto inf = Inferior::spawn({program("futex_counter"), "3", "20000"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol counter = symbol(inf->pid(), "counter");
  auto watch = SoftWatch::arm(*inf, {{counter.address, 8, kWatchWrite, 0}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  ASSERT_TRUE(inf->resume_all(watch->resume_mode()));
  std::vector<WatchHit> hits;
  pid_t stepper = 0;
  bool exited_call = false;
  std::optional<Event> after;
  for (int n = 0; n < 1'000'000 && !after; ++n) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev) << ev.error().to_string();
    ASSERT_NE(ev->kind, EventKind::kExited) << "no futex call of a second thread was seen";
    if (stepper == 0 && ev->kind == EventKind::kSyscallEnter && ev->syscall == SYS_futex &&
        ev->tid != inf->pid()) {
      stepper = ev->tid;
      watch->set_caller_steps({stepper});
    }
    if (ev->tid == stepper && exited_call) {
      after = *ev;
      break;
    }
    if (ev->tid == stepper && ev->kind == EventKind::kSyscallExit) exited_call = true;
    auto mine = watch->handle(*ev, hits);
    ASSERT_TRUE(mine) << mine.error().to_string();
    if (!*mine) pass_through(*inf, *watch, *ev);
  }
  ASSERT_TRUE(after) << "the stepped thread never left its call";
  EXPECT_EQ(after->kind, EventKind::kSignal) << "event kind " << static_cast<int>(after->kind);
  EXPECT_EQ(after->signal, SIGTRAP) << "a step's trap, not a fault of the program running on";
}

// A forked child is followed: its writes are hits too (its own tid), and both processes run as
// unwatched (the parent waits for the child's exit status 3).
TEST(SoftWatch, AForkedChildIsFollowedAndItsWritesAreHits) {
  Capture out;
  auto inf = Inferior::spawn({program("forker"), "fork", "10"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol counter = symbol(inf->pid(), "counter");
  auto watch = SoftWatch::arm(*inf, {{counter.address, 8, kWatchWrite, 0}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "child exit 3\n");
  ASSERT_EQ(got.hits.size(), 20u);
  std::set<pid_t> tids;
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(value_of(got.hits[i].new_value), i % 10 + 1) << "hit " << i;
    tids.insert(got.hits[i].tid);
  }
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_NE(got.hits.front().tid, inf->pid());
  EXPECT_EQ(got.hits.back().tid, inf->pid());
}

// An exec of the same executable (directly, or by a vfork child) is watched again in the new
// image: the writes before and after it are all hits, and the program runs as unwatched.
TEST(SoftWatch, AnExecOfTheSameProgramIsWatchedAgain) {
  for (const char* mode : {"exec", "vfork"}) {
    Capture out;
    Outcome got = watch_to_end({program("forker"), mode, "10"}, out, "counter", 0, 8, kWatchWrite);
    const bool exec = std::string(mode) == "exec";
    EXPECT_EQ(got.end.kind, EventKind::kExited) << mode << ": killed by " << got.end.signal;
    EXPECT_EQ(got.end.status, exec ? 3 : 0) << mode;
    EXPECT_EQ(out.text(), exec ? "" : "child exit 3\n") << mode;
    ASSERT_EQ(got.hits.size(), 20u) << mode;
    for (std::size_t i = 0; i < got.hits.size(); ++i) {
      EXPECT_EQ(value_of(got.hits[i].new_value), i % 10 + 1) << mode << " hit " << i;
    }
  }
}

// A program with its own SIGSEGV handler for the watched page: its own fault reaches the handler
// with the kernel's exact siginfo (SEGV_ACCERR at the faulting address), its mprotect applies, and
// the faulting write restarts and completes; the watched word's writes are the only hits.
TEST(SoftWatch, TheProgramsOwnFaultsReachItsHandlerExactly) {
  Capture out;
  Outcome got = watch_to_end({program("own_segv"), "5"}, out, "area", 0, 4, kWatchWrite);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 4);
  EXPECT_EQ(out.text(), "handled=1 code_ok=1 addr_ok=1 spare=7 counter=6\n");
  ASSERT_EQ(got.hits.size(), 6u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(value_of(got.hits[i].new_value), i + 1) << "hit " << i;
  }
}

// A store that faults on the program's own protection (its mprotect) did not happen: no hit.
// The program's handler makes the page writable and the store restarts: that one is the hit.
// Its value's writes: 10, 11 (faulting once), 1000 (SIGSEGV blocked), 2000 (SIGSEGV ignored).
TEST(SoftWatch, AStoreThatFaultsOnTheProgramsOwnProtectionIsNoHit) {
  Capture out;
  Outcome got = watch_to_end({program("segv_rounds"), "1"}, out, "page", 0, 4, kWatchWrite);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 5);
  EXPECT_EQ(out.text(), "handled=2 value=2000 pending=1\n");
  std::vector<std::uint64_t> values;
  for (const WatchHit& h : got.hits) values.push_back(value_of(h.new_value));
  EXPECT_EQ(values, (std::vector<std::uint64_t>{10, 11, 1000, 2000}));
}

// The program's SIGSEGV handler writes the watched word while SIGSEGV is blocked (inside the
// handler, and by sigprocmask), and then ignores SIGSEGV: the watch's faults there make the kernel
// reset the action (and unblock SIGSEGV), which the watch puts back. Every later SIGSEGV is the
// program's handler's (or ignored, or left pending) as unwatched; each handler write is a hit.
TEST(SoftWatch, TheProgramsSegvActionOutlivesTheWatchsFaults) {
  Capture out;
  Outcome got = watch_to_end({program("segv_rounds"), "3"}, out, "page", 4, 4, kWatchWrite);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 5);
  EXPECT_EQ(out.text(), "handled=4 value=2000 pending=1\n");
  ASSERT_EQ(got.hits.size(), 4u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(value_of(got.hits[i].new_value), i + 1) << "hit " << i;
  }
}

// The kernel writing the same bytes again (pread64, preadv of the same file range) is a write
// each time, as a store of an equal value is: one hit per call, in both methods (single-step
// armed from main's open of its file on: stepping the loader too would take half a minute).
TEST(SoftWatch, EveryKernelWriteIsAHitEvenOfTheSameBytes) {
  for (const bool step : {false, true}) {
    const int n = step ? 6 : 20;
    Capture out;
    auto inf = Inferior::spawn({program("reread"), std::to_string(n)}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf);
    const Symbol buffer = symbol(inf->pid(), "buffer");
    if (step) {
      ASSERT_TRUE(inf->resume(inf->pid(), Resume::kSyscall));
      for (;;) {
        auto ev = inf->wait();
        ASSERT_TRUE(ev);
        ASSERT_NE(ev->kind, EventKind::kExited);
        if (ev->kind == EventKind::kSyscallEnter && ev->syscall == SYS_openat) {
          char path[15] = {};
          (void)inf->read_memory(ev->args[1],
                                 std::span(reinterpret_cast<std::uint8_t*>(path), sizeof path - 1));
          if (std::string(path) == "/proc/self/exe") break;
        }
        ASSERT_TRUE(inf->resume(ev->tid, Resume::kSyscall));
      }
    }
    auto watch =
        SoftWatch::arm(*inf, {{buffer.address, 16, kWatchWrite, 0}}, {.force_single_step = step});
    ASSERT_TRUE(watch) << watch.error().to_string();
    Outcome got = run(*inf, *watch);
    EXPECT_EQ(got.end.status, 0);
    EXPECT_EQ(out.text(), "reads=" + std::to_string(n) + "\n");
    ASSERT_EQ(got.hits.size(), static_cast<std::size_t>(n)) << (step ? "single-step" : "pages");
    for (std::size_t i = 0; i < got.hits.size(); ++i) {
      EXPECT_EQ(got.hits[i].syscall, i % 2 == 0 ? "pread64" : "preadv") << "hit " << i;
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.hits[i].new_value.data()), 4),
                "\x7f"
                "ELF");
    }
  }
}

// The watched page unmapped and mapped again at the same address (MAP_FIXED): the watch follows
// it, every write of both mappings is a hit (the first after the remap from the fresh page's
// zero), and both events are told as notes.
TEST(SoftWatch, AWatchFollowsItsAddressThroughMunmapAndMmap) {
  Capture out;
  auto inf = Inferior::spawn({program("remap"), "5"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol area = symbol(inf->pid(), "area");
  auto watch = SoftWatch::arm(*inf, {{area.address, 4, kWatchWrite, 3}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "remapped counter=5\n");
  ASSERT_EQ(got.hits.size(), 10u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(got.hits[i].addr, area.address) << "hit " << i;
    EXPECT_EQ(got.hits[i].access, kWatchWrite) << "hit " << i;
    EXPECT_EQ(value_of(got.hits[i].old_value), i % 5) << "hit " << i;
    EXPECT_EQ(value_of(got.hits[i].new_value), i % 5 + 1) << "hit " << i;
  }
  const std::vector<SoftWatch::Note> notes = watch->take_notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].id, 3u);
  EXPECT_NE(notes[0].text.find("unmapped (munmap"), std::string::npos) << notes[0].text;
  EXPECT_NE(notes[1].text.find("watched again"), std::string::npos) << notes[1].text;
  EXPECT_TRUE(watch->take_notes().empty());
}

// XSAVEC writes a state component only when it saves it (not in its initial configuration):
// prog_xsave_init saves AVX three times, in use only the second time, into an area whose AVX
// component is watched. One hit per execution that saved AVX (as the program reads each
// XSTATE_BV), by both methods, where the operand alone would say three.
TEST(SoftWatch, XsavecIsAHitOnlyWhereItSavedTheComponent) {
  for (const bool single_step : {false, true}) {
    Capture out;
    auto inf = Inferior::spawn({program("xsave_init")}, {.stdout_fd = out.fd()});
    ASSERT_TRUE(inf);
    const Symbol area = symbol(inf->pid(), "area");
    auto watch = SoftWatch::arm(*inf, {{area.address + 576, 8, kWatchWrite, 0}},
                                {.force_single_step = single_step});
    ASSERT_TRUE(watch) << watch.error().to_string();
    Outcome got = run(*inf, *watch);
    EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
    const std::string text = out.text();
    if (text == "saved=-1\n") GTEST_SKIP() << "this processor has no AVX or no XSAVEC";
    ASSERT_EQ(text.rfind("saved=", 0), 0u) << text;
    const std::size_t saved = std::stoul(text.substr(6));
    EXPECT_GE(saved, 1u) << "ymm0 in use was not saved";
    ASSERT_EQ(got.hits.size(), saved) << (single_step ? "single-step" : "page protection");
    for (const WatchHit& h : got.hits) EXPECT_EQ(value_of(h.new_value), ~0ull);
  }
}

// rep stos, rep movs and xsave over a buffer holding the watched word: one hit per instruction
// (not per iteration), at the instruction, with the value before it and the value after it, as a
// debug register reports them.
TEST(SoftWatch, AStringInstructionIsOneHitPerInstruction) {
  Capture out;
  std::uint64_t area = 0;
  Outcome got = watch_to_end({program("strings")}, out, "area", 24, 8, kWatchWrite, &area);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  const std::string text = out.text();
  ASSERT_TRUE(text == "writes=9\n" || text == "writes=8\n") << text;
  const std::size_t writes = text == "writes=9\n" ? 9 : 8;
  ASSERT_EQ(got.hits.size(), writes);
  std::set<std::uint64_t> ips;
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    const WatchHit& h = got.hits[i];
    EXPECT_EQ(h.addr, area + 24) << "hit " << i;
    EXPECT_EQ(h.access, kWatchWrite) << "hit " << i;
    ips.insert(h.ip);
    if (i > 0) {
      EXPECT_EQ(h.old_value, got.hits[i - 1].new_value) << "hit " << i;
    }
    if (i < 4) {
      EXPECT_EQ(value_of(h.new_value), 0x1111111111111111ULL * (i + 1)) << "hit " << i;
    } else if (i < 8) {
      EXPECT_EQ(value_of(h.new_value), 100 + (i - 4)) << "hit " << i;
    }
  }
  EXPECT_EQ(value_of(got.hits[0].old_value), 0u);
  EXPECT_EQ(ips.size(), writes);  // each instruction once
}

// Buffers reached through iovecs (readv/writev, sendmsg/recvmsg) are opened around the call like
// read(2)'s: the program's calls succeed as without hwarb, and the kernel's accesses are hits.
TEST(SoftWatch, KernelAccessesThroughIovecsAreSeenAndTheCallsSucceed) {
  Capture out;
  auto inf = Inferior::spawn({program("vectors")}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol head = symbol(inf->pid(), "head");
  const Symbol tail = symbol(inf->pid(), "tail");
  const Symbol mail = symbol(inf->pid(), "mail");
  auto watch = SoftWatch::arm(*inf, {{head.address, 4, kWatchRead | kWatchWrite, 0},
                                     {tail.address, 4, kWatchRead | kWatchWrite, 1},
                                     {mail.address, 8, kWatchWrite, 2}});
  ASSERT_TRUE(watch);
  Outcome got = run(*inf, *watch);
  std::vector<std::string> seen;
  for (const WatchHit& h : got.hits) {
    if (!h.syscall.empty()) {
      seen.push_back(std::to_string(h.id) + ":" + h.syscall + ":" + std::to_string(h.access));
    }
  }
  const std::string w = std::to_string(kWatchWrite);
  const std::string r = std::to_string(kWatchRead);
  const std::vector<std::string> want = {"0:readv:" + w,  "1:readv:" + w,   "0:writev:" + r,
                                         "1:writev:" + r, "1:sendmsg:" + r, "2:recvmsg:" + w};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "headtail\nmail=tail\n");
}

TEST(SoftWatch, AStackVariableUsesSingleStepAndIsExact) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto inf = Inferior::spawn({program("stackvar")}, {.stdout_fd = fds[1]});
  ::close(fds[1]);
  ASSERT_TRUE(inf);
  // Run until the program has printed the address of its local.
  ASSERT_TRUE(inf->resume(inf->pid(), Resume::kSyscall));
  std::uint64_t addr = 0;
  while (addr == 0) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev);
    if (ev->kind == EventKind::kSyscallExit && ev->syscall == 1 /* write */) {
      char text[64] = {};
      ASSERT_GT(::read(fds[0], text, sizeof(text) - 1), 0);
      ASSERT_EQ(std::sscanf(text, "addr=%lx", &addr), 1) << text;
      break;
    }
    ASSERT_TRUE(inf->resume(ev->tid, Resume::kSyscall));
  }
  ::close(fds[0]);
  auto watch = SoftWatch::arm(*inf, {{addr, 4, kWatchWrite, 0}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  EXPECT_EQ(watch->method(0), WatchMethod::kSingleStep);
  EXPECT_NE(watch->describe().find("single-step"), std::string::npos);
  const Symbol store = symbol(inf->pid(), "store");
  Outcome got = run(*inf, *watch);
  // The five stores of store(); after main returns, the dead slot is reused by other frames
  // (exit's), which a watch on a raw address rightly sees too.
  ASSERT_GE(got.hits.size(), 5u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    const bool in_store =
        got.hits[i].ip >= store.address && got.hits[i].ip < store.address + store.size;
    EXPECT_EQ(in_store, i < 5) << i;
    if (i < 5) {
      EXPECT_EQ(value_of(got.hits[i].new_value), i + 1);
    }
  }
  EXPECT_EQ(got.end.status, 0);
}

TEST(SoftWatch, DisarmRestoresEveryProtectionAndByte) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "5"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol target = symbol(inf->pid(), "target");
  const Symbol setter = symbol(inf->pid(), "set_target");
  auto before = read_maps(inf->pid());
  ASSERT_TRUE(before);
  std::uint8_t code_before[4];
  ASSERT_TRUE(inf->read_memory(setter.address, code_before));
  auto watch = SoftWatch::arm(
      *inf, {{target.address, 4, kWatchRead | kWatchWrite, 0}, {setter.address, 1, kWatchExec, 1}});
  ASSERT_TRUE(watch);
  auto during = read_maps(inf->pid());
  ASSERT_TRUE(during);
  EXPECT_EQ(find_mapping(*during, target.address)->prot(), PROT_NONE);
  ASSERT_TRUE(watch->disarm());
  auto after = read_maps(inf->pid());
  ASSERT_TRUE(after);
  EXPECT_EQ(find_mapping(*after, target.address)->prot(),
            find_mapping(*before, target.address)->prot());
  std::uint8_t code_after[4];
  ASSERT_TRUE(inf->read_memory(setter.address, code_after));
  EXPECT_EQ(std::memcmp(code_before, code_after, 4), 0);
  Outcome got = run(*inf, *watch);
  EXPECT_TRUE(got.hits.empty());
  EXPECT_EQ(got.end.status, 3);
  EXPECT_EQ(out.text(), "sum=25\n");
}

TEST(SoftWatch, BadRangesAreRefusedAndChangeNothing) {
  auto inf = Inferior::spawn({program("writer")}, {.stdout_fd = ::open("/dev/null", O_WRONLY)});
  ASSERT_TRUE(inf);
  const Symbol target = symbol(inf->pid(), "target");
  auto zero = SoftWatch::arm(*inf, {{target.address, 0, kWatchWrite, 0}});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code(), ErrorCode::kInval);
  auto mixed = SoftWatch::arm(*inf, {{target.address, 4, kWatchWrite | kWatchExec, 0}});
  ASSERT_FALSE(mixed);
  auto before = read_maps(inf->pid());
  ASSERT_TRUE(before);
  // The second range is refused: the first one's protection must not stay behind.
  auto half = SoftWatch::arm(*inf, {{target.address, 4, kWatchWrite, 0},
                                    {target.address, 4, kWatchWrite | kWatchExec, 1}});
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().code(), ErrorCode::kInval);
  auto after = read_maps(inf->pid());
  ASSERT_TRUE(after);
  EXPECT_EQ(find_mapping(*after, target.address)->prot(),
            find_mapping(*before, target.address)->prot());
}

// A watch of an address no mapping holds yet is armed, and watched from the mmap that maps it:
// prog_late_map maps its page after it starts and writes it N times.
TEST(SoftWatch, AnAddressNotMappedYetIsWatchedFromItsMmap) {
  Capture out;
  auto inf = Inferior::spawn({program("late_map"), "7"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  constexpr std::uint64_t kLatePage = 0x7e0000000000;
  auto watch = SoftWatch::arm(*inf, {{kLatePage, 4, kWatchWrite, 2}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  const std::vector<SoftWatch::Note> armed = watch->take_notes();
  ASSERT_EQ(armed.size(), 1u);
  EXPECT_EQ(armed[0].id, 2u);
  EXPECT_NE(armed[0].text.find("not mapped yet"), std::string::npos) << armed[0].text;
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.end.kind, EventKind::kExited) << "killed by signal " << got.end.signal;
  EXPECT_EQ(got.end.status, 0);
  EXPECT_EQ(out.text(), "late counter=7\n");
  ASSERT_EQ(got.hits.size(), 7u);
  for (std::size_t i = 0; i < got.hits.size(); ++i) {
    EXPECT_EQ(got.hits[i].addr, kLatePage) << "hit " << i;
    EXPECT_EQ(value_of(got.hits[i].new_value), i + 1) << "hit " << i;
  }
}

// The last page of the address space: the walk over a range's pages stops there (a page walk
// that wrapped to page 0 went on until memory ran out). Nothing maps it, so it is watched from an
// mmap, and the program runs as unwatched.
TEST(SoftWatch, ARangeEndingAtTheTopOfTheAddressSpaceIsArmed) {
  Capture out;
  auto inf = Inferior::spawn({program("writer"), "4"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  auto watch = SoftWatch::arm(
      *inf, {{0xfffffffffffffff8, 1, kWatchWrite, 0}, {0xfffffffffffff000, 0xfff, kWatchRead, 1}});
  ASSERT_TRUE(watch) << watch.error().to_string();
  Outcome got = run(*inf, *watch);
  EXPECT_EQ(got.end.kind, EventKind::kExited);
  EXPECT_EQ(got.end.status, 3);
  EXPECT_EQ(out.text(), "sum=16\n");
  EXPECT_TRUE(got.hits.empty());
}

TEST(PageSpan, ListsEachPageOnceAndNeverWraps) {
  const auto list = [](std::uint64_t addr, std::uint64_t len) {
    std::vector<std::uint64_t> pages;
    for (const std::uint64_t p : pages_of(addr, len)) pages.push_back(p);
    return pages;
  };
  EXPECT_EQ(list(0x1234, 1), std::vector<std::uint64_t>{0x1000});
  EXPECT_EQ(list(0x1234, 0), std::vector<std::uint64_t>{0x1000});
  EXPECT_EQ(list(0x1ffc, 8), (std::vector<std::uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(list(0x1000, 0x2000), (std::vector<std::uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(list(0xfffffffffffffff8, 8), std::vector<std::uint64_t>{0xfffffffffffff000});
  EXPECT_EQ(list(0xfffffffffffffffc, 8), std::vector<std::uint64_t>{0xfffffffffffff000});
  EXPECT_EQ(list(0xffffffffffffeffc, 8),
            (std::vector<std::uint64_t>{0xffffffffffffe000, 0xfffffffffffff000}));
  EXPECT_EQ(pages_of(0, ~std::uint64_t{0}).size(), std::uint64_t{1} << 52);
}

}  // namespace
}  // namespace hwarb::native

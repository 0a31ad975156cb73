// Tests of BranchTracer on real processes (tests/programs): the taken branches of a function are
// exactly those an independent single-stepping count finds; few stops per taken branch; threads,
// signals and forks traced without changing the program; stop() restores the text byte for byte.
#include "hwarb/linux/branch_tracer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/personality.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/symbols.h"
#include "test_programs.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

Symbol symbol(pid_t pid, const char* name) {
  auto table = SymbolTable::load(pid);
  EXPECT_TRUE(table) << table.error().to_string();
  if (!table) return {};
  auto sym = table->find(name);
  EXPECT_TRUE(sym) << sym.error().to_string();
  return sym ? *sym : Symbol{};
}

// Runs the process to its end as a debugger that does nothing: signals passed through.
Event finish(Inferior& inf, Resume how = Resume::kCont) {
  for (;;) {
    auto ev = inf.wait();
    EXPECT_TRUE(ev) << ev.error().to_string();
    if (!ev) return {};
    switch (ev->kind) {
      case EventKind::kExited:
      case EventKind::kKilled:
        return *ev;
      case EventKind::kThreadExit:
        break;
      case EventKind::kFork:
        if (!ev->vfork) {
          EXPECT_TRUE(inf.release(ev->child));
        } else {
          EXPECT_TRUE(inf.resume(ev->child, how));
        }
        break;
      case EventKind::kSignal:
        EXPECT_TRUE(inf.resume(ev->tid, how, ev->signal));
        break;
      default:
        EXPECT_TRUE(inf.resume(ev->tid, how));
        break;
    }
  }
}

// The program's output and exit status without any tracing.
struct Plain {
  std::string out;
  int status = -1;
};
Plain plain_run(const std::vector<std::string>& argv) {
  Capture out;
  auto inf = Inferior::spawn(argv, {.stdout_fd = out.fd()});
  EXPECT_TRUE(inf) << inf.error().to_string();
  if (!inf) return {};
  EXPECT_TRUE(inf->resume_all(Resume::kCont));
  const Event end = finish(*inf);
  EXPECT_EQ(end.kind, EventKind::kExited);
  return {out.text(), end.status};
}

// The event loop a user of BranchTracer writes: the tracer first, then pass-through.
Event drive(Inferior& inf, BranchTracer& tracer) {
  EXPECT_TRUE(inf.resume_all(tracer.resume_mode()));
  for (;;) {
    auto ev = inf.wait();
    EXPECT_TRUE(ev) << ev.error().to_string();
    if (!ev) return {};
    auto mine = tracer.handle(*ev);
    EXPECT_TRUE(mine) << mine.error().to_string();
    if (!mine) return {};
    if (*mine) continue;
    switch (ev->kind) {
      case EventKind::kExited:
      case EventKind::kKilled:
        return *ev;
      case EventKind::kThreadExit:
        break;
      case EventKind::kSignal:
        EXPECT_TRUE(inf.resume(ev->tid, tracer.resume_mode(), ev->signal));
        break;
      case EventKind::kFork:
        EXPECT_TRUE(ev->vfork ? inf.resume(ev->child, tracer.resume_mode())
                              : inf.release(ev->child));
        break;
      default:
        EXPECT_TRUE(inf.resume(ev->tid, tracer.resume_mode()));
        break;
    }
  }
}

enum class Start { kFirstInstruction, kMain };

struct TraceExtras {
  // Symbols of the traced process to resolve (into Traced::symbols).
  std::vector<std::string> resolve;
  // Called for each record while the thread is stopped at it.
  std::function<void(Inferior&, const BranchRecord&)> observe;
};

struct Traced {
  std::vector<BranchRecord> records;
  BranchTracerStats stats;
  Event end;
  std::string out;
  std::map<std::string, Symbol> symbols;
};

// Traces the whole run of argv; `only_function` restricts the int3s to that function.
Traced trace(const std::vector<std::string>& argv, Start start, const char* only_function,
             const TraceExtras& extras = {}, bool defer = true) {
  Traced t;
  Capture out;
  auto inf = Inferior::spawn(argv, {.stdout_fd = out.fd()});
  EXPECT_TRUE(inf) << inf.error().to_string();
  if (!inf) return t;
  for (const std::string& name : extras.resolve) {
    t.symbols[name] = symbol(inf->pid(), name.c_str());
  }
  BranchTracerOptions options;
  options.defer_conditional = defer;
  if (only_function != nullptr) {
    const Symbol f = symbol(inf->pid(), only_function);
    options.only = std::pair{f.address, f.address + f.size};
  }
  if (start == Start::kMain) options.start_at = symbol(inf->pid(), "main").address;
  auto tracer = BranchTracer::start(*inf, options, [&](const BranchRecord& r) {
    t.records.push_back(r);
    if (extras.observe) extras.observe(*inf, r);
  });
  EXPECT_TRUE(tracer) << tracer.error().to_string();
  if (!tracer) return t;
  t.end = drive(*inf, *tracer);
  t.stats = tracer->stats();
  t.out = out.text();
  return t;
}

// The independent count: run to `function`'s entry (own int3), then single-step every
// instruction until it returns; a step whose new rip is not the previous rip + the instruction's
// length took a branch. Counts the taken branches whose address is inside the function.
struct Reference {
  std::uint64_t taken = 0;
  std::uint64_t steps = 0;
  std::string out;
  int status = -1;
};
Reference reference_count(const std::vector<std::string>& argv, const char* function) {
  Reference ref;
  Capture out;
  auto inf = Inferior::spawn(argv, {.stdout_fd = out.fd()});
  EXPECT_TRUE(inf) << inf.error().to_string();
  if (!inf) return ref;
  const pid_t pid = inf->pid();
  const Symbol f = symbol(pid, function);
  const auto inside = [&](std::uint64_t a) { return a >= f.address && a < f.address + f.size; };
  std::uint8_t original = 0;
  EXPECT_TRUE(inf->read_memory(f.address, std::span(&original, 1)));
  const std::uint8_t int3 = 0xCC;
  EXPECT_TRUE(inf->write_memory(f.address, std::span<const std::uint8_t>(&int3, 1)));
  EXPECT_TRUE(inf->resume(pid, Resume::kCont));
  for (;;) {
    auto ev = inf->wait();
    EXPECT_TRUE(ev);
    if (!ev || ev->kind == EventKind::kExited) {
      ADD_FAILURE() << "the program never reached " << function;
      return ref;
    }
    if (ev->kind == EventKind::kSignal && ev->signal == SIGTRAP) {
      auto regs = inf->get_regs(pid);
      if (regs && regs->rip == f.address + 1) break;
    }
    EXPECT_TRUE(
        inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  EXPECT_TRUE(inf->write_memory(f.address, std::span<const std::uint8_t>(&original, 1)));
  auto regs = inf->get_regs(pid);
  EXPECT_TRUE(regs);
  if (!regs) return ref;
  regs->rip = f.address;
  EXPECT_TRUE(inf->set_regs(pid, *regs));
  const std::uint64_t entry_rsp = regs->rsp;
  for (;;) {
    auto insn = inf->decode_at(regs->rip);
    EXPECT_TRUE(insn) << "at " << std::hex << regs->rip;
    if (!insn) return ref;
    const std::uint64_t prev = regs->rip;
    EXPECT_TRUE(inf->resume(pid, Resume::kStep));
    auto ev = inf->wait();
    EXPECT_TRUE(ev && ev->kind == EventKind::kSignal && ev->signal == SIGTRAP);
    if (!ev || ev->kind != EventKind::kSignal) return ref;
    ++ref.steps;
    regs = inf->get_regs(pid);
    EXPECT_TRUE(regs);
    if (!regs) return ref;
    if (regs->rip != prev + insn->length && inside(prev)) ++ref.taken;
    if (!inside(regs->rip) && regs->rsp > entry_rsp) break;
  }
  EXPECT_TRUE(inf->resume(pid, Resume::kCont));
  const Event end = finish(*inf);
  EXPECT_EQ(end.kind, EventKind::kExited);
  ref.status = end.status;
  ref.out = out.text();
  return ref;
}

std::uint64_t count_from(const std::vector<BranchRecord>& records, const Symbol& f) {
  return static_cast<std::uint64_t>(std::count_if(
      records.begin(), records.end(),
      [&](const BranchRecord& r) { return r.from >= f.address && r.from < f.address + f.size; }));
}

TEST(BranchTracer, TakenBranchesOfAFunctionMatchAnIndependentSingleStepCount) {
  const std::vector<std::string> argv = {program("branches"), "100"};
  const Plain plain = plain_run(argv);
  ASSERT_EQ(plain.status, 0);
  ASSERT_EQ(plain.out.rfind("classify(100)=", 0), 0u) << plain.out;

  const Reference ref = reference_count(argv, "classify");
  ASSERT_GT(ref.taken, 100u);  // the loop runs 100 times
  EXPECT_EQ(ref.out, plain.out);
  EXPECT_EQ(ref.status, 0);

  // With the int3s restricted to classify.
  const Traced only = trace(argv, Start::kFirstInstruction, "classify",
                            {.resolve = {"classify"}, .observe = nullptr});
  const Symbol f = only.symbols.at("classify");
  EXPECT_EQ(only.end.kind, EventKind::kExited);
  EXPECT_EQ(only.end.status, 0);
  EXPECT_EQ(only.out, plain.out);
  EXPECT_EQ(count_from(only.records, f), ref.taken);
  EXPECT_EQ(only.records.size(), ref.taken) << "only: every record starts inside the function";
  EXPECT_EQ(only.stats.taken, ref.taken);

  // Everything from the first instruction (the dynamic loader on), then filtered.
  const Traced all = trace(argv, Start::kFirstInstruction, nullptr);
  EXPECT_EQ(all.end.kind, EventKind::kExited);
  EXPECT_EQ(all.end.status, 0);
  EXPECT_EQ(all.out, plain.out);
  EXPECT_EQ(count_from(all.records, f), ref.taken);
  EXPECT_GT(all.records.size(), 10 * ref.taken);  // the loader and libc too
  EXPECT_GT(all.stats.syscalls, 10u);

  // From main.
  const Traced from_main = trace(argv, Start::kMain, nullptr);
  EXPECT_EQ(from_main.end.status, 0);
  EXPECT_EQ(from_main.out, plain.out);
  EXPECT_EQ(count_from(from_main.records, f), ref.taken);
  EXPECT_LT(from_main.records.size(), all.records.size());
  std::printf(
      "classify: %llu taken branches (%llu instructions single-stepped); whole run: %zu "
      "branches, %llu stops, %llu blocks\n",
      static_cast<unsigned long long>(ref.taken), static_cast<unsigned long long>(ref.steps),
      all.records.size(), static_cast<unsigned long long>(all.stats.stops),
      static_cast<unsigned long long>(all.stats.blocks_decoded));
}

TEST(BranchTracer, AtMostTwoStopsPerTakenBranch) {
  for (Start start : {Start::kFirstInstruction, Start::kMain}) {
    for (const char* only : {static_cast<const char*>(nullptr), "classify"}) {
      const Traced t = trace({program("branches"), "2000"}, start, only);
      EXPECT_EQ(t.end.status, 0);
      ASSERT_GT(t.stats.taken, 0u);
      const double ratio = static_cast<double>(t.stats.stops) / static_cast<double>(t.stats.taken);
      std::printf(
          "start=%s only=%s: %llu stops, %llu taken, %llu not taken: %.3f stops per taken "
          "branch\n",
          start == Start::kMain ? "main" : "first", only ? only : "-",
          static_cast<unsigned long long>(t.stats.stops),
          static_cast<unsigned long long>(t.stats.taken),
          static_cast<unsigned long long>(t.stats.not_taken), ratio);
      EXPECT_LE(ratio, 2.0);
      EXPECT_EQ(t.stats.stepped, 0u);  // every branch of this program is emulated
      EXPECT_GT(t.stats.deferred, 0u);
      EXPECT_EQ(t.stats.ambiguous, 0u);
    }
  }
}

// Runs in child processes without address-space randomization (inherited by exec), so that two
// runs of a program have the same addresses.
class NoRandomization {
 public:
  NoRandomization() : before_(::personality(0xffffffff)) {
    if (before_ >= 0) ::personality(static_cast<unsigned long>(before_) | ADDR_NO_RANDOMIZE);
  }
  ~NoRandomization() {
    if (before_ >= 0) ::personality(static_cast<unsigned long>(before_));
  }
  NoRandomization(const NoRandomization&) = delete;
  NoRandomization& operator=(const NoRandomization&) = delete;
  bool ok() const { return before_ >= 0; }

 private:
  int before_;
};

TEST(BranchTracer, DeferredConditionalBranchesGiveTheSameRecordsAsOneStopPerBlock) {
  NoRandomization fixed;
  ASSERT_TRUE(fixed.ok());
  for (const char* mode : {"plain", "signal"}) {
    const std::vector<std::string> argv = {program("branches"), "300", mode};
    const Traced stops = trace(argv, Start::kFirstInstruction, nullptr, {}, false);
    const Traced deferred = trace(argv, Start::kFirstInstruction, nullptr, {}, true);
    EXPECT_EQ(stops.stats.deferred, 0u);
    EXPECT_GT(deferred.stats.deferred, 100u);
    EXPECT_EQ(deferred.stats.ambiguous, 0u) << mode;
    EXPECT_LT(deferred.stats.stops, stops.stats.stops);
    EXPECT_EQ(deferred.out, stops.out);
    ASSERT_EQ(deferred.records.size(), stops.records.size()) << mode;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < stops.records.size(); ++i) {
      const BranchRecord& a = stops.records[i];
      const BranchRecord& b = deferred.records[i];
      if (a.from != b.from || a.to != b.to || a.kind != b.kind) ++differ;
    }
    EXPECT_EQ(differ, 0u) << mode;
    EXPECT_EQ(deferred.stats.taken, stops.stats.taken);
    EXPECT_EQ(deferred.stats.not_taken, stops.stats.not_taken);
  }
}

TEST(BranchTracer, CallAndReturnPairToTheHelper) {
  // The displacement of each call, read while its thread is stopped there (only the first byte
  // of an instruction holds an int3).
  std::map<std::uint64_t, std::int32_t> displacement;
  TraceExtras extras{.resolve = {"classify", "weigh"},
                     .observe = [&](Inferior& inf, const BranchRecord& r) {
                       if (r.kind != x86::BranchKind::kCall) return;
                       std::int32_t rel = 0;
                       auto bytes = std::span(reinterpret_cast<std::uint8_t*>(&rel), 4);
                       EXPECT_TRUE(inf.read_memory(r.from + 1, bytes));
                       displacement[r.from] = rel;
                     }};
  const Traced t = trace({program("branches"), "10"}, Start::kMain, nullptr, extras);
  ASSERT_EQ(t.end.status, 0);
  const Symbol& classify = t.symbols.at("classify");
  const Symbol& weigh = t.symbols.at("weigh");
  const auto in = [](const Symbol& s, std::uint64_t a) {
    return a >= s.address && a < s.address + s.size;
  };
  int pairs = 0;
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const BranchRecord& call = t.records[i];
    if (call.kind != x86::BranchKind::kCall || !in(classify, call.from)) continue;
    EXPECT_EQ(call.to, weigh.address);
    // A direct call (e8 rel32) is 5 bytes: the return comes back right after it, from weigh.
    EXPECT_EQ(call.from + 5 + static_cast<std::uint64_t>(std::int64_t{displacement[call.from]}),
              weigh.address);
    bool returned = false;
    for (std::size_t j = i + 1; j < t.records.size(); ++j) {
      const BranchRecord& r = t.records[j];
      ASSERT_NE(r.kind, x86::BranchKind::kCall);  // weigh calls nothing
      if (r.kind == x86::BranchKind::kReturn) {
        EXPECT_EQ(r.to, call.from + 5);
        EXPECT_EQ(r.tid, call.tid);
        EXPECT_TRUE(in(weigh, r.from));
        returned = true;
        break;
      }
    }
    EXPECT_TRUE(returned) << "no return after the call at " << std::hex << call.from;
    ++pairs;
  }
  // classify(10) calls weigh for i = 0, 3, 6, 9.
  EXPECT_EQ(pairs, 4);
}

TEST(BranchTracer, ThreadsAreTracedEachWithItsOwnRecords) {
  const Traced t = trace({program("threads"), "4", "200"}, Start::kFirstInstruction, nullptr);
  EXPECT_EQ(t.end.kind, EventKind::kExited);
  EXPECT_EQ(t.end.status, 0);
  EXPECT_EQ(t.out, "done\n");
  std::set<pid_t> tids;
  for (const BranchRecord& r : t.records) tids.insert(r.tid);
  EXPECT_EQ(tids.size(), 5u) << "the main thread and its 4 workers";
  EXPECT_EQ(t.stats.stepped, 0u);
}

TEST(BranchTracer, SignalsAndForksLeaveTheProgramUnchanged) {
  for (const char* mode : {"signal", "fork"}) {
    const std::vector<std::string> argv = {program("branches"), "50", mode};
    const Plain plain = plain_run(argv);
    ASSERT_EQ(plain.status, 0) << mode;
    for (Start start : {Start::kFirstInstruction, Start::kMain}) {
      const Traced t =
          trace(argv, start, nullptr, {.resolve = {"on_usr1", "weigh"}, .observe = nullptr});
      EXPECT_EQ(t.end.kind, EventKind::kExited) << mode;
      EXPECT_EQ(t.end.status, 0) << mode;
      EXPECT_EQ(t.out, plain.out) << mode;
      if (std::strcmp(mode, "signal") == 0) {
        EXPECT_GE(t.stats.signals, 1u);
        EXPECT_EQ(t.stats.handlers, 1u);
        // The handler is traced from its entry: its call of weigh is recorded.
        const Symbol handler = t.symbols.at("on_usr1");
        const Symbol weigh = t.symbols.at("weigh");
        const auto calls = std::count_if(t.records.begin(), t.records.end(), [&](const auto& r) {
          return r.kind == x86::BranchKind::kCall && r.from >= handler.address &&
                 r.from < handler.address + handler.size && r.to == weigh.address;
        });
        EXPECT_EQ(calls, 1) << "start " << static_cast<int>(start);
        EXPECT_EQ(t.stats.ambiguous, 0u);
      }
    }
  }
}

// The bytes [addr, addr + n) of the file mapped there, or of this process's own vdso (the same
// image in every process).
std::vector<std::uint8_t> original_bytes(const Mapping& m, std::uint64_t addr, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  if (m.path == "[vdso]") {
    auto own = read_maps(::getpid());
    EXPECT_TRUE(own);
    for (const Mapping& o : *own) {
      if (o.path == "[vdso]")
        std::memcpy(out.data(), reinterpret_cast<const void*>(o.start + (addr - m.start)), n);
    }
    return out;
  }
  const int fd = ::open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << m.path;
  if (fd < 0) return out;
  const auto got = ::pread(fd, out.data(), n, static_cast<off_t>(m.offset + (addr - m.start)));
  EXPECT_EQ(got, static_cast<ssize_t>(n)) << m.path;
  ::close(fd);
  return out;
}

TEST(BranchTracer, StopRestoresTheTextByteForByteMidRun) {
  const std::vector<std::string> argv = {program("branches"), "300"};
  const Plain plain = plain_run(argv);
  Capture out;
  auto inf = Inferior::spawn(argv, {.stdout_fd = out.fd()});
  ASSERT_TRUE(inf);
  const Symbol f = symbol(inf->pid(), "classify");
  std::uint64_t in_classify = 0;
  auto tracer = BranchTracer::start(*inf, {}, [&](const BranchRecord& r) {
    if (r.from >= f.address && r.from < f.address + f.size) ++in_classify;
  });
  ASSERT_TRUE(tracer) << tracer.error().to_string();
  ASSERT_TRUE(inf->resume_all(tracer->resume_mode()));
  // Run until the middle of classify's loop.
  while (in_classify < 200) {
    auto ev = inf->wait();
    ASSERT_TRUE(ev);
    auto mine = tracer->handle(*ev);
    ASSERT_TRUE(mine) << mine.error().to_string();
    ASSERT_NE(ev->kind, EventKind::kExited);
    if (*mine) continue;
    ASSERT_TRUE(inf->resume(ev->tid, tracer->resume_mode(),
                            ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  ASSERT_TRUE(inf->stop_all());
  const std::vector<std::uint64_t> planted = tracer->planted();
  ASSERT_GT(planted.size(), 100u);
  ASSERT_TRUE(tracer->stop());
  EXPECT_TRUE(tracer->planted().empty());

  auto maps = read_maps(inf->pid());
  ASSERT_TRUE(maps);
  // Every planted byte is the original again.
  std::size_t checked = 0;
  for (std::uint64_t a : planted) {
    auto m = find_mapping(*maps, a);
    ASSERT_TRUE(m) << std::hex << a;
    std::uint8_t now = 0;
    ASSERT_TRUE(inf->read_memory(a, std::span(&now, 1)));
    EXPECT_EQ(now, original_bytes(*m, a, 1)[0]) << m->path << " at " << std::hex << a;
    ++checked;
  }
  EXPECT_EQ(checked, planted.size());
  // And every executable file mapping equals its file.
  for (const Mapping& m : *maps) {
    if (!m.exec || m.path.empty() || m.path[0] == '[') continue;
    std::vector<std::uint8_t> now(m.end - m.start);
    ASSERT_TRUE(inf->read_memory(m.start, now));
    EXPECT_TRUE(now == original_bytes(m, m.start, now.size())) << m.path;
  }
  // The program goes on untraced and ends as it would have.
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  const Event end = finish(*inf);
  EXPECT_EQ(end.kind, EventKind::kExited);
  EXPECT_EQ(end.status, plain.status);
  EXPECT_EQ(out.text(), plain.out);
}

TEST(BranchTracer, RejectsAnEmptyRange) {
  auto inf = Inferior::spawn({program("hello")});
  ASSERT_TRUE(inf);
  BranchTracerOptions options;
  options.only = std::pair<std::uint64_t, std::uint64_t>{0x1000, 0x1000};
  auto tracer = BranchTracer::start(*inf, options, nullptr);
  ASSERT_FALSE(tracer);
  EXPECT_EQ(tracer.error().code(), ErrorCode::kInval);
  EXPECT_NE(tracer.error().to_string().find("only"), std::string::npos);
}

}  // namespace
}  // namespace hwarb::native

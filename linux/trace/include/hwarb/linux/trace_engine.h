// hwarb/linux/trace_engine.h — branch tracing of a real process as Engines of run_target, and the
// store the branches go through.
//
//  - BranchStore keeps every branch it is given as a processor's BTS would: a bts::SoftwareBts
//    (one CPU, 64-bit records) stores it and a bts::Tracer sorts it into one task context (user
//    branches, signal mode) of the traced process; drain() hands the records stored so far to
//    the sink in one batch, in order (an empty batch when there are none). BTS records hold from,
//    to and a flag only: the thread, kind and time of each branch travel beside them in a queue in
//    the same order (one context, one CPU: the order is the branch order). The store drains itself
//    before its context can fill (kCapacity - kDsRecords records held); the context's full handler
//    is the backstop, and records a full context dropped are counted in lost(), never hidden. Its
//    first error (a record the facility refused, a failed drain) is kept in error() and the branch
//    is not stored.
//  - SoftTraceEngine: native::BranchTracer (int3 on basic-block ends, software) as an Engine; its
//    branches go to the store through the tracer's sink (the caller wires it). The store is
//    drained at exit_group's entry, while the process's libraries can still be symbolized.
//  - BtsTraceEngine: hardware branch tracing with native::IntelBtsTrace. The caller adds the
//    threads that exist (stopped) with add_threads(); the engine adds each new thread at its
//    clone stop, before its first instruction, and drains a thread as it exits. Threads run with
//    PTRACE_SYSCALL so that the records are read at exit and exit_group (code still mapped);
//    between stops the loop wakes on the AUX areas' descriptors and every 100 ms, and tick()
//    drains then. Each record's kind is decoded from the instruction at `from` (cached). Options:
//    `only` keeps the branches taken from inside the range; `start_at` (an attached process)
//    keeps a thread's branches from the first one that arrives there. finish() drains and closes
//    every thread's event.
//  - Both engines return the store's error as theirs.
// Thread-safety: none; the Inferior's thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/bts/software_bts.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/linux/branch_tracer.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/intel_bts.h"
#include "hwarb/linux/session.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

// A branch as the store hands it back.
struct StoredBranch {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  pid_t tid = -1;
  x86::BranchKind kind = x86::BranchKind::kNone;
  double time = 0;  // seconds since the store was opened, when the branch was added
};

class BranchStore {
 public:
  using Sink = std::function<void(std::span<const StoredBranch>)>;
  // Records the context holds before the tracer moves them out of the (simulated) DS buffer.
  static constexpr std::size_t kDsRecords = 64;
  // Records the context holds before a drain.
  static constexpr std::size_t kCapacity = 64 * 1024;

  // A store for the branches of process `pid`; the Tracer's errors.
  static Result<std::unique_ptr<BranchStore>> open(pid_t pid, Sink sink);

  BranchStore(const BranchStore&) = delete;
  BranchStore& operator=(const BranchStore&) = delete;

  void add(const BranchRecord& record);
  // Hands every record stored so far to the sink.
  void drain();

  std::uint64_t lost() const { return lost_; }
  const std::optional<Error>& error() const { return error_; }

 private:
  struct Side {
    pid_t tid;
    x86::BranchKind kind;
    double time;
  };
  explicit BranchStore(Sink sink);

  Sink sink_;
  std::chrono::steady_clock::time_point start_;
  bts::SoftwareBts hardware_{1, x86::BtsFormat::k64};
  std::unique_ptr<bts::Tracer> tracer_;
  bts::ContextId context_{};
  bool full_ = false;
  std::deque<Side> side_;
  std::uint64_t lost_ = 0;
  std::optional<Error> error_;
};

class SoftTraceEngine final : public Engine {
 public:
  SoftTraceEngine(BranchTracer& tracer, BranchStore& store) : tracer_(tracer), store_(store) {}

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return tracer_.resume_mode(); }
  Result<void> finish() override { return tracer_.stop(); }

 private:
  BranchTracer& tracer_;
  BranchStore& store_;
};

// The kind of a branch, decoded from the instruction at its `from` (cached: a program's branches
// are few and taken often); kNone when it cannot be read or decoded.
class BranchClassifier {
 public:
  explicit BranchClassifier(Inferior& inferior) : inferior_(inferior) {}
  x86::BranchKind kind(std::uint64_t from);

 private:
  Inferior& inferior_;
  std::unordered_map<std::uint64_t, x86::BranchKind> cache_;
};

class BtsTraceEngine final : public Engine {
 public:
  BtsTraceEngine(Inferior& inferior, IntelBtsTrace& bts, BranchStore& store,
                 const BranchTracerOptions& options);
  BtsTraceEngine(const BtsTraceEngine&) = delete;
  BtsTraceEngine& operator=(const BtsTraceEngine&) = delete;

  // Every thread of a process that is stopped (before it runs on).
  Result<void> add_threads(const std::vector<pid_t>& tids);

  Result<bool> handle(const Event& event) override;
  Resume resume_mode() const override { return Resume::kSyscall; }
  Result<void> finish() override;
  void tick() override {
    ignore_error(drain(), "a periodic drain: records not read now are read later");
  }
  std::vector<int> wake_fds() const override { return bts_.fds(); }
  bool wants_wakeups() const override { return true; }

  // Reads every thread's records into the store.
  Result<void> drain() { return bts_.drain(sink_); }
  std::uint64_t syscalls() const { return syscalls_; }
  std::uint64_t signals() const { return signals_; }
  // Branches taken since tracing started (before the `only` filter).
  std::uint64_t taken() const { return taken_; }

 private:
  Result<void> add(pid_t tid);
  void take(pid_t tid, const x86::BtsRecord& b);

  IntelBtsTrace& bts_;
  BranchStore& store_;
  BranchClassifier kinds_;
  BranchTracerOptions options_;
  IntelBtsTrace::Sink sink_;
  std::set<pid_t> started_;
  std::uint64_t syscalls_ = 0;
  std::uint64_t signals_ = 0;
  std::uint64_t taken_ = 0;
};

}  // namespace hwarb::native

// hwarb/linux/perf_watch.h — the hardware watch path: perf_event_open(PERF_TYPE_BREAKPOINT)
// events on every thread of a process, their hits read from mmap ring buffers.
//
// Contract:
//  - A HwPiece is one debug register's worth: a data range of 1, 2, 4 or 8 bytes aligned to its
//    length (breakpoints::split_range makes them), or an execute breakpoint (len 8 = sizeof(long),
//    the form x86_64 Linux accepts). `expr` is the caller's index of the expression it came from.
//    `thread` 0: the piece is every thread's (PerfWatch::open opens it on each, inherited by
//    threads created later); a thread id: that thread's alone (opened on it only, not inherited;
//    on no thread when it is not one of the process's), for a variable each thread has a copy
//    of. Only PerfWatch::open takes a thread's piece: elsewhere it is EINVAL naming
//    `pieces[i].thread`.
//  - open() checks every piece (breakpoints::check_reservable and validate_breakpoint for x86_64:
//    EINVAL/EOPNOTSUPP naming `pieces[i]`), then accounts them per thread with hwarb's arbiter
//    (x86_64: one pool of 4 per thread; a thread holds every thread's pieces and its own): more
//    than fit is ENOSPC naming `slots` ("the expressions need N debug registers; x86_64 has 4",
//    or "thread T needs N ..."). It then opens each piece on each thread listed in
//    /proc/PID/task, with inherit (threads created later get copies; forked processes too, except
//    with sigtrap), sample_period 1,
//    sample_type kWatchSampleType with CLOCK_MONOTONIC times, wakeup_events 1, exclude_kernel.
//    Linux refuses to mmap an inherited event that follows its task across CPUs (cpu -1), so,
//    as `perf record`, every (thread, piece) is one event per online CPU, and all events on one
//    CPU write into that CPU's ring (PERF_EVENT_IOC_SET_OUTPUT). Each CPU's breakpoint slots are
//    a task's own, so this needs no more slots than one event per piece. The events are opened
//    disabled and enabled together once every ring is in place, so no hit goes unrecorded.
//    A thread that exits while open() runs is skipped. When the kernel refuses a slot that
//    hwarb's count allowed, the error is ENOSPC naming `slots` and saying the others are held
//    outside this process (a debugger's ptrace breakpoints, another perf session).
//  - open() is all-or-nothing: on any error every descriptor and mapping it made is released.
//  - The process should be stopped (every thread) while open() runs: a thread created during
//    open() before its creator's events exist is not covered. A CPU that comes online later is
//    not covered either.
//  - poll() waits up to timeout_ms (0: not at all, -1: forever) for a ring to have data, then
//    drains every ring; hits come back sorted by time. PERF_RECORD_LOST counts add to lost().
//    A hit's addr is the piece's address (what the breakpoint reports), ip the instruction after
//    the access (a data breakpoint traps after it). Once every covered thread (and every thread
//    it created) has exited, exited() is true and poll() no longer waits.
//  - PerfCount counts, as `perf stat` does: no sampling and no ring; one counting event per
//    (thread, piece) on whichever CPU the thread runs (cpu -1), its count read with read(2).
//    Nothing is ever dropped. open() covers the threads in /proc/PID/task one by one (inherit
//    off: a thread created later is added with add_thread(), at its first stop, so that every
//    thread keeps its own count); add_process() covers a forked child with inherit (its threads'
//    counts go to the child's). The pieces are checked and accounted as PerfWatch::open does
//    (same errors), the events counting from their open. A thread that exited still reads its
//    final count. counts() reads every event: one entry per (thread or process, piece) in the
//    order they were added. The events never send a signal and outlive an exec (as perf stat's).
//  - PerfCpuCount counts on CPUs, as `perf stat -a` / `-C`: one counting event per (CPU, piece),
//    pid -1, so every task that runs there is counted, and (unless exclude_kernel) the kernel's
//    own accesses too — e.g. copy_to_user writing a watched user buffer. A CPU-bound breakpoint
//    takes a slot that every task on that CPU then lacks (Linux's constraint). open() checks the
//    pieces as this kernel does (exclude_kernel as asked; a kernel data address passes as for a
//    privileged caller and the kernel decides; an execute breakpoint in kernel space is EINVAL,
//    as on a kernel without kprobes such as this VM's), accounts them per CPU with
//    the arbiter (more than the registers: ENOSPC naming `slots`), then opens every event
//    disabled, all or nothing; enable() starts them all, disable() stops them all, so every CPU
//    counts the same interval. counts() reads one entry per (CPU, piece), CPUs ascending. The
//    kernel's refusals are named: ENOSPC (`slots`: held by other sessions on that CPU),
//    EACCES/EPERM (`cpus`, with perf_event_paranoid), EINVAL (`pieces[i]`), ENODEV (`cpus`:
//    offline).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/perf_ring.h"
#include "hwarb/pmu/event.h"

namespace hwarb::native {

struct HwPiece {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  pmu::BpType type = pmu::BpType::kW;
  std::size_t expr = 0;
  pid_t thread = 0;  // 0: every thread of the process; else that thread alone
  friend bool operator==(const HwPiece&, const HwPiece&) = default;
};

// The thread that holds the most of `pieces` (every thread's and its own) and how many it
// holds: thread 0 when no piece is one thread's (every thread holds them all).
struct ThreadNeed {
  pid_t thread = 0;
  std::size_t pieces = 0;
};
ThreadNeed fullest_thread(const std::vector<HwPiece>& pieces);

struct PerfHit {
  std::uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  pid_t tid = 0;
  std::uint64_t ip = 0;
  std::uint64_t addr = 0;
  std::size_t piece = 0;  // index into the pieces given to open()
  pid_t pid = 0;          // the hitting thread's process
  int cpu = -1;           // the CPU whose ring had it
  friend bool operator==(const PerfHit&, const PerfHit&) = default;
};

struct PerfWatchOptions {
  // Each hit also sends the hitting thread a synchronous SIGTRAP (perf's sigtrap, with
  // remove_on_exec; si_code TRAP_PERF, si_addr the piece's address), delivered right after the
  // access: a ptrace tracer sees the thread stopped with the value just written. The events are
  // then inherited by new threads only (inherit_thread), never by forked processes, which no
  // tracer may be there to take the SIGTRAPs (a caller that follows a fork opens the child's own).
  // The rings still get every sample, but wake a poller only when half full (the stops are the
  // news; a caller drains them from time to time: HardWatchEngine::surface_blocked_hits).
  bool sigtrap = false;
};

struct CpuCountOptions {
  // False (as `perf stat -a` for a privileged user): the kernel's accesses count too.
  bool exclude_kernel = false;
};

class PerfWatch {
 public:
  // Data pages of each thread's ring (a power of two).
  static constexpr std::size_t kRingPages = 16;

  static Result<PerfWatch> open(pid_t pid, std::vector<HwPiece> pieces,
                                const PerfWatchOptions& options = {});
  // Every task on `cpus` (perf record -a / -C): one sampling event per (CPU, piece), pid -1,
  // the kernel's accesses too unless options.exclude_kernel; checked, accounted and refused as
  // PerfCpuCount::open (same errors). No signal, no stop: a hit carries its CPU, process,
  // thread, ip and address. threads() is empty and exited() never becomes true.
  static Result<PerfWatch> open_cpus(std::vector<int> cpus, std::vector<HwPiece> pieces,
                                     const CpuCountOptions& options);

  PerfWatch(PerfWatch&&) noexcept = default;
  PerfWatch& operator=(PerfWatch&&) noexcept = default;
  PerfWatch(const PerfWatch&) = delete;
  PerfWatch& operator=(const PerfWatch&) = delete;
  ~PerfWatch() = default;

  Result<std::vector<PerfHit>> poll(int timeout_ms);
  std::uint64_t lost() const { return lost_; }
  // Open perf events: pieces x threads covered at open() x online CPUs.
  std::size_t events() const { return fds_.size(); }
  // The threads covered at open(), ascending.
  const std::vector<pid_t>& threads() const { return threads_; }
  // The online CPUs at open(), one ring each.
  const std::vector<int>& cpus() const { return cpus_; }
  const std::vector<HwPiece>& pieces() const { return pieces_; }
  // The descriptors poll() waits on (POLLIN: a ring has data), for a caller's own poll loop.
  std::vector<int> ring_fds() const { return {poll_fds_.begin(), poll_fds_.begin() + live_}; }
  // True once every covered thread and its descendants exited (poll() saw them hang up).
  bool exited() const { return !fds_.empty() && live_ == 0; }

 private:
  PerfWatch() = default;

  std::vector<HwPiece> pieces_;
  std::vector<pid_t> threads_;
  std::vector<int> cpus_;
  // Declared after fds_, the rings are unmapped before the descriptors close (either order works).
  std::vector<Fd> fds_;
  std::vector<PerfRing> rings_;  // one per online CPU
  // One descriptor per (thread, CPU), polled until it hangs up (its thread and descendants
  // exited); the first live_ are still polled.
  std::vector<int> poll_fds_;
  std::size_t live_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> piece_of_id_;  // event id -> piece index
  std::uint64_t lost_ = 0;
};

// Counting breakpoint events of a process (see the contract).
class PerfCount {
 public:
  static Result<PerfCount> open(pid_t pid, std::vector<HwPiece> pieces);

  PerfCount(PerfCount&&) noexcept = default;
  PerfCount& operator=(PerfCount&&) noexcept = default;
  PerfCount(const PerfCount&) = delete;
  PerfCount& operator=(const PerfCount&) = delete;
  ~PerfCount() = default;

  // A new thread of the process (stopped before its first instruction). ESRCH naming `pid` when
  // it is gone; the errors of perf_event_open otherwise.
  Result<void> add_thread(pid_t tid);
  // A forked child (stopped), counted with its later threads.
  Result<void> add_process(pid_t child);

  struct Count {
    pid_t tid = 0;
    std::size_t piece = 0;
    std::uint64_t count = 0;
    friend bool operator==(const Count&, const Count&) = default;
  };
  Result<std::vector<Count>> counts() const;
  const std::vector<HwPiece>& pieces() const { return pieces_; }
  // The threads and processes covered, in the order they were added.
  std::vector<pid_t> tasks() const;
  // Closes every event: their registers are free again; counts() and tasks() are empty after.
  void close() { entries_.clear(); }

 private:
  PerfCount() = default;
  Result<void> add(pid_t tid, bool inherit);

  std::vector<HwPiece> pieces_;
  struct Entry {
    pid_t tid = 0;
    std::size_t piece = 0;
    Fd fd;
  };
  std::vector<Entry> entries_;
};

// The CPUs a `-C LIST` names ("0", "0-1,3": EINVAL naming `cpus` otherwise), each online (else
// ENODEV naming `cpus`); an empty list: every online CPU. Ascending.
Result<std::vector<int>> select_cpus(std::string_view list);

// Counting breakpoint events on CPUs (see the contract).
class PerfCpuCount {
 public:
  // `cpus`: the CPUs to count on, each online (none given: EINVAL naming `cpus`).
  static Result<PerfCpuCount> open(std::vector<int> cpus, std::vector<HwPiece> pieces,
                                   const CpuCountOptions& options = {});

  PerfCpuCount(PerfCpuCount&&) noexcept = default;
  PerfCpuCount& operator=(PerfCpuCount&&) noexcept = default;
  PerfCpuCount(const PerfCpuCount&) = delete;
  PerfCpuCount& operator=(const PerfCpuCount&) = delete;
  ~PerfCpuCount() = default;

  Result<void> enable();
  Result<void> disable();

  struct Count {
    int cpu = 0;
    std::size_t piece = 0;
    std::uint64_t count = 0;
    friend bool operator==(const Count&, const Count&) = default;
  };
  Result<std::vector<Count>> counts() const;
  const std::vector<int>& cpus() const { return cpus_; }
  const std::vector<HwPiece>& pieces() const { return pieces_; }
  std::size_t events() const { return entries_.size(); }

 private:
  PerfCpuCount() = default;

  std::vector<int> cpus_;
  std::vector<HwPiece> pieces_;
  struct Entry {
    int cpu = 0;
    std::size_t piece = 0;
    Fd fd;
  };
  std::vector<Entry> entries_;
};

}  // namespace hwarb::native

// hwarb/linux/probe.h — what this machine's debug hardware and kernel really do, measured rather
// than assumed: whether perf breakpoints open and how many one thread gets,
// whether their hits are delivered (a canary), BTS/PT, and whether ptrace may trace a child and
// single-steps and block-steps as documented.
//
// Contract:
//  - probe() forks short-lived children (each killed and reaped before it returns; they make raw
//    system calls only, so the caller may be multi-threaded): one blocked on a pipe on which
//    breakpoint events are opened until the kernel refuses (the slot count); per canary run, one
//    blocked on a pipe that then writes a canary variable kCanaryWrites times under a write
//    breakpoint; one traced child (StoppedChild) whose rip is moved to a known 5-instruction
//    block for one PTRACE_SINGLESTEP and one PTRACE_SINGLEBLOCK.
//  - A canary whose breakpoint counted 0 writes decides nothing (the breakpoint never fired:
//    e.g. the child ran before the event was in place): it is run again, up to
//    options.canary_runs times in all. hits_delivered is decided by the first run that counted
//    writes; when every run counted 0, hits are not delivered and a note says how many runs
//    saw none. canary_runs in the report is how many ran.
//  - A capability that is absent or refused is a finding, not an error: probe() fails only when
//    it cannot run its experiments (fork, pipe: the kernel's error naming `fork` or `pipe`).
//  - probe_to_json() is one line holding one JSON object whose keys are the field names;
//    optional fields are null when absent. probe_to_text() is human lines ending in '\n'.
// Thread-safety: probe() may run on any thread; it ptraces its child from that thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

inline constexpr std::uint64_t kCanaryWrites = 1000;
inline constexpr int kCanaryRuns = 3;

// The canary child's body: makes kCanaryWrites writes of `canary` on run `run` (1, 2, ...). It
// runs in a forked child between the fork and exit_group: raw memory writes only, no system
// call, no allocation.
using CanaryBody = void (*)(volatile std::uint64_t* canary, int run);

struct ProbeOptions {
  CanaryBody canary = nullptr;    // nullptr: kCanaryWrites writes on every run
  int canary_runs = kCanaryRuns;  // at most this many runs while the canary counts 0 writes
};

struct ProbeReport {
  std::optional<int> perf_event_paranoid;  // /proc/sys/kernel/perf_event_paranoid
  bool breakpoint_pmu = false;             // /sys/bus/event_source/devices/breakpoint exists
  int breakpoint_slots = 0;  // breakpoint events one thread could open before an error
  std::string slots_error;   // the errno that ended the count ("ENOSPC"), or why none opened
  // The count ended on ENOSPC below x86's 4 slots: the others are held by other users. The
  // canary child is fresh (no event of its own, none inherited), so what refuses it holds them
  // CPU-wide (`perf stat -a -e mem:...`, the kernel's own users): a per-task holder takes the
  // slots of its own task only.
  bool slots_held_elsewhere = false;
  // The processes with perf events open at the probe's time, "perf[1234]" (from /proc/*/fd;
  // /proc does not say an event's kind: the candidates, not proof). Filled when
  // slots_held_elsewhere.
  std::vector<std::string> perf_holders;
  bool hits_delivered = false;  // canary_hits == canary_writes > 0
  std::uint64_t canary_writes = 0, canary_hits = 0;
  int canary_runs = 0;  // canary children run (more than one: earlier ones counted 0)
  bool intel_bts = false, intel_pt = false;  // /sys/bus/event_source/devices/intel_bts, intel_pt
  std::optional<int> ptrace_scope;           // Yama's; nullopt when Yama is absent
  bool ptrace_allowed = false;               // a forked child could become a tracee
  bool singlestep_works = false;             // PTRACE_SINGLESTEP advanced by one instruction
  bool singleblock_steps_blocks = false;     // PTRACE_SINGLEBLOCK reached the branch target
  std::string singleblock_detail;            // what PTRACE_SINGLEBLOCK did
  std::vector<std::string> notes;            // human remarks (fallbacks chosen and why)
};

Result<ProbeReport> probe(const ProbeOptions& options = {});
// Why the slots another user holds are missing, for a fallback note or a refusal: "ENOSPC:
// every breakpoint slot is held CPU-wide by another user (perf events open in: perf[1234])"
// (or "2 of 4 breakpoint slots are ..."). Empty unless report.slots_held_elsewhere.
std::string slots_held_text(const ProbeReport& report);
// The breakpoint slots of a thread here in the words of the simulator's `explain`: "ok — 4 slots
// (DR0-DR3), 4 free for a thread here", or "ENOSPC — 4 slots (DR0-DR3); held: elsewhere 2
// (perf[1234]); free 2". Empty without a breakpoint PMU.
std::string slots_explain(const ProbeReport& report);
std::string probe_to_json(const ProbeReport& report);
// The processes other than this one with a perf event open now, "comm[pid]" (from /proc/*/fd:
// the candidates for another user of the breakpoints, not proof; /proc does not say an event's
// kind).
std::vector<std::string> perf_event_holders();
std::string probe_to_text(const ProbeReport& report);

}  // namespace hwarb::native

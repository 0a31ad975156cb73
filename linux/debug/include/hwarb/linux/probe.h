// hwarb/linux/probe.h — what this machine's debug hardware and kernel really do, measured rather
// than assumed (DESIGN.md section 7): whether perf breakpoints open and how many one thread gets,
// whether their hits are delivered (a canary), BTS/PT, and whether ptrace may trace a child and
// single-steps and block-steps as documented.
//
// Contract:
//  - probe() forks short-lived children (each killed and reaped before it returns; they make raw
//    system calls only, so the caller may be multi-threaded): one blocked on a pipe on which
//    breakpoint events are counted and which then writes a canary variable kCanaryWrites times
//    under a write breakpoint; one traced child (StoppedChild) whose rip is moved to a known
//    5-instruction block for one PTRACE_SINGLESTEP and one PTRACE_SINGLEBLOCK.
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

namespace hwarb::linux {

inline constexpr std::uint64_t kCanaryWrites = 1000;

struct ProbeReport {
  std::optional<int> perf_event_paranoid;  // /proc/sys/kernel/perf_event_paranoid
  bool breakpoint_pmu = false;             // /sys/bus/event_source/devices/breakpoint exists
  int breakpoint_slots = 0;     // breakpoint events one thread could open before an error
  std::string slots_error;      // the errno that ended the count ("ENOSPC"), or why none opened
  bool hits_delivered = false;  // canary_hits == canary_writes > 0
  std::uint64_t canary_writes = 0, canary_hits = 0;
  bool intel_bts = false, intel_pt = false;  // /sys/bus/event_source/devices/intel_bts, intel_pt
  std::optional<int> ptrace_scope;           // Yama's; nullopt when Yama is absent
  bool ptrace_allowed = false;               // a forked child could become a tracee
  bool singlestep_works = false;             // PTRACE_SINGLESTEP advanced by one instruction
  bool singleblock_steps_blocks = false;     // PTRACE_SINGLEBLOCK reached the branch target
  std::string singleblock_detail;            // what PTRACE_SINGLEBLOCK did
  std::vector<std::string> notes;            // human remarks (fallbacks chosen and why)
};

Result<ProbeReport> probe();
std::string probe_to_json(const ProbeReport& report);
std::string probe_to_text(const ProbeReport& report);

}  // namespace hwarb::linux

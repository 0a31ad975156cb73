// hwarb/scenario/scenario.h — scenario files (.scn) for `hwarb sim`.
//
// A scenario is a line-oriented script that drives the slot arbiter on a simulated machine; the
// language is documented in docs/scenarios.md (and briefly in `hwarb sim --help`).
//
// Contract:
//  - parse_scenario() checks the WHOLE text — syntax, keys, values and ranges, names (duplicate,
//    unknown, wrong kind), CPU indices, the position of `machine` — before anything runs. A
//    scenario error is an Error whose message is "FILE:LINE: message".
//  - run_scenario() executes a parsed scenario and returns the output lines: one per
//    bp/wide/modify/bts/pt/lbr command, "NAME ok" or "NAME <ERRNO>" (plus " — reason" with
//    explain). Refusals are normal output. It fails only on internal errors (a bug), never on
//    anything in the scenario.
//  - validate_breakpoint() is the breakpoint-field validation (type, len, addr) that belongs to
//    the breakpoints layer; it lives here until that layer exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"

namespace hwarb::scenario {

enum class Arch : std::uint8_t { kX86_64, kI386, kArm64 };
std::string_view to_string(Arch arch);

// A breakpoint's access type: r, w, rw (data pool) or x (instruction pool).
enum class AccessType : std::uint8_t { kR, kW, kRw, kX };
std::string_view to_string(AccessType type);
arbiter::SlotType slot_type(AccessType type);

// The breakpoint fields the arbiter does not look at.
struct BreakpointFields {
  AccessType type = AccessType::kRw;
  std::uint64_t len = 4;
  std::uint64_t addr = 0;
  bool disabled = false;
  bool inherit = false;

  friend bool operator==(const BreakpointFields&, const BreakpointFields&) = default;
};

// The default len of a type: sizeof(long) for x on x86 (8 on x86_64, 4 on i386), 4 for x on
// arm64 (the instruction size), 4 for data breakpoints.
std::uint64_t default_len(Arch arch, AccessType type);

// Linux's breakpoint attribute checks (EINVAL, message names the field):
//  - x86 (x86_64, i386): type r is refused (no read-only watchpoints); x needs len ==
//    sizeof(long) and any address (x86 execute breakpoints have no alignment); data len in
//    {1, 2, 4, 8} (no 8 on i386) and addr aligned to len.
//  - arm64: r, w, rw allowed; x needs len 4 and addr aligned to 4; data len in {1, 2, 4, 8} and
//    addr aligned to len.
Result<void> validate_breakpoint(Arch arch, const BreakpointFields& bp);

struct MachineSpec {
  int cpus = 2;
  Arch arch = Arch::kX86_64;
  arbiter::FlexiblePolicy flexible = arbiter::FlexiblePolicy::kMultiplexed;
};

enum class CommandKind : std::uint8_t {
  kTask,    // task NAME [parent=P]
  kBp,      // bp NAME ...
  kWide,    // wide NAME ...
  kModify,  // modify NAME ...
  kDel,     // del NAME
  kCpu,     // cpu N offline|online
  kBts,     // bts NAME [task=T] [cpu=N|any]
  kPt,      // pt NAME ...
  kLbr,     // lbr NAME ...
};
std::string_view to_string(CommandKind kind);

// cpu=N (any == false) or cpu=any.
struct CpuChoice {
  bool any = false;
  int index = 0;
  friend bool operator==(const CpuChoice&, const CpuChoice&) = default;
};

// One parsed command (the `machine` command is folded into Scenario::machine). Only the fields
// the command's line named are set; defaults are applied when it runs.
struct Command {
  CommandKind kind = CommandKind::kBp;
  int line = 0;                       // 1-based line in the file
  std::string name;                   // the request or task name; empty for `cpu`
  RequestId id{};                     // kBp..kLbr, kModify, kDel: the request's id (see Scenario)
  std::optional<std::string> task;    // task=T
  std::optional<std::string> parent;  // kTask: parent=P (recorded only)
  std::optional<CpuChoice> cpu;       // cpu=N|any; kCpu: the CPU
  bool online = true;                 // kCpu
  std::optional<AccessType> type;
  std::optional<std::uint64_t> len;
  std::optional<std::uint64_t> addr;
  std::optional<int> weight;
  std::optional<bool> pinned;    // pinned (true) | flexible (false)
  std::optional<bool> disabled;  // disabled (true) | enabled (false)
  bool inherit = false;
};

struct Scenario {
  std::string file;  // the name used in messages
  MachineSpec machine;
  std::vector<Command> commands;
  // Names by id: request_names[id - 1] is the name of RequestId id (1-based, order of first
  // appearance; a name re-created after `del` keeps its id). task_names[id - 1] likewise for
  // TaskId id.
  std::vector<std::string> request_names;
  std::vector<std::string> task_names;
};

// Parses and checks a whole scenario. `file` is used in error messages only.
Result<Scenario> parse_scenario(std::string_view text, std::string_view file);

struct RunOptions {
  bool explain = false;  // append " — reason" to refusals
};

// Runs a parsed scenario on a fresh arbiter; returns the output lines (without newlines).
Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace hwarb::scenario

// hwarb/scenario/scenario.h — scenario files (.scn) for `hwarb sim`.
//
// A scenario is a line-oriented script that drives the simulated machine (sim::System: machine,
// arbiter, perf-event core, breakpoint PMU, Watchpoint layer); the language is documented in the
// README (and briefly in `hwarb sim --help`).
//
// Contract:
//  - parse_scenario() checks the WHOLE text — syntax, keys, values and ranges, names (duplicate,
//    unknown, wrong kind; a `bts drain` of a context never opened or closed), CPU indices, the
//    position of `machine`, and the scheduling state it implies (an access or branch by a task
//    that does not run on that CPU, a switch to a task that runs elsewhere or has exited,
//    offlining a busy CPU) — before anything runs. A scenario error is an Error whose message is
//    "FILE:LINE: message".
//  - run_scenario() executes a parsed scenario and returns the output lines: "NAME ok" or
//    "NAME <ERRNO>" (plus " — reason" with explain) for bp/wide/modify/watch/fork/bts/pt/lbr,
//    one "hit ..." line per delivered hit, the `show` report, the ptrace lines ("poke dr7
//    ENOSPC", "peek dr6 = 0x00000000ffff0ff0", "stopped SIGTRAP dr6=0x...", "running", ...), and
//    the BTS lines ("NAME ok" for `bts open`, the records of `bts drain`, the `bts status` line,
//    the `ptrace T bts-...` lines, "T stopped after N branches" for a `run` cut short).
//    Refusals are normal output. Same scenario, same output.
//  - Run-time scenario errors are what the file alone cannot decide: a command that uses a task
//    whose fork failed (fault injection), and an `access`/`exec`/`branch`/`run` by a task that is
//    in a ptrace stop (whether a hit or a full BTS buffer stopped it is known only by running).
//    Their Error message is "FILE:LINE: message", like a parse error. Any other error of
//    run_scenario is internal (a bug in hwarb): is_internal_error() tells them apart; its message
//    is "internal error: FILE:LINE: message".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/validate.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/ptrace_compat/user_area.h"

namespace hwarb::scenario {

// The architectures and breakpoint types are the breakpoints layer's (validate.h): arch decides
// the pools and the checks; a type r, w, rw (data pool) or x (instruction pool).
using Arch = breakpoints::Arch;
using AccessType = pmu::BpType;

struct MachineSpec {
  int cpus = 2;
  Arch arch = Arch::kX86_64;
  arbiter::FlexiblePolicy flexible = arbiter::FlexiblePolicy::kMultiplexed;
};

enum class CommandKind : std::uint8_t {
  kTask,       // task NAME [parent=P]
  kBp,         // bp NAME ...
  kWide,       // wide NAME ...
  kModify,     // modify NAME ...
  kDel,        // del NAME
  kCpu,        // cpu N offline|online
  kBts,        // bts NAME [task=T] [cpu=N|any]
  kPt,         // pt NAME ...
  kLbr,        // lbr NAME ...
  kSwitch,     // switch cpu=N task=T|idle
  kTick,       // tick [cpu=N]
  kFork,       // fork NAME parent=T
  kExit,       // exit T
  kAccess,     // access task=T cpu=N r|w addr=HEX len=N [value=HEX]
  kExec,       // exec task=T cpu=N addr=HEX
  kWatch,      // watch NAME [task=T] addr=HEX len=N [type=w|rw|x] [if=EXPR]
  kShow,       // show
  kInject,     // inject enomem=K
  kPtrace,     // ptrace T attach|detach|peek|poke|wait|cont|step|bts-... ...
  kBtsOpen,    // bts open NAME task=T|global [user] [kernel] [sched] size=BYTES [mode=M]
  kBtsClose,   // bts close NAME
  kBtsDrain,   // bts drain NAME
  kBtsStatus,  // bts status NAME
  kBranch,     // branch task=T cpu=N from=HEX to=HEX [predicted]
  kRun,        // run task=T cpu=N branches=K seed=S
};
std::string_view to_string(CommandKind kind);

// The operation of a `ptrace T OP ...` command.
enum class PtraceOp : std::uint8_t {
  kAttach,
  kDetach,
  kPeek,
  kPoke,
  kWait,
  kCont,
  kStep,
  kBtsConfig,  // PTRACE_BTS_CONFIG: size=BYTES [flags=LIST]
  kBtsStatus,
  kBtsSize,
  kBtsGet,  // INDEX
  kBtsDrain,
  kBtsClear,
};
std::string_view to_string(PtraceOp op);  // "attach", "detach", "peek", ..., "bts-config", ...

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
  // switch: task=idle
  bool idle = false;
  // access: w (true) | r (false); value=HEX
  bool write = false;
  std::optional<std::uint64_t> value;
  // watch: if=OP VALUE, OP one of == != < <= > >=
  std::string cond_op;
  std::uint64_t cond_value = 0;
  // inject: enomem=K
  int inject_at = 0;
  // ptrace T OP (name = T). peek/poke: the register as written (`reg`: "dr7", "849", "0x390"),
  // either a debug register by name (debugreg = N for drN) or a byte offset into struct user
  // (offset); poke: value=. attach: layout= (unset: i386 on an i386 machine, else x86_64).
  PtraceOp ptrace_op = PtraceOp::kWait;
  std::string reg;
  std::optional<int> debugreg;
  std::uint64_t offset = 0;
  std::optional<ptrace_compat::UserLayout> layout;
  // bts open: task= (task) or global; bts::kUser/kKernel/kSched as named (neither user nor
  // kernel: both, applied when it runs); mode=; size= (also ptrace bts-config).
  bool global = false;
  std::uint32_t bts_flags = 0;
  std::optional<bts::BufferMode> mode;
  std::optional<std::uint64_t> size;
  // branch: from=HEX to=HEX [predicted]
  std::optional<std::uint64_t> from;
  std::optional<std::uint64_t> to;
  bool predicted = false;
  // run: branches=K seed=S
  std::uint64_t branches = 0;
  std::uint64_t seed = 0;
  // ptrace bts-config: flags= (ptrace_compat::kBts* bits, unknown bits kept); bts-get: INDEX.
  std::uint64_t ptrace_bts_flags = 0;
  std::int64_t index = 0;
};

// The condition of a watch command on the new value (cond_op empty: always true).
bool condition_holds(const Command& cmd, std::uint64_t value);

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

// Runs a parsed scenario on a fresh arbiter; returns the output lines (without newlines), or a
// run-time scenario error or an internal error (see the contract above).
Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options);

// Whether an error of run_scenario is internal (a bug in hwarb) rather than a scenario error.
bool is_internal_error(const Error& error);

}  // namespace hwarb::scenario

// hwarb/scenario/scenario.h — scenario files (.scn) for `hwarb sim`.
//
// A scenario is a line-oriented script that drives the simulated machine (sim::System: machine,
// arbiter, perf-event core, breakpoint PMU, Watchpoint layer); the language is documented in
// docs/scenarios.md, its vocabulary is the command table of grammar.h.
//
// Contract:
//  - read_scenario_file() reads at most Limits::file_bytes + 1 bytes of a file (so that a larger
//    one is refused by parse_scenario with its line); a file that cannot be read (missing, a
//    directory, an I/O error) is an Error "cannot read PATH: reason".
//  - parse_scenario() checks the WHOLE text — the limits below, syntax, keys, values and ranges,
//    names (duplicate, unknown, wrong kind; a `bts drain` of a context never opened or closed),
//    CPU indices, the position of `machine`, and the scheduling state it implies (an access or
//    branch by a task that does not run on that CPU, a switch to a task that runs elsewhere or
//    has exited, offlining a busy CPU) — before anything runs. A scenario error is an Error
//    whose message is "FILE:LINE: message" (one line).
//  - run_scenario() executes a parsed scenario and returns the output lines: "NAME ok" or
//    "NAME <ERRNO>" (plus " — reason" with explain) for bp/wide/modify/watch/fork/bts/pt/lbr,
//    one "hit ..." line per delivered hit, the `show` report, the ptrace lines ("poke dr7
//    ENOSPC", "peek dr6 = 0x00000000ffff0ff0", "stopped SIGTRAP dr6=0x...", "running", ...), and
//    the BTS lines ("NAME ok" for `bts open`, the records of `bts drain`, the `bts status` line,
//    the `ptrace T bts-...` lines, "T stopped after N branches" for a `run` cut short), and
//    the guest lines ("guest enter cpu=N ok", "guest exit cpu=N EINVAL", "guest hit cpu=N ...").
//    Refusals are normal output. Same scenario, same output.
//  - Run-time scenario errors are what the file alone cannot decide: a command that uses a task
//    whose fork failed (fault injection), an `access`/`exec`/`branch`/`run` by a task that is
//    in a ptrace stop (whether a hit or a full BTS buffer stopped it is known only by running),
//    host work (switch, exit, access, exec, branch, run) on a CPU whose `guest enter` succeeded,
//    and output past Limits::output_bytes. Their Error message is "FILE:LINE: message", like a
//    parse error. Any other error of run_scenario is internal (a bug in hwarb):
//    is_internal_error() tells them apart; its message is "internal error: FILE:LINE: message".
//  - Cost: parsing is linear in the file; running is bounded by the limits (each command's cost
//    is at most linear in what the limits count).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/validate.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/pmu/permission.h"
#include "hwarb/ptrace_compat/user_area.h"

namespace hwarb::scenario {

// The architectures and breakpoint types are the breakpoints layer's (validate.h): arch decides
// the pools and the checks; a type r, w, rw (data pool) or x (instruction pool).
using Arch = breakpoints::Arch;
using AccessType = pmu::BpType;

inline constexpr int kMaxCpus = 65536;  // machine cpus=

// The limits of a scenario (docs/scenarios.md, "Limits"). The counts are bounds computed from the
// file before it runs, so a scenario is refused (a FILE:LINE error at the line that passes one)
// before anything runs; only the output is counted while running.
struct Limits {
  std::size_t file_bytes = std::size_t{8} << 20;  // the file
  int lines = 100'000;                            // lines in the file
  std::size_t line_bytes = 4096;                  // one line, without its newline
  // Breakpoint events and exclusive reservations the commands may create: bp, bts, pt, lbr 1;
  // wide one per CPU; watch one per piece (times the CPUs without task=); a fork or `task
  // parent=` one per breakpoint it may inherit; ksym_trace one per CPU.
  std::uint64_t events = std::uint64_t{1} << 19;
  // CPU steps: every command that acts on each CPU (wide, watch without task= per piece, show,
  // tick without cpu=, bts open global, a request or modify with cpu=any, a fork per inherited
  // cpu=any breakpoint, ksym_trace) counts the machine's cpus.
  std::uint64_t cpu_steps = std::uint64_t{1} << 20;
  // Flexible breakpoints created (bp/wide flexible (one per CPU), modify to flexible, inherited
  // copies). An install costs the same at any number (the core keeps the installed ones on a
  // list of their own), but a switch or tick still updates the times of every event of the
  // task, so their number multiplies the cost of those lines: 5000 with the rest of the file
  // switching runs in about 4 s (docs/scenarios.md, "Limits").
  std::uint64_t flexible = 5000;
  std::uint64_t watch_len = breakpoints::kMaxWatchLen;  // bytes of one watch (len=)
  std::uint64_t branches = std::uint64_t{1} << 24;      // branches of all `run` commands together
  // BTS buffer bytes: the size= of every `bts open` and `ptrace T bts-config` (each at most what
  // the layer accepts) plus 98304 per `bts NAME` event.
  std::uint64_t buffer_bytes = std::uint64_t{256} << 20;
  std::size_t output_bytes = std::size_t{32} << 20;  // output, newlines included (run time)
};

struct MachineSpec {
  int cpus = 2;
  Arch arch = Arch::kX86_64;
  arbiter::FlexiblePolicy flexible = arbiter::FlexiblePolicy::kMultiplexed;
};

// The kind of a command: one per row of the command table (grammar.h), where its words, keys
// and flags are; kCpu is `cpu N offline|online` and its `offline cpu=N` / `online cpu=N` forms.
enum class CommandKind : std::uint8_t {
  kTask,
  kBp,
  kWide,
  kModify,
  kDel,
  kCpu,
  kBts,
  kPt,
  kLbr,
  kSwitch,
  kTick,
  kFork,
  kExit,
  kAccess,
  kExec,
  kWatch,
  kShow,
  kInject,
  kPtrace,
  kBtsOpen,
  kBtsClose,
  kBtsDrain,
  kBtsStatus,
  kBranch,
  kRun,
  kSysctl,
  kGuestEnter,  // guest enter|access|exit (guest.cpp)
  kGuestAccess,
  kGuestExit,
  // The kernel symbol table and the ksym tracer (ksym_parse.cpp,
  // ksym_run.cpp).
  kKsym,
  kKallsyms,
  kKsymTrace,
  kKsymTraceDel,
  kKsymStats,
  kKaccess,
  kMachine,  // folded into Scenario::machine: never a Command's kind
};
// The command's name in the table: "bp", "bts open", "cpu".
std::string_view to_string(CommandKind kind);

// The operation of a `ptrace T OP ...` command (its words: grammar.h, ptrace_op_table()).
enum class PtraceOp : std::uint8_t {
  kAttach,
  kDetach,
  kPeek,
  kPoke,
  kWait,
  kCont,
  kStep,
  kBtsConfig,
  kBtsStatus,
  kBtsSize,
  kBtsGet,
  kBtsDrain,
  kBtsClear,
};
std::string_view to_string(PtraceOp op);  // its name in the table: "attach", "bts-config"

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
  // bp: caller=root|user (unset: the in-kernel API); exclude_kernel (true) | include_kernel
  // (false) (unset: as perf's tool, see docs/scenarios.md).
  std::optional<pmu::Credentials> caller;
  std::optional<bool> exclude_kernel;
  // sysctl: perf_event_paranoid=N; bp: paranoid=N (with caller=; unset: the sysctl's value)
  std::optional<int> paranoid;
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
  // guest enter: dr0..dr3, dr7 (unset: 0); guest access: r|w|x (`write`, guest_exec), addr=,
  // len= (unset: 1); guest exit: restore=tif_debug (guest_tif_debug).
  std::array<std::uint64_t, 4> guest_dr{};
  std::uint64_t guest_dr7 = 0;
  bool guest_exec = false;
  bool guest_tif_debug = false;
  // ksym, kallsyms, ksym_trace, ksym_trace_del: the SYMBOL[+OFF] or FILE is `name`; ksym size=
  // is `size`; kaccess ip=.
  std::optional<std::uint64_t> ip;
};

// The condition of a watch command on the new value (cond_op empty: always true).
bool condition_holds(const Command& cmd, std::uint64_t value);

struct Scenario {
  std::string file;  // the name used in messages
  Limits limits;     // as parsed with (run_scenario enforces output_bytes)
  MachineSpec machine;
  std::vector<Command> commands;
  // Names by id: request_names[id - 1] is the name of RequestId id (1-based, order of first
  // appearance; a name re-created after `del` keeps its id). task_names[id - 1] likewise for
  // TaskId id.
  std::vector<std::string> request_names;
  std::vector<std::string> task_names;
};

// The text of the scenario file at `path` (at most limits.file_bytes + 1 bytes; see above).
Result<std::string> read_scenario_file(const std::string& path, const Limits& limits = {});

// Parses and checks a whole scenario. `file` is used in error messages only.
Result<Scenario> parse_scenario(std::string_view text, std::string_view file,
                                const Limits& limits = {});

// What the machine's slots hold after one command, for pictures (`hwarb sim --svg`): handed to
// RunOptions::on_step after each command, in order.
struct SlotStep {
  int line = 0;              // the command's line
  std::string_view command;  // its name in the table ("bp", "tick")
  std::string name;          // the request or task it names, if any
  struct Cpu {
    bool online = true;
    std::string task;                    // the task running there, or "idle"
    std::vector<std::string> slots;      // the occupant of each debug register ("": free)
    std::vector<std::string> exclusive;  // holders of BTS, PT, LBR there ("bts NAME")
  };
  std::vector<Cpu> cpus;  // the first RunOptions::step_cpus CPUs
  struct Refusal {
    std::string name;
    std::string error;   // "ENOSPC"
    std::string reason;  // the --explain reason
    std::optional<int> cpu =
        std::nullopt;  // the CPU it names (cpu=N, or the reason's "cpu N"), if one
  };
  std::vector<Refusal> refusals;  // made by this command
};

struct RunOptions {
  bool explain = false;  // append " — reason" to refusals
  // Called after each command with what the slots hold (nothing recorded when empty).
  std::function<void(const SlotStep&)> on_step = nullptr;
  int step_cpus = 64;  // CPUs a SlotStep describes at most
};

// Runs a parsed scenario on a fresh arbiter; returns the output lines (without newlines), or a
// run-time scenario error or an internal error (see the contract above).
Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options);

// Whether an error of run_scenario is internal (a bug in hwarb) rather than a scenario error.
bool is_internal_error(const Error& error);

}  // namespace hwarb::scenario

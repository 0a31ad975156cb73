// The command table of the scenario language and the lookups the parser uses (grammar.h); the
// texts generated from it for people are in help.cpp.
#include "hwarb/scenario/grammar.h"

#include <algorithm>

namespace hwarb::scenario {

namespace {

using V = ValueKind;

Param key(std::string_view name, std::string_view value, ValueKind kind, std::string_view def,
          std::string_view doc) {
  return Param{.key = name, .value = value, .kind = kind, .default_text = def, .doc = doc};
}

Param required(std::string_view name, std::string_view value, ValueKind kind,
               std::string_view doc) {
  Param p = key(name, value, kind, "", doc);
  p.required = true;
  return p;
}

Param choice(std::string_view name, std::string_view value, std::vector<std::string_view> choices,
             std::string_view def, std::string_view doc) {
  Param p = key(name, value, V::kChoice, def, doc);
  p.choices = std::move(choices);
  return p;
}

Param as_required(Param p) {
  p.required = true;
  return p;
}

// [a|b] (exclusive) or [a] (a single flag).
Param flags(std::vector<std::string_view> words, std::string_view def, std::string_view doc) {
  return Param{.flags = std::move(words), .exclusive = true, .default_text = def, .doc = doc};
}

// The keys and flags shared by bp, wide and modify.
Param type_key() {
  return choice("type", "r|w|rw|x", {"r", "w", "rw", "x"}, "rw",
                "r, w, rw (data pool) or x (instruction pool)");
}
Param len_key() {
  return key("len", "N", V::kDecimal, "4 (x: 8 on x86_64, 4 on i386 and arm64)", "bytes watched");
}
Param addr_key() {
  return key("addr", "HEX", V::kHex, "0x1000 * ID",
             "ID: the NAME's request id (1-based order of first appearance)");
}
Param weight_key() {
  return key("weight", "N", V::kPositive, "1", "slots needed (more than the pool never fits)");
}
Param pinned_flags() {
  return flags({"pinned", "flexible"}, "pinned",
               "flexible requests time-share the slots pinned ones leave (machine flexible=)");
}
Param disabled_flags() {
  return flags({"disabled", "enabled"}, "enabled",
               "a disabled breakpoint holds its slot but is never installed");
}
Param task_key(std::string_view doc) {
  return key("task", "T", V::kName, "", doc);
}
Param cpu_any_key(std::string_view def) {
  return key("cpu", "N|any", V::kCpu, def, "the CPU; any: all CPUs, only with task=");
}
Param work_task() {
  return required("task", "T", V::kName, "the task; it must run on cpu N");
}
Param work_cpu() {
  return required("cpu", "N", V::kCpuNumber, "the CPU that runs T");
}

constexpr std::string_view kRequestPrints = "NAME ok | NAME ERRNO";

// guest enter|access|exit: a KVM guest with its own debug registers on a CPU (sim/guest.h).
void add_guest_rows(std::vector<CommandSpec>& t) {
  const Param cpu = required("cpu", "N", V::kCpuNumber, "the CPU; its task is the vCPU thread");
  std::vector<Param> regs{cpu};
  for (std::string_view r : {"dr0", "dr1", "dr2", "dr3"}) {
    regs.push_back(key(r, "HEX", V::kHex, "0", "the guest's debug address register"));
  }
  regs.push_back(key("dr7", "HEX", V::kHex, "0", "the guest's DR7 (enabled slots decoded)"));
  t.push_back({"guest enter", CommandKind::kGuestEnter, Operand::kNone, Creates::kNothing,
               std::move(regs),
               "VM entry on CPU N: the guest's DR0-DR3/DR7 replace the host's in the CPU. EINVAL "
               "for a bad DR7 encoding (as ptrace decodes it) or an idle CPU, EBUSY when N is in "
               "a guest. Until its exit, host work on CPU N (switch, exit, access, exec, branch, "
               "run) is a run-time error; host breakpoint changes reach CPU N at the exit.",
               "guest enter cpu=N ok | guest enter cpu=N ERRNO", false});
  t.push_back({"guest access",
               CommandKind::kGuestAccess,
               Operand::kNone,
               Creates::kNothing,
               {cpu,
                Param{.flags = {"r", "w", "x"},
                      .required = true,
                      .exclusive = true,
                      .doc = "a read, a write or an instruction fetch"},
                required("addr", "HEX", V::kHex, "the first byte"),
                key("len", "1|2|4|8", V::kDecimal, "1", "bytes accessed (not with x)")},
               "The guest on CPU N accesses addr: only the guest's breakpoints match; EINVAL when "
               "N is not in a guest.",
               "guest hit cpu=N addr=HEX access=r|w|x dr6=HEX | guest access cpu=N ERRNO",
               false});
  t.push_back({"guest exit",
               CommandKind::kGuestExit,
               Operand::kNone,
               Creates::kNothing,
               {cpu, choice("restore", "all|tif_debug", {"all", "tif_debug"}, "all",
                            "tif_debug: the v3 patch (only for TIF_DEBUG tasks or guests with "
                            "breakpoints)")},
               "VM exit (DR7 becomes 0x400), then the host's DR0-DR3, DR7 and the task's "
               "virtual DR6 are written back, for every kind of host breakpoint. EINVAL when N "
               "is not in a guest.",
               "guest exit cpu=N ok | guest exit cpu=N ERRNO",
               false});
}

// The kernel symbol table, the ksym tracer and kernel-mode accesses.
void add_ksym_rows(std::vector<CommandSpec>& t) {
  t.push_back({"ksym",
               CommandKind::kKsym,
               Operand::kSymbol,
               Creates::kNothing,
               {required("addr", "HEX", V::kHex, "the symbol's address (kernel space)"),
                key("size", "N", V::kDecimal, "0", "bytes it covers; 0: up to the next symbol")},
               "A kernel symbol of the machine's symbol table. An addr below TASK_SIZE_MAX "
               "(user space) is EINVAL. Names may repeat: lookups take the first.",
               "nothing; SYMBOL EINVAL if refused",
               false});
  t.push_back({"kallsyms",
               CommandKind::kKallsyms,
               Operand::kFile,
               Creates::kNothing,
               {},
               "Loads a file of /proc/kallsyms lines (ADDR TYPE NAME [[module]]; FILE relative to "
               "the scenario's directory), every symbol or none.",
               "kallsyms FILE N symbols | kallsyms FILE ERRNO",
               false});
  t.push_back({"ksym_trace",
               CommandKind::kKsymTrace,
               Operand::kSymOff,
               Creates::kNothing,
               {Param{.flags = {"r", "w", "rw", "x"},
                      .required = true,
                      .exclusive = true,
                      .doc = "the access type: w or rw (r and x: EINVAL)"}},
               "The ksym tracer: a kernel breakpoint (len 4) on the symbol on every online CPU, "
               "all or nothing. Again with the other type: the type changes (on failure the old "
               "one stays). ENOSPC: a CPU has no free slot, or 4 symbols are traced; EINVAL: r, x, "
               "the same request again, an address not aligned to 4; ENOENT: no such symbol.",
               "SYMBOL[+OFF] ok | SYMBOL[+OFF] ERRNO",
               false});
  t.push_back({"ksym_trace_del",
               CommandKind::kKsymTraceDel,
               Operand::kSymOff,
               Creates::kNothing,
               {},
               "Stops tracing the symbol: its breakpoint goes from every CPU.",
               "nothing; SYMBOL[+OFF] ENOENT if it is not traced",
               false});
  t.push_back({"ksym_stats",
               CommandKind::kKsymStats,
               Operand::kNone,
               Creates::kNothing,
               {},
               "The ksym tracer's symbols in the order added, with their hit counts.",
               "ksym_stat SYMBOL+0xOFF type=w|rw count=N per symbol",
               false});
  t.push_back(
      {"kaccess",
       CommandKind::kKaccess,
       Operand::kNone,
       Creates::kNothing,
       {required("cpu", "N", V::kCpuNumber, "the CPU"),
        Param{.flags = {"r", "w"}, .required = true, .exclusive = true, .doc = "a read or a write"},
        required("addr", "HEX", V::kHex, "the first byte, at or above TASK_SIZE_MAX"),
        required("len", "1|2|4|8", V::kDecimal, "bytes accessed"),
        key("value", "HEX", V::kHex, "0", "the value written (w only)"),
        key("ip", "HEX", V::kHex, "0", "the accessing instruction")},
       "A kernel-mode access by CPU N, whatever it runs (a task or idle), to kernel memory "
       "(one for all CPUs).",
       "hit lines; ksym_hit SYMBOL+0xOFF cpu=N task=T|- ip=HEX addr=HEX access=r|w count=N",
       false});
}

std::vector<CommandSpec> make_table() {
  const std::string_view exclusive_summary =
      "An exclusive facility: any number of one kind, another kind gets EBUSY; no breakpoint "
      "slots. cpu= defaults to any with a task and is required without one.";
  std::vector<CommandSpec> t;
  t.push_back({"machine",
               CommandKind::kMachine,
               Operand::kNone,
               Creates::kNothing,
               {key("cpus", "N", V::kCpuCount, "2", "possible CPUs, 1 .. 65536, all online"),
                choice("arch", "x86_64|i386|arm64", {"x86_64", "i386", "arm64"}, "x86_64",
                       "x86: one pool of 4 slots; arm64: 6 instruction + 4 data slots"),
                choice("flexible", "multiplexed|as_pinned", {"multiplexed", "as_pinned"},
                       "multiplexed", "as_pinned: flexible requests are accounted as pinned")},
               "The simulated machine: at most once, before any other command. x86_64/i386: one "
               "pool of 4 slots shared by x and data breakpoints; arm64: 6 instruction + 4 data "
               "slots. as_pinned: flexible requests are accounted as pinned (exact Linux).",
               "",
               true});
  t.push_back({"task",
               CommandKind::kTask,
               Operand::kName,
               Creates::kTask,
               {key("parent", "P", V::kName, "", "fork P (copies of its inherit breakpoints)")},
               "Creates a task; parent= forks P (copies of P's inherit breakpoints).",
               "nothing; NAME ERRNO if the fork fails",
               true});
  t.push_back(
      {"bp",
       CommandKind::kBp,
       Operand::kName,
       Creates::kRequest,
       {task_key("task-bound to T; without it CPU-bound"), as_required(cpu_any_key("")), type_key(),
        len_key(), addr_key(), pinned_flags(), disabled_flags(),
        flags({"inherit"}, "off", "children forked later get a copy"), weight_key(),
        choice("caller", "root|user", {"root", "user"}, "",
               "perf_event_open by root or by an unprivileged process (sysctl); without it the "
               "in-kernel API"),
        key("paranoid", "N", V::kInteger, "sysctl's",
            "with caller=: kernel.perf_event_paranoid for this request only"),
        flags({"exclude_kernel", "include_kernel"}, "include_kernel",
              "perf's exclude_kernel set or clear; neither: as perf's tool")},
       "One breakpoint. No task: CPU-bound on cpu N. With task: on cpu N, or on all CPUs with "
       "cpu=any. The slot check comes first (a bad bp on a full CPU gets ENOSPC), then the "
       "fields (EINVAL; a task's breakpoint in kernel space: EPERM; x in kernel space: EINVAL). "
       "caller=root|user: perf_event_open by that process, in Linux's order: EACCES for "
       "include_kernel at paranoid > 1, the slots, the fields (kernel space: EINVAL with "
       "exclude_kernel, EPERM for user), EACCES for a CPU-bound user bp at paranoid > 0. "
       "Neither exclude_kernel nor include_kernel: as perf's tool, the kernel included and, with "
       "caller=, once more excluded after an EACCES at paranoid > 1.",
       kRequestPrints,
       true});
  t.push_back({"wide",
               CommandKind::kWide,
               Operand::kName,
               Creates::kRequest,
               {type_key(), len_key(), addr_key(), pinned_flags(), disabled_flags(), weight_key()},
               "One CPU-bound breakpoint per online CPU, all or nothing; keys as for bp.",
               kRequestPrints,
               true});
  t.push_back({"modify",
               CommandKind::kModify,
               Operand::kName,
               Creates::kNothing,
               {cpu_any_key(""), type_key(), len_key(), addr_key(), weight_key(), pinned_flags(),
                disabled_flags()},
               "Changes a bp or wide (no cpu= for wide); keys not given keep their values. The "
               "fields are checked first, then the slots; on any error nothing changes. A NAME "
               "that holds nothing prints NAME ENOENT.",
               kRequestPrints,
               true});
  t.push_back({"del",
               CommandKind::kDel,
               Operand::kName,
               Creates::kNothing,
               {},
               "Releases NAME (fine when it holds nothing); NAME may then be created again.",
               "",
               true});
  t.push_back({"cpu",
               CommandKind::kCpu,
               Operand::kCpuState,
               Creates::kNothing,
               {},
               "CPU hotplug (only an idle CPU, never the last). CPU-bound requests on an offline "
               "CPU get ENODEV; wide covers online CPUs only; accounting survives.",
               "",
               true});
  t.push_back({"bts",
               CommandKind::kBts,
               Operand::kName,
               Creates::kRequest,
               {task_key("the task (on all its CPUs by default)"),
                cpu_any_key("any with task= (else required)")},
               "A perf BTS event (an exclusive facility, see pt). Per-task and CPU-wide BTS events "
               "never mix (EBUSY). NAME may not be open, close, drain or status.",
               kRequestPrints,
               true});
  t.push_back({"bts open",
               CommandKind::kBtsOpen,
               Operand::kName,
               Creates::kContext,
               {[] {
                  Param p = required("task", "T", V::kName,
                                     "T's branches on any CPU; global: every task's");
                  p.or_flag = "global";
                  return p;
                }(),
                flags({"user"}, "", "user branches (neither user nor kernel: both)"),
                flags({"kernel"}, "", "kernel branches (neither user nor kernel: both)"),
                flags({"sched"}, "off", "arrives/departs timestamps"),
                required("size", "BYTES", V::kDecimal, "the buffer, in 24-byte records"),
                choice("mode", "aux|snapshot|wrap|signal", {"aux", "snapshot", "wrap", "signal"},
                       "aux", "what happens when the buffer is full")},
               "A BTS tracing context. Neither user nor kernel: both.",
               kRequestPrints,
               false});
  t.push_back({"bts close",
               CommandKind::kBtsClose,
               Operand::kName,
               Creates::kNothing,
               {},
               "Closes the context; its records go with it.",
               "",
               false});
  t.push_back({"bts drain",
               CommandKind::kBtsDrain,
               Operand::kName,
               Creates::kNothing,
               {},
               "Prints the context's records, oldest first, and empties it.",
               "NAME from=HEX to=HEX [predicted] | NAME arrives|departs task=T time=N, then NAME "
               "drained K lost L",
               false});
  t.push_back({"bts status",
               CommandKind::kBtsStatus,
               Operand::kName,
               Creates::kNothing,
               {},
               "The context's state.",
               "NAME state=S mode=M task=T|global flags=F capacity=N held=N lost=N",
               false});
  for (auto [name, kind] : {std::pair{"pt", CommandKind::kPt}, {"lbr", CommandKind::kLbr}}) {
    t.push_back({name,
                 kind,
                 Operand::kName,
                 Creates::kRequest,
                 {task_key("the task (on all its CPUs by default)"),
                  cpu_any_key("any with task= (else required)")},
                 exclusive_summary,
                 kRequestPrints,
                 true});
  }
  t.push_back({"switch",
               CommandKind::kSwitch,
               Operand::kNone,
               Creates::kNothing,
               {required("cpu", "N", V::kCpuNumber, "the CPU"),
                required("task", "T|idle", V::kName, "the task to run, or nothing")},
               "Context switch: uninstalls the old task's breakpoints, installs T's.",
               "",
               false});
  t.push_back({"tick",
               CommandKind::kTick,
               Operand::kNone,
               Creates::kNothing,
               {key("cpu", "N", V::kCpuNumber, "every online CPU", "the CPU")},
               "A 1 ms timer tick: flexible breakpoints rotate.",
               "",
               false});
  t.push_back({"fork",
               CommandKind::kFork,
               Operand::kName,
               Creates::kTask,
               {required("parent", "T", V::kName, "the task that forks")},
               "Forks T into the new task NAME.",
               kRequestPrints,
               false});
  t.push_back({"exit",
               CommandKind::kExit,
               Operand::kTask,
               Creates::kNothing,
               {},
               "The task exits: its breakpoints go to EXIT, copies fold into their parents.",
               "",
               false});
  t.push_back(
      {"access",
       CommandKind::kAccess,
       Operand::kNone,
       Creates::kNothing,
       {work_task(), work_cpu(),
        Param{.flags = {"r", "w"}, .required = true, .exclusive = true, .doc = "a read or a write"},
        required("addr", "HEX", V::kHex, "the first byte"),
        required("len", "1|2|4|8", V::kDecimal, "bytes accessed"),
        key("value", "HEX", V::kHex, "0", "the value written (w only)")},
       "Task T, running on CPU N, reads or writes memory.",
       "hit lines",
       false});
  t.push_back({"exec",
               CommandKind::kExec,
               Operand::kNone,
               Creates::kNothing,
               {work_task(), work_cpu(), required("addr", "HEX", V::kHex, "the instruction")},
               "Task T, running on CPU N, executes the instruction at addr.",
               "hit lines",
               false});
  t.push_back({"branch",
               CommandKind::kBranch,
               Operand::kNone,
               Creates::kNothing,
               {work_task(), work_cpu(), required("from", "HEX", V::kHex, "the branch"),
                required("to", "HEX", V::kHex, "its target"),
                flags({"predicted"}, "off", "a predicted branch")},
               "One taken branch of T, running on CPU N.",
               "",
               false});
  t.push_back({"run",
               CommandKind::kRun,
               Operand::kNone,
               Creates::kNothing,
               {work_task(), work_cpu(), required("branches", "K", V::kDecimal, "how many"),
                required("seed", "S", V::kDecimal, "the generated program")},
               "K branches of a seeded generated program.",
               "T stopped after N branches, when a full signal-mode ptrace BTS buffer stopped T",
               false});
  t.push_back(
      {"watch",
       CommandKind::kWatch,
       Operand::kName,
       Creates::kRequest,
       {task_key("T's accesses on every CPU; without it every task's"),
        required("addr", "HEX", V::kHex, "the first byte"),
        key("len", "N", V::kDecimal, "4 (x: 1)", "bytes, any length and alignment"),
        choice("type", "w|rw|x", {"r", "w", "rw", "x"}, "w",
               "writes, reads and writes, or one instruction (r: refused, x86 has none)"),
        key("if", "OPVALUE", V::kCondition, "", "report only new values that satisfy it")},
       "A watchpoint over any range: the fewest aligned pieces, one register each, all or "
       "nothing; identical pieces share a register; hits show old/new values; if= filters on "
       "the new value (OP: == != < <= > >=).",
       kRequestPrints,
       false});
  for (auto [name, online] : {std::pair{"offline", false}, {"online", true}}) {
    t.push_back({name,
                 CommandKind::kCpu,
                 Operand::kNone,
                 Creates::kNothing,
                 {required("cpu", "N", V::kCpuNumber, "the CPU")},
                 online ? "The same as cpu N online." : "The same as cpu N offline.",
                 "",
                 false});
  }
  t.push_back({"show",
               CommandKind::kShow,
               Operand::kNone,
               Creates::kNothing,
               {},
               "Per CPU: DR0-DR3, DR7, installed events; per breakpoint event: state, count, "
               "time_enabled, time_running; per traced task: its stop (or running), DR6, DR7.",
               "cpu N ... | event NAME ... | ptrace T ...",
               false});
  t.push_back({"sysctl",
               CommandKind::kSysctl,
               Operand::kNone,
               Creates::kNothing,
               {required("perf_event_paranoid", "N", V::kInteger,
                         "kernel.perf_event_paranoid for later bp caller= requests")},
               "Sets kernel.perf_event_paranoid (Linux's default 2; -1 and 0 act alike for "
               "breakpoints, above 2 as 2) for the bp caller= requests that follow.",
               "",
               false});
  t.push_back({"inject",
               CommandKind::kInject,
               Operand::kNone,
               Creates::kNothing,
               {required("enomem", "K", V::kPositive, "which fallible step fails")},
               "The K-th fallible arbiter step from now fails with ENOMEM.",
               "",
               false});
  t.push_back(
      {"ptrace",
       CommandKind::kPtrace,
       Operand::kPtrace,
       Creates::kNothing,
       {},
       "A tracer of task T: PTRACE_PEEKUSER/POKEUSER of DR0-DR7 with Linux x86 semantics (REG: "
       "dr0..dr7, or a byte offset into struct user, decimal or 0x hex); ptrace breakpoints take "
       "slots from the same pool as bp and wide. The first ptrace command on an untraced task "
       "attaches it (layout x86_64; i386 on arch=i386), which stops it with SIGSTOP; "
       "peek/poke/cont/step/detach need a stop (else ESRCH). A ptrace hit, or the trap after a "
       "step, stops T with SIGTRAP; then work by T is a run-time error until `ptrace T cont`. "
       "bts-*: the legacy PTRACE_BTS_* (user branches only); LIST: comma-separated trace, sched, "
       "signal, cut-size or 0x hex bits. A full signal-mode buffer stops T with SIGIO.",
       "see the operations",
       false});
  add_guest_rows(t);
  add_ksym_rows(t);
  return t;
}

std::vector<PtraceOpSpec> make_ops() {
  return {
      {"attach",
       PtraceOp::kAttach,
       "",
       {choice("layout", "x86_64|i386", {"x86_64", "i386"}, "the machine's",
               "struct user of a 64-bit or a 32-bit debugger")},
       "nothing; attach EPERM if T is traced already"},
      {"detach", PtraceOp::kDetach, "", {}, "nothing; detach ESRCH unless T is in a stop"},
      {"peek", PtraceOp::kPeek, "REG", {}, "peek REG = 0x + 16 hex digits | peek REG ERRNO"},
      {"poke", PtraceOp::kPoke, "REG=HEX", {}, "poke REG ok | poke REG ERRNO"},
      {"wait", PtraceOp::kWait, "", {}, "stopped SIGTRAP dr6=0x... (16 hex digits) | running"},
      {"cont", PtraceOp::kCont, "", {}, "nothing; cont ESRCH unless T is in a stop"},
      {"step", PtraceOp::kStep, "", {}, "nothing; step ESRCH unless T is in a stop"},
      {"bts-config",
       PtraceOp::kBtsConfig,
       "",
       {required("size", "BYTES", V::kDecimal, "the buffer (0 frees it)"),
        key("flags", "LIST", V::kName, "none", "trace, sched, signal, cut-size or 0x hex bits")},
       "bts-config ok | bts-config ERRNO"},
      {"bts-status", PtraceOp::kBtsStatus, "", {}, "bts-status size=N flags=F"},
      {"bts-size", PtraceOp::kBtsSize, "", {}, "bts-size = N | bts-size ERRNO"},
      {"bts-get", PtraceOp::kBtsGet, "INDEX", {}, "bts-get I from=HEX to=HEX | bts-get I ERRNO"},
      {"bts-drain",
       PtraceOp::kBtsDrain,
       "",
       {},
       "bts-drain from=HEX to=HEX per record, then bts-drain K records"},
      {"bts-clear", PtraceOp::kBtsClear, "", {}, "bts-clear ok | bts-clear ERRNO"},
  };
}

}  // namespace

std::string_view to_string(CommandKind kind) {
  return command_spec(kind).name;
}

std::string_view to_string(PtraceOp op) {
  for (const PtraceOpSpec& spec : ptrace_op_table()) {
    if (spec.op == op) return spec.name;
  }
  return "?";
}

std::span<const CommandSpec> command_table() {
  static const std::vector<CommandSpec> kTable = make_table();
  return kTable;
}

std::span<const PtraceOpSpec> ptrace_op_table() {
  static const std::vector<PtraceOpSpec> kOps = make_ops();
  return kOps;
}

const CommandSpec* find_command(std::string_view first, std::string_view second) {
  const CommandSpec* found = nullptr;
  for (const CommandSpec& c : command_table()) {
    const std::string_view n = c.name;
    if (n == first && !found) found = &c;
    if (n.size() == first.size() + 1 + second.size() && n.starts_with(first) &&
        n[first.size()] == ' ' && n.ends_with(second)) {
      return &c;
    }
  }
  return found;
}

const CommandSpec& command_spec(CommandKind kind) {
  for (const CommandSpec& c : command_table()) {
    if (c.kind == kind) return c;
  }
  return command_table().front();
}

const PtraceOpSpec* find_ptrace_op(std::string_view name) {
  for (const PtraceOpSpec& op : ptrace_op_table()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

const Param* find_key(std::span<const Param> params, std::string_view name) {
  for (const Param& p : params) {
    if (!p.key.empty() && p.key == name) return &p;
  }
  return nullptr;
}

const Param* find_flag(std::span<const Param> params, std::string_view flag) {
  for (const Param& p : params) {
    if (std::ranges::find(p.flags, flag) != p.flags.end() ||
        (!p.or_flag.empty() && p.or_flag == flag)) {
      return &p;
    }
  }
  return nullptr;
}

std::string one_of(std::span<const std::string_view> words) {
  std::string s;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) s += i + 1 == words.size() ? " or " : ", ";
    s += words[i];
  }
  return s;
}

std::string command_words() {
  std::vector<std::string_view> words;
  for (const CommandSpec& c : command_table()) {
    const std::string_view first = c.name.substr(0, c.name.find(' '));
    if (std::ranges::find(words, first) == words.end()) words.push_back(first);
  }
  return one_of(words);
}

std::string ptrace_op_words() {
  std::vector<std::string_view> words;
  for (const PtraceOpSpec& op : ptrace_op_table()) words.push_back(op.name);
  return one_of(words);
}

}  // namespace hwarb::scenario

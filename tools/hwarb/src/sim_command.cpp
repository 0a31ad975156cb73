// `hwarb sim FILE.scn [--explain]`: runs a scenario on the simulated machine's slot arbiter.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "commands.h"
#include "hwarb/scenario/scenario.h"

namespace hwarb::cli {
namespace {

constexpr const char* kScenarioHelp =
    R"(Scenario language (full reference: README.md, "Scenario files")
  One command per line, words separated by blanks, key=value in any order; '#' starts a
  comment, blank lines are ignored. NAMEs: letters, digits, _ . - (first a letter or _).

  machine cpus=N [arch=x86_64|i386|arm64] [flexible=multiplexed|as_pinned]
      At most once, before any other command. Default: cpus=2 arch=x86_64
      flexible=multiplexed. x86_64/i386: one pool of 4 slots shared by x and data
      breakpoints; arm64: 6 instruction + 4 data slots. as_pinned: flexible requests are
      accounted as pinned (exact Linux).
  task NAME [parent=P]
      Creates a task; parent= forks P (copies of P's inherit breakpoints).
  bp NAME [task=T] cpu=N|any [type=r|w|rw|x] [len=N] [addr=HEX] [pinned|flexible]
         [disabled|enabled] [inherit] [weight=N]
      One breakpoint. No task: CPU-bound on cpu N. With task: on cpu N, or on all CPUs
      with cpu=any. Defaults: type=rw, len=4 (x: 8 on x86_64, 4 on i386/arm64),
      addr=0x1000*ID (ID = 1-based order of the NAME's first appearance), pinned, enabled,
      weight=1. A disabled bp holds its slot but is not installed; inherit copies it to
      children forked later.
  wide NAME [type=..] [len=..] [addr=..] [pinned|flexible] [disabled|enabled] [weight=N]
      One CPU-bound breakpoint per online CPU, all or nothing.
  modify NAME [cpu=N|any] [type=..] [len=..] [addr=..] [weight=N] [pinned|flexible]
         [disabled|enabled]
      Changes a bp or wide (no cpu= for wide); unnamed keys keep their values. On any
      error nothing changes. The fields are checked first (as Linux), then the slots.
      A NAME that holds nothing (its creation was refused) prints NAME ENOENT.
  del NAME
      Releases NAME (nothing printed; fine when it holds nothing); NAME may then be reused.
  cpu N offline|online   (also: offline cpu=N, online cpu=N)
      CPU hotplug (only an idle CPU, never the last). CPU-bound requests on an offline CPU
      get ENODEV; wide covers online CPUs only; accounting survives offline/online.
  switch cpu=N task=T|idle     context switch (uninstalls the old task's bps, installs T's)
  tick [cpu=N]                 a 1 ms tick (all online CPUs without cpu=): flexible rotation
  fork NAME parent=T           fork; prints NAME ok|ERRNO
  exit T                       the task exits; its bps go to EXIT, copies fold into parents
  access task=T cpu=N r|w addr=HEX len=1|2|4|8 [value=HEX]
  exec task=T cpu=N addr=HEX   scripted work of a task running on that CPU
  watch NAME [task=T] addr=HEX len=N [type=w|rw|x] [if=OPVALUE]
      A watchpoint over any range: fewest aligned pieces, shared registers, old/new values,
      if= filter on the new value (OP: == != < <= > >=).
  show                         per CPU: DR0-DR3, DR7, installed events; per breakpoint event:
                               state, count, time_enabled, time_running; per traced task: its
                               stop (or running), DR6 and DR7
  inject enomem=K              the K-th fallible arbiter step from now fails with ENOMEM
  bts NAME [task=T] [cpu=N|any]    (also: pt NAME ..., lbr NAME ...)
      An exclusive facility: any number of one kind, another kind gets EBUSY. cpu= defaults
      to any with a task and is required without one. bts NAME is a perf BTS event; per-task
      and CPU-wide BTS events never mix (EBUSY).
  bts open NAME task=T|global [user] [kernel] [sched] size=BYTES
           [mode=aux|snapshot|wrap|signal]
      A BTS tracing context: T's branches on any CPU, or every task's. Neither user nor
      kernel: both; sched adds arrives/departs timestamps; mode defaults to aux.
  bts drain NAME    bts status NAME    bts close NAME
      drain: 'NAME from=HEX to=HEX [predicted]' per record ('NAME arrives|departs task=T
      time=N' for a timestamp), then 'NAME drained K lost L'. status: 'NAME state=S mode=M
      task=T|global flags=F capacity=N held=N lost=N'. close prints nothing.
  branch task=T cpu=N from=HEX to=HEX [predicted]   one taken branch of T, running on N
  run task=T cpu=N branches=K seed=S
      K branches of a seeded generated program; prints 'T stopped after N branches' when a
      full signal-mode ptrace BTS buffer stopped T first.
  ptrace T attach [layout=x86_64|i386]    ptrace T detach    ptrace T wait
  ptrace T peek REG    ptrace T poke REG=HEX    ptrace T cont    ptrace T step
  ptrace T bts-config size=BYTES [flags=LIST]    ptrace T bts-status    ptrace T bts-size
  ptrace T bts-get INDEX    ptrace T bts-drain    ptrace T bts-clear
      A tracer of task T: PTRACE_PEEKUSER/POKEUSER of DR0-DR7 with Linux x86 semantics (REG:
      dr0..dr7, or a byte offset into struct user, decimal or 0x hex); ptrace breakpoints
      take slots from the same pool as bp and wide. The first ptrace command on an untraced
      task attaches it (layout x86_64; i386 on arch=i386), which stops it with SIGSTOP;
      peek/poke/cont/step/detach need a stop (else ESRCH). A ptrace breakpoint hit, or the
      trap after a step, stops T with SIGTRAP; then work (access, exec, branch, run) by T is
      a run-time error until `ptrace T cont` (or step). bts-*: the legacy PTRACE_BTS_* (user
      branches only); LIST: comma-separated trace, sched, signal, cut-size or 0x hex bits.
      A full signal-mode buffer stops T with SIGIO.

  Breakpoint checks, after the slot check (so a bad bp on a full CPU gets ENOSPC):
  x86 has no type=r; data len in {1,2,4,8} (no 8 on i386) with addr aligned to len;
  x needs len 8 on x86_64, 4 on i386 and arm64 (x86: any addr; arm64: aligned to 4).
  Else EINVAL.

Output: one line per bp, wide, modify, watch, fork, bts, pt, lbr: 'NAME ok' or
  'NAME <ERRNO>' (ENOSPC, EBUSY, ENODEV, EINVAL, ENOENT, ENOMEM); with --explain refusals
  end in ' — reason'. Each hit: 'hit NAME task=T cpu=N ip=HEX addr=HEX access=r|w|x'
  (+ ' old=HEX new=HEX' for watchpoints); a ptrace breakpoint's hit shows as T's stop.
  ptrace: 'poke dr7 ok', 'poke dr7 ENOSPC', 'poke 849 EIO' (an offset that is no debug
  register is printed as given), 'peek dr6 = 0x00000000ffff0ff0' (16 hex digits), wait:
  'stopped SIGTRAP dr6=0x...' or 'running'; attach, detach, cont and step print only a
  refusal ('cont ESRCH'). bts-config/bts-clear: 'bts-config ok'; 'bts-status size=N
  flags=trace,signal'; 'bts-size = N'; 'bts-get 0 from=HEX to=HEX'; bts-drain: one
  'bts-drain from=HEX to=HEX' per record, then 'bts-drain K records'; refusals
  'bts-get 5 EINVAL', 'bts-size ENXIO'. Other commands print nothing.
Errors: the whole file is checked before anything runs; a scenario error (bad syntax,
  unknown command or key, bad value, duplicate or unknown name, cpu=any without task, CPU
  out of range, misplaced machine) prints 'FILE:LINE: message' on stderr, nothing on
  stdout, and exits 2. So does a run-time scenario error, which the file alone cannot
  decide: an access/exec/branch/run by a task in a ptrace stop, a task whose fork failed.
Exit status: 0 ran (refusals included), 1 internal error, 2 usage, unreadable file or
  scenario error.)";

int run_sim(const std::string& file, bool explain) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "hwarb sim: cannot read " << file << ": " << std::strerror(errno) << "\n";
    return kExitUsage;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    std::cerr << "hwarb sim: cannot read " << file << "\n";
    return kExitUsage;
  }
  auto scenario = scenario::parse_scenario(text.str(), file);
  if (!scenario) {
    std::cerr << scenario.error().message() << "\n";
    return kExitUsage;
  }
  auto lines = scenario::run_scenario(*scenario, {.explain = explain});
  if (!lines) {
    if (!scenario::is_internal_error(lines.error())) {  // a run-time scenario error
      std::cerr << lines.error().message() << "\n";
      return kExitUsage;
    }
    std::cerr << "hwarb sim: " << lines.error().to_string() << "\n";
    return kExitFailure;
  }
  for (const std::string& line : *lines) std::cout << line << "\n";
  std::cout.flush();
  return std::cout ? kExitOk : kExitFailure;
}

}  // namespace

CommandRunner setup_sim(CLI::App& app) {
  struct Options {
    std::string file;
    bool explain = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sim = app.add_subcommand("sim", "Run a scenario file (.scn) on the simulated machine");
  sim->add_option("FILE", options->file, "The scenario file (.scn)")->required();
  sim->add_flag("--explain", options->explain,
                "Append ' — reason' to each refusal: the full CPU and pool and who holds it, "
                "the exclusive kind in use, the offline CPU or the invalid field");
  sim->footer(kScenarioHelp);
  return [options] { return run_sim(options->file, options->explain); };
}

}  // namespace hwarb::cli

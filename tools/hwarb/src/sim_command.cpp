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

constexpr const char* kScenarioHelp = R"(Scenario language (full reference: docs/scenarios.md)
  One command per line, words separated by blanks, key=value in any order; '#' starts a
  comment, blank lines are ignored. NAMEs: letters, digits, _ . - (first a letter or _).

  machine cpus=N [arch=x86_64|i386|arm64] [flexible=multiplexed|as_pinned]
      At most once, before any other command. Default: cpus=2 arch=x86_64
      flexible=multiplexed. x86_64/i386: one pool of 4 slots shared by x and data
      breakpoints; arm64: 6 instruction + 4 data slots. as_pinned: flexible requests are
      accounted as pinned (exact Linux).
  task NAME [parent=P]
      Declares a task. parent= is recorded only: events are not inherited yet.
  bp NAME [task=T] cpu=N|any [type=r|w|rw|x] [len=N] [addr=HEX] [pinned|flexible]
         [disabled|enabled] [inherit] [weight=N]
      One breakpoint. No task: CPU-bound on cpu N. With task: on cpu N, or on all CPUs
      with cpu=any. Defaults: type=rw, len=4 (x: 8 on x86_64, 4 on i386/arm64),
      addr=0x1000*ID (ID = 1-based order of the NAME's first appearance), pinned, enabled,
      weight=1. disabled and inherit are recorded (a disabled bp still holds its slot).
  wide NAME [type=..] [len=..] [addr=..] [pinned|flexible] [disabled|enabled] [weight=N]
      One CPU-bound breakpoint per online CPU, all or nothing.
  modify NAME [cpu=N|any] [type=..] [len=..] [addr=..] [weight=N] [pinned|flexible]
         [disabled|enabled]
      Changes a bp or wide (no cpu= for wide); unnamed keys keep their values. On any
      error nothing changes. The fields are checked first (as Linux), then the slots.
      A NAME that holds nothing (its creation was refused) prints NAME ENOENT.
  del NAME
      Releases NAME (nothing printed; fine when it holds nothing); NAME may then be reused.
  cpu N offline|online
      CPU hotplug. CPU-bound requests on an offline CPU get ENODEV; wide covers online CPUs
      only; accounting is over all CPUs and survives offline/online.
  bts NAME [task=T] [cpu=N|any]    (also: pt NAME ..., lbr NAME ...)
      An exclusive facility: any number of one kind, another kind gets EBUSY. cpu= defaults
      to any with a task and is required without one.

  Breakpoint checks, after the slot check (so a bad bp on a full CPU gets ENOSPC):
  x86 has no type=r; data len in {1,2,4,8} (no 8 on i386) with addr aligned to len;
  x needs len 8 on x86_64, 4 on i386 and arm64 (x86: any addr; arm64: aligned to 4).
  Else EINVAL.

Output: one line per bp, wide, modify, bts, pt, lbr: 'NAME ok' or 'NAME <ERRNO>' (ENOSPC,
  EBUSY, ENODEV, EINVAL, ENOENT); with --explain refusals end in ' — reason'. task,
  machine, cpu and del print nothing.
Errors: the whole file is checked before anything runs; a scenario error (bad syntax,
  unknown command or key, bad value, duplicate or unknown name, cpu=any without task, CPU
  out of range, misplaced machine) prints 'FILE:LINE: message' on stderr, nothing on
  stdout, and exits 2.
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
    std::cerr << "hwarb sim: internal error: " << lines.error().to_string() << "\n";
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
  CLI::App* sim = app.add_subcommand(
      "sim", "Run a scenario file (.scn) against the slot arbiter of a simulated machine");
  sim->add_option("FILE", options->file, "The scenario file (.scn)")->required();
  sim->add_flag("--explain", options->explain,
                "Append ' — reason' to each refusal: the full CPU and pool and who holds it, "
                "the exclusive kind in use, the offline CPU or the invalid field");
  sim->footer(kScenarioHelp);
  return [options] { return run_sim(options->file, options->explain); };
}

}  // namespace hwarb::cli

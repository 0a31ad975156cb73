// `hwarb probe [--json]`: what this machine's debug hardware and kernel really do (breakpoint
// slots, whether hits are delivered, BTS/PT, ptrace stepping) and which paths hwarb will use.
#include <iostream>
#include <memory>

#include "commands.h"
#include "hwarb/linux/probe.h"
#include "session.h"

namespace hwarb::cli {
namespace {

int run_probe(bool json) {
  auto report = native::probe();
  if (!report) {
    std::cerr << "hwarb probe: " << report.error().to_string() << "\n";
    return kExitFailure;
  }
  Report out = Report::standard_output();
  out.write(json ? native::probe_to_json(*report) + "\n" : native::probe_to_text(*report));
  return finish_report("probe", out, kExitOk);
}

}  // namespace

CommandRunner setup_probe(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "probe",
      "Measure what this machine's debug hardware really does: perf breakpoint slots, whether "
      "hits are delivered (a canary), BTS/PT, ptrace single-step and block-step");
  cmd->add_flag("--json", *json, "One line, one JSON object (keys as in the text report)");
  cmd->footer(
      "Output (text): one line per finding ('breakpoint PMU: yes (4 slots per thread)', 'hits "
      "delivered: NO (0 of 1000 canary writes)', ...), then the paths hwarb will use ('watch: "
      "hardware|software ...', 'trace: ...') and notes.\n"
      "Exit status: 0 probed (absent capabilities are findings), 1 the probe could not run or "
      "its report could not be written.");
  return [json] { return run_probe(*json); };
}

}  // namespace hwarb::cli

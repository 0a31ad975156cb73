// hwarb — the command-line tool. Subcommands come from the table in commands.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "hwarb/scenario/grammar.h"
#include "session.h"

namespace {

constexpr const char* kUsage =
    R"(Usage of each subcommand ('hwarb SUBCOMMAND --help' for all of it):
  hwarb probe [--json]             what this machine's debug hardware really does
  hwarb watch [--json] [--software|--hardware] [-o FILE] [--if COND] [--count N] EXPR...
              (-p PID | -t TID | -- CMD)
                                   every access to memory (or execution of code) of a process
  hwarb stat [--json] [--software|--hardware] [-o FILE] EXPR... (-p PID | -t TID | -- CMD)
                                   the same, counted per expression and thread
  hwarb trace [--json|--perf-script] [-o FILE] [--filter SYM] [--start SYM]
              (-p PID | -t TID | -- CMD)
                                   branch records from -> to
    -o FILE: the report to FILE; the target's own output stays on stdout and stderr
    EXPR: mem:ADDR[/LEN][:ACCESS] or SYMBOL[+OFF][/LEN][:ACCESS], ACCESS from r, w, x
  hwarb gdbserver [--software] [--multi] [--attach] COMM [PROG [ARGS] | PID]
                                   gdb, lldb or an IDE debug the process with hwarb's
                                   watchpoints (gdbserver's command line; COMM HOST:PORT or stdio;
                                   --multi: extended-remote, the client runs or attaches)
  hwarb sim FILE.scn [--explain] [--svg OUT.svg]
                                   run a scenario on the simulated machine's slot arbiter;
                                   one line per request: 'NAME ok' or 'NAME <ERRNO>'
  hwarb report RUN.json [-o OUT.html]
                                   a page of a 'watch --json' run: placements, hits per site
                                   and over time
    --timeline FILE (watch, trace): the run as Chrome trace-event JSON (Perfetto)
)";

constexpr const char* kExitStatus =
    R"(Exit status: 0 success, 1 internal error, a target that could not be traced or output that
could not be written (said on stderr), 2 usage error, unreadable file or scenario error.)";

// The footer of `hwarb --help`; the scenario commands come from their table (grammar.h).
std::string footer() {
  return std::string(kUsage) +
         "\nScenario files, in brief (see 'hwarb sim --help' and docs/scenarios.md):\n" +
         hwarb::scenario::scenario_brief() +
         "  '#' starts a comment. Scenario errors print 'FILE:LINE: message' on stderr.\n\n" +
         kExitStatus;
}

}  // namespace

int main(int argc, char** argv) {
  using hwarb::cli::CommandRunner;
  CLI::App app{
      "hwarb: share a CPU's debug hardware (breakpoint slots, BTS) the way Linux perf "
      "events do",
      "hwarb"};
  app.require_subcommand(1);
  app.footer(footer());
  std::vector<std::pair<std::string, CommandRunner>> runners;
  for (const hwarb::cli::CommandSpec& spec : hwarb::cli::commands()) {
    runners.emplace_back(std::string(spec.name), spec.setup(app));
  }
  // Everything after the first "--" is the target command of watch/stat/trace.
  std::vector<std::string> args(argv + 1, argv + argc);
  // gdbserver's `--wrapper WRAPPER... --`: the words up to that "--" are the wrapper.
  if (!args.empty() && args[0] == "gdbserver") {
    const auto wrapper = std::find(args.begin(), args.end(), "--wrapper");
    const auto end = std::find(args.begin(), args.end(), "--");
    if (wrapper < end && end != args.end()) {
      hwarb::cli::set_gdbserver_wrapper(std::vector<std::string>(wrapper + 1, end));
      args.erase(wrapper, end + 1);
    }
  }
  std::vector<std::string> command;
  const auto dash = std::find(args.begin(), args.end(), "--");
  const bool separator = dash != args.end();
  if (separator) {
    command.assign(dash + 1, args.end());
    args.erase(dash, args.end());
  }
  hwarb::cli::set_trailing_command(std::move(command), separator);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // Help (exit code 0) prints to stdout; errors print to stderr.
    return app.exit(e) == 0 ? hwarb::cli::kExitOk : hwarb::cli::kExitUsage;
  }
  for (CLI::App* sub : app.get_subcommands()) {
    for (const auto& [name, run] : runners) {
      if (sub->get_name() == name) return run();
    }
  }
  return hwarb::cli::kExitUsage;
}

// tools/hwarb/src/commands.h — the subcommand table of the `hwarb` CLI.
//
// Each subcommand lives in its own file (sim_command.cpp, ...) and exposes one setup function
// that adds the subcommand, its options and its help to the CLI11 app and returns the function
// that runs it once the command line is parsed. main.cpp walks the table; adding a subcommand
// is one file plus one row in commands.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <span>
#include <string_view>

namespace hwarb::cli {

// Exit statuses of hwarb.
inline constexpr int kExitOk = 0;       // success (refusals in a scenario are normal output)
inline constexpr int kExitFailure = 1;  // a bug, an untraceable target, output not written
inline constexpr int kExitUsage = 2;    // bad command line, unreadable file, scenario error

// Runs a parsed subcommand; returns the exit status. Never throws.
using CommandRunner = std::function<int()>;

struct CommandSpec {
  std::string_view name;
  // Adds the subcommand called `name` to `app` and returns its runner.
  CommandRunner (*setup)(CLI::App& app);
};

// All subcommands, in the order `hwarb --help` lists them.
std::span<const CommandSpec> commands();

// One per subcommand file.
CommandRunner setup_sim(CLI::App& app);        // sim_command.cpp
CommandRunner setup_probe(CLI::App& app);      // probe_command.cpp
CommandRunner setup_watch(CLI::App& app);      // watch_command.cpp
CommandRunner setup_stat(CLI::App& app);       // watch_command.cpp
CommandRunner setup_trace(CLI::App& app);      // trace_command.cpp
CommandRunner setup_gdbserver(CLI::App& app);  // gdbserver_command.cpp
CommandRunner setup_report(CLI::App& app);     // report_command.cpp

}  // namespace hwarb::cli

// parser.h — the parser and checker behind parse_scenario (scenario.h). Internal to
// hwarb_scenario: parser.cpp reads the file (read_scenario_file), its lines and words,
// and applies the keys the command table allows (grammar.h); checks.cpp checks names,
// the scheduling state and the limits; ptrace_parse.cpp reads the commands with a shape
// of their own (ptrace, bts open|close|drain|status).
//
// Contract: one Parser per text; parse() returns the Scenario, or the first error as
// "FILE:LINE: message" (EINVAL). Every step is linear in the line's length, or logarithmic in
// the names defined so far.
#pragma once

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/scenario/grammar.h"
#include "hwarb/scenario/scenario.h"

namespace hwarb::scenario::internal {

using Keys = std::map<std::string_view, std::string_view>;
using Flags = std::set<std::string_view>;

// A number in `base`: the whole string, in T's range.
template <typename T>
bool parse_number(std::string_view s, int base, T* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && ptr == s.data() + s.size();
}
// A 64-bit hex number, with or without 0x.
bool parse_hex(std::string_view s, std::uint64_t* out);
// Letters, digits, _ . -; starting with a letter or _.
bool valid_name(std::string_view s);

class Parser {
 public:
  Parser(std::string_view file, const Limits& limits);
  Result<Scenario> parse(std::string_view text);

 private:
  // What a name currently stands for during the checking pass.
  struct NameInfo {
    bool is_task = false;
    CommandKind kind = CommandKind::kBp;  // requests: the creating command
    bool task_bound = false;              // requests: created with task=
  };
  // What a task may pass on to a child at a fork: its inherit breakpoints (an upper bound; its
  // own and the copies it inherited), those with cpu=any, those that are flexible.
  struct Inheritance {
    std::uint64_t all = 0;
    std::uint64_t any_cpu = 0;
    std::uint64_t flexible = 0;
  };

  std::unexpected<Error> fail(const std::string& message) const;

  // parser.cpp
  Result<void> parse_line(std::string_view line);
  Result<void> split_args(const CommandSpec& spec, std::string_view command,
                          std::span<const std::string_view> args, Keys* keys, Flags* flags);
  Result<CpuChoice> parse_cpu_value(std::string_view command, std::string_view value);
  Result<void> apply_args(const CommandSpec& spec, std::string_view command, const Keys& keys,
                          const Flags& flags, Command* cmd);
  Result<void> parse_machine(std::span<const std::string_view> words);
  Result<void> parse_cpu(std::span<const std::string_view> words);

  // ptrace_parse.cpp
  Result<void> parse_bts_context(const CommandSpec& spec, std::span<const std::string_view> words);
  Result<void> parse_ptrace(std::span<const std::string_view> words);
  Result<void> parse_bts_config(const std::string& command, std::span<const std::string_view> args,
                                Command* cmd);
  Result<void> parse_register(const std::string& command, std::string_view reg, Command* cmd);

  // guest.cpp
  static bool is_guest(CommandKind kind);
  Result<void> parse_guest(const CommandSpec& spec, std::span<const std::string_view> words);
  // ksym_parse.cpp: ksym, kallsyms, ksym_trace, ksym_trace_del, ksym_stats, kaccess.
  static bool is_ksym(CommandKind kind);
  Result<void> parse_ksym(const CommandSpec& spec, std::span<const std::string_view> words);

  // checks.cpp
  Result<void> check_names(std::string_view command, Command* cmd);
  Result<void> check_task(const std::string& command, const std::string& task);
  Result<void> check_work(std::string_view command, const Keys& keys, const Flags& flags,
                          Command* cmd);
  Result<void> check_online(const std::string& command, int cpu);
  Result<void> check_running(const std::string& command, const std::string& task, int cpu);
  Result<void> set_online(const std::string& command, int cpu, bool online);
  void sched_init();
  RequestId id_of(const std::string& name);
  static std::string no_hardware(const std::string& command);
  // The limits a checked command counts against (Limits); run after its other checks.
  Result<void> account(std::string_view command, const Command& cmd);
  Result<void> charge(std::string_view command, std::uint64_t* used, std::uint64_t add,
                      std::uint64_t limit, std::string_view what);

  Scenario scenario_;
  int line_ = 0;
  bool machine_seen_ = false;
  bool seen_other_ = false;
  std::map<std::string, NameInfo> names_;
  std::map<std::string, RequestId> ids_;
  // Scheduling state (sized at the first command after `machine`).
  std::vector<std::optional<std::string>> running_;  // per CPU
  std::vector<bool> online_;
  int online_count_ = 0;
  std::map<std::string, int> on_cpu_;
  std::set<std::string> exited_;
  // What the scenario has used of its limits so far.
  std::uint64_t events_ = 0;
  std::uint64_t cpu_steps_ = 0;
  std::uint64_t flexible_ = 0;
  std::uint64_t branches_ = 0;
  std::uint64_t buffer_bytes_ = 0;
  std::map<std::string, Inheritance> inheritance_;  // by task name
};

}  // namespace hwarb::scenario::internal

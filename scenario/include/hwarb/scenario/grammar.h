// hwarb/scenario/grammar.h — the command table of the scenario language (.scn files).
//
// One row per command: its name, its operand (NAME, T, CPU), its keys and flags in the order
// they are written, what it creates and what it prints. Everything that lists the vocabulary is
// generated from this table:
//  - the parser takes the words a command accepts from it (an unknown key or flag is an error
//    naming the command), and the lists in its messages ("unknown command 'x' (expected machine,
//    task, ...)", "unknown OP 'x' (expected attach, ...)", "bad mode 'x' (expected aux, ...)");
//  - `hwarb sim --help` (scenario_help()) and the brief of `hwarb --help` (scenario_brief());
//  - docs/scenarios.md documents every row under its synopsis (a unit test checks that every
//    synopsis, key and flag of the table is there).
// Contract: the table is fixed at build time; names are unique (`bts open` etc. are rows of their
// own, selected by the second word); the order of rows is the order of the help and of the
// "expected ..." lists.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/scenario/scenario.h"

namespace hwarb::scenario {

// How a key's value is read (the parser's check and message for each kind).
enum class ValueKind : std::uint8_t {
  kName,       // a task NAME (task=, parent=)
  kCpu,        // a CPU number, or `any`
  kCpuNumber,  // a CPU number (`any` is refused)
  kHex,        // a 64-bit hex number, with or without 0x
  kDecimal,    // a 64-bit decimal number
  kChoice,     // one of Param::choices
  kPositive,   // 1 .. 2147483647
  kCondition,  // OP VALUE (watch if=)
  kCpuCount,   // machine cpus=: 1 .. kMaxCpus
  kInteger,    // a 32-bit signed decimal number (sysctl perf_event_paranoid=)
};

// One `key=VALUE`, or a group of bare flags (key empty).
struct Param {
  std::string_view key{};
  std::string_view value{};  // the placeholder in the synopsis: "T", "N|any", "r|w|rw|x"
  ValueKind kind = ValueKind::kName;
  std::vector<std::string_view> choices{};  // kChoice: the accepted words
  std::vector<std::string_view> flags{};    // a flag group: its flags
  bool required = false;                    // key: must be given; group: exactly one flag
  bool exclusive = false;                   // group: at most one of its flags
  std::string_view or_flag{};               // a required key that this flag may replace
  std::string_view default_text{};          // the default, for the reference ("" = none)
  std::string_view doc{};                   // one line, for the reference
};

// What follows the command word before the keys.
enum class Operand : std::uint8_t {
  kNone,      // keys only
  kName,      // NAME
  kTask,      // T (exit)
  kCpuState,  // N offline|online (cpu)
  kPtrace,    // T OP [ARGS] (ptrace; see PtraceOpSpec)
  kSymbol,    // SYMBOL (ksym)
  kSymOff,    // SYMBOL[+OFF] (ksym_trace, ksym_trace_del)
  kFile,      // FILE, relative to the scenario (kallsyms)
};

// What a command creates under its NAME (tasks, requests and contexts share one name space).
enum class Creates : std::uint8_t { kNothing, kTask, kRequest, kContext };

struct CommandSpec {
  std::string_view name;  // "bp", "bts open"
  CommandKind kind;
  Operand operand = Operand::kNone;
  Creates creates = Creates::kNothing;
  std::vector<Param> params;
  std::string_view summary;  // what it does (help and reference)
  std::string_view prints;   // its output lines ("" = nothing)
  bool brief = false;        // listed in the brief of `hwarb --help`
};

// One operation of `ptrace T OP`.
struct PtraceOpSpec {
  std::string_view name;  // "attach", "bts-config"
  PtraceOp op;
  std::string_view positional;  // "REG", "REG=HEX", "INDEX" or ""
  std::vector<Param> params;    // keys after OP (attach, bts-config)
  std::string_view prints;
};

// The table, in help order; the ptrace operations likewise.
std::span<const CommandSpec> command_table();
std::span<const PtraceOpSpec> ptrace_op_table();

// The row of a line whose first two words are `first` and `second` ("bts open NAME" selects
// `bts open`, "bts NAME" selects `bts`); nullptr for an unknown command word.
const CommandSpec* find_command(std::string_view first, std::string_view second);
const CommandSpec& command_spec(CommandKind kind);  // the row of a kind (kCpu: `cpu`)
const PtraceOpSpec* find_ptrace_op(std::string_view name);
// The param of `spec` with this key or flag; nullptr if the command has none.
const Param* find_key(std::span<const Param> params, std::string_view key);
const Param* find_flag(std::span<const Param> params, std::string_view flag);

// "a, b or c" ("a" for one, "a or b" for two).
std::string one_of(std::span<const std::string_view> words);
// The distinct command words ("machine, task, ..., ksym_stats or kaccess") and the ptrace OPs.
std::string command_words();
std::string ptrace_op_words();

// "bp NAME [task=T] cpu=N|any [type=r|w|rw|x] ..."; "ptrace T attach [layout=x86_64|i386]".
std::string synopsis(const CommandSpec& spec);
std::string synopsis(const PtraceOpSpec& op);
// "task=T", "[user]", "[pinned|flexible]", "r|w", "task=T|global": one param as written.
std::string param_text(const Param& param);

// The text of `hwarb sim --help` after the options (the language in brief, output, errors,
// limits, exit status) and the scenario part of `hwarb --help`.
std::string scenario_help();
std::string scenario_brief();

}  // namespace hwarb::scenario

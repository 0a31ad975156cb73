#include "hwarb/scenario/scenario.h"

#include "hwarb/base/format.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <utility>

#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/ptrace_compat/bts_ptrace.h"
#include "hwarb/sim/branch_walk.h"
#include "hwarb/sim/sim_tracee.h"
#include "hwarb/sim/system.h"
#include "scenario_bts.h"

namespace hwarb::scenario {

using arbiter::Arbiter;
using arbiter::Explanation;
using arbiter::FlexiblePolicy;
using arbiter::Request;
using arbiter::Reservation;
using arbiter::ResourceKind;
using arbiter::SlotType;
using internal::parse_buffer_mode;
using internal::parse_ptrace_bts_flags;

std::string_view to_string(CommandKind kind) {
  switch (kind) {
    case CommandKind::kTask:
      return "task";
    case CommandKind::kBp:
      return "bp";
    case CommandKind::kWide:
      return "wide";
    case CommandKind::kModify:
      return "modify";
    case CommandKind::kDel:
      return "del";
    case CommandKind::kCpu:
      return "cpu";
    case CommandKind::kBts:
      return "bts";
    case CommandKind::kPt:
      return "pt";
    case CommandKind::kLbr:
      return "lbr";
    case CommandKind::kSwitch:
      return "switch";
    case CommandKind::kTick:
      return "tick";
    case CommandKind::kFork:
      return "fork";
    case CommandKind::kExit:
      return "exit";
    case CommandKind::kAccess:
      return "access";
    case CommandKind::kExec:
      return "exec";
    case CommandKind::kWatch:
      return "watch";
    case CommandKind::kShow:
      return "show";
    case CommandKind::kInject:
      return "inject";
    case CommandKind::kPtrace:
      return "ptrace";
    case CommandKind::kBtsOpen:
      return "bts open";
    case CommandKind::kBtsClose:
      return "bts close";
    case CommandKind::kBtsDrain:
      return "bts drain";
    case CommandKind::kBtsStatus:
      return "bts status";
    case CommandKind::kBranch:
      return "branch";
    case CommandKind::kRun:
      return "run";
  }
  return "?";
}

std::string_view to_string(PtraceOp op) {
  switch (op) {
    case PtraceOp::kAttach:
      return "attach";
    case PtraceOp::kDetach:
      return "detach";
    case PtraceOp::kPeek:
      return "peek";
    case PtraceOp::kPoke:
      return "poke";
    case PtraceOp::kWait:
      return "wait";
    case PtraceOp::kCont:
      return "cont";
    case PtraceOp::kStep:
      return "step";
    case PtraceOp::kBtsConfig:
      return "bts-config";
    case PtraceOp::kBtsStatus:
      return "bts-status";
    case PtraceOp::kBtsSize:
      return "bts-size";
    case PtraceOp::kBtsGet:
      return "bts-get";
    case PtraceOp::kBtsDrain:
      return "bts-drain";
    case PtraceOp::kBtsClear:
      return "bts-clear";
  }
  return "?";
}

bool condition_holds(const Command& cmd, std::uint64_t v) {
  const std::string& op = cmd.cond_op;
  const std::uint64_t c = cmd.cond_value;
  if (op.empty()) return true;
  if (op == "==") return v == c;
  if (op == "!=") return v != c;
  if (op == "<") return v < c;
  if (op == "<=") return v <= c;
  if (op == ">") return v > c;
  return v >= c;
}

// ---------------------------------------------------------------------------------------------
// Parser.

namespace {

constexpr int kMaxCpus = 65536;

bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(s[0])) return false;
  return std::ranges::all_of(s,
                             [&](char c) { return alpha(c) || digit(c) || c == '.' || c == '-'; });
}

template <typename T>
bool parse_number(std::string_view s, int base, T* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// What a name currently stands for during the checking pass.
struct NameInfo {
  bool is_task = false;
  CommandKind kind = CommandKind::kBp;  // requests: the creating command
  bool task_bound = false;              // requests: created with task=
};

// Which keys and flags a command accepts.
struct Grammar {
  std::set<std::string_view> keys;
  std::set<std::string_view> flags;
};

const Grammar& grammar_of(std::string_view command) {
  static const std::map<std::string_view, Grammar> kGrammar = {
      {"machine", {{"cpus", "arch", "flexible"}, {}}},
      {"task", {{"parent"}, {}}},
      {"bp",
       {{"task", "cpu", "type", "len", "addr", "weight"},
        {"pinned", "flexible", "disabled", "enabled", "inherit"}}},
      {"wide", {{"type", "len", "addr", "weight"}, {"pinned", "flexible", "disabled", "enabled"}}},
      {"modify",
       {{"cpu", "type", "len", "addr", "weight"}, {"pinned", "flexible", "disabled", "enabled"}}},
      {"del", {{}, {}}},
      {"bts", {{"task", "cpu"}, {}}},
      {"bts open", {{"task", "size", "mode"}, {"global", "user", "kernel", "sched"}}},
      {"bts close", {{}, {}}},
      {"bts drain", {{}, {}}},
      {"bts status", {{}, {}}},
      {"branch", {{"task", "cpu", "from", "to"}, {"predicted"}}},
      {"run", {{"task", "cpu", "branches", "seed"}, {}}},
      {"pt", {{"task", "cpu"}, {}}},
      {"lbr", {{"task", "cpu"}, {}}},
      {"switch", {{"cpu", "task"}, {}}},
      {"tick", {{"cpu"}, {}}},
      {"fork", {{"parent"}, {}}},
      {"exit", {{}, {}}},
      {"access", {{"task", "cpu", "addr", "len", "value"}, {"r", "w"}}},
      {"exec", {{"task", "cpu", "addr"}, {}}},
      {"watch", {{"task", "addr", "len", "type", "if"}, {}}},
      {"offline", {{"cpu"}, {}}},
      {"online", {{"cpu"}, {}}},
      {"show", {{}, {}}},
      {"inject", {{"enomem"}, {}}},
  };
  return kGrammar.at(command);
}

const std::map<std::string_view, CommandKind>& command_kinds() {
  static const std::map<std::string_view, CommandKind> kKinds = {
      {"task", CommandKind::kTask},     {"bp", CommandKind::kBp},
      {"wide", CommandKind::kWide},     {"modify", CommandKind::kModify},
      {"del", CommandKind::kDel},       {"cpu", CommandKind::kCpu},
      {"bts", CommandKind::kBts},       {"pt", CommandKind::kPt},
      {"lbr", CommandKind::kLbr},       {"switch", CommandKind::kSwitch},
      {"tick", CommandKind::kTick},     {"fork", CommandKind::kFork},
      {"exit", CommandKind::kExit},     {"access", CommandKind::kAccess},
      {"exec", CommandKind::kExec},     {"watch", CommandKind::kWatch},
      {"branch", CommandKind::kBranch}, {"run", CommandKind::kRun},
      {"offline", CommandKind::kCpu},   {"online", CommandKind::kCpu},
      {"show", CommandKind::kShow},     {"inject", CommandKind::kInject},
      {"ptrace", CommandKind::kPtrace},
  };
  return kKinds;
}

bool creates_request(CommandKind k) {
  return k == CommandKind::kBp || k == CommandKind::kWide || k == CommandKind::kBts ||
         k == CommandKind::kPt || k == CommandKind::kLbr || k == CommandKind::kWatch;
}

// Commands whose first word after the command is not a NAME.
bool has_no_name(std::string_view command) {
  return command == "switch" || command == "tick" || command == "access" || command == "exec" ||
         command == "branch" || command == "run" || command == "offline" || command == "online" ||
         command == "show" || command == "inject";
}

// `bts VERB NAME ...`: the tracing-context forms of `bts` (any other second word is a NAME).
std::optional<CommandKind> bts_verb(std::string_view word) {
  if (word == "open") return CommandKind::kBtsOpen;
  if (word == "close") return CommandKind::kBtsClose;
  if (word == "drain") return CommandKind::kBtsDrain;
  if (word == "status") return CommandKind::kBtsStatus;
  return std::nullopt;
}

// A 64-bit hex number, with or without 0x.
bool parse_hex(std::string_view s, std::uint64_t* out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  return parse_number(s, 16, out);
}

class Parser {
 public:
  explicit Parser(std::string_view file) { scenario_.file = std::string(file); }

  Result<Scenario> parse(std::string_view text) {
    while (!text.empty()) {
      ++line_;
      const std::size_t nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      if (auto r = parse_line(line); !r) return std::unexpected(r.error());
    }
    return std::move(scenario_);
  }

 private:
  std::unexpected<Error> fail(const std::string& message) const {
    return make_error(ErrorCode::kInval,
                      scenario_.file + ":" + std::to_string(line_) + ": " + message);
  }

  Result<void> parse_line(std::string_view line) {
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> words;
    std::size_t i = 0;
    auto space = [](char c) {
      return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
    };
    while (i < line.size()) {
      while (i < line.size() && space(line[i])) ++i;
      std::size_t start = i;
      while (i < line.size() && !space(line[i])) ++i;
      if (i > start) words.push_back(line.substr(start, i - start));
    }
    if (words.empty()) return {};
    const std::string_view command = words[0];
    if (command == "machine") return parse_machine(words);
    if (!command_kinds().contains(command)) {
      return fail("unknown command '" + std::string(command) +
                  "' (expected machine, task, bp, wide, modify, del, cpu, bts, pt, lbr, switch, "
                  "tick, fork, exit, access, exec, branch, run, watch, offline, online, show, "
                  "inject or ptrace)");
    }
    seen_other_ = true;
    const CommandKind kind = command_kinds().at(command);
    if (command == "cpu") return parse_cpu(words);
    if (command == "ptrace") return parse_ptrace(words);
    if (command == "bts" && words.size() >= 2) {
      if (auto verb = bts_verb(words[1])) return parse_bts_context(*verb, words);
    }

    Command cmd;
    cmd.kind = kind;
    cmd.line = line_;
    if (has_no_name(command)) {
      std::map<std::string_view, std::string_view> keys;
      std::set<std::string_view> flags;
      if (auto r = split_args(command, std::span(words).subspan(1), &keys, &flags); !r) return r;
      if (auto r = apply_args(command, keys, flags, &cmd); !r) return r;
      if (auto r = check_work(command, keys, flags, &cmd); !r) return r;
      scenario_.commands.push_back(std::move(cmd));
      return {};
    }
    if (words.size() < 2 || words[1].find('=') != std::string_view::npos) {
      return fail(std::string(command) + ": missing NAME");
    }
    if (!valid_name(words[1])) {
      return fail(std::string(command) + ": bad name '" + std::string(words[1]) +
                  "' (letters, digits, _ . -; starting with a letter or _)");
    }
    cmd.name = std::string(words[1]);
    std::map<std::string_view, std::string_view> keys;
    std::set<std::string_view> flags;
    if (auto r = split_args(command, std::span(words).subspan(2), &keys, &flags); !r) return r;
    if (auto r = apply_args(command, keys, flags, &cmd); !r) return r;
    if (auto r = check_names(command, &cmd); !r) return r;
    scenario_.commands.push_back(std::move(cmd));
    return {};
  }

  Result<void> split_args(std::string_view command, std::span<const std::string_view> args,
                          std::map<std::string_view, std::string_view>* keys,
                          std::set<std::string_view>* flags) {
    const Grammar& g = grammar_of(command);
    const std::string cmd(command);
    for (std::string_view a : args) {
      const std::size_t eq = a.find('=');
      if (eq == std::string_view::npos) {
        if (!g.flags.contains(a)) {
          if (g.keys.contains(a)) return fail(cmd + ": '" + std::string(a) + "' needs =VALUE");
          return fail(cmd + ": unknown key '" + std::string(a) + "'");
        }
        if (!flags->insert(a).second) return fail(cmd + ": duplicate '" + std::string(a) + "'");
        continue;
      }
      const std::string_view key = a.substr(0, eq);
      const std::string_view value = a.substr(eq + 1);
      if (!g.keys.contains(key)) return fail(cmd + ": unknown key '" + std::string(key) + "'");
      if (value.empty()) return fail(cmd + ": empty value for " + std::string(key));
      if (!keys->emplace(key, value).second) {
        return fail(cmd + ": duplicate key '" + std::string(key) + "'");
      }
    }
    if (flags->contains("pinned") && flags->contains("flexible")) {
      return fail(cmd + ": pinned and flexible are exclusive");
    }
    if (flags->contains("disabled") && flags->contains("enabled")) {
      return fail(cmd + ": disabled and enabled are exclusive");
    }
    return {};
  }

  Result<CpuChoice> parse_cpu_value(std::string_view cmd, std::string_view v) {
    if (v == "any") return CpuChoice{.any = true};
    int n = 0;
    if (!parse_number(v, 10, &n) || n < 0) {
      return fail(std::string(cmd) + ": bad cpu '" + std::string(v) +
                  "' (expected a CPU number or any)");
    }
    if (n >= scenario_.machine.cpus) {
      return fail(std::string(cmd) + ": cpu " + std::to_string(n) + " out of range (machine has " +
                  std::to_string(scenario_.machine.cpus) + " CPUs)");
    }
    return CpuChoice{.any = false, .index = n};
  }

  Result<void> apply_args(std::string_view command,
                          const std::map<std::string_view, std::string_view>& keys,
                          const std::set<std::string_view>& flags, Command* cmd) {
    const std::string c(command);
    for (const auto& [key, value] : keys) {
      const std::string v(value);
      if (key == "task") {
        if (command == "switch" && value == "idle") {
          cmd->idle = true;
        } else {
          cmd->task = v;
        }
      } else if (key == "value" || key == "addr" || key == "from" || key == "to") {
        std::uint64_t n = 0;
        if (!parse_hex(value, &n)) {
          return fail(c + ": bad " + std::string(key) + " '" + v +
                      "' (expected a 64-bit hex number)");
        }
        if (key == "value") {
          cmd->value = n;
        } else if (key == "addr") {
          cmd->addr = n;
        } else if (key == "from") {
          cmd->from = n;
        } else {
          cmd->to = n;
        }
      } else if (key == "size" || key == "branches" || key == "seed") {
        std::uint64_t n = 0;
        if (!parse_number(value, 10, &n)) {
          return fail(c + ": bad " + std::string(key) + " '" + v + "' (expected a decimal number)");
        }
        if (key == "size") {
          cmd->size = n;
        } else if (key == "branches") {
          cmd->branches = n;
        } else {
          cmd->seed = n;
        }
      } else if (key == "mode") {
        cmd->mode = parse_buffer_mode(value);
        if (!cmd->mode) {
          return fail(c + ": bad mode '" + v + "' (expected aux, snapshot, wrap or signal)");
        }
      } else if (key == "if") {
        std::string_view e = value;
        for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
          if (e.starts_with(op)) {
            cmd->cond_op = op;
            e.remove_prefix(cmd->cond_op.size());
            break;
          }
        }
        int base = 10;
        if (e.starts_with("0x") || e.starts_with("0X")) {
          e.remove_prefix(2);
          base = 16;
        }
        if (cmd->cond_op.empty() || !parse_number(e, base, &cmd->cond_value)) {
          return fail(c + ": bad if '" + v +
                      "' (expected OP VALUE, OP one of == != < <= > >=, e.g. if=>=0x10)");
        }
      } else if (key == "enomem") {
        if (!parse_number(value, 10, &cmd->inject_at) || cmd->inject_at < 1) {
          return fail(c + ": bad enomem '" + v + "' (expected a number >= 1)");
        }
      } else if (key == "parent") {
        cmd->parent = v;
      } else if (key == "cpu") {
        auto cpu = parse_cpu_value(command, value);
        if (!cpu) return std::unexpected(cpu.error());
        cmd->cpu = *cpu;
      } else if (key == "type") {
        if (value == "r") {
          cmd->type = AccessType::kR;
        } else if (value == "w") {
          cmd->type = AccessType::kW;
        } else if (value == "rw") {
          cmd->type = AccessType::kRw;
        } else if (value == "x") {
          cmd->type = AccessType::kX;
        } else {
          return fail(c + ": bad type '" + v + "' (expected r, w, rw or x)");
        }
      } else if (key == "len") {
        std::uint64_t n = 0;
        if (!parse_number(value, 10, &n)) {
          return fail(c + ": bad len '" + v + "' (expected a decimal number)");
        }
        cmd->len = n;
      } else if (key == "weight") {
        int n = 0;
        if (!parse_number(value, 10, &n) || n < 1) {
          return fail(c + ": bad weight '" + v + "' (expected a number >= 1)");
        }
        cmd->weight = n;
      }
    }
    if (flags.contains("pinned")) cmd->pinned = true;
    if (flags.contains("flexible")) cmd->pinned = false;
    if (flags.contains("disabled")) cmd->disabled = true;
    if (flags.contains("enabled")) cmd->disabled = false;
    cmd->inherit = flags.contains("inherit");
    cmd->write = flags.contains("w");
    cmd->global = flags.contains("global");
    cmd->predicted = flags.contains("predicted");
    if (flags.contains("user")) cmd->bts_flags |= bts::kUser;
    if (flags.contains("kernel")) cmd->bts_flags |= bts::kKernel;
    if (flags.contains("sched")) cmd->bts_flags |= bts::kSched;
    return {};
  }

  // Name checks: definitions, references, and per-kind rules.
  Result<void> check_names(std::string_view command, Command* cmd) {
    const std::string c(command);
    if (cmd->task) {
      if (auto r = check_task(c, *cmd->task); !r) return r;
    }
    if (cmd->kind == CommandKind::kExit) {
      if (auto r = check_task("exit", cmd->name); !r) return r;
      sched_init();
      if (auto it = on_cpu_.find(cmd->name); it != on_cpu_.end()) {
        running_[static_cast<std::size_t>(it->second)].reset();
        on_cpu_.erase(it);
      }
      exited_.insert(cmd->name);
      return {};
    }
    if (cmd->kind == CommandKind::kFork && !cmd->parent) return fail("fork: parent=T is required");
    if (cmd->kind == CommandKind::kTask || cmd->kind == CommandKind::kFork) {
      if (names_.contains(cmd->name)) return fail(c + ": name '" + cmd->name + "' already in use");
      if (cmd->parent) {
        auto it = names_.find(*cmd->parent);
        if (it == names_.end() || !it->second.is_task) {
          return fail(c + ": unknown parent task '" + *cmd->parent + "'");
        }
        if (exited_.contains(*cmd->parent)) {
          return fail(c + ": parent task '" + *cmd->parent + "' has exited");
        }
      }
      names_[cmd->name] = NameInfo{.is_task = true};
      scenario_.task_names.push_back(cmd->name);
      return {};
    }
    if (creates_request(cmd->kind)) {
      if (names_.contains(cmd->name)) return fail(c + ": name '" + cmd->name + "' already in use");
      if (cmd->kind == CommandKind::kWatch) {
        if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
        if (!cmd->addr) return fail("watch: addr=HEX is required");
        if (cmd->len && *cmd->len == 0) return fail("watch: len must be at least 1");
        if (!cmd->cond_op.empty() && cmd->type == AccessType::kX) {
          return fail("watch: if= needs a data watchpoint (type w or rw)");
        }
        if (cmd->type == AccessType::kR) {
          return fail("watch: type r is not available (x86 has no read-only watchpoint; use rw)");
        }
        names_[cmd->name] = NameInfo{.kind = cmd->kind, .task_bound = cmd->task.has_value()};
        cmd->id = id_of(cmd->name);
        return {};
      }
      const bool exclusive = cmd->kind != CommandKind::kBp && cmd->kind != CommandKind::kWide;
      if (!cmd->cpu && cmd->kind == CommandKind::kBp) return fail("bp: cpu=N|any is required");
      if (!cmd->cpu && exclusive) {
        if (!cmd->task) return fail(c + ": cpu=N is required without task=");
        cmd->cpu = CpuChoice{.any = true};
      }
      if (cmd->cpu && cmd->cpu->any && !cmd->task) return fail(c + ": cpu=any needs task=");
      names_[cmd->name] = NameInfo{.kind = cmd->kind, .task_bound = cmd->task.has_value()};
      cmd->id = id_of(cmd->name);
      return {};
    }
    // modify / del: the name must be a live request.
    auto it = names_.find(cmd->name);
    if (it == names_.end()) return fail(c + ": unknown name '" + cmd->name + "'");
    if (it->second.is_task) {
      return fail(c + ": '" + cmd->name + "' is a task, not a breakpoint or request");
    }
    if (it->second.kind == CommandKind::kBtsOpen) {
      return fail(c + ": '" + cmd->name + "' is a bts context (close it with `bts close " +
                  cmd->name + "`)");
    }
    cmd->id = id_of(cmd->name);
    if (cmd->kind == CommandKind::kDel) {
      names_.erase(it);
      return {};
    }
    const NameInfo& info = it->second;
    if (info.kind != CommandKind::kBp && info.kind != CommandKind::kWide) {
      return fail("modify: '" + cmd->name + "' is a " + std::string(to_string(info.kind)) +
                  " request; only bp and wide can be modified");
    }
    if (info.kind == CommandKind::kWide && cmd->cpu) {
      return fail("modify: cpu= does not apply to the wide breakpoint '" + cmd->name + "'");
    }
    if (cmd->cpu && cmd->cpu->any && !info.task_bound) {
      return fail("modify: cpu=any needs a task, and '" + cmd->name + "' is CPU-bound");
    }
    return {};
  }

  static std::string no_hardware(const std::string& command) {
    return command +
           ": arch arm64 models slot accounting only (the simulated machine has x86 debug "
           "registers); use arch=x86_64 or i386";
  }

  Result<void> check_task(const std::string& command, const std::string& task) {
    auto it = names_.find(task);
    if (it == names_.end() || !it->second.is_task) {
      return fail(command + ": unknown task '" + task + "'");
    }
    if (exited_.contains(task)) return fail(command + ": task '" + task + "' has exited");
    return {};
  }

  void sched_init() {
    if (running_.empty()) {
      running_.resize(static_cast<std::size_t>(scenario_.machine.cpus));
      online_.assign(static_cast<std::size_t>(scenario_.machine.cpus), true);
      online_count_ = scenario_.machine.cpus;
    }
  }

  // The scheduling state a command needs, tracked statically (the machine is deterministic).
  Result<void> check_online(const std::string& command, int cpu) {
    sched_init();
    if (!online_[static_cast<std::size_t>(cpu)]) {
      return fail(command + ": cpu " + std::to_string(cpu) + " is offline");
    }
    return {};
  }

  Result<void> check_running(const std::string& command, const std::string& task, int cpu) {
    sched_init();
    auto it = on_cpu_.find(task);
    if (it == on_cpu_.end()) {
      return fail(command + ": task '" + task + "' does not run on cpu " + std::to_string(cpu) +
                  " (it is not running; switch it in first)");
    }
    if (it->second != cpu) {
      return fail(command + ": task '" + task + "' does not run on cpu " + std::to_string(cpu) +
                  " (it runs on cpu " + std::to_string(it->second) + ")");
    }
    return {};
  }

  Result<void> set_online(const std::string& command, int cpu, bool online) {
    sched_init();
    const auto c = static_cast<std::size_t>(cpu);
    const std::string n = std::to_string(cpu);
    if (online_[c] == online) {
      return fail(command + ": cpu " + n + " is already " + (online ? "online" : "offline"));
    }
    if (!online && running_[c]) {
      return fail(command + ": cpu " + n + " runs task '" + *running_[c] +
                  "' (switch it to idle first)");
    }
    if (!online && online_count_ == 1) {
      return fail(command + ": cpu " + n + " is the last online CPU");
    }
    online_[c] = online;
    online_count_ += online ? 1 : -1;
    return {};
  }

  Result<void> check_work(std::string_view command,
                          const std::map<std::string_view, std::string_view>& keys,
                          const std::set<std::string_view>& flags, Command* cmd) {
    const std::string c(command);
    auto require = [&](std::string_view key) -> Result<void> {
      if (!keys.contains(key)) return fail(c + ": " + std::string(key) + "= is required");
      return {};
    };
    if (cmd->cpu && cmd->cpu->any) return fail(c + ": expected a CPU number, not any");
    if (cmd->task) {
      if (auto r = check_task(c, *cmd->task); !r) return r;
    }
    switch (cmd->kind) {
      case CommandKind::kSwitch: {
        if (auto r = require("cpu"); !r) return r;
        if (!cmd->task && !cmd->idle) return fail("switch: task=T|idle is required");
        const int cpu = cmd->cpu->index;
        if (auto r = check_online(c, cpu); !r) return r;
        auto& cur = running_[static_cast<std::size_t>(cpu)];
        if (cmd->task) {
          auto it = on_cpu_.find(*cmd->task);
          if (it != on_cpu_.end() && it->second != cpu) {
            return fail("switch: task '" + *cmd->task + "' runs on cpu " +
                        std::to_string(it->second) + " (switch that CPU away from it first)");
          }
        }
        if (cur) on_cpu_.erase(*cur);
        cur.reset();
        if (cmd->task) {
          cur = *cmd->task;
          on_cpu_[*cmd->task] = cpu;
        }
        return {};
      }
      case CommandKind::kTick:
        if (cmd->cpu) return check_online(c, cmd->cpu->index);
        return {};
      case CommandKind::kAccess:
      case CommandKind::kExec: {
        if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
        for (std::string_view k : {"task", "cpu", "addr"}) {
          if (auto r = require(k); !r) return r;
        }
        if (cmd->kind == CommandKind::kAccess) {
          if (flags.contains("r") == flags.contains("w")) {
            return fail("access: exactly one of r or w is required");
          }
          if (auto r = require("len"); !r) return r;
          if (*cmd->len != 1 && *cmd->len != 2 && *cmd->len != 4 && *cmd->len != 8) {
            return fail("access: bad len " + std::to_string(*cmd->len) +
                        " (expected 1, 2, 4 or 8)");
          }
          if (cmd->value && !cmd->write) return fail("access: value= needs w");
          if (cmd->len && *cmd->len < 8 && cmd->value && (*cmd->value >> (*cmd->len * 8)) != 0) {
            return fail("access: value does not fit in len " + std::to_string(*cmd->len) +
                        " bytes");
          }
        }
        if (auto r = check_online(c, cmd->cpu->index); !r) return r;
        return check_running(c, *cmd->task, cmd->cpu->index);
      }
      case CommandKind::kBranch:
      case CommandKind::kRun: {
        if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
        const bool branch = cmd->kind == CommandKind::kBranch;
        for (std::string_view k : {"task", "cpu"}) {
          if (auto r = require(k); !r) return r;
        }
        for (std::string_view k : branch ? std::array<std::string_view, 2>{"from", "to"}
                                         : std::array<std::string_view, 2>{"branches", "seed"}) {
          if (auto r = require(k); !r) return r;
        }
        if (branch && scenario_.machine.arch == Arch::kI386) {
          for (std::uint64_t v : {*cmd->from, *cmd->to}) {
            if (v > 0xffffffff) {
              return fail("branch: " + hex(v) + " does not fit in 32 bits (an i386 machine)");
            }
          }
        }
        if (auto r = check_online(c, cmd->cpu->index); !r) return r;
        return check_running(c, *cmd->task, cmd->cpu->index);
      }
      case CommandKind::kCpu: {
        if (auto r = require("cpu"); !r) return r;
        cmd->online = command == "online";
        return set_online(c, cmd->cpu->index, cmd->online);
      }
      case CommandKind::kInject:
        return require("enomem");
      default:
        return {};
    }
  }

  RequestId id_of(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, RequestId(scenario_.request_names.size() + 1));
    if (inserted) scenario_.request_names.push_back(name);
    return it->second;
  }

  Result<void> parse_machine(const std::vector<std::string_view>& words) {
    if (machine_seen_) return fail("machine: given twice (at most one machine command)");
    if (seen_other_) return fail("machine: must come before any other command");
    machine_seen_ = true;
    std::map<std::string_view, std::string_view> keys;
    std::set<std::string_view> flags;
    if (auto r = split_args("machine", std::span(words).subspan(1), &keys, &flags); !r) return r;
    MachineSpec& m = scenario_.machine;
    for (const auto& [key, value] : keys) {
      const std::string v(value);
      if (key == "cpus") {
        if (!parse_number(value, 10, &m.cpus) || m.cpus < 1 || m.cpus > kMaxCpus) {
          return fail("machine: bad cpus '" + v + "' (expected 1 .. " + std::to_string(kMaxCpus) +
                      ")");
        }
      } else if (key == "arch") {
        auto arch = breakpoints::parse_arch(value);
        if (!arch) return fail("machine: bad arch '" + v + "' (expected x86_64, i386 or arm64)");
        m.arch = *arch;
      } else if (key == "flexible") {
        if (value == "multiplexed") {
          m.flexible = FlexiblePolicy::kMultiplexed;
        } else if (value == "as_pinned") {
          m.flexible = FlexiblePolicy::kAsPinned;
        } else {
          return fail("machine: bad flexible '" + v + "' (expected multiplexed or as_pinned)");
        }
      }
    }
    return {};
  }

  Result<void> parse_cpu(const std::vector<std::string_view>& words) {
    if (words.size() != 3 || (words[2] != "offline" && words[2] != "online")) {
      return fail("cpu: expected 'cpu N offline' or 'cpu N online'");
    }
    auto cpu = parse_cpu_value("cpu", words[1]);
    if (!cpu) return std::unexpected(cpu.error());
    if (cpu->any) return fail("cpu: expected a CPU number, not any");
    Command cmd;
    cmd.kind = CommandKind::kCpu;
    cmd.line = line_;
    cmd.cpu = *cpu;
    cmd.online = words[2] == "online";
    if (auto r = set_online("cpu", cpu->index, cmd.online); !r) return r;
    scenario_.commands.push_back(std::move(cmd));
    return {};
  }

  // bts open|close|drain|status NAME ...: a tracing context (NAME shares the name space).
  Result<void> parse_bts_context(CommandKind kind, const std::vector<std::string_view>& words) {
    const std::string c(to_string(kind));
    Command cmd;
    cmd.kind = kind;
    cmd.line = line_;
    if (words.size() < 3 || words[2].find('=') != std::string_view::npos) {
      return fail(c + ": missing NAME");
    }
    if (!valid_name(words[2])) {
      return fail(c + ": bad name '" + std::string(words[2]) +
                  "' (letters, digits, _ . -; starting with a letter or _)");
    }
    cmd.name = std::string(words[2]);
    std::map<std::string_view, std::string_view> keys;
    std::set<std::string_view> flags;
    if (auto r = split_args(c, std::span(words).subspan(3), &keys, &flags); !r) return r;
    if (auto r = apply_args(c, keys, flags, &cmd); !r) return r;
    if (kind == CommandKind::kBtsOpen) {
      if (names_.contains(cmd.name)) return fail(c + ": name '" + cmd.name + "' already in use");
      if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
      if (cmd.task && cmd.global) return fail(c + ": task=T and global are exclusive");
      if (!cmd.task && !cmd.global) return fail(c + ": task=T or global needed");
      if (cmd.task) {
        if (auto r = check_task(c, *cmd.task); !r) return r;
      }
      if (!cmd.size) return fail(c + ": size=BYTES is required");
      names_[cmd.name] = NameInfo{.kind = kind, .task_bound = cmd.task.has_value()};
      scenario_.commands.push_back(std::move(cmd));
      return {};
    }
    auto it = names_.find(cmd.name);
    if (it == names_.end()) {
      return fail(c + ": unknown context '" + cmd.name + "' (not opened with bts open, or closed)");
    }
    if (it->second.is_task) return fail(c + ": '" + cmd.name + "' is a task, not a bts context");
    if (it->second.kind != CommandKind::kBtsOpen) {
      return fail(c + ": '" + cmd.name + "' is a " + std::string(to_string(it->second.kind)) +
                  " request, not a bts context (bts open)");
    }
    if (kind == CommandKind::kBtsClose) names_.erase(it);
    scenario_.commands.push_back(std::move(cmd));
    return {};
  }

  // ptrace T OP [ARG]: its own shape (T and OP are positional; see scenario.h).
  Result<void> parse_ptrace(const std::vector<std::string_view>& words) {
    static constexpr std::string_view kOps =
        "attach, detach, peek, poke, wait, cont, step, bts-config, bts-status, bts-size, "
        "bts-get, bts-drain or bts-clear";
    static const std::map<std::string_view, PtraceOp> kOpNames = {
        {"attach", PtraceOp::kAttach},
        {"detach", PtraceOp::kDetach},
        {"peek", PtraceOp::kPeek},
        {"poke", PtraceOp::kPoke},
        {"wait", PtraceOp::kWait},
        {"cont", PtraceOp::kCont},
        {"step", PtraceOp::kStep},
        {"bts-config", PtraceOp::kBtsConfig},
        {"bts-status", PtraceOp::kBtsStatus},
        {"bts-size", PtraceOp::kBtsSize},
        {"bts-get", PtraceOp::kBtsGet},
        {"bts-drain", PtraceOp::kBtsDrain},
        {"bts-clear", PtraceOp::kBtsClear},
    };
    // `ptrace peek dr0` (no task): say so rather than "unknown task 'peek'".
    const bool task_missing =
        words.size() < 2 || words[1].find('=') != std::string_view::npos ||
        (kOpNames.contains(words[1]) && !names_.contains(std::string(words[1])));
    if (task_missing) {
      return fail("ptrace: missing task (expected 'ptrace T OP', OP one of " + std::string(kOps) +
                  ")");
    }
    if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware("ptrace"));
    Command cmd;
    cmd.kind = CommandKind::kPtrace;
    cmd.line = line_;
    cmd.name = std::string(words[1]);
    if (auto r = check_task("ptrace", cmd.name); !r) return r;
    if (words.size() < 3) return fail("ptrace: missing OP (expected " + std::string(kOps) + ")");
    auto op = kOpNames.find(words[2]);
    if (op == kOpNames.end()) {
      return fail("ptrace: unknown OP '" + std::string(words[2]) + "' (expected " +
                  std::string(kOps) + ")");
    }
    cmd.ptrace_op = op->second;
    const std::string c = "ptrace " + std::string(words[2]);
    std::span<const std::string_view> args = std::span(words).subspan(3);
    std::size_t takes = 0;  // how many words after OP it accepts
    switch (cmd.ptrace_op) {
      case PtraceOp::kAttach:
        takes = 1;
        if (!args.empty()) {
          const std::string_view a = args[0];
          if (!a.starts_with("layout=")) {
            return fail(c + ": unknown key '" + std::string(a.substr(0, a.find('='))) +
                        "' (expected layout=x86_64|i386)");
          }
          const std::string_view v = a.substr(a.find('=') + 1);
          auto layout = ptrace_compat::parse_user_layout(v);
          if (!layout) {
            return fail(c + ": bad layout '" + std::string(v) + "' (expected x86_64 or i386)");
          }
          cmd.layout = *layout;
          if (cmd.layout == ptrace_compat::UserLayout::kX86_64 &&
              scenario_.machine.arch == Arch::kI386) {
            return fail(c + ": layout x86_64 needs an x86_64 machine (this one is i386)");
          }
        }
        break;
      case PtraceOp::kPeek:
      case PtraceOp::kPoke: {
        takes = 1;
        const bool poke = cmd.ptrace_op == PtraceOp::kPoke;
        if (args.empty()) {
          return fail(c + (poke ? ": missing REG=HEX" : ": missing REG") +
                      " (REG: dr0..dr7 or a byte offset into struct user)");
        }
        std::string_view reg = args[0];
        const std::size_t eq = reg.find('=');
        std::string_view value;
        if (eq != std::string_view::npos) {
          value = reg.substr(eq + 1);
          reg = reg.substr(0, eq);
        }
        if (auto r = parse_register(c, reg, &cmd); !r) return r;
        if (!poke) {
          if (eq != std::string_view::npos) {
            return fail(c + ": '" + std::string(args[0]) + "': peek takes no value");
          }
          break;
        }
        if (eq == std::string_view::npos) return fail(c + ": '" + cmd.reg + "' needs =HEX");
        if (value.empty()) return fail(c + ": empty value for " + cmd.reg);
        std::string_view digits = value;
        if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
        std::uint64_t n = 0;
        if (!parse_number(digits, 16, &n)) {
          return fail(c + ": bad value '" + std::string(value) +
                      "' (expected a 64-bit hex number)");
        }
        cmd.value = n;
        break;
      }
      case PtraceOp::kBtsConfig:
        takes = args.size();
        if (auto r = parse_bts_config(c, args, &cmd); !r) return r;
        break;
      case PtraceOp::kBtsGet:
        takes = 1;
        if (args.empty()) return fail(c + ": missing INDEX (0 is the newest record)");
        if (!parse_number(args[0], 10, &cmd.index)) {
          return fail(c + ": bad INDEX '" + std::string(args[0]) + "' (expected a decimal number)");
        }
        break;
      default:
        break;
    }
    if (args.size() > takes) return fail(c + ": unexpected '" + std::string(args[takes]) + "'");
    scenario_.commands.push_back(std::move(cmd));
    return {};
  }

  // ptrace T bts-config size=BYTES [flags=LIST], in any order.
  Result<void> parse_bts_config(const std::string& c, std::span<const std::string_view> args,
                                Command* cmd) {
    std::set<std::string_view> seen;
    for (std::string_view a : args) {
      const std::size_t eq = a.find('=');
      const std::string_view key = a.substr(0, eq);
      if (key != "size" && key != "flags") {
        return fail(c + ": unknown key '" + std::string(key) +
                    "' (expected size=BYTES and flags=LIST)");
      }
      if (eq == std::string_view::npos) {
        return fail(c + ": '" + std::string(key) + "' needs =VALUE");
      }
      const std::string_view value = a.substr(eq + 1);
      if (value.empty()) return fail(c + ": empty value for " + std::string(key));
      if (!seen.insert(key).second) return fail(c + ": duplicate key '" + std::string(key) + "'");
      if (key == "size") {
        std::uint64_t n = 0;
        if (!parse_number(value, 10, &n)) {
          return fail(c + ": bad size '" + std::string(value) + "' (expected a decimal number)");
        }
        cmd->size = n;
        continue;
      }
      auto flags = parse_ptrace_bts_flags(value);
      if (!flags) return fail(c + ": " + flags.error().message());
      cmd->ptrace_bts_flags = *flags;
    }
    if (!cmd->size) return fail(c + ": size=BYTES is required");
    return {};
  }

  // dr0..dr7, or a byte offset (decimal, or hex with 0x).
  Result<void> parse_register(const std::string& c, std::string_view reg, Command* cmd) {
    cmd->reg = std::string(reg);
    auto bad = [&] {
      return fail(c + ": bad register '" + cmd->reg +
                  "' (expected dr0..dr7 or a byte offset into struct user, decimal or 0x hex)");
    };
    if (reg.empty()) return bad();
    if (reg.starts_with("dr")) {
      if (reg.size() != 3 || reg[2] < '0' || reg[2] > '7') return bad();
      cmd->debugreg = reg[2] - '0';
      return {};
    }
    std::string_view digits = reg;
    int base = 10;
    if (digits.starts_with("0x") || digits.starts_with("0X")) {
      digits.remove_prefix(2);
      base = 16;
    }
    if (!parse_number(digits, base, &cmd->offset)) return bad();
    return {};
  }

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
};

// ---------------------------------------------------------------------------------------------
// Runner.

std::string_view access_name(pmu::AccessKind k) {
  switch (k) {
    case pmu::AccessKind::kRead:
      return "r";
    case pmu::AccessKind::kWrite:
      return "w";
    case pmu::AccessKind::kExecute:
      return "x";
    default:
      return "?";
  }
}

// What a request name holds at run time.
struct Held {
  CommandKind kind = CommandKind::kBp;
  Request request;                       // the slot request (wide: the per-CPU template, cpu unset)
  std::vector<pmu::EventHandle> events;  // bp: one; wide: one per CPU
  std::vector<Reservation> parts;        // bts/pt/lbr
  std::optional<breakpoints::WatchId> watch;
  bool live() const { return !events.empty() || !parts.empty() || watch.has_value(); }
};

class Runner {
 public:
  Runner(const Scenario& scenario, const RunOptions& options)
      : scenario_(scenario), options_(options) {}

  Result<std::vector<std::string>> run() {
    sim::SystemConfig config;
    config.cpus = scenario_.machine.cpus;
    config.arch = scenario_.machine.arch;
    config.flexible = scenario_.machine.flexible;
    auto sys = sim::System::create(config);
    if (!sys) return std::unexpected(sys.error().with_context("machine").with_context(kInternal));
    sys_ = std::move(*sys);
    for (const Command& cmd : scenario_.commands) {
      if (auto r = execute(cmd); !r) {
        Error e = r.error().with_context(scenario_.file + ":" + std::to_string(cmd.line));
        return std::unexpected(run_error_ ? e : e.with_context(kInternal));
      }
    }
    tracees_.clear();  // detach (the tracers go away) ...
    held_.clear();     // ... and release everything before the system goes
    return std::move(out_);
  }

  static constexpr std::string_view kInternal = "internal error";

 private:
  sim::Machine& machine() { return sys_->machine(); }
  Arbiter& arbiter() { return sys_->arbiter(); }

  Result<void> execute(const Command& cmd) {
    switch (cmd.kind) {
      case CommandKind::kTask:
      case CommandKind::kFork:
        return task(cmd);
      case CommandKind::kCpu:
        return machine().set_online(CpuId(cmd.cpu->index), cmd.online);
      case CommandKind::kDel:
        // Handles and reservations release themselves; a watchpoint belongs to the layer.
        if (auto it = held_.find(cmd.name); it != held_.end() && it->second.watch) {
          if (auto r = sys_->watchpoints().unwatch(*it->second.watch); !r) return r;
        }
        held_.erase(cmd.name);
        return {};
      case CommandKind::kBp:
        bp(cmd);
        return {};
      case CommandKind::kWide:
        wide(cmd);
        return {};
      case CommandKind::kModify:
        return modify(cmd);
      case CommandKind::kBts:
        bts_event(cmd);
        return {};
      case CommandKind::kPt:
      case CommandKind::kLbr:
        exclusive(cmd);
        return {};
      case CommandKind::kBtsOpen:
        return bts_open(cmd);
      case CommandKind::kBtsClose:
        return bts_close(cmd);
      case CommandKind::kBtsDrain:
        return bts_drain(cmd);
      case CommandKind::kBtsStatus:
        return bts_status(cmd);
      case CommandKind::kBranch: {
        auto t = live_task(*cmd.task);
        if (!t) return std::unexpected(t.error());
        if (auto s = check_not_stopped(cmd, *t); !s) return s;
        auto r = machine().branch(CpuId(cmd.cpu->index), *t, *cmd.from, *cmd.to, cmd.predicted);
        if (!r) return std::unexpected(r.error());
        return {};
      }
      case CommandKind::kRun:
        return run_walk(cmd);
      case CommandKind::kWatch:
        return watch(cmd);
      case CommandKind::kSwitch: {
        const CpuId cpu(cmd.cpu->index);
        if (cmd.idle) return machine().switch_to_idle(cpu);
        auto t = live_task(*cmd.task);
        if (!t) return std::unexpected(t.error());
        return machine().switch_to(cpu, *t);
      }
      case CommandKind::kTick:
        if (cmd.cpu) return machine().tick(CpuId(cmd.cpu->index));
        for (int c = 0; c < machine().possible_cpus(); ++c) {
          if (*machine().is_online(CpuId(c))) {
            if (auto r = machine().tick(CpuId(c)); !r) return r;
          }
        }
        return {};
      case CommandKind::kExit: {
        auto t = live_task(cmd.name);
        if (!t) return std::unexpected(t.error());
        if (auto r = machine().exit(*t); !r) return r;
        tracees_.erase(cmd.name);  // the exit ended the tracing
        return {};
      }
      case CommandKind::kAccess: {
        auto t = live_task(*cmd.task);
        if (!t) return std::unexpected(t.error());
        if (auto s = check_not_stopped(cmd, *t); !s) return s;
        auto r = machine().access(CpuId(cmd.cpu->index), *t,
                                  cmd.write ? sim::AccessKind::kWrite : sim::AccessKind::kRead,
                                  *cmd.addr, static_cast<int>(*cmd.len), cmd.value.value_or(0));
        if (!r) return std::unexpected(r.error());
        return {};
      }
      case CommandKind::kExec: {
        auto t = live_task(*cmd.task);
        if (!t) return std::unexpected(t.error());
        if (auto s = check_not_stopped(cmd, *t); !s) return s;
        auto r = machine().exec(CpuId(cmd.cpu->index), *t, *cmd.addr);
        if (!r) return std::unexpected(r.error());
        return {};
      }
      case CommandKind::kShow:
        show();
        return {};
      case CommandKind::kInject:
        arbiter().inject_fault_at(cmd.inject_at);
        return {};
      case CommandKind::kPtrace:
        return ptrace(cmd);
    }
    return {};
  }

  // A run-time scenario error (scenario.h): what the file alone cannot decide.
  std::unexpected<Error> run_error(ErrorCode code, std::string message) {
    run_error_ = true;
    return make_error(code, std::move(message));
  }

  // ---- tasks ----

  Result<TaskId> live_task(const std::string& name) {
    auto it = tasks_.find(name);
    if (it == tasks_.end() || !machine_has(it->second)) {
      return run_error(ErrorCode::kSrch, "task '" + name + "' does not exist (its fork failed)");
    }
    return it->second;
  }
  bool machine_has(TaskId t) const { return sys_->machine().task_exists(t); }

  std::string task_name(TaskId id) const {
    auto it = task_names_.find(id);
    return it != task_names_.end() ? it->second : "#" + std::to_string(id.value());
  }

  void add_task(const std::string& name, TaskId id) {
    tasks_[name] = id;
    task_names_[id] = name;
  }

  Result<void> task(const Command& cmd) {
    if (!cmd.parent) {
      auto t = machine().create_task();
      if (!t) return std::unexpected(t.error());
      add_task(cmd.name, *t);
      return {};
    }
    auto parent = live_task(*cmd.parent);
    if (!parent) return std::unexpected(parent.error());
    auto t = machine().fork(*parent);
    if (!t) {
      refuse(cmd.name, t.error().code(), t.error().message());
      return {};
    }
    add_task(cmd.name, *t);
    if (cmd.kind == CommandKind::kFork) ok(cmd.name);
    return {};
  }

  // ---- requests ----

  std::optional<TaskId> task_id(const std::optional<std::string>& name) const {
    if (!name) return std::nullopt;
    auto it = tasks_.find(*name);
    if (it == tasks_.end()) return TaskId(-1);  // a failed fork: the request is refused (ESRCH)
    return it->second;
  }

  pmu::EventAttr new_attr(const Command& cmd) const {
    const AccessType type = cmd.type.value_or(AccessType::kRw);
    pmu::EventAttr a = breakpoints::breakpoint_attr(
        cmd.addr.value_or(0x1000 * cmd.id.value()),
        cmd.len.value_or(breakpoints::default_len(scenario_.machine.arch, type)), type);
    a.disabled = cmd.disabled.value_or(false);
    a.inherit = cmd.inherit;
    a.pinned = cmd.pinned.value_or(true);
    a.weight = cmd.weight.value_or(1);
    return a;
  }

  Request slot_request(const pmu::EventAttr& a, std::optional<TaskId> task,
                       std::optional<CpuId> cpu) const {
    Request r;
    r.kind = ResourceKind::kBreakpoint;
    r.type = a.bp_type == pmu::BpType::kX ? SlotType::kInst : SlotType::kData;
    r.task = task;
    r.cpu = cpu;
    r.weight = a.weight;
    r.pinned = a.pinned;
    return r;
  }

  void ok(const std::string& name) { out_.push_back(name + " ok"); }

  void refuse(const std::string& name, ErrorCode code, const std::string& reason) {
    std::string line = name + " " + errno_name(code);
    if (options_.explain) line += " — " + reason;
    out_.push_back(std::move(line));
  }

  // "hit NAME task=T cpu=N ip=HEX addr=HEX access=r|w|x"
  std::string hit_line(const std::string& name, const pmu::Sample& s) const {
    return "hit " + name + " task=" + (s.task ? task_name(*s.task) : "-") +
           " cpu=" + std::to_string(s.cpu.value()) + " ip=" + hex(s.ip) + " addr=" + hex(s.addr) +
           " access=" + std::string(access_name(s.access));
  }

  pmu::OverflowHandler hit_printer(const std::string& name) {
    return [this, name](pmu::Event&, const pmu::Sample& s) { out_.push_back(hit_line(name, s)); };
  }

  void bp(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    pmu::EventAttr attr = new_attr(cmd);
    std::optional<TaskId> task = task_id(cmd.task);
    std::optional<CpuId> cpu;
    if (!cmd.cpu->any) cpu = CpuId(cmd.cpu->index);
    h.request = slot_request(attr, task, cpu);
    breakpoints::HwBreakpoints& api = sys_->breakpoints();
    // The slot check comes first (a bad request on a full CPU gets ENOSPC), then the fields.
    auto r =
        task
            ? (task->value() < 0
                   ? Result<pmu::EventHandle>(make_error(ErrorCode::kSrch, "task: its fork failed"))
                   : api.register_user_hw_breakpoint(attr, hit_printer(cmd.name), *task, cpu))
            : api.register_cpu_hw_breakpoint(attr, hit_printer(cmd.name), *cpu);
    settle_open(cmd, std::move(h), std::move(r));
  }

  void wide(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    pmu::EventAttr attr = new_attr(cmd);
    h.request = slot_request(attr, std::nullopt, std::nullopt);
    auto r = sys_->breakpoints().register_wide_hw_breakpoint(attr, hit_printer(cmd.name));
    if (!r) {
      std::vector<Request> requests;
      for (CpuId cpu : arbiter().online_cpus()) {
        requests.push_back(slot_request(attr, std::nullopt, cpu));
      }
      refuse(cmd.name, r.error().code(), reason_any(requests, r.error()));
    } else {
      for (auto& e : r->per_cpu) names_[e.id()] = cmd.name;
      h.events = std::move(r->per_cpu);
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  Result<void> modify(const Command& cmd) {
    Held& h = held_.at(cmd.name);
    if (h.events.empty()) {
      refuse(cmd.name, ErrorCode::kNoEnt, cmd.name + " holds no reservation");
      return {};
    }
    pmu::Core& core = sys_->core();
    std::vector<pmu::EventAttr> old_attrs;
    std::vector<pmu::EventOwner> old_owners;
    for (const pmu::EventHandle& e : h.events) {
      old_attrs.push_back(e.event()->attr());
      old_owners.push_back({e.event()->task(), e.event()->cpu()});
    }
    for (std::size_t i = 0; i < h.events.size(); ++i) {
      pmu::EventAttr next = old_attrs[i];
      if (cmd.type) next.bp_type = *cmd.type;
      if (cmd.len) next.bp_len = *cmd.len;
      if (cmd.addr) next.bp_addr = *cmd.addr;
      if (cmd.disabled) next.disabled = *cmd.disabled;
      if (cmd.weight) next.weight = *cmd.weight;
      if (cmd.pinned) next.pinned = *cmd.pinned;
      pmu::EventOwner owner = old_owners[i];
      if (cmd.cpu) owner.cpu = cmd.cpu->any ? std::nullopt : std::optional(CpuId(cmd.cpu->index));
      if (auto r = core.modify(h.events[i].id(), next, owner); !r) {
        // All or nothing: put back the parts already changed (they held these slots before).
        for (std::size_t j = 0; j < i; ++j) {
          if (auto back = core.modify(h.events[j].id(), old_attrs[j], old_owners[j]); !back) {
            return std::unexpected(back.error().with_context("modify rollback"));
          }
        }
        refuse(cmd.name, r.error().code(),
               reason(slot_request(next, owner.task, owner.cpu), r.error()));
        return {};
      }
    }
    const pmu::Event* e = h.events.front().event();
    h.request =
        slot_request(e->attr(), e->task(), h.kind == CommandKind::kWide ? std::nullopt : e->cpu());
    ok(cmd.name);
    return {};
  }

  // The outcome of opening one event for `cmd`: "NAME ok" with the handle kept under the name,
  // or "NAME ERRNO" (with the reason for --explain).
  void settle_open(const Command& cmd, Held h, Result<pmu::EventHandle> r) {
    if (!r) {
      refuse(cmd.name, r.error().code(), reason(h.request, r.error()));
    } else {
      names_[r->id()] = cmd.name;
      h.events.push_back(std::move(*r));
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  void exclusive(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    h.request.kind = cmd.kind == CommandKind::kBts  ? ResourceKind::kBts
                     : cmd.kind == CommandKind::kPt ? ResourceKind::kPt
                                                    : ResourceKind::kLbr;
    h.request.task = task_id(cmd.task);
    if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
    // Request ids of the exclusive kinds live above the event ids.
    h.request.id = RequestId(kExclusiveIds + cmd.id.value());
    auto r = arbiter().reserve(h.request);
    if (!r) {
      refuse(cmd.name, r.error().code(), reason(h.request, r.error()));
    } else {
      names_[h.request.id.value()] = cmd.name;
      h.parts.push_back(std::move(*r));
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  // ---- BTS ----

  // `bts NAME`: a perf BTS event (the BTS PMU, through the perf core). Its AUX area holds
  // kBtsEventAuxBytes; the scenario never reads it.
  void bts_event(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    h.request.kind = ResourceKind::kBts;
    h.request.task = task_id(cmd.task);
    if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
    h.request.id = RequestId(kExclusiveIds + cmd.id.value());
    if (h.request.task && h.request.task->value() < 0) {
      refuse(cmd.name, ErrorCode::kSrch, "task: its fork failed");
      held_[cmd.name] = std::move(h);
      return;
    }
    pmu::EventAttr attr;
    attr.type = pmu::EventType::kBts;
    attr.aux_size = kBtsEventAuxBytes;
    attr.aux_snapshot = false;
    auto r = sys_->core().open(attr, pmu::EventOwner{h.request.task, h.request.cpu});
    settle_open(cmd, std::move(h), std::move(r));
  }

  // The arbiter requests a tracing context stands for (what the Tracer reserves): {task, all
  // CPUs}, or one CPU-bound request per possible CPU for a global one.
  std::vector<Request> context_requests(std::optional<TaskId> task) {
    std::vector<Request> requests;
    Request r;
    r.kind = ResourceKind::kBts;
    r.task = task;
    if (task) {
      requests.push_back(r);
      return requests;
    }
    for (int c = 0; c < machine().possible_cpus(); ++c) {
      r.cpu = CpuId(c);
      requests.push_back(r);
    }
    return requests;
  }

  Result<void> bts_open(const Command& cmd) {
    bts::ContextConfig config;
    config.task = task_id(cmd.task);
    if (config.task && config.task->value() < 0) {
      refuse(cmd.name, ErrorCode::kSrch, "task: its fork failed");
      return {};
    }
    config.flags = cmd.bts_flags;
    if ((config.flags & (bts::kUser | bts::kKernel)) == 0) {
      config.flags |= bts::kUser | bts::kKernel;  // neither named: both
    }
    config.mode = cmd.mode.value_or(bts::BufferMode::kAux);
    config.size = static_cast<std::size_t>(*cmd.size);
    auto id = sys_->tracer().open(config);
    if (!id) {
      refuse(cmd.name, id.error().code(), reason_any(context_requests(config.task), id.error()));
      return {};
    }
    contexts_[cmd.name] = *id;
    ok(cmd.name);
    return {};
  }

  // The context NAME holds; a NAME whose `bts open` was refused holds none ("NAME ENOENT").
  std::optional<bts::ContextId> context_of(const Command& cmd) {
    auto it = contexts_.find(cmd.name);
    if (it != contexts_.end()) return it->second;
    refuse(cmd.name, ErrorCode::kNoEnt, cmd.name + " holds no context (its bts open was refused)");
    return std::nullopt;
  }

  Result<void> bts_close(const Command& cmd) {
    auto it = contexts_.find(cmd.name);
    if (it == contexts_.end()) return {};  // holds nothing: fine, as del
    const bts::ContextId id = it->second;
    contexts_.erase(it);
    return sys_->tracer().close(id);
  }

  Result<void> bts_drain(const Command& cmd) {
    auto id = context_of(cmd);
    if (!id) return {};
    auto d = sys_->tracer().drain(*id);
    if (!d) return std::unexpected(d.error());
    const internal::TaskNamer namer = [this](TaskId t) { return task_name(t); };
    for (const bts::TraceRecord& rec : d->records) {
      out_.push_back(cmd.name + " " + internal::record_text(rec, namer));
    }
    out_.push_back(cmd.name + " drained " + std::to_string(d->records.size()) + " lost " +
                   std::to_string(d->lost));
    return {};
  }

  Result<void> bts_status(const Command& cmd) {
    auto id = context_of(cmd);
    if (!id) return {};
    auto st = sys_->tracer().status(*id);
    if (!st) return std::unexpected(st.error());
    out_.push_back(cmd.name + " " +
                   internal::context_status_text(*st, [this](TaskId t) { return task_name(t); }));
    return {};
  }

  // `run`: branches of the seeded walk; a SIGNAL-mode buffer that fills stops the task early.
  Result<void> run_walk(const Command& cmd) {
    auto t = live_task(*cmd.task);
    if (!t) return std::unexpected(t.error());
    if (auto s = check_not_stopped(cmd, *t); !s) return s;
    auto walk = sim::BranchWalk::generate(cmd.seed, {.format = machine().bts_format()});
    if (!walk) return std::unexpected(walk.error());
    auto n = machine().run(CpuId(cmd.cpu->index), *t, *walk, cmd.branches);
    if (!n) return std::unexpected(n.error());
    if (*n < cmd.branches) {
      out_.push_back(*cmd.task + " stopped after " + std::to_string(*n) + " branches");
    }
    return {};
  }

  Result<void> watch(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    breakpoints::WatchSpec spec;
    spec.task = task_id(cmd.task);
    if (spec.task && spec.task->value() < 0) {
      refuse(cmd.name, ErrorCode::kSrch, "task: its fork failed");
      held_[cmd.name] = std::move(h);
      return {};
    }
    spec.addr = *cmd.addr;
    spec.len = cmd.len.value_or(cmd.type == AccessType::kX ? 1 : 4);
    spec.type = cmd.type.value_or(AccessType::kW);
    if (!cmd.cond_op.empty()) {
      spec.condition = [cmd](std::uint64_t v) { return condition_holds(cmd, v); };
    }
    const std::string name = cmd.name;
    auto r = sys_->watchpoints().watch(spec, [this, name](const breakpoints::WatchHit& hit) {
      const pmu::Sample& s = hit.sample;
      std::string line = hit_line(name, s);
      if (hit.has_value) line += " old=" + hex(hit.old_value) + " new=" + hex(hit.new_value);
      out_.push_back(std::move(line));
    });
    if (!r) {
      refuse(cmd.name, r.error().code(), r.error().message());
    } else {
      h.watch = *r;
      watch_names_[*r] = cmd.name;
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
    return {};
  }

  // ---- ptrace ----

  static std::string signal_name(int sig) {
    switch (sig) {
      case SIGTRAP:
        return "SIGTRAP";
      case SIGSTOP:
        return "SIGSTOP";
      case ptrace_compat::kBtsFullSignal:
        return "SIGIO";
      default:
        return "signal " + std::to_string(sig);
    }
  }

  // "stopped SIGTRAP dr6=0x..." or "running".
  static std::string stop_text(const std::optional<ptrace_compat::Stop>& stop) {
    if (!stop) return "running";
    return "stopped " + signal_name(stop->signal) + " dr6=" + hex_padded(stop->dr6, 16);
  }

  // An access or exec by a task in a ptrace stop: the machine refuses it (EBUSY); the file alone
  // cannot tell (a hit may have stopped the task), so this is a run-time scenario error.
  Result<void> check_not_stopped(const Command& cmd, TaskId t) {
    auto stopped = machine().stopped(t);
    if (!stopped) return std::unexpected(stopped.error());
    if (!*stopped) return {};
    std::string what;
    if (auto s = sys_->ptrace_wait(t, ptrace_compat::WaitMode::kNoHang); s && *s) {
      what = " (" + signal_name((*s)->signal) + ")";
    }
    return run_error(ErrorCode::kBusy, std::string(to_string(cmd.kind)) + ": task '" + *cmd.task +
                                           "' is in a ptrace stop" + what +
                                           "; resume it with `ptrace " + *cmd.task +
                                           " cont` (or step) first");
  }

  ptrace_compat::UserLayout default_layout() const {
    return scenario_.machine.arch == Arch::kI386 ? ptrace_compat::UserLayout::kI386
                                                 : ptrace_compat::UserLayout::kX86_64;
  }

  // The struct user offset a peek/poke addresses, and how its output line names it: drN for a
  // debug register (by name or by an offset that decodes to one), else the offset as written.
  static std::uint64_t user_offset(const Command& cmd, ptrace_compat::UserLayout layout) {
    if (cmd.debugreg)
      return ptrace_compat::debugreg_offset(ptrace_compat::user_area(layout), *cmd.debugreg);
    return cmd.offset;
  }
  std::string reg_label(const Command& cmd, ptrace_compat::UserLayout layout) {
    if (cmd.debugreg) return "dr" + std::to_string(*cmd.debugreg);
    auto where = ptrace_compat::decode_offset(layout, sys_->ptrace().abi(layout), cmd.offset);
    if (where && where->kind == ptrace_compat::OffsetKind::kDebugReg) {
      return "dr" + std::to_string(where->debugreg);
    }
    return cmd.reg;
  }

  // The reason of a refused ptrace request of task `name`.
  std::string ptrace_reason(const std::string& name, TaskId task, const Error& error) {
    switch (error.code()) {
      case ErrorCode::kSrch:  // the tracee is live and attached: it runs
        return "task '" + name + "' is running, not in a ptrace stop";
      case ErrorCode::kNoSpc: {
        // A ptrace breakpoint: a pinned breakpoint of the task on all CPUs.
        Request r;
        r.kind = ResourceKind::kBreakpoint;
        r.type = SlotType::kData;
        r.task = task;
        r.weight = 1;
        r.pinned = true;
        const Explanation ex = arbiter().explain(r);
        if (ex.admitted || ex.code != error.code()) return error.message();
        return format_nospc(ex, /*name_task_holders=*/true);
      }
      default:
        return error.message();
    }
  }

  void ptrace_refuse(const Command& cmd, const std::string& what, TaskId task, const Error& e) {
    refuse(what, e.code(), ptrace_reason(cmd.name, task, e));
  }

  Result<void> ptrace(const Command& cmd) {
    auto t = live_task(cmd.name);
    if (!t) return std::unexpected(t.error());
    auto it = tracees_.find(cmd.name);
    // `attach`, or the first command on an untraced task: attach (it stops with SIGSTOP).
    if (cmd.ptrace_op == PtraceOp::kAttach || it == tracees_.end()) {
      auto tr = sim::SimTracee::attach(*sys_, *t, cmd.layout.value_or(default_layout()));
      if (!tr) {
        if (cmd.ptrace_op != PtraceOp::kAttach) return std::unexpected(tr.error());
        const bool again = tr.error().code() == ErrorCode::kPerm;
        refuse("attach", tr.error().code(),
               again ? "task '" + cmd.name + "' is traced already" : tr.error().message());
        return {};
      }
      it = tracees_.insert_or_assign(cmd.name, std::move(*tr)).first;
      if (cmd.ptrace_op == PtraceOp::kAttach) return {};
    }
    sim::SimTracee& tracee = it->second;
    const std::string op(to_string(cmd.ptrace_op));
    switch (cmd.ptrace_op) {
      case PtraceOp::kAttach:
        return {};
      case PtraceOp::kPeek: {
        const std::string what = "peek " + reg_label(cmd, tracee.layout());
        auto v = tracee.peek_user(user_offset(cmd, tracee.layout()));
        if (!v) {
          ptrace_refuse(cmd, what, *t, v.error());
        } else {
          out_.push_back(what + " = " + hex_padded(*v, 16));
        }
        return {};
      }
      case PtraceOp::kPoke: {
        const std::string what = "poke " + reg_label(cmd, tracee.layout());
        auto r = tracee.poke_user(user_offset(cmd, tracee.layout()), *cmd.value);
        if (!r) {
          ptrace_refuse(cmd, what, *t, r.error());
        } else {
          ok(what);
        }
        return {};
      }
      case PtraceOp::kWait: {
        auto s = tracee.wait(ptrace_compat::WaitMode::kNoHang);
        if (!s) {
          ptrace_refuse(cmd, op, *t, s.error());
        } else {
          out_.push_back(stop_text(*s));
        }
        return {};
      }
      case PtraceOp::kCont:
      case PtraceOp::kStep: {
        auto r = cmd.ptrace_op == PtraceOp::kCont ? tracee.cont() : tracee.step();
        if (!r) ptrace_refuse(cmd, op, *t, r.error());
        return {};
      }
      case PtraceOp::kBtsConfig:
      case PtraceOp::kBtsStatus:
      case PtraceOp::kBtsSize:
      case PtraceOp::kBtsGet:
      case PtraceOp::kBtsDrain:
      case PtraceOp::kBtsClear:
        ptrace_bts(cmd, *t);
        return {};
      case PtraceOp::kDetach: {
        auto r = tracee.detach();
        if (!r) {
          ptrace_refuse(cmd, op, *t, r.error());
        } else {
          tracees_.erase(it);
        }
        return {};
      }
    }
    return {};
  }

  // PTRACE_BTS_*: like PEEKUSER, they need the tracee in a ptrace stop (ESRCH otherwise).
  void ptrace_bts(const Command& cmd, TaskId t) {
    std::string what(to_string(cmd.ptrace_op));
    if (cmd.ptrace_op == PtraceOp::kBtsGet) what += " " + std::to_string(cmd.index);
    if (auto s = sys_->ptrace_check_stopped(t); !s) {
      ptrace_refuse(cmd, what, t, s.error());
      return;
    }
    ptrace_compat::PtraceBts& pb = sys_->ptrace_bts();
    const internal::TaskNamer namer = [this](TaskId id) { return task_name(id); };
    Result<void> r;
    switch (cmd.ptrace_op) {
      case PtraceOp::kBtsConfig:
        r = pb.config(t, {.size = *cmd.size, .flags = cmd.ptrace_bts_flags});
        if (r) ok(what);
        break;
      case PtraceOp::kBtsStatus: {
        auto st = pb.status(t);
        if (!st) {
          r = std::unexpected(st.error());
          break;
        }
        out_.push_back(what + " size=" + std::to_string(st->size) +
                       " flags=" + internal::ptrace_bts_flags_text(st->flags));
        break;
      }
      case PtraceOp::kBtsSize: {
        auto n = pb.size(t);
        if (!n) {
          r = std::unexpected(n.error());
          break;
        }
        out_.push_back(what + " = " + std::to_string(*n));
        break;
      }
      case PtraceOp::kBtsGet: {
        auto rec = pb.get(t, cmd.index);
        if (!rec) {
          r = std::unexpected(rec.error());
          break;
        }
        out_.push_back(what + " " + internal::record_text(*rec, namer));
        break;
      }
      case PtraceOp::kBtsDrain: {
        auto recs = pb.drain(t);
        if (!recs) {
          r = std::unexpected(recs.error());
          break;
        }
        for (const bts::TraceRecord& rec : *recs) {
          out_.push_back(what + " " + internal::record_text(rec, namer));
        }
        out_.push_back(what + " " + std::to_string(recs->size()) + " records");
        break;
      }
      case PtraceOp::kBtsClear:
        r = pb.clear(t);
        if (r) ok(what);
        break;
      default:
        break;
    }
    if (!r) ptrace_refuse(cmd, what, t, r.error());
  }

  // ---- show ----

  std::string event_name(const pmu::Event& e) const {
    pmu::EventId origin = e.parent() != 0 ? e.parent() : e.id();
    if (auto it = names_.find(origin); it != names_.end()) return it->second;
    std::vector<breakpoints::WatchId> users = sys_->watchpoints().users_of(origin);
    if (!users.empty()) {
      std::string n;
      for (breakpoints::WatchId w : users) n += (n.empty() ? "" : "+") + watch_names_.at(w);
      return n + "[" + hex(e.attr().bp_addr) + "/" + std::to_string(e.attr().bp_len) + "]";
    }
    if (e.task()) {
      if (const breakpoints::PtraceThread* pt = sys_->breakpoints().find_ptrace_thread(*e.task())) {
        for (int n = 0; n < breakpoints::kPtraceSlots; ++n) {
          const pmu::Event* bp = pt->bps[static_cast<std::size_t>(n)].event();
          if (bp != nullptr && bp->id() == e.id()) {
            return "ptrace:" + task_name(*e.task()) + ":dr" + std::to_string(n);
          }
        }
      }
    }
    return "#" + std::to_string(e.id());
  }

  void show() {
    const bool hw = scenario_.machine.arch != Arch::kArm64;
    for (int c = 0; c < machine().possible_cpus(); ++c) {
      const CpuId cpu(c);
      std::string line = "cpu " + std::to_string(c) + (*machine().is_online(cpu) ? "" : " offline");
      auto cur = *machine().current(cpu);
      line += " task=" + (cur ? task_name(*cur) : std::string("idle"));
      if (hw) {
        const sim::DebugRegisters regs = *machine().debug_registers(cpu);
        for (int n = 0; n < 4; ++n) line += " dr" + std::to_string(n) + "=" + hex(regs.dr[n]);
        line += " dr7=" + hex(regs.dr7);
      }
      std::vector<const pmu::Event*> inst = sys_->bp_pmu().installed(cpu);
      line += " installed:";
      bool any = false;
      for (std::size_t n = 0; n < inst.size(); ++n) {
        if (!inst[n]) continue;
        // Appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on the chained form.
        line += hw ? " dr" : " slot";
        line += std::to_string(n);
        line += '=';
        line += event_name(*inst[n]);
        any = true;
      }
      if (!any) line += " none";
      out_.push_back(std::move(line));
    }
    // The breakpoint events (a `bts NAME` event holds no debug register and is not shown).
    pmu::Core& core = sys_->core();
    for (pmu::EventId id : core.events()) {
      const pmu::Event* e = core.find(id);
      if (e->attr().type != pmu::EventType::kBreakpoint) continue;
      auto v = core.read(id);
      std::string line = "event " + event_name(*e);
      line += " task=" + (e->task() ? task_name(*e->task()) : std::string("-"));
      line += " cpu=" + (e->cpu() ? std::to_string(e->cpu()->value()) : std::string("any"));
      line += " state=" + std::string(pmu::to_string(e->state()));
      line += " count=" + std::to_string(v->count);
      line += " time_enabled=" + std::to_string(v->time_enabled);
      line += " time_running=" + std::to_string(v->time_running);
      out_.push_back(std::move(line));
    }
    // Each traced task: "ptrace T stopped SIGTRAP dr6=0x... dr7=0x..." (or "running ..."),
    // in task order.
    std::map<TaskId, std::string> traced;
    for (const auto& [name, tracee] : tracees_) traced[tracee.task()] = name;
    for (const auto& [task, name] : traced) {
      auto stop = sys_->ptrace_wait(task, ptrace_compat::WaitMode::kNoHang);
      auto dr6 = sys_->ptrace().get_debugreg(task, 6);
      auto dr7 = sys_->ptrace().get_debugreg(task, 7);
      if (!stop || !dr6 || !dr7) continue;
      std::string line =
          "ptrace " + name + " " +
          (*stop ? "stopped " + signal_name((*stop)->signal) : std::string("running"));
      out_.push_back(line + " dr6=" + hex_padded(*dr6, 16) + " dr7=" + hex_padded(*dr7, 16));
    }
  }

  // ---- explanations ----

  std::string request_name(RequestId id) const {
    if (auto it = names_.find(id.value()); it != names_.end()) return it->second;
    if (const pmu::Event* e = sys_->core().find(id.value())) return event_name(*e);
    return "#" + std::to_string(id.value());
  }

  // The reason for a refusal of `request` with `error`, built from Arbiter::explain.
  std::string reason(const Request& request, const Error& error) {
    const Explanation ex = arbiter().explain(request);
    if (ex.admitted || ex.code != error.code()) return error.message();
    return format(request, ex);
  }

  // For a refused set of per-CPU requests: the first one explain refuses.
  std::string reason_any(const std::vector<Request>& requests, const Error& error) {
    for (const Request& r : requests) {
      const Explanation ex = arbiter().explain(r);
      if (!ex.admitted && ex.code == error.code()) return format(r, ex);
    }
    return error.message();
  }

  std::string format(const Request& request, const Explanation& ex) {
    switch (ex.code) {
      case ErrorCode::kNoSpc:
        return format_nospc(ex);
      case ErrorCode::kBusy:
        return format_busy(ex);
      case ErrorCode::kNoDev:
        if (request.cpu) return "cpu " + std::to_string(request.cpu->value()) + " is offline";
        return ex.reason;
      default:
        return ex.reason;
    }
  }

  // The names of what task `task` holds on `cpu`: its pinned, live events there or on all CPUs.
  std::vector<std::string> task_holders(TaskId task, std::optional<CpuId> cpu) const {
    std::vector<std::string> names;
    pmu::Core& core = sys_->core();
    for (pmu::EventId id : core.events()) {
      const pmu::Event* e = core.find(id);
      if (e == nullptr || e->task() != task || !e->attr().pinned) continue;
      if (e->state() == pmu::EventState::kExit) continue;
      if (cpu && e->cpu() && *e->cpu() != *cpu) continue;
      std::string n = event_name(*e);
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(std::move(n));
    }
    return names;
  }

  std::string format_nospc(const Explanation& ex, bool name_task_holders = false) {
    const arbiter::ArchProfile& profile = arbiter().config().profile;
    std::string s;
    if (ex.cpu) s = "cpu " + std::to_string(ex.cpu->value()) + " ";
    s += std::string(profile.pool_name(profile.pool_of(ex.pool_type))) +
         " pool: " + std::to_string(ex.pool_slots) + " slots";
    std::vector<std::string> held;
    if (ex.cpu_pinned > 0) {
      std::string part = "cpu-bound " + std::to_string(ex.cpu_pinned);
      std::vector<std::string> names;
      for (RequestId id : ex.cpu_holders) {
        std::string n = request_name(id);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
      if (!names.empty()) {
        part += " (";
        for (std::size_t i = 0; i < names.size(); ++i) part += (i ? ", " : "") + names[i];
        part += ")";
      }
      held.push_back(part);
    }
    if (ex.heaviest_task && ex.heaviest_task_use > 0) {
      std::string part =
          "task " + task_name(*ex.heaviest_task) + " " + std::to_string(ex.heaviest_task_use);
      if (name_task_holders) {
        std::vector<std::string> names = task_holders(*ex.heaviest_task, ex.cpu);
        if (!names.empty()) {
          part += " (";
          for (std::size_t i = 0; i < names.size(); ++i) part += (i ? ", " : "") + names[i];
          part += ")";
        }
      }
      held.push_back(std::move(part));
    }
    if (ex.flexible_reserve > 0) {
      held.push_back("flexible reserve " + std::to_string(ex.flexible_reserve));
    }
    if (!held.empty()) {
      s += "; held: ";
      for (std::size_t i = 0; i < held.size(); ++i) s += (i ? ", " : "") + held[i];
    }
    return s + "; needs " + std::to_string(ex.weight);
  }

  std::string format_busy(const Explanation& ex) const {
    if (!ex.busy_kind) return ex.reason;
    const std::string kind = *ex.busy_kind == ResourceKind::kBts   ? "bts"
                             : *ex.busy_kind == ResourceKind::kPt  ? "pt"
                             : *ex.busy_kind == ResourceKind::kLbr ? "lbr"
                                                                   : "breakpoint";
    std::vector<std::string> holders;
    for (const std::string& name : scenario_.request_names) {
      auto it = held_.find(name);
      if (it != held_.end() && it->second.live() && it->second.request.kind == *ex.busy_kind) {
        holders.push_back(name);
      }
    }
    if (*ex.busy_kind == ResourceKind::kBts) {
      // Tracing contexts in the order they were opened, then ptrace BTS buffers in task order.
      std::map<bts::ContextId, std::string> contexts;
      for (const auto& [name, id] : contexts_) contexts[id] = name;
      for (const auto& [id, name] : contexts) holders.push_back(name);
      std::map<TaskId, std::string> traced;
      for (const auto& [name, tracee] : tracees_) traced[tracee.task()] = name;
      for (const auto& [task, name] : traced) {
        if (sys_->ptrace_bts().context(task)) holders.push_back("ptrace:" + name + ":bts");
      }
    }
    std::string s = kind + " in use";
    if (!holders.empty()) {
      s += " by ";
      for (std::size_t i = 0; i < holders.size(); ++i) s += (i ? ", " : "") + holders[i];
    }
    return s;
  }

  static constexpr std::uint64_t kExclusiveIds = std::uint64_t{1} << 62;
  // The AUX area of a `bts NAME` perf event: 4096 records of 24 bytes (96 KiB), the order of a
  // perf AUX mmap of a few dozen pages; never read by a scenario.
  static constexpr std::size_t kBtsEventAuxBytes = 4096 * bts::kTraceRecordSize;

  const Scenario& scenario_;
  RunOptions options_;
  std::unique_ptr<sim::System> sys_;
  std::map<std::string, TaskId> tasks_;
  std::map<TaskId, std::string> task_names_;    // the reverse of tasks_, for hit lines
  std::map<std::uint64_t, std::string> names_;  // event id (or exclusive request id) -> name
  std::map<breakpoints::WatchId, std::string> watch_names_;
  std::map<std::string, Held> held_;                // declared after sys_: destroyed before it
  std::map<std::string, sim::SimTracee> tracees_;   // by task name; likewise (they detach)
  std::map<std::string, bts::ContextId> contexts_;  // `bts open` contexts by name
  bool run_error_ = false;  // the error being returned is a run-time scenario error
  std::vector<std::string> out_;
};

}  // namespace

Result<Scenario> parse_scenario(std::string_view text, std::string_view file) {
  return Parser(file).parse(text);
}

Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options) {
  return Runner(scenario, options).run();
}

bool is_internal_error(const Error& error) {
  return error.message().starts_with(std::string(Runner::kInternal) + ": ");
}

}  // namespace hwarb::scenario

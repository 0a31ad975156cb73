#include "hwarb/scenario/scenario.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <utility>

namespace hwarb::scenario {

using arbiter::Arbiter;
using arbiter::ArbiterConfig;
using arbiter::Explanation;
using arbiter::FlexiblePolicy;
using arbiter::Request;
using arbiter::Reservation;
using arbiter::ResourceKind;
using arbiter::SlotType;

std::string_view to_string(Arch arch) {
  switch (arch) {
    case Arch::kX86_64:
      return "x86_64";
    case Arch::kI386:
      return "i386";
    case Arch::kArm64:
      return "arm64";
  }
  return "?";
}

std::string_view to_string(AccessType type) {
  switch (type) {
    case AccessType::kR:
      return "r";
    case AccessType::kW:
      return "w";
    case AccessType::kRw:
      return "rw";
    case AccessType::kX:
      return "x";
  }
  return "?";
}

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
  }
  return "?";
}

SlotType slot_type(AccessType type) {
  return type == AccessType::kX ? SlotType::kInst : SlotType::kData;
}

std::uint64_t default_len(Arch arch, AccessType type) {
  if (type == AccessType::kX) return arch == Arch::kX86_64 ? 8 : 4;
  return 4;
}

// ---------------------------------------------------------------------------------------------
// Breakpoint field validation (moves to breakpoints/ later).

Result<void> validate_breakpoint(Arch arch, const BreakpointFields& bp) {
  const bool x86 = arch != Arch::kArm64;
  const std::string len = std::to_string(bp.len);
  if (bp.type == AccessType::kX) {
    const std::uint64_t want = default_len(arch, AccessType::kX);
    if (bp.len != want) {
      return make_error(ErrorCode::kInval, "len " + len + ": an execute breakpoint on " +
                                               std::string(to_string(arch)) + " needs len " +
                                               std::to_string(want));
    }
    // x86 execute breakpoints match one instruction start at any byte address.
    if (!x86 && bp.addr % want != 0) {
      return make_error(ErrorCode::kInval,
                        "addr: an execute breakpoint on arm64 needs a 4-byte aligned address");
    }
    return {};
  }
  if (x86 && bp.type == AccessType::kR) {
    return make_error(ErrorCode::kInval, "type r: x86 has no read-only watchpoint (use rw)");
  }
  const std::uint64_t max_len = arch == Arch::kI386 ? 4 : 8;
  if ((bp.len != 1 && bp.len != 2 && bp.len != 4 && bp.len != 8) || bp.len > max_len) {
    return make_error(ErrorCode::kInval, "len " + len + ": a data breakpoint on " +
                                             std::string(to_string(arch)) + " needs len 1, 2, 4" +
                                             (max_len == 8 ? " or 8" : ""));
  }
  if (bp.addr % bp.len != 0) {
    return make_error(ErrorCode::kInval, "addr: not aligned to len " + len);
  }
  return {};
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
      {"pt", {{"task", "cpu"}, {}}},
      {"lbr", {{"task", "cpu"}, {}}},
  };
  return kGrammar.at(command);
}

const std::map<std::string_view, CommandKind>& command_kinds() {
  static const std::map<std::string_view, CommandKind> kKinds = {
      {"task", CommandKind::kTask},     {"bp", CommandKind::kBp},   {"wide", CommandKind::kWide},
      {"modify", CommandKind::kModify}, {"del", CommandKind::kDel}, {"cpu", CommandKind::kCpu},
      {"bts", CommandKind::kBts},       {"pt", CommandKind::kPt},   {"lbr", CommandKind::kLbr},
  };
  return kKinds;
}

bool creates_request(CommandKind k) {
  return k == CommandKind::kBp || k == CommandKind::kWide || k == CommandKind::kBts ||
         k == CommandKind::kPt || k == CommandKind::kLbr;
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
                  "' (expected machine, task, bp, wide, modify, del, cpu, bts, pt or lbr)");
    }
    seen_other_ = true;
    const CommandKind kind = command_kinds().at(command);
    if (kind == CommandKind::kCpu) return parse_cpu(words);

    Command cmd;
    cmd.kind = kind;
    cmd.line = line_;
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
        cmd->task = v;
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
      } else if (key == "addr") {
        std::string_view digits = value;
        if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
        std::uint64_t n = 0;
        if (!parse_number(digits, 16, &n)) {
          return fail(c + ": bad addr '" + v + "' (expected a 64-bit hex number)");
        }
        cmd->addr = n;
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
    return {};
  }

  // Name checks: definitions, references, and per-kind rules.
  Result<void> check_names(std::string_view command, Command* cmd) {
    const std::string c(command);
    if (cmd->task) {
      auto it = names_.find(*cmd->task);
      if (it == names_.end() || !it->second.is_task) {
        return fail(c + ": unknown task '" + *cmd->task + "'");
      }
    }
    if (cmd->kind == CommandKind::kTask) {
      if (names_.contains(cmd->name)) return fail("task: name '" + cmd->name + "' already in use");
      if (cmd->parent) {
        auto it = names_.find(*cmd->parent);
        if (it == names_.end() || !it->second.is_task) {
          return fail("task: unknown parent task '" + *cmd->parent + "'");
        }
      }
      names_[cmd->name] = NameInfo{.is_task = true};
      scenario_.task_names.push_back(cmd->name);
      return {};
    }
    if (creates_request(cmd->kind)) {
      if (names_.contains(cmd->name)) return fail(c + ": name '" + cmd->name + "' already in use");
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
        if (value == "x86_64") {
          m.arch = Arch::kX86_64;
        } else if (value == "i386") {
          m.arch = Arch::kI386;
        } else if (value == "arm64") {
          m.arch = Arch::kArm64;
        } else {
          return fail("machine: bad arch '" + v + "' (expected x86_64, i386 or arm64)");
        }
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
    scenario_.commands.push_back(std::move(cmd));
    return {};
  }

  Scenario scenario_;
  int line_ = 0;
  bool machine_seen_ = false;
  bool seen_other_ = false;
  std::map<std::string, NameInfo> names_;
  std::map<std::string, RequestId> ids_;
};

// ---------------------------------------------------------------------------------------------
// Runner.

// What a request name holds at run time.
struct Held {
  CommandKind kind = CommandKind::kBp;
  Request request;  // wide: the per-CPU template (cpu unset)
  BreakpointFields fields;
  std::vector<Reservation> parts;  // empty: refused, holds nothing
};

class Runner {
 public:
  Runner(const Scenario& scenario, const RunOptions& options)
      : scenario_(scenario), options_(options) {}

  Result<std::vector<std::string>> run() {
    ArbiterConfig config;
    switch (scenario_.machine.arch) {
      case Arch::kX86_64:
        config.profile = arbiter::ArchProfile::x86_64();
        break;
      case Arch::kI386:
        config.profile = arbiter::ArchProfile::i386();
        break;
      case Arch::kArm64:
        config.profile = arbiter::ArchProfile::arm64();
        break;
    }
    config.cpus = scenario_.machine.cpus;
    config.flexible = scenario_.machine.flexible;
    auto arbiter = Arbiter::create(config);
    if (!arbiter) return std::unexpected(arbiter.error().with_context("machine"));
    arbiter_ = std::move(*arbiter);
    for (const Command& cmd : scenario_.commands) {
      if (auto r = execute(cmd); !r) {
        return std::unexpected(
            r.error().with_context(scenario_.file + ":" + std::to_string(cmd.line)));
      }
    }
    held_.clear();  // release everything before the arbiter goes
    return std::move(out_);
  }

 private:
  Result<void> execute(const Command& cmd) {
    switch (cmd.kind) {
      case CommandKind::kTask:
        return {};  // tasks exist by name; parent= is recorded only
      case CommandKind::kCpu:
        return arbiter_->set_cpu_online(CpuId(cmd.cpu->index), cmd.online);
      case CommandKind::kDel:
        held_.erase(cmd.name);  // releases whatever it holds
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
      case CommandKind::kPt:
      case CommandKind::kLbr:
        exclusive(cmd);
        return {};
    }
    return {};
  }

  std::optional<TaskId> task_id(const std::optional<std::string>& name) const {
    if (!name) return std::nullopt;
    const auto& names = scenario_.task_names;
    auto it = std::find(names.begin(), names.end(), *name);
    return TaskId(static_cast<std::int64_t>(it - names.begin()) + 1);
  }

  BreakpointFields new_fields(const Command& cmd) const {
    BreakpointFields f;
    f.type = cmd.type.value_or(AccessType::kRw);
    f.len = cmd.len.value_or(default_len(scenario_.machine.arch, f.type));
    f.addr = cmd.addr.value_or(0x1000 * cmd.id.value());
    f.disabled = cmd.disabled.value_or(false);
    f.inherit = cmd.inherit;
    return f;
  }

  void ok(const std::string& name) { out_.push_back(name + " ok"); }

  void refuse(const std::string& name, ErrorCode code, const std::string& reason) {
    std::string line = name + " " + errno_name(code);
    if (options_.explain) line += " — " + reason;
    out_.push_back(std::move(line));
  }

  void bp(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    h.fields = new_fields(cmd);
    h.request.kind = ResourceKind::kBreakpoint;
    h.request.type = slot_type(h.fields.type);
    h.request.task = task_id(cmd.task);
    if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
    h.request.weight = cmd.weight.value_or(1);
    h.request.pinned = cmd.pinned.value_or(true);
    h.request.id = cmd.id;
    // The slot check comes first (a bad request on a full CPU gets ENOSPC), then the fields.
    auto r = arbiter_->reserve(h.request);
    if (!r) {
      refuse(cmd.name, r.error().code(), reason(h.request, r.error()));
    } else if (auto v = validate_breakpoint(scenario_.machine.arch, h.fields); !v) {
      r->release();
      refuse(cmd.name, v.error().code(), v.error().message());
    } else {
      h.parts.push_back(std::move(*r));
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  void wide(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    h.fields = new_fields(cmd);
    h.request.kind = ResourceKind::kBreakpoint;
    h.request.type = slot_type(h.fields.type);
    h.request.weight = cmd.weight.value_or(1);
    h.request.pinned = cmd.pinned.value_or(true);
    h.request.id = cmd.id;
    std::vector<Request> requests;
    for (CpuId cpu : arbiter_->online_cpus()) {
      Request r = h.request;
      r.cpu = cpu;
      requests.push_back(r);
    }
    auto r = arbiter_->reserve_all(requests);
    if (!r) {
      refuse(cmd.name, r.error().code(), reason_any(requests, r.error()));
    } else if (auto v = validate_breakpoint(scenario_.machine.arch, h.fields); !v) {
      for (Reservation& part : *r) part.release();
      refuse(cmd.name, v.error().code(), v.error().message());
    } else {
      h.parts = std::move(*r);
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  Result<void> modify(const Command& cmd) {
    Held& h = held_.at(cmd.name);
    if (h.parts.empty()) {
      refuse(cmd.name, ErrorCode::kNoEnt, cmd.name + " holds no reservation");
      return {};
    }
    BreakpointFields f = h.fields;
    if (cmd.type) f.type = *cmd.type;
    if (cmd.len) f.len = *cmd.len;
    if (cmd.addr) f.addr = *cmd.addr;
    if (cmd.disabled) f.disabled = *cmd.disabled;
    // As Linux's modify_user_hw_breakpoint: the fields are checked before the slots.
    if (auto v = validate_breakpoint(scenario_.machine.arch, f); !v) {
      refuse(cmd.name, v.error().code(), v.error().message());
      return {};
    }
    Request next = h.request;
    next.type = slot_type(f.type);
    if (cmd.weight) next.weight = *cmd.weight;
    if (cmd.pinned) next.pinned = *cmd.pinned;
    if (cmd.cpu) next.cpu = cmd.cpu->any ? std::nullopt : std::optional(CpuId(cmd.cpu->index));
    if (next != h.request) {
      std::vector<Request> old;
      for (std::size_t i = 0; i < h.parts.size(); ++i) {
        old.push_back(h.parts[i].request());
        Request part_next = next;
        if (h.kind == CommandKind::kWide) part_next.cpu = old[i].cpu;
        if (auto r = arbiter_->modify(h.parts[i], part_next); !r) {
          // All or nothing: put back the parts already changed.
          for (std::size_t j = 0; j < i; ++j) {
            if (auto back = arbiter_->modify(h.parts[j], old[j]); !back) {
              return std::unexpected(back.error().with_context("modify rollback"));
            }
          }
          refuse(cmd.name, r.error().code(), reason(part_next, r.error()));
          return {};
        }
      }
    }
    h.request = next;
    h.fields = f;
    ok(cmd.name);
    return {};
  }

  void exclusive(const Command& cmd) {
    Held h;
    h.kind = cmd.kind;
    h.request.kind = cmd.kind == CommandKind::kBts  ? ResourceKind::kBts
                     : cmd.kind == CommandKind::kPt ? ResourceKind::kPt
                                                    : ResourceKind::kLbr;
    h.request.task = task_id(cmd.task);
    if (!cmd.cpu->any) h.request.cpu = CpuId(cmd.cpu->index);
    h.request.id = cmd.id;
    auto r = arbiter_->reserve(h.request);
    if (!r) {
      refuse(cmd.name, r.error().code(), reason(h.request, r.error()));
    } else {
      h.parts.push_back(std::move(*r));
      ok(cmd.name);
    }
    held_[cmd.name] = std::move(h);
  }

  // ---- explanations ----

  std::string request_name(RequestId id) const {
    const auto& names = scenario_.request_names;
    if (id.value() >= 1 && id.value() <= names.size()) return names[id.value() - 1];
    return "#" + std::to_string(id.value());
  }

  std::string task_name(TaskId id) const {
    const auto& names = scenario_.task_names;
    if (id.value() >= 1 && static_cast<std::size_t>(id.value()) <= names.size()) {
      return names[id.value() - 1];
    }
    return "#" + std::to_string(id.value());
  }

  // The reason for a refusal of `request` with `error`, built from Arbiter::explain.
  std::string reason(const Request& request, const Error& error) const {
    const Explanation ex = arbiter_->explain(request);
    if (ex.admitted || ex.code != error.code()) return error.message();
    return format(request, ex);
  }

  // For a refused reserve_all of per-CPU requests: the first one explain refuses.
  std::string reason_any(const std::vector<Request>& requests, const Error& error) const {
    for (const Request& r : requests) {
      const Explanation ex = arbiter_->explain(r);
      if (!ex.admitted && ex.code == error.code()) return format(r, ex);
    }
    return error.message();
  }

  std::string format(const Request& request, const Explanation& ex) const {
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

  std::string format_nospc(const Explanation& ex) const {
    const arbiter::ArchProfile& profile = arbiter_->config().profile;
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
      held.push_back("task " + task_name(*ex.heaviest_task) + " " +
                     std::to_string(ex.heaviest_task_use));
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
      if (it != held_.end() && !it->second.parts.empty() &&
          it->second.request.kind == *ex.busy_kind) {
        holders.push_back(name);
      }
    }
    std::string s = kind + " in use";
    if (!holders.empty()) {
      s += " by ";
      for (std::size_t i = 0; i < holders.size(); ++i) s += (i ? ", " : "") + holders[i];
    }
    return s;
  }

  const Scenario& scenario_;
  RunOptions options_;
  std::unique_ptr<Arbiter> arbiter_;
  std::map<std::string, Held> held_;  // declared after arbiter_: destroyed before it
  std::vector<std::string> out_;
};

}  // namespace

Result<Scenario> parse_scenario(std::string_view text, std::string_view file) {
  return Parser(file).parse(text);
}

Result<std::vector<std::string>> run_scenario(const Scenario& scenario, const RunOptions& options) {
  return Runner(scenario, options).run();
}

}  // namespace hwarb::scenario

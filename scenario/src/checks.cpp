// The scenario checker: names, the scheduling state a file implies, and the limits.
#include <algorithm>
#include <array>

#include "bts.h"
#include "hwarb/base/format.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/bts/byte_buffer.h"
#include "hwarb/ptrace_compat/bts_ptrace.h"
#include "parser.h"

namespace hwarb::scenario::internal {

Result<void> Parser::check_names(std::string_view command, Command* cmd) {
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
  const Creates creates = command_spec(cmd->kind).creates;
  if (creates == Creates::kTask) {
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
  if (creates == Creates::kRequest) {
    if (names_.contains(cmd->name)) return fail(c + ": name '" + cmd->name + "' already in use");
    if (cmd->kind == CommandKind::kWatch) {
      if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
      if (!cmd->addr) return fail("watch: addr=HEX is required");
      if (cmd->len && *cmd->len == 0) return fail("watch: len must be at least 1");
      if (cmd->len && *cmd->len > scenario_.limits.watch_len) {
        return fail("watch: len " + std::to_string(*cmd->len) + " is over the limit of " +
                    std::to_string(scenario_.limits.watch_len) + " bytes");
      }
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

std::string Parser::no_hardware(const std::string& command) {
  return command +
         ": arch arm64 models slot accounting only (the simulated machine has x86 debug "
         "registers); use arch=x86_64 or i386";
}

Result<void> Parser::check_task(const std::string& command, const std::string& task) {
  auto it = names_.find(task);
  if (it == names_.end() || !it->second.is_task) {
    return fail(command + ": unknown task '" + task + "'");
  }
  if (exited_.contains(task)) return fail(command + ": task '" + task + "' has exited");
  return {};
}

void Parser::sched_init() {
  if (running_.empty()) {
    running_.resize(static_cast<std::size_t>(scenario_.machine.cpus));
    online_.assign(static_cast<std::size_t>(scenario_.machine.cpus), true);
    online_count_ = scenario_.machine.cpus;
  }
}

// The scheduling state a command needs, tracked statically (the machine is deterministic).
Result<void> Parser::check_online(const std::string& command, int cpu) {
  sched_init();
  if (!online_[static_cast<std::size_t>(cpu)]) {
    return fail(command + ": cpu " + std::to_string(cpu) + " is offline");
  }
  return {};
}

Result<void> Parser::check_running(const std::string& command, const std::string& task, int cpu) {
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

Result<void> Parser::set_online(const std::string& command, int cpu, bool online) {
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

Result<void> Parser::check_work(std::string_view command, const Keys& keys, const Flags& flags,
                                Command* cmd) {
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
        for (const Param& p : command_spec(cmd->kind).params) {
          if (!p.required || !p.key.empty()) continue;
          const auto given =
              std::ranges::count_if(p.flags, [&](auto f) { return flags.contains(f); });
          if (given != 1) return fail(c + ": exactly one of " + one_of(p.flags) + " is required");
        }
        if (auto r = require("len"); !r) return r;
        const std::uint64_t len = *cmd->len;
        if (len != 1 && len != 2 && len != 4 && len != 8) {
          return fail("access: bad len " + std::to_string(len) + " (expected 1, 2, 4 or 8)");
        }
        if (cmd->value && !cmd->write) return fail("access: value= needs w");
        if (len < 8 && cmd->value && (*cmd->value >> (len * 8)) != 0) {
          return fail("access: value does not fit in len " + std::to_string(len) + " bytes");
        }
        if (*cmd->addr + (len - 1) < *cmd->addr) {
          return fail("access: addr " + hex(*cmd->addr) + " + len " + std::to_string(len) +
                      " wraps past 2^64");
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
    case CommandKind::kSysctl:
      return require("perf_event_paranoid");
    default:
      return {};
  }
}

RequestId Parser::id_of(const std::string& name) {
  auto [it, inserted] = ids_.emplace(name, RequestId(scenario_.request_names.size() + 1));
  if (inserted) scenario_.request_names.push_back(name);
  return it->second;
}

Result<void> Parser::charge(std::string_view command, std::uint64_t* used, std::uint64_t add,
                            std::uint64_t limit, std::string_view what) {
  if (add > limit || *used > limit - add) {
    return fail(std::string(command) + ": over the limit of " + std::to_string(limit) + " " +
                std::string(what) + " in a scenario (this line needs " + std::to_string(add) +
                ", the lines before it used " + std::to_string(*used) + ")");
  }
  *used += add;
  return {};
}

Result<void> Parser::account(std::string_view command, const Command& cmd) {
  const Limits& limits = scenario_.limits;
  const std::uint64_t cpus = static_cast<std::uint64_t>(scenario_.machine.cpus);
  const bool any = cmd.cpu && cmd.cpu->any;
  const bool flexible = cmd.pinned == false;
  std::uint64_t events = 0;
  std::uint64_t steps = 0;
  std::uint64_t flex = 0;
  std::uint64_t buffer = 0;
  std::optional<Inheritance> child;  // task/fork: what the new task inherits
  switch (cmd.kind) {
    case CommandKind::kBp:
      events = 1;
      steps = any ? cpus : 0;
      flex = flexible ? 1 : 0;
      break;
    case CommandKind::kWide:
      events = cpus;
      steps = cpus;
      flex = flexible ? cpus : 0;
      break;
    case CommandKind::kModify: {
      // The name was a bp or a wide (check_names); a wide's parts are one per CPU.
      auto it = names_.find(cmd.name);
      const bool wide = it != names_.end() && it->second.kind == CommandKind::kWide;
      steps = wide || any ? cpus : 0;
      flex = flexible ? (wide ? cpus : 1) : 0;
      break;
    }
    case CommandKind::kBts:
    case CommandKind::kPt:
    case CommandKind::kLbr:
      events = 1;
      steps = any ? cpus : 0;
      buffer = cmd.kind == CommandKind::kBts ? kBtsEventAuxBytes : 0;
      break;
    case CommandKind::kWatch: {
      const AccessType type = cmd.type.value_or(AccessType::kW);
      const std::uint64_t len = cmd.len.value_or(type == AccessType::kX ? 1 : 4);
      const std::uint64_t pieces =
          type == AccessType::kX
              ? 1
              : breakpoints::count_pieces(*cmd.addr, len,
                                          scenario_.machine.arch == Arch::kI386 ? 4 : 8);
      events = cmd.task ? pieces : pieces * cpus;
      steps = cmd.task ? 0 : pieces * cpus;
      break;
    }
    case CommandKind::kTask:
    case CommandKind::kFork:
      child = cmd.parent ? inheritance_[*cmd.parent] : Inheritance{};
      events = child->all;
      steps = child->any_cpu * cpus;
      flex = child->flexible;
      break;
    case CommandKind::kShow:
      steps = cpus;
      break;
    case CommandKind::kTick:
      steps = cmd.cpu ? 0 : cpus;
      break;
    case CommandKind::kBtsOpen:
      buffer = cmd.size && *cmd.size <= bts::kMaxBufferBytes ? *cmd.size : 0;
      steps = cmd.global ? cpus : 0;
      break;
    case CommandKind::kPtrace:
      if (cmd.ptrace_op == PtraceOp::kPoke) events = 1;
      if (cmd.ptrace_op == PtraceOp::kBtsConfig) {
        buffer = std::min<std::uint64_t>(*cmd.size, ptrace_compat::PtraceBtsOptions{}.max_bytes);
      }
      break;
    case CommandKind::kKsymTrace:
      events = cpus;
      steps = cpus;
      break;
    case CommandKind::kRun:
      if (auto r = charge(command, &branches_, cmd.branches, limits.branches, "branches"); !r) {
        return r;
      }
      break;
    default:
      break;
  }
  if (auto r = charge(command, &events_, events, limits.events, "breakpoint events"); !r) return r;
  if (auto r = charge(command, &cpu_steps_, steps, limits.cpu_steps, "CPU steps"); !r) return r;
  if (auto r = charge(command, &flexible_, flex, limits.flexible, "flexible breakpoints"); !r) {
    return r;
  }
  if (auto r = charge(command, &buffer_bytes_, buffer, limits.buffer_bytes, "bytes of BTS buffers");
      !r) {
    return r;
  }
  if (child) inheritance_[cmd.name] = *child;
  if (cmd.kind == CommandKind::kBp && cmd.task && cmd.inherit) {
    Inheritance& inh = inheritance_[*cmd.task];
    ++inh.all;
    inh.any_cpu += any ? 1 : 0;
    inh.flexible += flexible ? 1 : 0;
  }
  return {};
}

}  // namespace hwarb::scenario::internal

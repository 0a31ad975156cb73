// `guest enter|access|exit`: a KVM guest with its own debug registers on a CPU of the simulated
// system (hwarb/sim/guest.h), parsed and run.
#include <string>

#include "hwarb/base/format.h"
#include "parser.h"
#include "runner.h"

namespace hwarb::scenario::internal {

bool Parser::is_guest(CommandKind kind) {
  return kind == CommandKind::kGuestEnter || kind == CommandKind::kGuestAccess ||
         kind == CommandKind::kGuestExit;
}

Result<void> Parser::parse_guest(const CommandSpec& spec, std::span<const std::string_view> words) {
  const std::string c(spec.name);
  Command cmd;
  cmd.kind = spec.kind;
  cmd.line = line_;
  Keys keys;
  Flags flags;
  if (auto r = split_args(spec, c, words.subspan(2), &keys, &flags); !r) return r;
  if (auto r = apply_args(spec, c, keys, flags, &cmd); !r) return r;
  if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
  if (!cmd.cpu) return fail(c + ": cpu= is required");
  if (cmd.cpu->any) return fail(c + ": expected a CPU number, not any");
  switch (cmd.kind) {
    case CommandKind::kGuestEnter:
      // apply_args checked every value is hex.
      for (const auto& [key, value] : keys) {
        if (!key.starts_with("dr")) continue;
        std::uint64_t v = 0;
        (void)parse_hex(value, &v);
        if (key == "dr7") {
          cmd.guest_dr7 = v;
        } else {
          cmd.guest_dr.at(static_cast<std::size_t>(key[2] - '0')) = v;
        }
      }
      break;
    case CommandKind::kGuestAccess: {
      const int given = static_cast<int>(flags.contains("r")) +
                        static_cast<int>(flags.contains("w")) +
                        static_cast<int>(flags.contains("x"));
      if (given != 1) return fail(c + ": exactly one of r, w or x is required");
      cmd.guest_exec = flags.contains("x");
      if (!cmd.addr) return fail(c + ": addr= is required");
      if (cmd.guest_exec && cmd.len) return fail(c + ": len= does not apply to x");
      const std::uint64_t len = cmd.len.value_or(cmd.guest_exec ? 0 : 1);
      if (!cmd.guest_exec) {
        if (len != 1 && len != 2 && len != 4 && len != 8) {
          return fail(c + ": bad len " + std::to_string(len) + " (expected 1, 2, 4 or 8)");
        }
        if (*cmd.addr + (len - 1) < *cmd.addr) {
          return fail(c + ": addr " + hex(*cmd.addr) + " + len " + std::to_string(len) +
                      " wraps past 2^64");
        }
      }
      cmd.len = len;
      break;
    }
    case CommandKind::kGuestExit:
      if (auto it = keys.find("restore"); it != keys.end()) {
        cmd.guest_tif_debug = it->second == "tif_debug";
      }
      break;
    default:
      break;
  }
  scenario_.commands.push_back(std::move(cmd));
  return {};
}

Result<void> Runner::guest_conflict(const Command& cmd) {
  std::optional<int> cpu;
  switch (cmd.kind) {
    case CommandKind::kSwitch:
    case CommandKind::kAccess:
    case CommandKind::kExec:
    case CommandKind::kBranch:
    case CommandKind::kRun:
      cpu = cmd.cpu->index;
      break;
    case CommandKind::kExit: {
      auto it = tasks_.find(cmd.name);
      if (it == tasks_.end()) return {};
      auto on = machine().running_on(it->second);
      if (on && *on) cpu = (*on)->value();
      break;
    }
    default:
      return {};
  }
  if (!cpu) return {};
  auto in = machine().in_guest(CpuId(*cpu));
  if (!in || !*in) return {};
  const std::string n = std::to_string(*cpu);
  return run_error(ErrorCode::kBusy, std::string(to_string(cmd.kind)) + ": cpu " + n +
                                         " is running a guest (`guest exit cpu=" + n + "` first)");
}

Result<void> Runner::guest(const Command& cmd) {
  const CpuId cpu(cmd.cpu->index);
  const std::string n = std::to_string(cmd.cpu->index);
  const std::string name = std::string(to_string(cmd.kind)) + " cpu=" + n;
  auto refused = [&](const Error& e) {
    refuse(name, e.code(), [&] { return e.message(); });
    return Result<void>{};
  };
  switch (cmd.kind) {
    case CommandKind::kGuestEnter: {
      sim::DebugRegisters regs;
      for (std::size_t i = 0; i < cmd.guest_dr.size(); ++i) regs.dr[i] = cmd.guest_dr[i];
      regs.dr7 = cmd.guest_dr7;
      if (auto r = sys_->guest_enter(cpu, regs); !r) return refused(r.error());
      ok(name);
      return {};
    }
    case CommandKind::kGuestAccess: {
      const sim::AccessKind kind = cmd.guest_exec ? sim::AccessKind::kExec
                                   : cmd.write    ? sim::AccessKind::kWrite
                                                  : sim::AccessKind::kRead;
      auto r = machine().guest_access(cpu, kind, *cmd.addr, static_cast<int>(*cmd.len));
      if (!r) return refused(r.error());
      if (*r != 0) {
        const char* access = cmd.guest_exec ? "x" : cmd.write ? "w" : "r";
        emit("guest hit cpu=" + n + " addr=" + hex(*cmd.addr) + " access=" + access +
             " dr6=" + hex(*r));
      }
      return {};
    }
    case CommandKind::kGuestExit: {
      const sim::GuestRestore restore =
          cmd.guest_tif_debug ? sim::GuestRestore::kTifDebugOnly : sim::GuestRestore::kAll;
      if (auto r = sys_->guest_exit(cpu, restore); !r) return refused(r.error());
      ok(name);
      return {};
    }
    default:
      return {};
  }
}

}  // namespace hwarb::scenario::internal

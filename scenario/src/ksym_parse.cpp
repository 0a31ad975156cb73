// The scenario parser's ksym commands: the kernel symbol table (ksym, kallsyms), the ksym tracer
// (ksym_trace, ksym_trace_del, ksym_stats) and kernel-mode accesses (kaccess).
#include <algorithm>

#include "hwarb/base/format.h"
#include "parser.h"

namespace hwarb::scenario::internal {

namespace {

// SYMBOL: no '+', '=' or '#' (the line's comment was cut already).
bool valid_symbol(std::string_view s) {
  return !s.empty() && s.find_first_of("+=") == std::string_view::npos;
}

// SYMBOL[+OFF], OFF decimal or 0x hex.
bool valid_symbol_off(std::string_view s) {
  const std::size_t plus = s.find('+');
  if (!valid_symbol(s.substr(0, plus))) return false;
  if (plus == std::string_view::npos) return true;
  std::string_view off = s.substr(plus + 1);
  std::uint64_t n = 0;
  if (off.starts_with("0x") || off.starts_with("0X")) {
    off.remove_prefix(2);
    return parse_number(off, 16, &n);
  }
  return parse_number(off, 10, &n);
}

// The one flag of a required group that was given, or "" (none or several).
std::string_view one_flag(const CommandSpec& spec, const Flags& flags) {
  for (const Param& p : spec.params) {
    if (!p.required || !p.key.empty()) continue;
    std::string_view given;
    for (std::string_view f : p.flags) {
      if (!flags.contains(f)) continue;
      if (!given.empty()) return "";
      given = f;
    }
    return given;
  }
  return "";
}

}  // namespace

bool Parser::is_ksym(CommandKind kind) {
  switch (kind) {
    case CommandKind::kKsym:
    case CommandKind::kKallsyms:
    case CommandKind::kKsymTrace:
    case CommandKind::kKsymTraceDel:
    case CommandKind::kKsymStats:
    case CommandKind::kKaccess:
      return true;
    default:
      return false;
  }
}

Result<void> Parser::parse_ksym(const CommandSpec& spec, std::span<const std::string_view> words) {
  const std::string c(spec.name);
  Command cmd;
  cmd.kind = spec.kind;
  cmd.line = line_;
  std::size_t first = 1;
  if (spec.operand != Operand::kNone) {
    const char* what = spec.operand == Operand::kFile     ? "FILE"
                       : spec.operand == Operand::kSymbol ? "SYMBOL"
                                                          : "SYMBOL[+OFF]";
    if (words.size() < 2 || words[1].find('=') != std::string_view::npos) {
      return fail(c + ": missing " + what);
    }
    cmd.name = std::string(words[1]);
    first = 2;
  }
  Keys keys;
  Flags flags;
  if (auto r = split_args(spec, c, words.subspan(first), &keys, &flags); !r) return r;
  if (auto r = apply_args(spec, c, keys, flags, &cmd); !r) return r;
  if (auto ip = keys.find("ip"); ip != keys.end()) {
    std::uint64_t n = 0;
    (void)parse_hex(ip->second, &n);  // checked by apply_args
    cmd.ip = n;
  }
  auto require = [&](std::string_view key) -> Result<void> {
    if (!keys.contains(key)) return fail(c + ": " + std::string(key) + "= is required");
    return {};
  };
  const std::uint64_t kernel_start = breakpoints::task_size_max(scenario_.machine.arch);
  switch (spec.kind) {
    case CommandKind::kKsym:
      if (!valid_symbol(cmd.name)) {
        return fail(c + ": bad symbol '" + cmd.name + "' (no '+' or '=')");
      }
      if (auto r = require("addr"); !r) return r;
      break;
    case CommandKind::kKsymTrace:
    case CommandKind::kKsymTraceDel:
      if (!valid_symbol_off(cmd.name)) {
        return fail(c + ": bad symbol '" + cmd.name +
                    "' (expected SYMBOL[+OFF], OFF decimal or 0x hex)");
      }
      if (spec.kind == CommandKind::kKsymTrace) {
        const std::string_view type = one_flag(spec, flags);
        if (type.empty()) return fail(c + ": exactly one of r, w, rw or x is required");
        cmd.type = type == "r"    ? AccessType::kR
                   : type == "w"  ? AccessType::kW
                   : type == "rw" ? AccessType::kRw
                                  : AccessType::kX;
      }
      break;
    case CommandKind::kKaccess: {
      if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
      for (std::string_view k : {"cpu", "addr", "len"}) {
        if (auto r = require(k); !r) return r;
      }
      if (cmd.cpu->any) return fail(c + ": expected a CPU number, not any");
      if (one_flag(spec, flags).empty()) return fail(c + ": exactly one of r or w is required");
      const std::uint64_t len = *cmd.len;
      if (len != 1 && len != 2 && len != 4 && len != 8) {
        return fail(c + ": bad len " + std::to_string(len) + " (expected 1, 2, 4 or 8)");
      }
      if (cmd.value && !cmd.write) return fail(c + ": value= needs w");
      if (len < 8 && cmd.value && (*cmd.value >> (len * 8)) != 0) {
        return fail(c + ": value does not fit in len " + std::to_string(len) + " bytes");
      }
      if (*cmd.addr < kernel_start) {
        return fail(c + ": addr " + hex(*cmd.addr) +
                    " is a user-space address (kernel accesses are at or above " +
                    hex(kernel_start) + ")");
      }
      if (*cmd.addr + (len - 1) < *cmd.addr) {
        return fail(c + ": addr " + hex(*cmd.addr) + " + len " + std::to_string(len) +
                    " wraps past 2^64");
      }
      if (auto r = check_online(c, cmd.cpu->index); !r) return r;
      break;
    }
    default:
      break;
  }
  if (auto r = account(c, cmd); !r) return r;
  scenario_.commands.push_back(std::move(cmd));
  return {};
}

}  // namespace hwarb::scenario::internal

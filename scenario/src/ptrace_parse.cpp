// The scenario commands with a shape of their own: `ptrace T OP [ARGS]` and the BTS tracing
// contexts `bts open|close|drain|status NAME ...`.
#include <algorithm>

#include "bts.h"
#include "parser.h"

namespace hwarb::scenario::internal {

namespace {

// "layout=x86_64|i386", "size=BYTES and flags=LIST": the keys an operation accepts.
std::string keys_text(std::span<const Param> params) {
  std::string s;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i > 0) s += i + 1 == params.size() ? " and " : ", ";
    s += std::string(params[i].key) + "=" + std::string(params[i].value);
  }
  return s;
}

}  // namespace

// bts open|close|drain|status NAME ...: a tracing context (NAME shares the name space).
Result<void> Parser::parse_bts_context(const CommandSpec& spec,
                                       std::span<const std::string_view> words) {
  const CommandKind kind = spec.kind;
  const std::string c(spec.name);
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
  Keys keys;
  Flags flags;
  if (auto r = split_args(spec, c, words.subspan(3), &keys, &flags); !r) return r;
  if (auto r = apply_args(spec, c, keys, flags, &cmd); !r) return r;
  if (kind == CommandKind::kBtsOpen) {
    if (names_.contains(cmd.name)) return fail(c + ": name '" + cmd.name + "' already in use");
    if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware(c));
    if (cmd.task && cmd.global) return fail(c + ": task=T and global are exclusive");
    if (!cmd.task && !cmd.global) return fail(c + ": task=T or global needed");
    if (cmd.task) {
      if (auto r = check_task(c, *cmd.task); !r) return r;
    }
    if (!cmd.size) return fail(c + ": size=BYTES is required");
    if (auto r = account(c, cmd); !r) return r;
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
Result<void> Parser::parse_ptrace(std::span<const std::string_view> words) {
  const std::string ops = ptrace_op_words();
  // `ptrace peek dr0` (no task): say so rather than "unknown task 'peek'".
  const bool task_missing =
      words.size() < 2 || words[1].find('=') != std::string_view::npos ||
      (find_ptrace_op(words[1]) != nullptr && !names_.contains(std::string(words[1])));
  if (task_missing) {
    return fail("ptrace: missing task (expected 'ptrace T OP', OP one of " + ops + ")");
  }
  if (scenario_.machine.arch == Arch::kArm64) return fail(no_hardware("ptrace"));
  Command cmd;
  cmd.kind = CommandKind::kPtrace;
  cmd.line = line_;
  cmd.name = std::string(words[1]);
  if (auto r = check_task("ptrace", cmd.name); !r) return r;
  if (words.size() < 3) return fail("ptrace: missing OP (expected " + ops + ")");
  const PtraceOpSpec* op = find_ptrace_op(words[2]);
  if (op == nullptr) {
    return fail("ptrace: unknown OP '" + std::string(words[2]) + "' (expected " + ops + ")");
  }
  cmd.ptrace_op = op->op;
  const std::string c = "ptrace " + std::string(words[2]);
  std::span<const std::string_view> args = words.subspan(3);
  std::size_t takes = 0;  // how many words after OP it accepts
  switch (cmd.ptrace_op) {
    case PtraceOp::kAttach:
      takes = 1;
      if (!args.empty()) {
        const std::string_view a = args[0];
        const Param& layout = op->params.front();
        if (!a.starts_with(std::string(layout.key) + "=")) {
          return fail(c + ": unknown key '" + std::string(a.substr(0, a.find('='))) +
                      "' (expected " + keys_text(op->params) + ")");
        }
        const std::string_view v = a.substr(a.find('=') + 1);
        auto parsed = ptrace_compat::parse_user_layout(v);
        if (!parsed || std::ranges::find(layout.choices, v) == layout.choices.end()) {
          return fail(c + ": bad layout '" + std::string(v) + "' (expected " +
                      one_of(layout.choices) + ")");
        }
        cmd.layout = *parsed;
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
        return fail(c + ": missing " + std::string(op->positional) +
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
      std::uint64_t n = 0;
      if (!parse_hex(value, &n)) {
        return fail(c + ": bad value '" + std::string(value) + "' (expected a 64-bit hex number)");
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
  if (auto r = account("ptrace", cmd); !r) return r;
  scenario_.commands.push_back(std::move(cmd));
  return {};
}

// ptrace T bts-config size=BYTES [flags=LIST], in any order.
Result<void> Parser::parse_bts_config(const std::string& c, std::span<const std::string_view> args,
                                      Command* cmd) {
  const std::span<const Param> params = find_ptrace_op("bts-config")->params;
  Flags seen;
  for (std::string_view a : args) {
    const std::size_t eq = a.find('=');
    const std::string_view key = a.substr(0, eq);
    if (find_key(params, key) == nullptr) {
      return fail(c + ": unknown key '" + std::string(key) + "' (expected " + keys_text(params) +
                  ")");
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
Result<void> Parser::parse_register(const std::string& c, std::string_view reg, Command* cmd) {
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

}  // namespace hwarb::scenario::internal

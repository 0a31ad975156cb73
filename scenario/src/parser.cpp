// The scenario parser: files, lines, words, and the keys and flags of the command table.
#include "parser.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "bts.h"
#include "hwarb/base/format.h"

namespace hwarb::scenario {

namespace internal {

bool parse_hex(std::string_view s, std::uint64_t* out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  return parse_number(s, 16, out);
}

bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(s[0])) return false;
  return std::ranges::all_of(s,
                             [&](char c) { return alpha(c) || digit(c) || c == '.' || c == '-'; });
}

namespace {

std::optional<AccessType> parse_access_type(std::string_view v) {
  if (v == "r") return AccessType::kR;
  if (v == "w") return AccessType::kW;
  if (v == "rw") return AccessType::kRw;
  if (v == "x") return AccessType::kX;
  return std::nullopt;
}

// if=OP VALUE: OP one of == != < <= > >=, VALUE decimal or 0x hex.
bool parse_condition(std::string_view e, Command* cmd) {
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
  return !cmd->cond_op.empty() && parse_number(e, base, &cmd->cond_value);
}

}  // namespace

Parser::Parser(std::string_view file, const Limits& limits) {
  scenario_.file = std::string(file);
  scenario_.limits = limits;
}

std::unexpected<Error> Parser::fail(const std::string& message) const {
  return make_error(ErrorCode::kInval,
                    scenario_.file + ":" + std::to_string(line_) + ": " + message);
}

Result<Scenario> Parser::parse(std::string_view text) {
  const Limits& limits = scenario_.limits;
  std::size_t at = 0;
  while (at < text.size()) {
    ++line_;
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    if (line_ > limits.lines) {
      return fail("over the limit of " + std::to_string(limits.lines) + " lines");
    }
    if (end - at > limits.line_bytes) {
      return fail("line longer than the limit of " + std::to_string(limits.line_bytes) + " bytes");
    }
    if (text.size() > limits.file_bytes && end >= limits.file_bytes) {
      return fail("file longer than the limit of " + std::to_string(limits.file_bytes) + " bytes");
    }
    if (auto r = parse_line(text.substr(at, end - at)); !r) return std::unexpected(r.error());
    at = end + 1;
  }
  return std::move(scenario_);
}

Result<void> Parser::parse_line(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);  // a CR LF line end
  if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return fail("bad character " + hex(c) + " at column " + std::to_string(i + 1) +
                  " (words are separated by spaces and tabs only)");
    }
  }
  std::vector<std::string_view> words;
  std::size_t i = 0;
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  if (words.empty()) return {};
  const CommandSpec* spec = find_command(words[0], words.size() > 1 ? words[1] : "");
  if (spec == nullptr) {
    return fail("unknown command '" + std::string(words[0]) + "' (expected " + command_words() +
                ")");
  }
  if (spec->kind == CommandKind::kMachine) return parse_machine(words);
  seen_other_ = true;
  if (spec->operand == Operand::kCpuState) return parse_cpu(words);
  if (spec->operand == Operand::kPtrace) return parse_ptrace(words);
  if (is_guest(spec->kind)) return parse_guest(*spec, words);
  if (is_ksym(spec->kind)) return parse_ksym(*spec, words);
  if (spec->name.find(' ') != std::string_view::npos) return parse_bts_context(*spec, words);

  const std::string_view command = spec->name;
  const std::span<const std::string_view> all(words);
  Command cmd;
  cmd.kind = spec->kind;
  cmd.line = line_;
  Keys keys;
  Flags flags;
  if (spec->operand == Operand::kNone) {
    if (auto r = split_args(*spec, command, all.subspan(1), &keys, &flags); !r) return r;
    if (auto r = apply_args(*spec, command, keys, flags, &cmd); !r) return r;
    if (auto r = check_work(command, keys, flags, &cmd); !r) return r;
  } else {
    if (words.size() < 2 || words[1].find('=') != std::string_view::npos) {
      return fail(std::string(command) + ": missing NAME");
    }
    if (!valid_name(words[1])) {
      return fail(std::string(command) + ": bad name '" + std::string(words[1]) +
                  "' (letters, digits, _ . -; starting with a letter or _)");
    }
    cmd.name = std::string(words[1]);
    if (auto r = split_args(*spec, command, all.subspan(2), &keys, &flags); !r) return r;
    if (auto r = apply_args(*spec, command, keys, flags, &cmd); !r) return r;
    if (auto r = check_names(command, &cmd); !r) return r;
  }
  if (auto r = account(command, cmd); !r) return r;
  scenario_.commands.push_back(std::move(cmd));
  return {};
}

Result<void> Parser::split_args(const CommandSpec& spec, std::string_view command,
                                std::span<const std::string_view> args, Keys* keys, Flags* flags) {
  const std::string cmd(command);
  for (std::string_view a : args) {
    const std::size_t eq = a.find('=');
    if (eq == std::string_view::npos) {
      if (find_flag(spec.params, a) == nullptr) {
        if (find_key(spec.params, a) != nullptr) {
          return fail(cmd + ": '" + std::string(a) + "' needs =VALUE");
        }
        return fail(cmd + ": unknown key '" + std::string(a) + "'");
      }
      if (!flags->insert(a).second) return fail(cmd + ": duplicate '" + std::string(a) + "'");
      continue;
    }
    const std::string_view key = a.substr(0, eq);
    const std::string_view value = a.substr(eq + 1);
    if (find_key(spec.params, key) == nullptr) {
      return fail(cmd + ": unknown key '" + std::string(key) + "'");
    }
    if (value.empty()) return fail(cmd + ": empty value for " + std::string(key));
    if (!keys->emplace(key, value).second) {
      return fail(cmd + ": duplicate key '" + std::string(key) + "'");
    }
  }
  // A group of flags of which at most one may be given (exactly one: check_work).
  for (const Param& p : spec.params) {
    if (!p.exclusive || p.required) continue;
    std::vector<std::string_view> given;
    for (std::string_view f : p.flags) {
      if (flags->contains(f)) given.push_back(f);
    }
    if (given.size() > 1) {
      std::string list;
      for (std::size_t i = 0; i < given.size(); ++i) {
        list += (i == 0 ? "" : i + 1 == given.size() ? " and " : ", ") + std::string(given[i]);
      }
      return fail(cmd + ": " + list + " are exclusive");
    }
  }
  return {};
}

Result<CpuChoice> Parser::parse_cpu_value(std::string_view cmd, std::string_view v) {
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

Result<void> Parser::apply_args(const CommandSpec& spec, std::string_view command, const Keys& keys,
                                const Flags& flags, Command* cmd) {
  const std::string c(command);
  for (const auto& [key, value] : keys) {
    const Param& p = *find_key(spec.params, key);
    const std::string v(value);
    auto bad = [&](const std::string& expected) {
      return fail(c + ": bad " + std::string(key) + " '" + v + "' (expected " + expected + ")");
    };
    switch (p.kind) {
      case ValueKind::kName:
        if (key == "parent") {
          cmd->parent = v;
        } else if (p.value.ends_with("|idle") && value == "idle") {
          cmd->idle = true;
        } else {
          cmd->task = v;
        }
        break;
      case ValueKind::kCpu:
      case ValueKind::kCpuNumber: {
        auto cpu = parse_cpu_value(command, value);
        if (!cpu) return std::unexpected(cpu.error());
        cmd->cpu = *cpu;
        break;
      }
      case ValueKind::kHex: {
        std::uint64_t n = 0;
        if (!parse_hex(value, &n)) return bad("a 64-bit hex number");
        if (key == "value") cmd->value = n;
        if (key == "addr") cmd->addr = n;
        if (key == "from") cmd->from = n;
        if (key == "to") cmd->to = n;
        break;
      }
      case ValueKind::kDecimal: {
        std::uint64_t n = 0;
        if (!parse_number(value, 10, &n)) return bad("a decimal number");
        if (key == "len") cmd->len = n;
        if (key == "size") cmd->size = n;
        if (key == "branches") cmd->branches = n;
        if (key == "seed") cmd->seed = n;
        break;
      }
      case ValueKind::kChoice:
        if (std::ranges::find(p.choices, value) == p.choices.end()) return bad(one_of(p.choices));
        if (key == "type") cmd->type = parse_access_type(value);
        if (key == "mode") cmd->mode = parse_buffer_mode(value);
        if (key == "caller") {
          cmd->caller = value == "root" ? pmu::Credentials::root() : pmu::Credentials::user();
        }
        break;
      case ValueKind::kPositive: {
        int n = 0;
        if (!parse_number(value, 10, &n) || n < 1) {
          return bad("1 .. " + std::to_string(std::numeric_limits<int>::max()));
        }
        if (key == "weight") cmd->weight = n;
        if (key == "enomem") cmd->inject_at = n;
        break;
      }
      case ValueKind::kCondition:
        if (!parse_condition(value, cmd)) {
          return fail(c + ": bad if '" + v +
                      "' (expected OP VALUE, OP one of == != < <= > >=, e.g. if=>=0x10)");
        }
        break;
      case ValueKind::kInteger: {
        int n = 0;
        if (!parse_number(value, 10, &n)) {
          return bad(std::to_string(std::numeric_limits<int>::min()) + " .. " +
                     std::to_string(std::numeric_limits<int>::max()));
        }
        cmd->paranoid = n;
        break;
      }
      case ValueKind::kCpuCount:
        break;  // machine cpus= (parse_machine)
    }
  }
  if (cmd->kind == CommandKind::kBp && cmd->paranoid && !cmd->caller) {
    return fail(c + ": paranoid= needs caller=root|user (the in-kernel API has no paranoid)");
  }
  if (flags.contains("pinned")) cmd->pinned = true;
  if (flags.contains("flexible")) cmd->pinned = false;
  if (flags.contains("disabled")) cmd->disabled = true;
  if (flags.contains("enabled")) cmd->disabled = false;
  if (flags.contains("exclude_kernel")) cmd->exclude_kernel = true;
  if (flags.contains("include_kernel")) cmd->exclude_kernel = false;
  cmd->inherit = flags.contains("inherit");
  cmd->write = flags.contains("w");
  cmd->global = flags.contains("global");
  cmd->predicted = flags.contains("predicted");
  if (flags.contains("user")) cmd->bts_flags |= bts::kUser;
  if (flags.contains("kernel")) cmd->bts_flags |= bts::kKernel;
  if (flags.contains("sched")) cmd->bts_flags |= bts::kSched;
  return {};
}

Result<void> Parser::parse_machine(std::span<const std::string_view> words) {
  if (machine_seen_) return fail("machine: given twice (at most one machine command)");
  if (seen_other_) return fail("machine: must come before any other command");
  machine_seen_ = true;
  const CommandSpec& spec = command_spec(CommandKind::kMachine);
  Keys keys;
  Flags flags;
  if (auto r = split_args(spec, "machine", words.subspan(1), &keys, &flags); !r) return r;
  MachineSpec& m = scenario_.machine;
  for (const auto& [key, value] : keys) {
    const std::string v(value);
    const Param& p = *find_key(spec.params, key);
    if (p.kind == ValueKind::kChoice && std::ranges::find(p.choices, value) == p.choices.end()) {
      return fail("machine: bad " + std::string(key) + " '" + v + "' (expected " +
                  one_of(p.choices) + ")");
    }
    if (key == "cpus") {
      if (!parse_number(value, 10, &m.cpus) || m.cpus < 1 || m.cpus > kMaxCpus) {
        return fail("machine: bad cpus '" + v + "' (expected 1 .. " + std::to_string(kMaxCpus) +
                    ")");
      }
    } else if (key == "arch") {
      m.arch = *breakpoints::parse_arch(value);
    } else if (key == "flexible") {
      m.flexible = value == "as_pinned" ? arbiter::FlexiblePolicy::kAsPinned
                                        : arbiter::FlexiblePolicy::kMultiplexed;
    }
  }
  return {};
}

Result<void> Parser::parse_cpu(std::span<const std::string_view> words) {
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

}  // namespace internal

Result<std::string> read_scenario_file(const std::string& path, const Limits& limits) {
  auto failed = [&](int err) {
    return make_error(from_errno(err), "cannot read " + path + ": " + std::strerror(err));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed(errno);
  std::string text;
  int err = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (S_ISDIR(st.st_mode)) {
    err = EISDIR;
  }
  // At most one byte past the limit: parse_scenario refuses the line that holds it.
  const std::size_t cap = limits.file_bytes + 1;
  while (err == 0 && text.size() < cap) {
    const std::size_t have = text.size();
    text.resize(std::min(cap, std::max<std::size_t>(have * 2, 65536)));
    const ssize_t n = ::read(fd, text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) {
      text.resize(have);
      continue;
    }
    if (n < 0) err = errno;
    text.resize(have + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n <= 0) break;
  }
  ::close(fd);
  if (err != 0) return failed(err);
  return text;
}

Result<Scenario> parse_scenario(std::string_view text, std::string_view file,
                                const Limits& limits) {
  return internal::Parser(file, limits).parse(text);
}

}  // namespace hwarb::scenario

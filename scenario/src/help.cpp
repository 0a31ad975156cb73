// What is generated from the command table for people: synopses, `hwarb sim --help` and the
// brief of `hwarb --help` (grammar.h).
#include <algorithm>

#include "hwarb/scenario/grammar.h"

namespace hwarb::scenario {

namespace {

// `text` wrapped at `width` columns: the first line indented by `first` spaces, the others by
// `rest`.
std::string wrap(std::string_view text, std::size_t first, std::size_t rest, std::size_t width) {
  std::string out;
  std::size_t indent = first;
  std::string line(indent, ' ');
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    at = end + 1;
    if (line.size() > indent && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      indent = rest;
      line.assign(indent, ' ');
    }
    if (line.size() > indent) line += ' ';
    line += word;
  }
  if (line.size() > indent) out += line + "\n";
  return out;
}

// "Defaults: type=rw, len: 4 (x: ...), pinned, inherit off." ("" when none has a default).
std::string defaults_text(std::span<const Param> params) {
  std::string s;
  for (const Param& p : params) {
    if (p.default_text.empty()) continue;
    std::string d;
    if (!p.key.empty()) {
      d = std::string(p.key) + (p.default_text.find(' ') == std::string_view::npos ? "=" : ": ");
    } else if (std::ranges::find(p.flags, p.default_text) == p.flags.end()) {
      d = std::string(p.flags.front()) + " ";
    }
    s += (s.empty() ? "Defaults: " : ", ") + d + std::string(p.default_text);
  }
  return s.empty() ? s : s + ".";
}

std::string params_text(std::span<const Param> params) {
  std::string s;
  for (const Param& p : params) s += " " + param_text(p);
  return s;
}

std::string limits_text() {
  const Limits l;
  return "Limits (a scenario past one is refused with FILE:LINE before it runs): a file of at "
         "most " +
         std::to_string(l.file_bytes) + " bytes, " + std::to_string(l.lines) +
         " lines, lines of at most " + std::to_string(l.line_bytes) + " bytes; at most " +
         std::to_string(l.events) + " breakpoint events (wide: one per CPU; watch: one per " +
         "piece, times the CPUs without task=), " + std::to_string(l.cpu_steps) +
         " CPU steps (cpus per command that acts on every CPU: wide, show, tick without cpu=, " +
         "cpu=any, ...), " + std::to_string(l.flexible) + " flexible breakpoints, watch len " +
         std::to_string(l.watch_len) + ", " + std::to_string(l.branches) +
         " branches of all runs, " + std::to_string(l.buffer_bytes) +
         " bytes of BTS buffers; output past " + std::to_string(l.output_bytes) +
         " bytes is a run-time scenario error.";
}

}  // namespace

std::string param_text(const Param& p) {
  if (!p.key.empty()) {
    std::string s = std::string(p.key) + "=" + std::string(p.value);
    if (!p.or_flag.empty()) s += "|" + std::string(p.or_flag);
    return p.required ? s : "[" + s + "]";
  }
  std::string s;
  for (std::string_view f : p.flags) s += (s.empty() ? "" : "|") + std::string(f);
  return p.required ? s : "[" + s + "]";
}

std::string synopsis(const CommandSpec& spec) {
  std::string s(spec.name);
  switch (spec.operand) {
    case Operand::kNone:
      break;
    case Operand::kName:
      s += " NAME";
      break;
    case Operand::kTask:
      s += " T";
      break;
    case Operand::kCpuState:
      s += " N offline|online";
      break;
    case Operand::kPtrace:
      s += " T OP ...";
      break;
    case Operand::kSymbol:
      s += " SYMBOL";
      break;
    case Operand::kSymOff:
      s += " SYMBOL[+OFF]";
      break;
    case Operand::kFile:
      s += " FILE";
      break;
  }
  return s + params_text(spec.params);
}

std::string synopsis(const PtraceOpSpec& op) {
  std::string s = "ptrace T " + std::string(op.name);
  if (!op.positional.empty()) s += " " + std::string(op.positional);
  return s + params_text(op.params);
}

std::string scenario_help() {
  std::string s =
      "Scenario language (full reference: docs/scenarios.md)\n"
      "  One command per line, words separated by spaces or tabs, key=value in any order; '#'\n"
      "  starts a comment, blank lines are ignored. NAMEs: letters, digits, _ . - (first a\n"
      "  letter or _). Numbers are decimal; addr, value, from and to are hex (0x optional).\n\n";
  for (const CommandSpec& c : command_table()) {
    if (c.operand == Operand::kPtrace) {
      for (const PtraceOpSpec& op : ptrace_op_table()) s += "  " + synopsis(op) + "\n";
    } else {
      s += wrap(synopsis(c), 2, 10, 96);
    }
    const std::string defaults = defaults_text(c.params);
    s += wrap(std::string(c.summary) + (defaults.empty() ? "" : " " + defaults), 6, 6, 96);
  }
  s += R"(
Output: one line per bp, wide, modify, watch, fork, bts, bts open, pt, lbr: 'NAME ok' or
  'NAME <ERRNO>' (ENOSPC, EBUSY, ENODEV, EINVAL, EPERM, EACCES, ENOENT, ENOMEM); with
  --explain refusals end in ' — reason'. Each hit: 'hit NAME task=T cpu=N ip=HEX addr=HEX access=r|w|x'
  (+ ' old=HEX new=HEX' for watchpoints); a ptrace breakpoint's hit shows as T's stop.
  ptrace: 'poke dr7 ok', 'poke dr7 ENOSPC', 'poke 849 EIO' (an offset that is no debug
  register is printed as given), 'peek dr6 = 0x00000000ffff0ff0' (16 hex digits), wait:
  'stopped SIGTRAP dr6=0x...' or 'running'; attach, detach, cont and step print only a
  refusal ('cont ESRCH'). bts drain: 'NAME from=HEX to=HEX [predicted]' per record, then
  'NAME drained K lost L'; run: 'T stopped after N branches' when cut short. guest enter,
  exit: 'guest enter cpu=N ok' or 'guest enter cpu=N <ERRNO>'; guest access: 'guest hit
  cpu=N addr=HEX access=r|w|x dr6=HEX' per guest breakpoint match. Other commands print
  'NAME drained K lost L'; run: 'T stopped after N branches' when cut short. ksym_trace:
  'SYMBOL[+OFF] ok|ERRNO', each hit 'ksym_hit SYMBOL+0xOFF cpu=N task=T|- ip=HEX addr=HEX
  access=r|w count=N'; ksym_stats: 'ksym_stat SYMBOL+0xOFF type=w|rw count=N'; kallsyms:
  'kallsyms FILE N symbols|ERRNO'; ksym: 'SYMBOL EINVAL' if refused. Other commands print
  nothing.
Errors: the whole file is checked before anything runs; a scenario error (bad syntax,
  unknown command or key, bad value, duplicate or unknown name, cpu=any without task, CPU
  out of range, misplaced machine, a limit passed) prints 'FILE:LINE: message' on stderr,
  nothing on stdout, and exits 2. So does a run-time scenario error, which the file alone
  cannot decide: an access/exec/branch/run by a task in a ptrace stop, a task whose fork
  failed, host work (switch, exit, access, exec, branch, run) on a CPU in a guest, output
  past the limit.
)";
  s += wrap(limits_text(), 0, 2, 94);
  s += "Exit status: 0 ran (refusals included), 1 internal error or output that could not be\n"
       "  written, 2 usage, unreadable file or scenario error.";
  return s;
}

std::string scenario_brief() {
  std::string s;
  std::vector<const CommandSpec*> rows;
  for (const CommandSpec& c : command_table()) {
    if (c.brief) rows.push_back(&c);
  }
  for (std::size_t i = 0; i < rows.size();) {
    // Rows of the same shape are one line: bts|pt|lbr NAME ...
    std::string names(rows[i]->name);
    const std::string rest = synopsis(*rows[i]).substr(rows[i]->name.size());
    std::size_t j = i + 1;
    while (j < rows.size() && synopsis(*rows[j]).substr(rows[j]->name.size()) == rest) {
      names += "|" + std::string(rows[j]->name);
      ++j;
    }
    s += wrap(names + rest, 2, 10, 96);
    i = j;
  }
  return s;
}

}  // namespace hwarb::scenario

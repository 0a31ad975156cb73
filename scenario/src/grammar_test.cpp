// The command table (grammar.h) and what is generated from it: the parser's vocabulary and
// messages, the help texts, and docs/scenarios.md, which must document every row.
#include "hwarb/scenario/grammar.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace hwarb::scenario {
namespace {

std::string parse_error(std::string_view text) {
  auto s = parse_scenario(text, "t.scn");
  EXPECT_FALSE(s.has_value());
  return s ? "" : s.error().message();
}

TEST(Grammar, NamesAreUniqueAndFound) {
  std::set<std::string_view> names;
  for (const CommandSpec& c : command_table()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    const std::size_t space = c.name.find(' ');
    const std::string_view first = c.name.substr(0, space);
    const std::string_view second =
        space == std::string_view::npos ? "x" : c.name.substr(space + 1);
    EXPECT_EQ(find_command(first, second), &c) << c.name;
  }
  EXPECT_EQ(find_command("frob", ""), nullptr);
  EXPECT_EQ(find_command("bts", "b1")->kind, CommandKind::kBts);  // `bts NAME`
  EXPECT_EQ(to_string(CommandKind::kBtsOpen), "bts open");
  EXPECT_EQ(to_string(CommandKind::kCpu), "cpu");
  EXPECT_EQ(to_string(PtraceOp::kBtsConfig), "bts-config");
}

TEST(Grammar, GeneratedListsAreTheMessagesOfBefore) {
  EXPECT_EQ(command_words(),
            "machine, task, bp, wide, modify, del, cpu, bts, pt, lbr, switch, tick, fork, exit, "
            "access, exec, branch, run, watch, offline, online, show, sysctl, inject, ptrace, "
            "guest, ksym, kallsyms, ksym_trace, ksym_trace_del, ksym_stats or kaccess");
  EXPECT_EQ(ptrace_op_words(),
            "attach, detach, peek, poke, wait, cont, step, bts-config, bts-status, bts-size, "
            "bts-get, bts-drain or bts-clear");
  EXPECT_EQ(parse_error("task t\nbts open c task=t size=24 mode=x\n"),
            "t.scn:2: bts open: bad mode 'x' (expected aux, snapshot, wrap or signal)");
  EXPECT_EQ(parse_error("machine flexible=x\n"),
            "t.scn:1: machine: bad flexible 'x' (expected multiplexed or as_pinned)");
  EXPECT_EQ(parse_error("task t\nptrace t bts-config bogus=1\n"),
            "t.scn:2: ptrace bts-config: unknown key 'bogus' (expected size=BYTES and "
            "flags=LIST)");
  EXPECT_EQ(parse_error("bp a cpu=0 enabled disabled\n"),
            "t.scn:1: bp: disabled and enabled are exclusive");
  EXPECT_EQ(parse_error("machine cpus=1\ntask t\nswitch cpu=0 task=t\n"
                        "access task=t cpu=0 r w addr=0x10 len=1\n"),
            "t.scn:4: access: exactly one of r or w is required");
}

TEST(Grammar, Synopses) {
  EXPECT_EQ(synopsis(command_spec(CommandKind::kBp)),
            "bp NAME [task=T] cpu=N|any [type=r|w|rw|x] [len=N] [addr=HEX] [pinned|flexible] "
            "[disabled|enabled] [inherit] [weight=N] [caller=root|user] [paranoid=N] "
            "[exclude_kernel|include_kernel]");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kBtsOpen)),
            "bts open NAME task=T|global [user] [kernel] [sched] size=BYTES "
            "[mode=aux|snapshot|wrap|signal]");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kAccess)),
            "access task=T cpu=N r|w addr=HEX len=1|2|4|8 [value=HEX]");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kCpu)), "cpu N offline|online");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kGuestAccess)),
            "guest access cpu=N r|w|x addr=HEX [len=1|2|4|8]");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kKsym)), "ksym SYMBOL addr=HEX [size=N]");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kKallsyms)), "kallsyms FILE");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kKsymTrace)), "ksym_trace SYMBOL[+OFF] r|w|rw|x");
  EXPECT_EQ(synopsis(command_spec(CommandKind::kKaccess)),
            "kaccess cpu=N r|w addr=HEX len=1|2|4|8 [value=HEX] [ip=HEX]");
  EXPECT_EQ(synopsis(*find_ptrace_op("attach")), "ptrace T attach [layout=x86_64|i386]");
  EXPECT_EQ(synopsis(*find_ptrace_op("poke")), "ptrace T poke REG=HEX");
}

// Every key and flag of the table is accepted by its command, and anything else is refused with
// the command's name.
TEST(Grammar, TheParserTakesItsWordsFromTheTable) {
  for (const CommandSpec& c : command_table()) {
    if (c.operand == Operand::kCpuState || c.operand == Operand::kPtrace) continue;
    SCOPED_TRACE(c.name);
    const std::string head = std::string(c.name) + (c.operand == Operand::kNone ? "" : " n1");
    EXPECT_EQ(parse_error(head + " bogus=1\n"),
              "t.scn:1: " + std::string(c.name) + ": unknown key 'bogus'");
    for (const Param& p : c.params) {
      // A known key never reads as unknown (whatever else is wrong with the line).
      const std::string word = p.key.empty() ? std::string(p.flags.front()) : std::string(p.key);
      auto s = parse_scenario(head + " " + word + (p.key.empty() ? "" : "=1") + "\n", "t.scn");
      if (!s) {
        EXPECT_EQ(s.error().message().find("unknown key"), std::string::npos) << word;
      }
    }
  }
}

TEST(Grammar, HelpAndBriefListEveryCommand) {
  const std::string help = scenario_help();
  for (const CommandSpec& c : command_table()) {
    if (c.operand == Operand::kPtrace) continue;
    EXPECT_NE(help.find(std::string(c.name)), std::string::npos) << c.name;
  }
  for (const PtraceOpSpec& op : ptrace_op_table()) {
    EXPECT_NE(help.find(synopsis(op)), std::string::npos) << op.name;
  }
  EXPECT_NE(help.find("Defaults: type=rw"), std::string::npos);
  const std::string brief = scenario_brief();
  EXPECT_NE(brief.find("  bts|pt|lbr NAME [task=T] [cpu=N|any]\n"), std::string::npos) << brief;
  EXPECT_NE(brief.find("  machine [cpus=N]"), std::string::npos) << brief;
}

std::string reference() {
  std::ifstream in(std::string(HWARB_SOURCE_DIR) + "/docs/scenarios.md");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// docs/scenarios.md: a section per command headed by its synopsis, naming each key and flag;
// every ptrace operation; every limit.
TEST(Grammar, TheReferenceDocumentsEveryRow) {
  const std::string doc = reference();
  ASSERT_FALSE(doc.empty());
  for (const CommandSpec& c : command_table()) {
    const std::string heading = "### `" + synopsis(c) + "`";
    const std::size_t at = doc.find(heading);
    ASSERT_NE(at, std::string::npos) << "no section " << heading;
    const std::size_t end = doc.find("\n### ", at + 1);
    const std::string section = doc.substr(at, end == std::string::npos ? end : end - at);
    for (const Param& p : c.params) {
      std::vector<std::string_view> words(p.flags.begin(), p.flags.end());
      if (!p.key.empty()) words.push_back(p.key);
      for (std::string_view w : words) {
        EXPECT_NE(section.find("`" + std::string(w)), std::string::npos)
            << heading << " does not document " << w;
      }
    }
  }
  for (const PtraceOpSpec& op : ptrace_op_table()) {
    EXPECT_NE(doc.find("`" + synopsis(op) + "`"), std::string::npos) << op.name;
  }
  const Limits l;
  for (std::uint64_t n : {std::uint64_t{l.file_bytes}, std::uint64_t(l.lines),
                          std::uint64_t{l.line_bytes}, l.events, l.cpu_steps, l.flexible,
                          l.watch_len, l.branches, l.buffer_bytes, std::uint64_t{l.output_bytes}}) {
    EXPECT_NE(doc.find(std::to_string(n)), std::string::npos) << "limit " << n;
  }
}

}  // namespace
}  // namespace hwarb::scenario

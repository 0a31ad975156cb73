#include "hwarb/scenario/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hwarb::scenario {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> run(std::string_view text, bool explain = false) {
  auto s = parse_scenario(text, "t.scn");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message());
  if (!s) return {};
  auto lines = run_scenario(*s, {.explain = explain});
  EXPECT_TRUE(lines.has_value()) << (lines ? "" : lines.error().to_string());
  return lines ? *lines : std::vector<std::string>{};
}

std::string parse_error(std::string_view text) {
  auto s = parse_scenario(text, "t.scn");
  EXPECT_FALSE(s.has_value());
  return s ? "" : s.error().message();
}

TEST(Parse, DefaultsAndComments) {
  auto s = parse_scenario("# c\n\n  task t1  # trailing\nbp a task=t1 cpu=any\n", "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->machine.cpus, 2);
  EXPECT_EQ(s->machine.arch, Arch::kX86_64);
  EXPECT_EQ(s->machine.flexible, arbiter::FlexiblePolicy::kMultiplexed);
  ASSERT_EQ(s->commands.size(), 2u);
  EXPECT_EQ(s->commands[1].line, 4);
  EXPECT_EQ(s->commands[1].id, RequestId(1));
  EXPECT_THAT(s->task_names, ElementsAre("t1"));
  EXPECT_THAT(s->request_names, ElementsAre("a"));
}

TEST(Parse, MachineKeys) {
  auto s = parse_scenario("machine flexible=as_pinned arch=arm64 cpus=8\n", "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->machine.cpus, 8);
  EXPECT_EQ(s->machine.arch, Arch::kArm64);
  EXPECT_EQ(s->machine.flexible, arbiter::FlexiblePolicy::kAsPinned);
}

TEST(Parse, NameKeepsItsIdAfterDel) {
  auto s = parse_scenario("bp a cpu=0\nbp b cpu=0\ndel a\nbp a cpu=1\n", "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->commands[3].id, RequestId(1));
  EXPECT_THAT(s->request_names, ElementsAre("a", "b"));
}

TEST(Parse, ErrorsNameFileAndLine) {
  EXPECT_EQ(parse_error("bp a cpu=0\nfrob x\n"),
            "t.scn:2: unknown command 'frob' (expected machine, task, bp, wide, modify, del, cpu, "
            "bts, pt, lbr, switch, tick, fork, exit, access, exec, branch, run, watch, offline, "
            "online, show, sysctl, inject, ptrace, guest, ksym, kallsyms, ksym_trace, "
            "ksym_trace_del, ksym_stats or kaccess)");
  EXPECT_EQ(parse_error("bp a cpu=0\nmachine cpus=4\n"),
            "t.scn:2: machine: must come before any other command");
  EXPECT_EQ(parse_error("machine\nmachine\n"),
            "t.scn:2: machine: given twice (at most one machine command)");
  EXPECT_EQ(parse_error("bp a cpu=0 colour=red\n"), "t.scn:1: bp: unknown key 'colour'");
  EXPECT_EQ(parse_error("bp a cpu=2\n"), "t.scn:1: bp: cpu 2 out of range (machine has 2 CPUs)");
  EXPECT_EQ(parse_error("bp a cpu=any\n"), "t.scn:1: bp: cpu=any needs task=");
  EXPECT_EQ(parse_error("bp a\n"), "t.scn:1: bp: cpu=N|any is required");
  EXPECT_EQ(parse_error("bp a cpu=0\nbp a cpu=1\n"), "t.scn:2: bp: name 'a' already in use");
  EXPECT_EQ(parse_error("bp a task=t cpu=0\n"), "t.scn:1: bp: unknown task 't'");
  EXPECT_EQ(parse_error("modify a addr=0x10\n"), "t.scn:1: modify: unknown name 'a'");
  EXPECT_EQ(parse_error("bp a cpu=0\ndel a\ndel a\n"), "t.scn:3: del: unknown name 'a'");
  EXPECT_EQ(parse_error("bp a cpu=0 weight=0\n"),
            "t.scn:1: bp: bad weight '0' (expected 1 .. 2147483647)");
  EXPECT_EQ(parse_error("bp a cpu=0 len=four\n"),
            "t.scn:1: bp: bad len 'four' (expected a decimal number)");
  EXPECT_EQ(parse_error("bp a cpu=0 pinned flexible\n"),
            "t.scn:1: bp: pinned and flexible are exclusive");
  EXPECT_EQ(parse_error("bp a cpu=0 cpu=1\n"), "t.scn:1: bp: duplicate key 'cpu'");
  EXPECT_EQ(parse_error("bp cpu=0\n"), "t.scn:1: bp: missing NAME");
  EXPECT_EQ(parse_error("cpu 1\n"), "t.scn:1: cpu: expected 'cpu N offline' or 'cpu N online'");
  EXPECT_EQ(parse_error("wide w\nmodify w cpu=0\n"),
            "t.scn:2: modify: cpu= does not apply to the wide breakpoint 'w'");
  EXPECT_EQ(parse_error("bts b cpu=0\nmodify b cpu=1\n"),
            "t.scn:2: modify: 'b' is a bts request; only bp and wide can be modified");
  EXPECT_EQ(parse_error("bts b\n"), "t.scn:1: bts: cpu=N is required without task=");
}

TEST(Parse, Ptrace) {
  auto s = parse_scenario(
      "task t\nptrace t attach layout=i386\nptrace t poke 0x350=ff\nptrace t peek dr6\n"
      "ptrace t step\n",
      "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  ASSERT_EQ(s->commands.size(), 5u);
  const Command& attach = s->commands[1];
  EXPECT_EQ(attach.kind, CommandKind::kPtrace);
  EXPECT_EQ(attach.name, "t");
  EXPECT_EQ(attach.ptrace_op, PtraceOp::kAttach);
  EXPECT_EQ(attach.layout, ptrace_compat::UserLayout::kI386);
  const Command& poke = s->commands[2];
  EXPECT_EQ(poke.ptrace_op, PtraceOp::kPoke);
  EXPECT_EQ(poke.reg, "0x350");
  EXPECT_FALSE(poke.debugreg.has_value());
  EXPECT_EQ(poke.offset, 0x350u);
  EXPECT_EQ(poke.value, 0xffu);
  EXPECT_EQ(s->commands[3].debugreg, 6);
  EXPECT_EQ(s->commands[4].ptrace_op, PtraceOp::kStep);
}

TEST(Parse, PtraceErrorsNameTheField) {
  EXPECT_EQ(parse_error("ptrace t peek dr0\n"), "t.scn:1: ptrace: unknown task 't'");
  EXPECT_EQ(parse_error("task t\nptrace peek dr0\n"),
            "t.scn:2: ptrace: missing task (expected 'ptrace T OP', OP one of attach, detach, "
            "peek, poke, wait, cont, step, bts-config, bts-status, bts-size, bts-get, bts-drain "
            "or bts-clear)");
  EXPECT_EQ(parse_error("task t\nptrace t\n"),
            "t.scn:2: ptrace: missing OP (expected attach, detach, peek, poke, wait, cont, step, "
            "bts-config, bts-status, bts-size, bts-get, bts-drain or bts-clear)");
  EXPECT_EQ(parse_error("task t\nptrace t kill\n"),
            "t.scn:2: ptrace: unknown OP 'kill' (expected attach, detach, peek, poke, wait, cont, "
            "step, bts-config, bts-status, bts-size, bts-get, bts-drain or bts-clear)");
  EXPECT_EQ(parse_error("task t\nptrace t peek\n"),
            "t.scn:2: ptrace peek: missing REG (REG: dr0..dr7 or a byte offset into struct user)");
  EXPECT_EQ(parse_error("task t\nptrace t poke\n"),
            "t.scn:2: ptrace poke: missing REG=HEX (REG: dr0..dr7 or a byte offset into struct "
            "user)");
  const std::string bad_reg =
      "' (expected dr0..dr7 or a byte offset into struct user, decimal or 0x hex)";
  EXPECT_EQ(parse_error("task t\nptrace t peek dr8\n"),
            "t.scn:2: ptrace peek: bad register 'dr8" + bad_reg);
  EXPECT_EQ(parse_error("task t\nptrace t peek DR0\n"),
            "t.scn:2: ptrace peek: bad register 'DR0" + bad_reg);
  EXPECT_EQ(parse_error("task t\nptrace t peek 0x\n"),
            "t.scn:2: ptrace peek: bad register '0x" + bad_reg);
  EXPECT_EQ(parse_error("task t\nptrace t poke =1\n"),
            "t.scn:2: ptrace poke: bad register '" + bad_reg);
  EXPECT_EQ(parse_error("task t\nptrace t poke dr0\n"), "t.scn:2: ptrace poke: 'dr0' needs =HEX");
  EXPECT_EQ(parse_error("task t\nptrace t poke dr0=\n"),
            "t.scn:2: ptrace poke: empty value for dr0");
  EXPECT_EQ(parse_error("task t\nptrace t poke dr0=0x10000000000000000\n"),
            "t.scn:2: ptrace poke: bad value '0x10000000000000000' (expected a 64-bit hex number)");
  EXPECT_EQ(parse_error("task t\nptrace t peek dr0=1\n"),
            "t.scn:2: ptrace peek: 'dr0=1': peek takes no value");
  EXPECT_EQ(parse_error("task t\nptrace t poke dr0=1 dr1=2\n"),
            "t.scn:2: ptrace poke: unexpected 'dr1=2'");
  EXPECT_EQ(parse_error("task t\nptrace t cont 1\n"), "t.scn:2: ptrace cont: unexpected '1'");
  EXPECT_EQ(parse_error("task t\nptrace t attach mode=x\n"),
            "t.scn:2: ptrace attach: unknown key 'mode' (expected layout=x86_64|i386)");
  EXPECT_EQ(parse_error("task t\nptrace t attach layout=arm\n"),
            "t.scn:2: ptrace attach: bad layout 'arm' (expected x86_64 or i386)");
  EXPECT_EQ(parse_error("task t\nexit t\nptrace t wait\n"), "t.scn:3: ptrace: task 't' has exited");
}

TEST(Parse, BtsCommands) {
  auto s = parse_scenario(
      "task t\nbts open c task=t user sched size=240 mode=wrap\nbts open g global size=48\n"
      "switch cpu=1 task=t\nbranch task=t cpu=1 from=401000 to=0x401010 predicted\n"
      "run task=t cpu=1 branches=20 seed=7\nbts drain c\nbts close c\nbts open c global "
      "size=24\nbts status c\nbts b task=t\n",
      "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  ASSERT_EQ(s->commands.size(), 11u);
  const Command& open = s->commands[1];
  EXPECT_EQ(open.kind, CommandKind::kBtsOpen);
  EXPECT_EQ(open.name, "c");
  EXPECT_EQ(open.task, "t");
  EXPECT_FALSE(open.global);
  EXPECT_EQ(open.bts_flags, bts::kUser | bts::kSched);
  EXPECT_EQ(open.size, 240u);
  EXPECT_EQ(open.mode, bts::BufferMode::kWrap);
  EXPECT_TRUE(s->commands[2].global);
  EXPECT_EQ(s->commands[2].bts_flags, 0u);  // both, applied when it runs
  EXPECT_FALSE(s->commands[2].mode.has_value());
  const Command& branch = s->commands[4];
  EXPECT_EQ(branch.kind, CommandKind::kBranch);
  EXPECT_EQ(branch.from, 0x401000u);
  EXPECT_EQ(branch.to, 0x401010u);
  EXPECT_TRUE(branch.predicted);
  EXPECT_EQ(branch.cpu, (CpuChoice{.any = false, .index = 1}));
  EXPECT_EQ(s->commands[5].kind, CommandKind::kRun);
  EXPECT_EQ(s->commands[5].branches, 20u);
  EXPECT_EQ(s->commands[5].seed, 7u);
  EXPECT_EQ(s->commands[6].kind, CommandKind::kBtsDrain);
  EXPECT_EQ(s->commands[7].kind, CommandKind::kBtsClose);
  EXPECT_EQ(s->commands[8].kind, CommandKind::kBtsOpen);  // the name is free again
  EXPECT_EQ(s->commands[9].kind, CommandKind::kBtsStatus);
  EXPECT_EQ(s->commands[10].kind, CommandKind::kBts);  // a perf BTS event
  EXPECT_THAT(s->request_names, ElementsAre("b"));     // contexts take no request id
}

TEST(Parse, BtsErrorsNameTheCommand) {
  EXPECT_EQ(parse_error("task t\nbts open c size=24\n"),
            "t.scn:2: bts open: task=T or global needed");
  EXPECT_EQ(parse_error("task t\nbts open c task=t global size=24\n"),
            "t.scn:2: bts open: task=T and global are exclusive");
  EXPECT_EQ(parse_error("bts open c global\n"), "t.scn:1: bts open: size=BYTES is required");
  EXPECT_EQ(parse_error("bts open c global size=24 mode=ring\n"),
            "t.scn:1: bts open: bad mode 'ring' (expected aux, snapshot, wrap or signal)");
  EXPECT_EQ(parse_error("bts open size=24\n"), "t.scn:1: bts open: missing NAME");
  EXPECT_EQ(parse_error("bts drain c\n"),
            "t.scn:1: bts drain: unknown context 'c' (not opened with bts open, or closed)");
  EXPECT_EQ(parse_error("bts open c global size=24\nbts close c\nbts status c\n"),
            "t.scn:3: bts status: unknown context 'c' (not opened with bts open, or closed)");
  EXPECT_EQ(parse_error("bts b cpu=0\nbts drain b\n"),
            "t.scn:2: bts drain: 'b' is a bts request, not a bts context (bts open)");
  EXPECT_EQ(parse_error("bts open c global size=24\ndel c\n"),
            "t.scn:2: del: 'c' is a bts context (close it with `bts close c`)");
  EXPECT_EQ(parse_error("task t\nbranch task=t cpu=0 from=0x10 to=0x20\n"),
            "t.scn:2: branch: task 't' does not run on cpu 0 (it is not running; switch it in "
            "first)");
  EXPECT_EQ(parse_error("task t\nswitch cpu=0 task=t\nbranch task=t cpu=0 from=0xg to=0x20\n"),
            "t.scn:3: branch: bad from '0xg' (expected a 64-bit hex number)");
  EXPECT_EQ(parse_error("task t\nswitch cpu=0 task=t\nbranch task=t cpu=0 from=0x10\n"),
            "t.scn:3: branch: to= is required");
  EXPECT_EQ(parse_error("task t\nswitch cpu=0 task=t\nrun task=t cpu=0 seed=1\n"),
            "t.scn:3: run: branches= is required");
  EXPECT_EQ(parse_error("machine arch=i386\ntask t\nswitch cpu=0 task=t\n"
                        "branch task=t cpu=0 from=0x100000000 to=0x20\n"),
            "t.scn:4: branch: 0x100000000 does not fit in 32 bits (an i386 machine)");
  EXPECT_EQ(parse_error("task t\nptrace t bts-config flags=trace\n"),
            "t.scn:2: ptrace bts-config: size=BYTES is required");
  EXPECT_EQ(parse_error("task t\nptrace t bts-config size=24 flags=trace,wrap\n"),
            "t.scn:2: ptrace bts-config: unknown flag 'wrap' in flags= (expected trace, sched, "
            "signal, cut-size or a 0x hex number, separated by commas)");
  EXPECT_EQ(parse_error("task t\nptrace t bts-get\n"),
            "t.scn:2: ptrace bts-get: missing INDEX (0 is the newest record)");
  EXPECT_EQ(parse_error("task t\nptrace t bts-size 1\n"),
            "t.scn:2: ptrace bts-size: unexpected '1'");
}

TEST(Parse, PtraceBtsConfigFlags) {
  auto s = parse_scenario(
      "task t\nptrace t bts-config flags=trace,0x10,cut-size size=100\nptrace t bts-get -1\n",
      "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->commands[1].ptrace_op, PtraceOp::kBtsConfig);
  EXPECT_EQ(s->commands[1].size, 100u);
  EXPECT_EQ(s->commands[1].ptrace_bts_flags, 0x19u);
  EXPECT_EQ(s->commands[2].ptrace_op, PtraceOp::kBtsGet);
  EXPECT_EQ(s->commands[2].index, -1);
}

// The following need the arbiter implementation.

TEST(Run, FillsTheSharedPool) {
  EXPECT_THAT(run("bp a cpu=0\nbp b cpu=0\nbp c cpu=0 type=x\nbp d cpu=0\nbp e cpu=0\n"
                  "bp f cpu=1\n"),
              ElementsAre("a ok", "b ok", "c ok", "d ok", "e ENOSPC", "f ok"));
}

TEST(Run, SlotCheckComesBeforeFieldCheck) {
  EXPECT_THAT(run("bp a cpu=0 weight=4\nbp b cpu=0 type=r\ndel a\nbp c cpu=0 type=r\n"
                  "bp d cpu=0 weight=4\n"),
              ElementsAre("a ok", "b ENOSPC", "c EINVAL", "d ok"));
}

TEST(Run, ModifyOfARefusedNameIsEnoent) {
  EXPECT_THAT(run("bp a cpu=0 weight=5\nmodify a weight=1\ndel a\n"),
              ElementsAre("a ENOSPC", "a ENOENT"));
}

TEST(Run, ExplainNamesTheHolders) {
  auto lines = run("task t\nbp a cpu=0 weight=2\nbp b task=t cpu=any weight=2\nbp c cpu=0\n",
                   /*explain=*/true);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2],
            "c ENOSPC — cpu 0 shared pool: 4 slots; held: cpu-bound 2 (a), task t 2; needs 1");
}

TEST(Run, ExplainValidation) {
  auto lines = run("bp a cpu=0 type=r\n", /*explain=*/true);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("a EINVAL — type r"));
}

TEST(Parse, CallerExcludeKernelAndSysctl) {
  auto s = parse_scenario(
      "task t\nsysctl perf_event_paranoid=-1\nbp a task=t cpu=any caller=user exclude_kernel\n"
      "bp b cpu=0 caller=root include_kernel\nbp c cpu=0\n",
      "t.scn");
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->commands.size(), 5u);
  EXPECT_EQ(s->commands[1].kind, CommandKind::kSysctl);
  EXPECT_EQ(s->commands[1].paranoid, -1);
  EXPECT_EQ(s->commands[2].caller, pmu::Credentials::user());
  EXPECT_EQ(s->commands[2].exclude_kernel, true);
  EXPECT_EQ(s->commands[3].caller, pmu::Credentials::root());
  EXPECT_EQ(s->commands[3].exclude_kernel, false);
  EXPECT_FALSE(s->commands[4].caller);
  EXPECT_FALSE(s->commands[4].exclude_kernel);
  EXPECT_EQ(parse_error("bp a cpu=0 exclude_kernel include_kernel\n"),
            "t.scn:1: bp: exclude_kernel and include_kernel are exclusive");
  EXPECT_EQ(parse_error("bp a cpu=0 caller=admin\n"),
            "t.scn:1: bp: bad caller 'admin' (expected root or user)");
  EXPECT_EQ(parse_error("sysctl\n"), "t.scn:1: sysctl: perf_event_paranoid= is required");
  EXPECT_EQ(parse_error("sysctl perf_event_paranoid=x\n"),
            "t.scn:1: sysctl: bad perf_event_paranoid 'x' (expected -2147483648 .. 2147483647)");
  EXPECT_EQ(parse_error("sysctl perf_event_paranoid=2147483648\n"),
            "t.scn:1: sysctl: bad perf_event_paranoid '2147483648' (expected -2147483648 .. "
            "2147483647)");
}

TEST(Run, CallerAndParanoid) {
  // The default paranoid is 2; perf's tool falls back to exclude_kernel after EACCES.
  EXPECT_THAT(run("task t\nbp a task=t cpu=any caller=user include_kernel\n"
                  "bp b task=t cpu=any caller=user\nbp c cpu=0 caller=user exclude_kernel\n"
                  "sysctl perf_event_paranoid=0\nbp d cpu=0 caller=user exclude_kernel\n"
                  "bp e task=t cpu=any addr=0x7ffffffff000 caller=user\n"
                  "bp f task=t cpu=any addr=0x7ffffffff000 caller=root\n"
                  "bp g task=t cpu=any addr=0x7ffffffff000\n"),
              ElementsAre("a EACCES", "b ok", "c EACCES", "d ok", "e EPERM", "f ok", "g EPERM"));
  auto lines = run("bp a cpu=0 caller=user exclude_kernel\n", /*explain=*/true);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("a EACCES — cpu: a CPU event, and perf_event_paranoid 2"));
}

TEST(Run, PtraceLines) {
  EXPECT_THAT(
      run("task t\nptrace t wait\nptrace t poke dr7=0x40001\nptrace t peek 848\n"
          "ptrace t poke 849=0\nptrace t cont\nptrace t wait\nptrace t step\n"),
      ElementsAre("stopped SIGSTOP dr6=0x00000000ffff0ff0", "poke dr7 EINVAL",
                  "peek dr0 = 0x0000000000000000", "poke 849 EIO", "running", "step ESRCH"));
}

TEST(Run, AccessInAPtraceStopIsARunTimeError) {
  auto s = parse_scenario(
      "machine cpus=1\ntask t\nswitch cpu=0 task=t\nptrace t poke dr0=0x10\n"
      "ptrace t poke dr7=0x1\nptrace t cont\nexec task=t cpu=0 addr=0x10\n"
      "exec task=t cpu=0 addr=0x14\n",
      "f.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  auto lines = run_scenario(*s, {});
  ASSERT_FALSE(lines.has_value());
  EXPECT_FALSE(is_internal_error(lines.error()));
  EXPECT_EQ(lines.error().code(), ErrorCode::kBusy);
  EXPECT_EQ(lines.error().message(),
            "f.scn:8: exec: task 't' is in a ptrace stop (SIGTRAP); resume it with `ptrace t "
            "cont` (or step) first");
}

TEST(Run, BtsContextAndPtraceLines) {
  EXPECT_THAT(run("machine cpus=1\ntask t\nbts open c task=t user size=48\nswitch cpu=0 task=t\n"
                  "branch task=t cpu=0 from=0x401000 to=0x401010\n"
                  "branch task=t cpu=0 from=0x401014 to=0x401000 predicted\nbts drain c\n"
                  "bts status c\nptrace t bts-size\nptrace t bts-config size=48 flags=trace\n"
                  "ptrace t bts-status\nptrace t bts-get 0\n"),
              ElementsAre("c ok", "c from=0x401000 to=0x401010",
                          "c from=0x401014 to=0x401000 predicted", "c drained 2 lost 0",
                          "c state=active mode=aux task=t flags=user capacity=2 held=0 lost=0",
                          "bts-size ENXIO", "bts-config ok", "bts-status size=48 flags=trace",
                          "bts-get 0 EINVAL"));
}

// kallsyms FILE is relative to the scenario's directory, wherever hwarb runs.
TEST(Run, KallsymsFileIsRelativeToTheScenario) {
  const std::string file = std::string(HWARB_SOURCE_DIR) + "/tests/conformance/t.scn";
  auto s = parse_scenario(
      "kallsyms ksym_kallsyms.kallsyms\nksym_trace nr_files w\n"
      "kaccess cpu=1 w addr=0xffffffff82a0b040 len=4 ip=0xffffffff81120004\nksym_stats\n",
      file);
  ASSERT_TRUE(s) << s.error().message();
  auto lines = run_scenario(*s, {});
  ASSERT_TRUE(lines) << lines.error().message();
  EXPECT_EQ(*lines, (std::vector<std::string>{
                        "kallsyms ksym_kallsyms.kallsyms 7 symbols",
                        "nr_files ok",
                        "ksym_hit nr_files+0x0 cpu=1 task=- ip=0xffffffff81120004 "
                        "addr=0xffffffff82a0b040 access=w count=1",
                        "ksym_stat nr_files+0x0 type=w count=1",
                    }));
  auto elsewhere = parse_scenario("kallsyms ksym_kallsyms.kallsyms\n", "/nonexistent/t.scn");
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(*run_scenario(*elsewhere, {}),
            (std::vector<std::string>{"kallsyms ksym_kallsyms.kallsyms ENOENT"}));
}

}  // namespace
}  // namespace hwarb::scenario

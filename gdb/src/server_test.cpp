// gdb::Server packet by packet against a fake target (server_test_support.h): each test sends
// framed packets, and checks the exact bytes of the replies and what the target was asked.
#include "hwarb/gdb/server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "hwarb/gdb/gdb_regs.h"
#include "server_test_support.h"

namespace hwarb::gdb {
namespace {

using testing::FakeConnection;
using testing::FakeTarget;

// rbp, rsp and rip of the fake's threads (rip 0x401000 + tid) as a stop reply carries them.
const std::string kRegs100 = "06:1000fe7f00000000;07:0000fe7f00000000;10:6410400000000000;";
const std::string kRegs101 = "06:1000fe7f00000000;07:0000fe7f00000000;10:6510400000000000;";

std::string acked(const std::string& reply) {
  return "+" + rsp_frame(reply);
}

// A packet as gdb frames binary data (X, vFile:pwrite): the payload already escaped.
std::string escaped_frame(const std::string& payload) {
  unsigned sum = 0;
  for (char c : payload) sum += static_cast<unsigned char>(c);
  char cc[3];
  std::snprintf(cc, sizeof cc, "%02x", sum & 0xff);
  return "$" + payload + "#" + cc;
}

StopEvent stop_of(StopEvent::Kind kind, Tid tid, int signal = SIGTRAP) {
  StopEvent ev;
  ev.kind = kind;
  ev.tid = tid;
  ev.signal = signal;
  return ev;
}

class ServerTest : public ::testing::Test {
 protected:
  // Sends each packet in a read of its own, then ends the input; what the server sent.
  std::string run(const std::vector<std::string>& packets) {
    for (const std::string& p : packets) connection.input.push_back(rsp_frame(p));
    Server server(target, connection);
    server.set_options(options);
    auto got = server.serve();
    EXPECT_TRUE(got.has_value()) << got.error().to_string();
    if (got) end = *got;
    return connection.output;
  }
  // The target's requests but those every session makes.
  std::vector<std::string> asked() const {
    std::vector<std::string> out;
    for (const std::string& c : target.calls) {
      if (!c.starts_with("finish") && !c.starts_with("set_features")) out.push_back(c);
    }
    return out;
  }

  FakeTarget target;
  FakeConnection connection;
  ServerOptions options;
  ServerEnd end;
};

using Calls = std::vector<std::string>;

// Handshake.

TEST_F(ServerTest, QSupportedAnnouncesWhatTheClientOffered) {
  options.once = true;  // the disconnect ends the serving (finish), as over stdio
  const std::string out =
      run({"qSupported:multiprocess+;swbreak+;fork-events+;vfork-events+;"
           "exec-events+;error-message+"});
  EXPECT_EQ(
      out,
      acked("PacketSize=4000;qXfer:features:read+;qXfer:auxv:read+;qXfer:exec-file:"
            "read+;qXfer:threads:read+;qXfer:libraries-svr4:read+;qXfer:siginfo:read+;"
            "qXfer:siginfo:write+;qXfer:osdata:read+;QStartNoAckMode+;swbreak+;hwbreak+;"
            "vContSupported+;QCatchSyscalls+;QProgramSignals+;"
            "ConditionalBreakpoints+;BreakpointCommands+;error-message+;exec-events+;multiprocess+;"
            "fork-events+;vfork-events+;QNonStop+;QThreadEvents+"));
  EXPECT_EQ(target.calls, (Calls{"set_features 1110 announced", "finish 2"}));
  EXPECT_EQ(end.how, ServerEnd::How::kDisconnected);
}

// gdb's no-resumed+ reaches the target, which may then end a wait with N: every thread the
// client resumed has ended (scheduler-locking held the others).
TEST_F(ServerTest, NoResumedIsPassedOnAndItsStopIsN) {
  options.once = true;
  target.stops = {stop_of(StopEvent::Kind::kNoResumed, 101)};
  const std::string out = run({"qSupported:no-resumed+", "vCont;c:65"});
  EXPECT_EQ(target.calls.front(), "set_features 0001 announced");
  EXPECT_TRUE(out.ends_with(acked("N"))) << out;
}

TEST_F(ServerTest, QSupportedOffersProcessStartsOnlyWhereTheTargetStartsThem) {
  target.startable = true;
  const std::string out = run({"qSupported:swbreak+"});
  EXPECT_NE(
      out.find(";ConditionalBreakpoints+;BreakpointCommands+;QDisableRandomization+;"
               "QEnvironmentHexEncoded+;"
               "QEnvironmentUnset+;QEnvironmentReset+;QStartupWithShell+;QSetWorkingDir+;QNonStop+;"
               "QThreadEvents+#"),
      std::string::npos)
      << out;
  EXPECT_EQ(target.calls.front(), "set_features 0000 announced");
}

TEST_F(ServerTest, NoAckModeAcknowledgesItsOkAndNothingAfter) {
  const std::string out = run({"QStartNoAckMode", "?"});
  EXPECT_EQ(out, "+" + rsp_frame("OK") + rsp_frame("T05thread:64;" + kRegs100));
}

TEST_F(ServerTest, MultiprocessThreadIdsInTheFirstStopReply) {
  const std::string out = run({"qSupported:multiprocess+", "?"});
  EXPECT_TRUE(out.ends_with(acked("T05thread:p64.64;" + kRegs100))) << out;
}

// Bad input.

TEST_F(ServerTest, BadChecksumAsksForTheResendAndServesNothing) {
  connection.input.push_back("$g#00");
  const std::string out = run({});
  EXPECT_EQ(out, "-");
  EXPECT_EQ(asked(), Calls{});
}

TEST_F(ServerTest, ANackResendsTheLastReply) {
  connection.input.push_back(rsp_frame("qC"));
  connection.input.push_back("-");
  const std::string out = run({});
  EXPECT_EQ(out, acked("QC64") + rsp_frame("QC64"));
}

TEST_F(ServerTest, UnknownPacketsGetTheEmptyReply) {
  const std::string out = run({"qTStatus", "J1", "vMustReplyEmpty", "Z9,1000,1", "Z0"});
  EXPECT_EQ(out, acked("") + acked("") + acked("") + acked("") + acked(""));
  EXPECT_EQ(asked(), Calls{});
}

TEST_F(ServerTest, MalformedPacketsGetENN) {
  const std::string out = run({"m1000", "Mzz", "Hgxyz", "p", "Z0,xyz,1", "c1000"});
  EXPECT_EQ(
      out, acked("E16") + acked("E16") + acked("E16") + acked("E16") + acked("E16") + acked("E16"));
  EXPECT_EQ(asked(), Calls{});
}

TEST_F(ServerTest, ErrorMessagesOnceTheClientAskedForThem) {
  const std::string out = run({"qSupported:error-message+", "m1000"});
  EXPECT_TRUE(out.ends_with(acked("E.EINVAL: packet: '1000' lacks ADDR,LENGTH"))) << out;
}

// Threads.

TEST_F(ServerTest, ThreadQueries) {
  const std::string out = run({"qfThreadInfo", "qsThreadInfo", "qC", "T65", "T99", "qAttached"});
  EXPECT_EQ(out,
            acked("m64,65") + acked("l") + acked("QC64") + acked("OK") + acked("E03") + acked("0"));
}

TEST_F(ServerTest, HgSelectsTheThreadOfRegisterReads) {
  const std::string out = run({"Hg65", "g", "Hc99", "H"});
  target.regs_of(101);
  EXPECT_EQ(out, acked("OK") +
                     acked(gdb_encode_registers(target.regs.at(101).regs, target.regs.at(101).fp)) +
                     acked("E03") + acked("E16"));
  EXPECT_EQ(asked(), Calls{"read_registers 101"});
}

TEST_F(ServerTest, HOfAProcessSelectsOneOfItsThreads) {
  target.thread_list = {100, 101, 102};
  target.group[102] = 102;
  const std::string out = run({"qSupported:multiprocess+", "Hgp66.-1", "g", "Hgp99.0"});
  EXPECT_NE(out.find(acked("OK")), std::string::npos);
  EXPECT_TRUE(out.ends_with(acked("E03"))) << out;
  EXPECT_EQ(asked(), Calls{"read_registers 102"});
}

// Registers.

TEST_F(ServerTest, RegistersGAndP) {
  Registers want = target.regs_of(100);
  want.regs.rax = 0x1122334455667788;
  const std::string out = run({"p10", "G" + gdb_encode_registers(want.regs, want.fp),
                               "P10=0020400000000000", "p95", "P10"});
  EXPECT_EQ(out,
            acked("6410400000000000") + acked("OK") + acked("OK") + acked("E16") + acked("E16"));
  EXPECT_EQ(target.regs.at(100).regs.rax, 0x1122334455667788u);
  EXPECT_EQ(target.regs.at(100).regs.rip, 0x402000u);
  EXPECT_EQ(asked(), (Calls{"read_registers 100", "read_registers 100", "write_registers 100",
                            "read_registers 100", "write_registers 100", "read_registers 100"}));
}

TEST_F(ServerTest, PWithAThreadSuffixAndAnExtendedRegister) {
  const std::string out = run({"p10;thread:65;", "p3c"});
  EXPECT_EQ(out, acked("6510400000000000") + acked("E16"));  // no AVX in the fake's registers
  EXPECT_EQ(asked(), (Calls{"read_registers 101", "read_registers 100 ext"}));
}

TEST_F(ServerTest, ATargetErrorOfRegistersIsENN) {
  target.fail.emplace("read_registers", Error(ErrorCode::kSrch, "thread: gone"));
  EXPECT_EQ(run({"g"}), acked("E03"));
}

// Memory.

TEST_F(ServerTest, MemoryReadsWholeShortOrNone) {
  target.memory = {{0x1000, 1}, {0x1001, 2}, {0x1002, 0x23}, {0x1003, 4}};
  const std::string out = run({"m1000,4", "m1002,10", "m2000,4", "x1001,2"});
  EXPECT_EQ(out,
            acked("01022304") + acked("2304") + acked("E0e") + "+$b\x02}\x03#e4");  // '#' escaped
  EXPECT_EQ(asked(), (Calls{"read_memory 100 1000 4", "read_memory 100 1002 16",
                            "read_memory 100 2000 4", "read_memory 100 1001 2"}));
}

TEST_F(ServerTest, MemoryWritesMAndXAndTheirErrors) {
  connection.input.push_back(rsp_frame("M1000,2:aabb"));
  connection.input.push_back(escaped_frame("X1002,2:}\x03\x05"));  // 23 05
  const std::string out = run({"M1000,3:aabb", "X1000,0:", "M1000,2"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("E16") + acked("OK") + acked("E16"));
  EXPECT_EQ(asked(), (Calls{"write_memory 100 1000 aabb", "write_memory 100 1002 2305"}));
}

TEST_F(ServerTest, MemoryOfTheHgThreadsProcess) {
  target.thread_list = {100, 102};
  target.group[102] = 102;
  target.memory[0x1000] = 9;
  const std::string out = run({"Hg66", "m1000,1"});
  EXPECT_EQ(out, acked("OK") + acked("09"));
  EXPECT_EQ(asked(), Calls{"read_memory 102 1000 1"});
}

// Breakpoints and watches.

TEST_F(ServerTest, ZAndZOfEachType) {
  const std::string out =
      run({"Z0,401000,1", "Z1,401004,1", "Z2,1000,4", "Z3,1008,8", "Z4,1010,2", "z0,401000,1",
           "z1,401004,1", "z2,1000,4", "z3,1008,8", "z4,1010,2"});
  std::string want;
  for (int i = 0; i < 10; ++i) want += acked("OK");
  EXPECT_EQ(out, want);
  EXPECT_EQ(asked(), (Calls{"insert_point 100 0 401000 1", "insert_point 100 1 401004 1",
                            "insert_point 100 2 1000 4", "insert_point 100 3 1008 8",
                            "insert_point 100 4 1010 2", "remove_point 100 0 401000 1",
                            "remove_point 100 1 401004 1", "remove_point 100 2 1000 4",
                            "remove_point 100 3 1008 8", "remove_point 100 4 1010 2"}));
}

TEST_F(ServerTest, ZErrorsOfTheTargetAndOfTheConditions) {
  target.fail.emplace("insert_point", Error(ErrorCode::kNoSpc, "watch: no room"));
  target.fail.emplace("remove_point", Error(ErrorCode::kFault, "addr: gone"));
  const std::string out = run({"Z2,1000,4", "z0,401000,1", "Z0,401000,1;X2,zz"});
  EXPECT_EQ(out, acked("E1c") + acked("E0e") + acked("E16"));
  EXPECT_EQ(asked(), (Calls{"insert_point 100 2 1000 4", "remove_point 100 0 401000 1"}));
}

TEST_F(ServerTest, ZWithConditionsAndCommandsGivesThemToTheTarget) {
  const std::string out =
      run({"Z0,401000,1;X3,220127;X3,220027;cmds:0,X1,27X2,2227", "Z2,1000,4;X3,220127",
           "Z0,401001,1;cmds:1,X1,27", "Z0,401002,1;cmds:1,Y1,27"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("E16"));
  ASSERT_EQ(target.conditions.size(), 3u);
  EXPECT_EQ(target.conditions[0].size(), 2u);
  EXPECT_EQ(target.commands[0], (std::vector<AgentExpr>{{0x27}, {0x22, 0x27}}));
  EXPECT_EQ(target.conditions[1].size(), 0u);  // a watch has neither
  EXPECT_EQ(target.commands[1].size(), 0u);
  EXPECT_EQ(target.conditions[2].size(), 0u);
  EXPECT_EQ(target.commands[2].size(), 1u);
}

// Resuming, and each form of stop reply.

struct StopCase {
  const char* name;
  StopEvent stop;
  std::string reply;
};

class StopReplyTest : public ServerTest, public ::testing::WithParamInterface<StopCase> {};

StopEvent watch_stop(PointType point) {
  StopEvent ev = stop_of(StopEvent::Kind::kWatch, 101);
  ev.point = point;
  ev.addr = 0x1008;
  return ev;
}

StopEvent breakpoint_stop(PointType point) {
  StopEvent ev = stop_of(StopEvent::Kind::kBreakpoint, 100);
  ev.point = point;
  return ev;
}

StopEvent syscall_stop(StopEvent::Kind kind, long nr) {
  StopEvent ev = stop_of(kind, 100);
  ev.syscall = nr;
  return ev;
}

StopEvent exit_stop(StopEvent::Kind kind, int status, int signal) {
  StopEvent ev = stop_of(kind, 0, signal);
  ev.status = status;
  ev.process = 100;
  return ev;
}

INSTANTIATE_TEST_SUITE_P(
    Forms, StopReplyTest,
    ::testing::Values(
        StopCase{"signal", stop_of(StopEvent::Kind::kSignal, 101, SIGSEGV),
                 "T0bthread:65;" + kRegs101},
        StopCase{"step", stop_of(StopEvent::Kind::kSignal, 100), "T05thread:64;" + kRegs100},
        StopCase{"sigusr1", stop_of(StopEvent::Kind::kSignal, 100, SIGUSR1),
                 "T1ethread:64;" + kRegs100},
        StopCase{"watch", watch_stop(PointType::kWrite), "T05thread:65;watch:1008;" + kRegs101},
        StopCase{"rwatch", watch_stop(PointType::kRead), "T05thread:65;rwatch:1008;" + kRegs101},
        StopCase{"awatch", watch_stop(PointType::kAccess), "T05thread:65;awatch:1008;" + kRegs101},
        StopCase{"hwbreak_watch", watch_stop(PointType::kHardware),
                 "T05thread:65;hwbreak:;" + kRegs101},
        StopCase{"swbreak", breakpoint_stop(PointType::kSoftware),
                 "T05thread:64;swbreak:;" + kRegs100},
        StopCase{"hwbreak", breakpoint_stop(PointType::kHardware),
                 "T05thread:64;hwbreak:;" + kRegs100},
        StopCase{"syscall_entry", syscall_stop(StopEvent::Kind::kSyscallEntry, 1),
                 "T05thread:64;syscall_entry:1;" + kRegs100},
        StopCase{"syscall_return", syscall_stop(StopEvent::Kind::kSyscallReturn, 0x3c),
                 "T05thread:64;syscall_return:3c;" + kRegs100},
        StopCase{"exited", exit_stop(StopEvent::Kind::kExited, 7, 0), "W07"},
        StopCase{"killed", exit_stop(StopEvent::Kind::kKilled, 0, SIGKILL), "X09"}),
    [](const ::testing::TestParamInfo<StopCase>& info) { return std::string(info.param.name); });

TEST_P(StopReplyTest, VContContinueReportsTheStop) {
  target.stops.push_back(GetParam().stop);
  const std::string out = run({"vCont;c", "?"});
  EXPECT_EQ(out, acked(GetParam().reply) + acked(GetParam().reply));
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "wait"}));
}

TEST_F(ServerTest, AnExitEndsThePacketsThatNeedTheProcess) {
  target.stops.push_back(exit_stop(StopEvent::Kind::kExited, 0, 0));
  const std::string out = run({"c", "g", "qfThreadInfo", "?"});
  EXPECT_EQ(out, acked("W00") + acked("E03") + acked("l") + acked("W00"));
}

TEST_F(ServerTest, MultiprocessStopsFormsOfForkVforkExecAndExit) {
  target.thread_list = {100, 101, 102};
  target.group[102] = 102;
  StopEvent fork = stop_of(StopEvent::Kind::kFork, 100);
  fork.child = 102;
  StopEvent vfork = fork;
  vfork.vfork = true;
  StopEvent exec = stop_of(StopEvent::Kind::kExec, 101);
  exec.exec_path = "/bin/prog";
  StopEvent child_end = exit_stop(StopEvent::Kind::kExited, 3, 0);
  child_end.process = 102;
  child_end.remains = true;
  target.stops = {fork, vfork,     stop_of(StopEvent::Kind::kVforkDone, 100),
                  exec, child_end, exit_stop(StopEvent::Kind::kKilled, 0, SIGKILL)};
  const std::string out = run({"qSupported:multiprocess+;fork-events+;vfork-events+;exec-events+",
                               "vCont;c", "vCont;c", "vCont;c", "vCont;c", "vCont;c", "vCont;c"});
  const std::string p = "T05thread:p64.64;";
  EXPECT_TRUE(out.ends_with(acked(p + "fork:p66.66;" + kRegs100) +
                            acked(p + "vfork:p66.66;" + kRegs100) +
                            acked(p + "vforkdone:;" + kRegs100) +
                            acked("T05thread:p64.65;exec:2f62696e2f70726f67;" + kRegs101) +
                            acked("W03;process:66") + acked("X09;process:64")))
      << out;
}

TEST_F(ServerTest, ExecWithoutExecEventsIsAPlainTrap) {
  StopEvent exec = stop_of(StopEvent::Kind::kExec, 100);
  exec.exec_path = "/bin/prog";
  target.stops.push_back(exec);
  EXPECT_EQ(run({"vCont;c"}), acked("T05thread:64;" + kRegs100));
}

TEST_F(ServerTest, OldResumeFormsAndSignals) {
  target.stops = {stop_of(StopEvent::Kind::kSignal, 100), stop_of(StopEvent::Kind::kSignal, 101),
                  stop_of(StopEvent::Kind::kSignal, 101), stop_of(StopEvent::Kind::kSignal, 100)};
  const std::string out = run({"s", "Hc65", "c", "C0b", "S1e", "Cfff"});
  EXPECT_EQ(out, acked("T05thread:64;" + kRegs100) + acked("OK") +
                     acked("T05thread:65;" + kRegs101) + acked("T05thread:65;" + kRegs101) +
                     acked("T05thread:64;" + kRegs100) + acked("E16"));
  EXPECT_EQ(asked(), (Calls{"resume s0:0.100", "wait", "resume c0:0.-1", "wait", "resume C11:0.-1",
                            "wait", "resume S10:0.101", "wait"}));
}

TEST_F(ServerTest, VContActionsPerThreadAndProcess) {
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101)};
  const std::string out = run({"vCont?", "vCont;s:65;t:64", "vCont;x", "vCont;", "vCont;c:zz"});
  EXPECT_EQ(out, acked("vCont;c;C;s;S;t;r") + acked("T05thread:65;" + kRegs101) + acked("E16") +
                     acked("E16") + acked("E16"));
  ASSERT_EQ(target.resumes.size(), 1u);
  EXPECT_EQ(target.resumes[0].size(), 2u);
  EXPECT_EQ(asked(), (Calls{"resume s0:0.101 t0:0.100", "wait"}));
}

TEST_F(ServerTest, ATargetErrorOfResumeIsENN) {
  target.fail.emplace("resume", Error(ErrorCode::kSrch, "vCont: no thread 99"));
  EXPECT_EQ(run({"vCont;c:99"}), acked("E03"));
  EXPECT_EQ(asked(), Calls{"resume c0:0.153"});
}

TEST_F(ServerTest, TheStoppedThreadBecomesTheGeneralThread) {
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101)};
  const std::string out = run({"vCont;c", "g"});
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "wait", "read_registers 101"}));
  EXPECT_NE(out.find("T05thread:65;"), std::string::npos);
}

TEST_F(ServerTest, CtrlCWhileRunningStopsTheProcess) {
  connection.input.push_back(rsp_frame("vCont;c"));
  connection.input.push_back("\x03");
  const std::string out = run({"?"});
  EXPECT_EQ(out, acked("T02thread:64;" + kRegs100) + acked("T02thread:64;" + kRegs100));
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "wait", "owe_interrupt", "interrupt"}));
}

// A Ctrl-C that came in the same read as the resume before it (a loaded server reads late): the
// wait does not find it in the connection, yet it stops the process at once.
TEST_F(ServerTest, CtrlCReadWithTheResumeStopsTheProcess) {
  connection.input.push_back(rsp_frame("vCont;c") + "\x03");
  const std::string out = run({});
  EXPECT_EQ(out, acked("T02thread:64;" + kRegs100));
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "owe_interrupt", "interrupt"}));
}

// A Ctrl-C the target owes a process that this resume leaves stopped (gdbserver's SIGINT waits in
// the process it last started or attached): no interrupt now; the resume's own stop is reported.
TEST_F(ServerTest, ACtrlCOwedToAStoppedProcessWaitsForTheResumesOwnStop) {
  target.owes = true;
  target.quiet_waits = 1;
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101)};
  connection.input.push_back(rsp_frame("vCont;c:p64.-1"));
  connection.input.push_back("\x03");
  const std::string out = run({});
  EXPECT_EQ(asked(), (Calls{"resume c0:100.-1", "wait", "owe_interrupt", "wait"}));
  EXPECT_NE(out.find("T05thread:65;"), std::string::npos) << out;
}

// A Ctrl-C that crossed the stop reply (gdb sent it while it still took the process as running)
// is kept for the next resume, which it interrupts at once, as gdbserver's SIGINT to the process
// is delivered then: gdb resuming from a breakpoint whose condition it finds false would else
// wait for a stop its Ctrl-C never brings.
TEST_F(ServerTest, CtrlCWhileStoppedInterruptsTheNextResume) {
  connection.input.push_back("\x03");
  EXPECT_EQ(run({"qC", "vCont;c"}), acked("QC64") + acked("T02thread:64;" + kRegs100));
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "owe_interrupt", "interrupt"}));
}

TEST_F(ServerTest, ACrossingCtrlCOwedToAStoppedProcessLetsTheNextResumeRun) {
  target.owes = true;
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101)};
  connection.input.push_back("\x03");
  EXPECT_EQ(run({"qC", "vCont;c"}),
            acked("QC64") +
                acked("T05thread:65;06:1000fe7f00000000;07:0000fe7f00000000;10:6510400000000000;"));
  EXPECT_EQ(asked(), (Calls{"resume c0:0.-1", "owe_interrupt", "wait"}));
}

// As gdbserver without --once: a client that goes away while the process is stopped leaves it
// stopped for the next one (nothing finished), whose '?' gets the last stop; with --once, or
// while the process runs (below), the serving ends.
TEST_F(ServerTest, WithoutOnceADisconnectKeepsTheStoppedProcessForTheNextClient) {
  EXPECT_EQ(run({"?"}), acked("T05thread:64;" + kRegs100));
  EXPECT_EQ(asked(), Calls{});
  EXPECT_TRUE(end.serving);
  EXPECT_EQ(end.how, ServerEnd::How::kDisconnected);
  options.once = true;
  run({"?"});
  EXPECT_EQ(target.calls.back(), "finish 2");
  EXPECT_FALSE(end.serving);
}

// The next client asks '?' of a program that a signal stopped: the signal, not a trap (it
// delivers it as it resumes; gdb numbers SIGUSR1 30), in the thread-id form that client asked
// for.
TEST_F(ServerTest, AReconnectingClientIsToldTheSignalOfTheLastStop) {
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101, SIGUSR1)};
  connection.input = {rsp_frame("vCont;c")};
  Server server(target, connection);
  server.set_options(options);
  auto first = server.serve();
  ASSERT_TRUE(first) << first.error().to_string();
  EXPECT_TRUE(first->serving);
  EXPECT_EQ(connection.output, acked("T1ethread:65;" + kRegs101));
  connection.output.clear();
  connection.input = {rsp_frame("qSupported:multiprocess+"), rsp_frame("?")};
  auto second = server.serve();
  ASSERT_TRUE(second) << second.error().to_string();
  EXPECT_TRUE(connection.output.ends_with(acked("T1ethread:p64.65;" + kRegs101)))
      << connection.output;
}

TEST_F(ServerTest, AClientGoneWhileRunningEndsTheServing) {
  const std::string out = run({"vCont;c"});
  EXPECT_EQ(out, "+");
  EXPECT_EQ(target.calls.back(), "finish 2");
  EXPECT_EQ(end.how, ServerEnd::How::kDisconnected);
}

TEST_F(ServerTest, ASignalToTheServerWhileRunningEndsIt) {
  target.fail.emplace("wait", Error(ErrorCode::kIntr, "wait: interrupted"));
  connection.interrupt_flag = true;
  EXPECT_EQ(run({"vCont;c", "qC"}), "+");
  EXPECT_EQ(end.how, ServerEnd::How::kInterrupted);
  EXPECT_EQ(target.calls.back(), "finish 3");
}

// Non-stop mode.

// A %Stop notification of `stop`.
std::string notified(const std::string& stop) {
  return "%" + rsp_frame("Stop:" + stop).substr(1);
}

TEST_F(ServerTest, NonStopNotifiesEachStopAndVStoppedTakesThem) {
  StopEvent bp = stop_of(StopEvent::Kind::kBreakpoint, 101);
  bp.point = PointType::kSoftware;
  target.stops = {bp, stop_of(StopEvent::Kind::kSignal, 100, SIGSEGV)};
  const std::string out = run({"QNonStop:1", "vCont;c", "vStopped", "vStopped", "vStopped"});
  // Both stops come before the client's vStopped: the second waits in the queue for it.
  EXPECT_EQ(out, acked("OK") + acked("OK") + notified("T05thread:65;swbreak:;" + kRegs101) + "+" +
                     rsp_frame("T0bthread:64;" + kRegs100) + acked("OK") + acked("OK"));
  EXPECT_EQ(asked(), (Calls{"non_stop 1", "resume c0:0.100 c0:0.101", "wait", "wait"}));
}

TEST_F(ServerTest, NonStopServesPacketsWhileThreadsRunAndTStopsOne) {
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101, 0)};
  target.quiet_waits = 2;
  const std::string out =
      run({"QNonStop:1", "vCont;c", "m1000,1", "vCont;t:65", "vStopped", "vCont;t:65"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("E0e") + acked("OK") +
                     notified("T00thread:65;" + kRegs101) + acked("OK") + acked("OK"));
  // t of a stopped thread asks nothing; the running one stays as it is.
  EXPECT_EQ(asked(),
            (Calls{"non_stop 1", "resume c0:0.100 c0:0.101", "wait", "read_memory 100 1000 1",
                   "wait", "resume t0:0.101", "wait", "wait", "wait", "wait"}));
}

TEST_F(ServerTest, NonStopStatusQueuesEveryStoppedThread) {
  const std::string out = run({"QNonStop:1", "?", "vStopped", "vStopped", "vStopped"});
  EXPECT_EQ(out, acked("OK") + acked("T05thread:64;" + kRegs100) +
                     acked("T00thread:65;" + kRegs101) + acked("OK") + acked("OK"));
}

TEST_F(ServerTest, NonStopStatusMakesEachStopAgainWithTheRegistersOfNow) {
  StopEvent bp = stop_of(StopEvent::Kind::kBreakpoint, 101);
  target.stops = {bp};
  const std::string out = run({"QNonStop:1", "vCont;c:65", "vStopped", "Hg65",
                               "P10=0020400000000000", "?", "vStopped", "vStopped"});
  EXPECT_TRUE(out.ends_with(acked("T05thread:64;" + kRegs100) +
                            acked("T05thread:65;swbreak:;06:1000fe7f00000000;07:0000fe7f00000000;"
                                  "10:0020400000000000;") +
                            acked("OK")))
      << out;
}

TEST_F(ServerTest, NonStopResumesOnlyStoppedThreadsNotThoseWithAQueuedStop) {
  target.thread_list = {100, 101, 102};
  target.stops = {stop_of(StopEvent::Kind::kSignal, 101, SIGSEGV),
                  stop_of(StopEvent::Kind::kSignal, 102, SIGILL)};
  target.quiet_waits = 1;
  const std::string out = run({"QNonStop:1", "vCont;c:65;c:66", "vCont;c", "vStopped", "vCont;c",
                               "vStopped", "vStopped", "vCont;s:66;c"});
  // 100 runs with the wildcard; 102's stop is queued behind 101's, so the next wildcard leaves
  // it stopped; once taken, it steps as named.
  Calls resumes;
  for (const std::string& c : asked()) {
    if (c.starts_with("resume")) resumes.push_back(c);
  }
  EXPECT_EQ(resumes, (Calls{"resume c0:0.101 c0:0.102", "resume c0:0.100", "resume c0:0.101",
                            "resume s0:0.102"}));
  EXPECT_NE(
      out.find(
          notified("T0bthread:65;" + kRegs101) + "+" +
          rsp_frame("T04thread:66;06:1000fe7f00000000;07:0000fe7f00000000;10:6610400000000000;")),
      std::string::npos)
      << out;
}

TEST_F(ServerTest, NonStopAWildcardLeavesAForkChildTheClientDoesNotKnowYet) {
  target.thread_list = {100, 101, 102};
  target.group[102] = 102;
  StopEvent fork = stop_of(StopEvent::Kind::kFork, 101);
  fork.child = 102;
  target.stops = {stop_of(StopEvent::Kind::kSignal, 100, SIGCHLD), fork};
  const std::string out = run({"qSupported:multiprocess+;fork-events+", "QNonStop:1",
                               "vCont;c:p64.65", "vCont;c:p64.64", "vStopped", "vCont;c"});
  // The second vCont;c comes with the fork's stop still queued: 102 stays stopped.
  Calls resumes;
  for (const std::string& c : asked()) {
    if (c.starts_with("resume")) resumes.push_back(c);
  }
  EXPECT_EQ(resumes, (Calls{"resume c0:0.101", "resume c0:0.100"})) << out;
}

TEST_F(ServerTest, NonStopThreadExitsWithThreadEventsAndTheProcessEnd) {
  StopEvent gone = stop_of(StopEvent::Kind::kThreadExited, 101, 0);
  target.stops = {gone, exit_stop(StopEvent::Kind::kExited, 3, 0)};
  const std::string out =
      run({"QNonStop:1", "QThreadEvents:1", "vCont;c", "vStopped", "vStopped", "?"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + notified("w0;65") + "+" +
                     rsp_frame("W03") + acked("OK") + acked("W03"));
}

TEST_F(ServerTest, NonStopNewThreadsRunUnlessThreadEventsAskForTheirStart) {
  target.thread_list = {100, 101, 102, 103};
  target.stops = {stop_of(StopEvent::Kind::kThreadCreated, 102)};
  const std::string out = run({"QNonStop:1", "vCont;c", "QThreadEvents:1", "vStopped", "vCont;c"});
  // 102 started before the client asked: resumed by the server, untold.
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("OK") + acked("OK"));
  Calls resumes;
  for (const std::string& c : asked()) {
    if (c.starts_with("resume")) resumes.push_back(c);
  }
  EXPECT_EQ(resumes, (Calls{"resume c0:0.100 c0:0.101 c0:0.102 c0:0.103", "resume c0:0.102"}));
}

TEST_F(ServerTest, NonStopNewThreadsStartAsStopsWithThreadEvents) {
  target.thread_list = {100, 101, 102};
  target.stops = {stop_of(StopEvent::Kind::kThreadCreated, 102)};
  const std::string out =
      run({"QNonStop:1", "QThreadEvents:1", "vCont;c:64", "vStopped", "vCont;c"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") +
                     notified("T05thread:66;create:;06:1000fe7f00000000;07:0000fe7f00000000;10:"
                              "6610400000000000;") +
                     acked("OK") + acked("OK"));
  // The new thread, stopped, runs again with the wildcard.
  const Calls calls = asked();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "resume c0:0.101 c0:0.102"), calls.end());
}

TEST_F(ServerTest, NonStopThreadExitsUntoldWithoutThreadEvents) {
  target.stops = {stop_of(StopEvent::Kind::kThreadExited, 101, 0),
                  exit_stop(StopEvent::Kind::kExited, 3, 0)};
  const std::string out = run({"QNonStop:1", "vCont;c", "vStopped"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + notified("W03") + acked("OK"));
}

TEST_F(ServerTest, NonStopCtrlC) {
  const std::string out = run({"vCtrlC", "QNonStop:1", "vCtrlC"});
  EXPECT_EQ(out, acked("") + acked("OK") + acked("OK"));
  EXPECT_EQ(asked(), (Calls{"non_stop 1", "interrupt_process"}));
}

TEST_F(ServerTest, NonStopRefusedByTheTargetIsENN) {
  target.fail.emplace("non_stop", Error(ErrorCode::kOpNotSupp, "non-stop: not here"));
  EXPECT_EQ(run({"QNonStop:1", "?", "QNonStop:2"}),
            acked("E5f") + acked("T05thread:64;" + kRegs100) + acked("E16"));
}

TEST_F(ServerTest, CatchSyscalls) {
  const std::string out = run({"QCatchSyscalls:1", "QCatchSyscalls:1;3b;e7", "QCatchSyscalls:0",
                               "QCatchSyscalls:2", "QCatchSyscalls:1;zz"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("E16") + acked("E16"));
  EXPECT_EQ(asked(), (Calls{"catch_syscalls", "catch_syscalls 59 231", "catch_syscalls off"}));
}

// Leaving.

TEST_F(ServerTest, DetachReplies) {
  const std::string out = run({"D", "qC"});
  EXPECT_EQ(out, acked("OK"));
  EXPECT_EQ(end.how, ServerEnd::How::kDetached);
  EXPECT_EQ(target.calls.back(), "finish 0");
}

TEST_F(ServerTest, KillHasNoReply) {
  const std::string out = run({"k", "qC"});
  EXPECT_EQ(out, "+");
  EXPECT_EQ(end.how, ServerEnd::How::kKilled);
  EXPECT_EQ(target.calls.back(), "finish 1");
}

TEST_F(ServerTest, VKillReplies) {
  EXPECT_EQ(run({"vKill;64"}), acked("OK"));
  EXPECT_EQ(end.how, ServerEnd::How::kKilled);
}

TEST_F(ServerTest, DetachAndKillOfOneProcessOfSeveral) {
  target.thread_list = {100, 101, 102};
  target.group[102] = 102;
  const std::string out = run({"qSupported:multiprocess+", "D;66", "vKill;66", "D;64", "D"});
  EXPECT_TRUE(out.ends_with(acked("OK") + acked("OK") + acked("OK") + acked("OK"))) << out;
  EXPECT_EQ(asked(), (Calls{"detach_process 102", "kill_process 102", "detach_process 100"}));
  EXPECT_EQ(end.how, ServerEnd::How::kDetached);
}

// A leader that ended while its threads run on (pthread_exit in main) is not among the threads;
// gdb still selects it for its process's memory (Hgp200.200): another thread of that process
// stands for it, never a thread of another process.
TEST_F(ServerTest, HgOfAnEndedLeaderSelectsItsProcess) {
  target.thread_list = {100, 101, 201};
  target.group[201] = 200;
  const std::string out = run({"qSupported:multiprocess+", "Hgpc8.c8", "m1000,1", "Hgpc8.12c"});
  EXPECT_NE(out.find(acked("OK")), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with(acked("E03"))) << out;  // a thread that was never there
  EXPECT_EQ(asked(), Calls{"read_memory 200 1000 1"});
}

TEST_F(ServerTest, MonitorExitAndUnknownCommands) {
  const std::string out = run({"qRcmd,68656c70", "qRcmd,626f677573", "qRcmd,65786974", "qC"});
  EXPECT_NE(out.find(acked("OK")), std::string::npos);
  EXPECT_NE(out.find(rsp_frame("E01")), std::string::npos);
  EXPECT_TRUE(out.ends_with(rsp_frame("OK"))) << out;
  EXPECT_EQ(end.how, ServerEnd::How::kDisconnected);
}

TEST_F(ServerTest, MonitorSetDebugTurnsTheTargetsEventLogOnAndOff) {
  run({"qRcmd,7365742064656275672031", "qRcmd,7365742064656275672030"});
  EXPECT_EQ(asked(), (Calls{"event_log on", "event_log off"}));
}

TEST_F(ServerTest, DebugOptionsLogFromTheStart) {
  // gdbserver's --debug --remote-debug --debug-format=timestamp: the event log is on before the
  // first packet, and every packet is logged, timed.
  options.debug = true;
  options.remote_debug = true;
  options.debug_timestamps = true;
  run({"qC"});
  ASSERT_FALSE(target.calls.empty());
  EXPECT_EQ(target.calls.front(), "event_log on");
  ASSERT_GE(connection.logged.size(), 2u);
  EXPECT_NE(connection.logged[0].find("hwarb gdbserver: remote: received qC"), std::string::npos)
      << connection.logged[0];
  EXPECT_TRUE(connection.logged[0].find_first_not_of("0123456789.") > 10) << connection.logged[0];
  EXPECT_NE(connection.logged[1].find("remote: sending "), std::string::npos);
}

TEST_F(ServerTest, NoDebugOptionsLogNothing) {
  run({"qC"});
  EXPECT_TRUE(connection.logged.empty());
  EXPECT_EQ(asked(), Calls{});
}

// Queries of the process and host I/O.

TEST_F(ServerTest, QXferObjects) {
  const std::string out = run({"qXfer:auxv:read::0,100", "qXfer:exec-file:read:66:0,100",
                               "qXfer:libraries-svr4:read::0,100", "qXfer:threads:read::0,100",
                               "qXfer:siginfo:read::7e,100", "qXfer:nope:read::0,1",
                               "qXfer:features:read:other.xml:0,10"});
  EXPECT_EQ(out, acked(std::string("l\x06\0\0\0\0\0\0\0", 9)) + acked("l/bin/prog") +
                     acked("l<library-list-svr4 version=\"1.0\"/>") +
                     acked("l<?xml version=\"1.0\"?>\n<threads>\n<thread id=\"64\" "
                           "name=\"main&lt;1&gt;\"/>\n<thread id=\"65\"/>\n</threads>\n") +
                     acked("l\x01\x01") + acked("") + acked("E02"));
  EXPECT_EQ(asked(), (Calls{"auxv 100", "exec_file 102", "libraries_svr4 100", "siginfo 100"}));
}

// qXfer:siginfo:write: the bytes written, in hex (the part within the 128 bytes); the target's
// error as E; another object's write is not served.
TEST_F(ServerTest, QXferSiginfoWrite) {
  const std::string out =
      run({"qXfer:siginfo:write::7e:abcd", "qXfer:siginfo:write::81:ab", "qXfer:auxv:write::0:ab"});
  EXPECT_EQ(out, acked("2") + acked("E16") + acked(""));
  EXPECT_EQ(asked(), (Calls{"write_siginfo 100 7e 4", "write_siginfo 100 81 2"}));
}

// qXfer:osdata: the table as an osdata document, escaped, read in pieces of one snapshot (the
// target is asked at offset 0 only); a name with no table is an empty document, as gdbserver's.
// Served without a process: the tables are the machine's.
TEST_F(ServerTest, QXferOsdataReadsOneSnapshotInPieces) {
  target.process = false;
  std::string doc;
  std::vector<std::string> packets;
  for (std::uint64_t offset = 0; offset < 0x8000; offset += 0x800) {
    packets.push_back("qXfer:osdata:read:processes:" + hex_u64(offset) + ",800");
  }
  const std::string out = run(packets);
  std::size_t at = 0;
  bool ended = false;
  while ((at = out.find("+$", at)) != std::string::npos) {
    const std::size_t end = out.find('#', at);
    const std::string payload = out.substr(at + 2, end - at - 2);
    if (!ended) doc += payload.substr(1);
    ended = ended || payload[0] == 'l';
    at = end;
  }
  EXPECT_TRUE(ended);
  EXPECT_TRUE(
      doc.starts_with("<?xml version=\"1.0\"?>\n<osdata type=\"processes\">\n"
                      "<item><column name=\"pid\">0</column><column name=\"command\">"
                      "prog &lt;0&gt;</column></item>\n"))
      << doc.substr(0, 200);
  EXPECT_TRUE(doc.ends_with("prog &lt;299&gt;</column></item>\n</osdata>\n"));
  EXPECT_EQ(asked(), Calls{"os_data processes"});

  const std::string more =
      run({"qXfer:osdata:read:bogus:0,800", "qXfer:osdata:read::0,800"}).substr(out.size());
  EXPECT_EQ(more, acked("l") + acked("l"));
}

// qGetTLSAddr: the target's address in hex; a thread that is not there, or a target's error, is
// an E reply (never the empty one: gdb would ask no more).
TEST_F(ServerTest, ThreadLocalAddresses) {
  target.fail.emplace("tls_address", Error(ErrorCode::kNxio, "thread 101: TLS not allocated"));
  const std::string out =
      run({"qGetTLSAddr:65,10,7ffff7ffe2e0", "qGetTLSAddr:p64.64,8,0", "qGetTLSAddr:99,0,0",
           "qGetTLSAddr:p65.64,0,0", "qGetTLSAddr:64,10"});
  EXPECT_EQ(out, acked("E06") + acked("E06") + acked("E03") + acked("E03") + acked("E16"));
  target.fail.clear();
  const std::string ok = run({"qGetTLSAddr:65,10,7ffff7ffe2e0", "qGetTLSAddr:p64.64,8,0"});
  EXPECT_EQ(ok.substr(out.size()), acked("7f0000065010") + acked("7f0000064008"));
  EXPECT_EQ(asked(), (Calls{"tls_address 101 10 7ffff7ffe2e0", "tls_address 100 8 0",
                            "tls_address 101 10 7ffff7ffe2e0", "tls_address 100 8 0"}));
}

// gdbserver's `monitor set libthread-db-search-path`: a path without a libthread_db makes
// thread-local addresses fail (gdb: "Remote target failed to process qGetTLSAddr request");
// the default ($pdir:$sdir, or none given) finds it again.
TEST_F(ServerTest, ALibthreadDbSearchPathWithoutOneFailsThreadLocalAddresses) {
  const std::string out =
      run({"qRcmd,736574206c69627468726561642d64622d7365617263682d70617468202f666f6f2f626172",
           "qGetTLSAddr:64,8,0", "qRcmd,736574206c69627468726561642d64622d7365617263682d70617468",
           "qGetTLSAddr:64,8,0"});
  EXPECT_EQ(out, acked("O6c69627468726561642d64622d7365617263682d706174682073657420746f20602f666f6f"
                       "2f626172270a") +
                     rsp_frame("OK") + acked("E02") +
                     acked("O6c69627468726561642d64622d7365617263682d706174682073657420746f20602470"
                           "6469723a2473646972270a") +
                     rsp_frame("OK") + acked("7f0000064008"));
  EXPECT_EQ(asked(), Calls{"tls_address 100 8 0"});
}

TEST_F(ServerTest, TargetXmlOfTheRegistersTheThreadHas) {
  const std::string out = run({"qXfer:features:read:target.xml:0,40"});
  EXPECT_EQ(out, acked("m" + gdb_target_xml(0).substr(0, 0x40)));
  EXPECT_EQ(asked(), Calls{"read_registers 100 ext"});
}

TEST_F(ServerTest, LldbQueries) {
  target.stops.push_back(stop_of(StopEvent::Kind::kSignal, 100));
  options.once = true;  // the disconnect ends the serving (finish), as over stdio
  const std::string out =
      run({"qHostInfo", "qProcessInfo", "qWatchpointSupportInfo:", "qMemoryRegionInfo:401234",
           "qMemoryRegionInfo:600000", "QListThreadsInStopReply", "vCont;c",
           "qXfer:libraries-svr4:read::0,10"});
  EXPECT_NE(out.find(acked("num:1024;")), std::string::npos);
  EXPECT_NE(out.find(acked("start:401000;size:1000;permissions:rx;name:2f62696e2f70726f67;")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(acked("start:600000;size:1000;")), std::string::npos);
  // Linux's signal numbers and the thread list in stop replies once lldb asked.
  EXPECT_NE(out.find(acked("T05thread:64;" + kRegs100 + "threads:64,65;")), std::string::npos);
  EXPECT_EQ(target.calls[target.calls.size() - 2], "libraries_svr4 100 without_main_lm");
}

TEST_F(ServerTest, HostFiles) {
  const std::string out =
      run({"vFile:setfs:0", "vFile:open:2f6574632f686f7374,0,0", "vFile:pread:7,3,1",
           "vFile:pwrite:7,5,!!", "vFile:fstat:7", "vFile:close:7", "vFile:pread:7,3,0",
           "vFile:unlink:2f78", "vFile:readlink:2f70726f632f312f637764"});
  const std::string stat = std::string(8, '\0') + std::string("\0\0\x81\xa4", 4) +
                           std::string(16, '\0') + std::string("\0\0\0\0\0\0\0\x05", 8) +
                           std::string(28, '\0');
  EXPECT_EQ(out, acked("F0") + acked("F7") + acked("F3;ell") + acked("F2") + acked("F40;" + stat) +
                     acked("F0") + acked("F-1,9") + acked("F-1,2") + acked("F5;/work"));
  EXPECT_EQ(asked(), (Calls{"open_file /etc/host 0 0", "unlink_file /x", "read_link /proc/1/cwd"}));
  EXPECT_EQ(target.files.size(), 0u);
}

// Extended mode.

TEST_F(ServerTest, ExtendedModeWithoutAProcess) {
  target.process = false;
  target.startable = true;
  // No target description either, as gdbserver: gdb's architecture stays its own to set
  // (`set architecture i386` before a `run`).
  const std::string out = run({"!", "?", "qfThreadInfo", "g", "vKill;64", "k", "qC", "vCont?",
                               "qXfer:features:read:target.xml:0,1000"});
  EXPECT_EQ(out, acked("OK") + acked("W00") + acked("l") + acked("E03") + acked("E03") + "+" +
                     acked("E03") + acked("vCont;c;C;s;S;t;r") + acked("E03"));
  EXPECT_TRUE(end.serving);  // '!' and a target that starts processes: the server stays
  EXPECT_EQ(asked(), Calls{});
}

// gdb connecting in non-stop mode to a server with no process asks '?': OK, as gdbserver (a
// W00 is a stop reply gdb queues, and its wait after `run` then fails an assertion).
TEST_F(ServerTest, NonStopWithoutAProcessHasNoStopToTell) {
  target.process = false;
  target.startable = true;
  const std::string out = run({"!", "QNonStop:1", "?", "QNonStop:0", "?"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("OK") + acked("W00"));
}

TEST_F(ServerTest, VRunVAttachVKill) {
  target.process = false;
  target.startable = true;
  const std::string out =
      run({"!", "vRun;2f62696e2f70726f67;61", "vAttach;1", "vKill;64", "?", "vAttach;c8", "?"});
  EXPECT_EQ(out, acked("OK") + acked("T05thread:64;" + kRegs100) + acked("E10") + acked("OK") +
                     acked("W00") +
                     acked("T00thread:c8;06:1000fe7f00000000;07:0000fe7f00000000;10:"
                           "c810400000000000;") +
                     acked("T00thread:c8;06:1000fe7f00000000;07:0000fe7f00000000;10:"
                           "c810400000000000;"));
  // The client went away at the end: the attached process stays, stopped, for the next one (as
  // gdbserver --multi keeps its processes across a disconnect).
  EXPECT_EQ(asked(), (Calls{"start [/bin/prog] [a]", "drop_process 1", "attach 200"}));
  EXPECT_TRUE(end.serving);
}

// An attach's stop is no signal (T00, as gdbserver's): gdb takes it as the attach's, not a
// SIGTRAP of the program's. In non-stop mode it is the client's to ask for: with '?', or with a
// vCont;t that names the thread (a notification then, once; a second 't' tells nothing).
TEST_F(ServerTest, NonStopVAttachAnswersOkAndItsThreadsStopsComeWithStatus) {
  target.process = false;
  target.startable = true;
  const std::string regs = "06:1000fe7f00000000;07:0000fe7f00000000;10:c810400000000000;";
  const std::string out = run({"!", "QNonStop:1", "vAttach;c8", "?", "vStopped"});
  EXPECT_EQ(out,
            acked("OK") + acked("OK") + acked("OK") + acked("T00thread:c8;" + regs) + acked("OK"));
  EXPECT_FALSE(target.is_spawned);
}

TEST_F(ServerTest, NonStopVAttachStopsAreToldAtTheFirstVContTNamingThem) {
  target.process = false;
  target.startable = true;
  const std::string regs = "06:1000fe7f00000000;07:0000fe7f00000000;10:c810400000000000;";
  const std::string out =
      run({"!", "QNonStop:1", "vAttach;c8", "vCont;t:c8", "vStopped", "vCont;t:c8"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("OK") +
                     notified("T00thread:c8;" + regs) + acked("OK") + acked("OK"));
}

// gdb's add-inferior: with multiprocess+, a vRun or vAttach while a process lives adds the new
// process beside it (nothing is dropped) and its stop is the reply; the general thread is its.
TEST_F(ServerTest, WithMultiprocessAVAttachWhileAProcessLivesAddsIt) {
  target.startable = true;
  const std::string out = run({"qSupported:multiprocess+", "!", "vAttach;c8", "qC"});
  EXPECT_NE(out.find("$T00thread:pc8.c8;"), std::string::npos) << out;
  EXPECT_NE(out.find("$QCpc8.c8#"), std::string::npos) << out;
  EXPECT_EQ(asked(), Calls{"attach 200"});
}

// A command-line attach (--attach): the stop is no signal (T00), and in non-stop mode '?' tells
// the main thread's alone; the other thread's is told at the vCont;t that names it, as
// gdbserver tells them (gdb 13 with target-non-stop fails an assertion on more at '?').
TEST_F(ServerTest, ACommandLineAttachTellsItsOtherThreadsAtVContT) {
  target.is_spawned = false;
  const std::string out = run(
      {"!", "QNonStop:1", "?", "vStopped", "vCont;t:65", "vStopped", "?", "vStopped", "vStopped"});
  const std::string main_stop = "T00thread:64;" + kRegs100;
  const std::string other_stop = "T00thread:65;" + kRegs101;
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked(main_stop) + acked("OK") + acked("OK") +
                     notified(other_stop) + acked("OK") + acked(main_stop) + acked(other_stop) +
                     acked("OK"));
}

// An attach into a program taking a signal: the attach's stop is that signal (gdb prints
// "received signal SIGALRM"), as gdbserver reports it; and so at a command-line attach.
TEST_F(ServerTest, AnAttachIntoASignalReportsTheSignal) {
  target.process = false;
  target.startable = true;
  target.attach_signo = SIGALRM;
  const std::string regs = "06:1000fe7f00000000;07:0000fe7f00000000;10:c810400000000000;";
  EXPECT_EQ(run({"!", "vAttach;c8", "?"}),
            acked("OK") + acked("T0ethread:c8;" + regs) + acked("T0ethread:c8;" + regs));
}

TEST_F(ServerTest, ACommandLineAttachIntoASignalReportsTheSignal) {
  target.is_spawned = false;
  target.attach_signo = SIGALRM;
  EXPECT_EQ(run({"?"}), acked("T0ethread:64;" + kRegs100));
}

// QProgramSignals: gdb's numbers (SIGALRM 14, SIGUSR1 30) as the system's (14, 10).
TEST_F(ServerTest, ProgramSignalsAreTheSystemsNumbers) {
  EXPECT_EQ(run({"QProgramSignals:e;1e", "QProgramSignals:"}), acked("OK") + acked("OK"));
  EXPECT_EQ(asked(), (Calls{"program_signals 10 14", "program_signals"}));
}

TEST_F(ServerTest, VRunAndVAttachWhereTheTargetStartsNothing) {
  target.process = false;
  const std::string out = run({"vRun;2f62696e2f70726f67", "vAttach;c8", "vAttach;0", "R00"});
  EXPECT_EQ(out, acked("E5f") + acked("E5f") + acked("E5f") + acked(""));
  EXPECT_FALSE(end.serving);
  EXPECT_EQ(asked(), Calls{});
}

TEST_F(ServerTest, AFailedVRunLeavesNoProcess) {
  target.process = false;
  target.startable = true;
  target.fail.emplace("start", Error(ErrorCode::kNoEnt, "exec: no such file"));
  EXPECT_EQ(run({"vRun;2f6e6f7065", "?", "vRun;zz"}), acked("E02") + acked("W00") + acked("E16"));
}

TEST_F(ServerTest, RestartAndTheLaunchSettings) {
  target.startable = true;
  const std::string out =
      run({"!", "QDisableRandomization:0", "QStartupWithShell:0", "QEnvironmentHexEncoded:413d31",
           "QEnvironmentUnset:42", "QEnvironmentReset", "QEnvironmentHexEncoded:3d31",
           "QSetWorkingDir:2f746d70", "QSetWorkingDir:", "QSetWorkingDir:2g", "R00", "?"});
  EXPECT_EQ(out, acked("OK") + acked("OK") + acked("OK") + acked("OK") + acked("OK") + acked("OK") +
                     acked("E16") + acked("OK") + acked("OK") + acked("E16") + "+" +
                     acked("T05thread:64;" + kRegs100));
  EXPECT_EQ(asked(),
            (Calls{"disable_randomization 0", "startup_with_shell 0", "set_environment A=1",
                   "unset_environment B", "reset_environment", "working_directory [/tmp]",
                   "working_directory []", "drop_process 1", "restart"}));
}

}  // namespace
}  // namespace hwarb::gdb

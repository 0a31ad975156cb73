// parse_request per packet family: the typed values of well-formed packets, and for malformed
// ones the error the server replies (EINVAL: E16, or E.text with error-message+).
#include "hwarb/gdb/request.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <variant>

#include "hwarb/gdb/gdb_regs.h"
#include "hwarb/gdb/rsp.h"

namespace hwarb::gdb {
namespace {

// The request of `packet`, which must be a T.
template <typename T>
T parsed(std::string_view packet) {
  auto r = parse_request(packet);
  if (!r) {
    ADD_FAILURE() << packet << ": " << r.error().to_string();
    return T{};
  }
  if (!std::holds_alternative<T>(*r)) {
    ADD_FAILURE() << packet << ": another kind of request (" << r->index() << ")";
    return T{};
  }
  return std::get<T>(*r);
}

template <typename T>
bool is(std::string_view packet) {
  auto r = parse_request(packet);
  return r && std::holds_alternative<T>(*r);
}

// The error of a malformed `packet`.
Error error_of(std::string_view packet) {
  auto r = parse_request(packet);
  if (r) {
    ADD_FAILURE() << packet << ": parsed (" << r->index() << ")";
    return Error(ErrorCode::kIo, "parsed");
  }
  return r.error();
}

TEST(ParseRequest, HandshakeAndSimpleRequests) {
  EXPECT_TRUE(is<StopReason>("?"));
  EXPECT_TRUE(is<ExtendedMode>("!"));
  EXPECT_TRUE(is<StartNoAckMode>("QStartNoAckMode"));
  EXPECT_TRUE(is<CurrentThread>("qC"));
  EXPECT_TRUE(is<Attached>("qAttached:1"));
  EXPECT_TRUE(parsed<ThreadInfo>("qfThreadInfo").first);
  EXPECT_FALSE(parsed<ThreadInfo>("qsThreadInfo").first);
  EXPECT_TRUE(is<VContQuery>("vCont?"));
  EXPECT_TRUE(is<Kill>("k"));
  EXPECT_TRUE(is<Restart>("R00"));
  EXPECT_TRUE(is<ReadRegisters>("g"));
  EXPECT_TRUE(is<Symbol>("qSymbol::"));
  EXPECT_TRUE(is<HostInfo>("qHostInfo"));
  EXPECT_TRUE(is<ProcessInfo>("qProcessInfo"));
  EXPECT_TRUE(is<WatchpointSupportInfo>("qWatchpointSupportInfo"));
  EXPECT_TRUE(is<WatchpointSupportInfo>("qWatchpointSupportInfo:"));
  EXPECT_TRUE(is<ThreadSuffixSupported>("QThreadSuffixSupported"));
  EXPECT_TRUE(is<ListThreadsInStopReply>("QListThreadsInStopReply"));
}

TEST(ParseRequest, UnservedPacketsAreUnsupported) {
  for (const char* p : {"", "qTStatus", "qOffsets", "J1", "vMustReplyEmpty", "vCont", "Z9,1000,1",
                        "Z0", "z5,0,0", "qXfer:features", "qXfer:features:erase:target.xml:0,10",
                        "qXfer:auxv:read:", "QEnvironmentOther:00", "qC1"}) {
    EXPECT_TRUE(is<Unsupported>(p)) << p;
  }
}

TEST(ParseRequest, XferWriteTakesItsDataUnescaped) {
  const XferWrite w = parsed<XferWrite>("qXfer:siginfo:write::1c:a}]b");
  EXPECT_EQ(w.object, "siginfo");
  EXPECT_EQ(w.annex, "");
  EXPECT_EQ(w.offset, 0x1cu);
  EXPECT_EQ(w.data, "a}b");
  auto no_offset = parse_request("qXfer:siginfo:write::zz:a");
  ASSERT_FALSE(no_offset);
  EXPECT_NE(no_offset.error().message().find("offset"), std::string::npos);
  EXPECT_FALSE(parse_request("qXfer:siginfo:write::10"));
}

TEST(ParseRequest, QSupportedFeatures) {
  const Supported all = parsed<Supported>(
      "qSupported:multiprocess+;swbreak+;fork-events+;vfork-events+;exec-events+;error-message+");
  EXPECT_TRUE(all.multiprocess && all.fork_events && all.vfork_events && all.exec_events &&
              all.error_message);
  const Supported none = parsed<Supported>("qSupported:swbreak+;fork-events-");
  EXPECT_FALSE(none.multiprocess || none.fork_events || none.vfork_events || none.exec_events ||
               none.error_message);
  // fork-events+ counts after a ';' only (not as the end of vfork-events+).
  const Supported vfork = parsed<Supported>("qSupported:vfork-events+");
  EXPECT_TRUE(vfork.vfork_events);
  EXPECT_FALSE(vfork.fork_events);
}

TEST(ParseRequest, QXfer) {
  const Xfer features = parsed<Xfer>("qXfer:features:read:target.xml:0,fff");
  EXPECT_EQ(features.object, "features");
  EXPECT_EQ(features.annex, "target.xml");
  EXPECT_FALSE(features.annex_process);
  EXPECT_EQ(features.offset, 0u);
  EXPECT_EQ(features.length, 0xfffu);
  const Xfer exec = parsed<Xfer>("qXfer:exec-file:read:c8:10,20");
  EXPECT_EQ(exec.annex_process, 200);
  EXPECT_EQ(exec.offset, 0x10u);
  EXPECT_EQ(exec.length, 0x20u);
  EXPECT_FALSE(parsed<Xfer>("qXfer:exec-file:read::0,20").annex_process);
  EXPECT_FALSE(parsed<Xfer>("qXfer:exec-file:read:0:0,20").annex_process);
  EXPECT_EQ(error_of("qXfer:auxv:read::0").message(), "packet: '0' lacks ADDR,LENGTH");
  EXPECT_EQ(error_of("qXfer:auxv:read::zz,10").code(), ErrorCode::kInval);
}

TEST(ParseRequest, MonitorCommands) {
  EXPECT_EQ(parsed<Monitor>("qRcmd,65786974").command, "exit");
  EXPECT_EQ(parsed<Monitor>("qRcmd,").command, "");
  // Malformed hex: an unknown (empty) command, answered E01 after the help.
  EXPECT_EQ(parsed<Monitor>("qRcmd,6z").command, "");
}

TEST(ParseRequest, ThreadLocalAddress) {
  const auto t = parsed<TlsAddress>("qGetTLSAddr:p64.65,1c,7ffff7ffe2e0");
  EXPECT_EQ(t.process, 0x64);
  EXPECT_EQ(t.tid, 0x65);
  EXPECT_EQ(t.offset, 0x1cu);
  EXPECT_EQ(t.lm, 0x7ffff7ffe2e0u);
  EXPECT_EQ(parsed<TlsAddress>("qGetTLSAddr:65,0,0").process, 0);
  EXPECT_EQ(error_of("qGetTLSAddr:65,0").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("qGetTLSAddr:65,x,0").code(), ErrorCode::kInval);
}

TEST(ParseRequest, LldbMemoryRegionInfo) {
  EXPECT_EQ(parsed<MemoryRegionInfo>("qMemoryRegionInfo:600000").addr, 0x600000u);
  EXPECT_EQ(error_of("qMemoryRegionInfo:").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("qMemoryRegionInfo:xyz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, CatchSyscalls) {
  EXPECT_FALSE(parsed<CatchSyscalls>("QCatchSyscalls:0").numbers);
  EXPECT_EQ(parsed<CatchSyscalls>("QCatchSyscalls:1").numbers, std::set<long>{});
  EXPECT_EQ(parsed<CatchSyscalls>("QCatchSyscalls:1;3b;e7").numbers, (std::set<long>{59, 231}));
  EXPECT_EQ(error_of("QCatchSyscalls:2").message(), "QCatchSyscalls: 0 or 1");
  EXPECT_EQ(parsed<ProgramSignals>("QProgramSignals:").signals, std::set<int>{});
  EXPECT_EQ(parsed<ProgramSignals>("QProgramSignals:e;1e").signals, (std::set<int>{14, 30}));
  EXPECT_EQ(error_of("QProgramSignals:e;zz").message(),
            "QProgramSignals: a signal number in hex expected");
  EXPECT_EQ(error_of("QCatchSyscalls:1,3b").message(), "QCatchSyscalls: ';' expected");
  EXPECT_EQ(error_of("QCatchSyscalls:1;").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("QCatchSyscalls:1;zz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, LaunchSettings) {
  EXPECT_TRUE(parsed<DisableRandomization>("QDisableRandomization:1").on);
  EXPECT_FALSE(parsed<DisableRandomization>("QDisableRandomization:0").on);
  EXPECT_TRUE(parsed<StartupWithShell>("QStartupWithShell:1").on);
  EXPECT_FALSE(parsed<StartupWithShell>("QStartupWithShell:0").on);
  EXPECT_EQ(parsed<SetWorkingDir>("QSetWorkingDir:2f746d70").dir, "/tmp");
  EXPECT_EQ(parsed<SetWorkingDir>("QSetWorkingDir:").dir, "");
  EXPECT_EQ(error_of("QSetWorkingDir:2").code(), ErrorCode::kInval);
  EXPECT_TRUE(is<EnvironmentReset>("QEnvironmentReset"));
  EXPECT_EQ(parsed<EnvironmentSet>("QEnvironmentHexEncoded:413d31").name_value, "A=1");
  EXPECT_EQ(parsed<EnvironmentUnset>("QEnvironmentUnset:41").name, "A");
  EXPECT_EQ(error_of("QEnvironmentHexEncoded:41").message(), "environment: 'A' is not NAME=VALUE");
  EXPECT_EQ(error_of("QEnvironmentHexEncoded:3d31").message(),
            "environment: '=1' is not NAME=VALUE");
  EXPECT_EQ(error_of("QEnvironmentUnset:").message(), "environment: '' is not a NAME");
  const Error bad_hex = error_of("QEnvironmentUnset:4");
  EXPECT_EQ(bad_hex.code(), ErrorCode::kInval);
  EXPECT_TRUE(bad_hex.message().starts_with("environment: ")) << bad_hex.message();
}

TEST(ParseRequest, ThreadSelectionAndAliveness) {
  const SelectThread hg = parsed<SelectThread>("Hg65");
  EXPECT_TRUE(hg.general);
  EXPECT_EQ(hg.process, 0);
  EXPECT_EQ(hg.tid, 0x65);
  const SelectThread hc = parsed<SelectThread>("Hc-1");
  EXPECT_FALSE(hc.general);
  EXPECT_EQ(hc.tid, -1);
  const SelectThread of_process = parsed<SelectThread>("Hgp64.0");
  EXPECT_EQ(of_process.process, 0x64);
  EXPECT_EQ(of_process.tid, 0);
  const SelectThread whole = parsed<SelectThread>("Hgp64");
  EXPECT_EQ(whole.process, 0x64);
  EXPECT_EQ(whole.tid, -1);
  EXPECT_EQ(error_of("H").message(), "packet: H without a thread");
  EXPECT_EQ(error_of("Hgxyz").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Hg").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Hg80000000").message(), "thread: 80000000 is not a thread id");

  EXPECT_EQ(parsed<ThreadAlive>("T65").tid, 0x65);
  EXPECT_EQ(parsed<ThreadAlive>("Tp64.65").tid, 0x65);
  EXPECT_EQ(error_of("T").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Tp64.zz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, Registers) {
  EXPECT_EQ(parsed<WriteRegisters>("G0011").hex, "0011");
  const ReadRegister p = parsed<ReadRegister>("p10");
  EXPECT_EQ(p.regno, 16);
  EXPECT_FALSE(p.thread);
  const ReadRegister suffixed = parsed<ReadRegister>("p3a;thread:65;");
  EXPECT_EQ(suffixed.regno, 0x3a);
  EXPECT_EQ(suffixed.thread, 0x65);
  // A malformed thread suffix: the general thread.
  EXPECT_FALSE(parsed<ReadRegister>("p3a;thread:zz;").thread);
  const WriteRegister w = parsed<WriteRegister>("P0=0100000000000000;thread:66;");
  EXPECT_EQ(w.regno, 0);
  EXPECT_EQ(w.hex, "0100000000000000");
  EXPECT_EQ(w.thread, 0x66);

  EXPECT_EQ(error_of("p").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("pzz").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("p95").message(),
            "regno: 95 is not a register (0-" + hex_u64(kGdbRegisterCount - 1) + ")");
  // P without a value: the server replies EINVAL once it read the registers.
  EXPECT_FALSE(parsed<WriteRegister>("P5").hex);
  EXPECT_EQ(error_of("P=00").code(), ErrorCode::kInval);
}

TEST(ParseRequest, Memory) {
  const ReadMemory m = parsed<ReadMemory>("m1000,4");
  EXPECT_EQ(m.addr, 0x1000u);
  EXPECT_EQ(m.length, 4u);
  EXPECT_FALSE(m.binary);
  EXPECT_TRUE(parsed<ReadMemory>("x1000,4").binary);
  // An overlong read is the server's to bound.
  EXPECT_EQ(parsed<ReadMemory>("m0,ffffffffffffffff").length, ~std::uint64_t{0});
  const WriteMemory hex = parsed<WriteMemory>("M1000,2:abcd");
  EXPECT_EQ(hex.addr, 0x1000u);
  EXPECT_EQ(hex.bytes, (std::vector<std::uint8_t>{0xab, 0xcd}));
  EXPECT_EQ(parsed<WriteMemory>("X1000,2:}\x03"
                                "a")
                .bytes,
            (std::vector<std::uint8_t>{'#', 'a'}));
  EXPECT_TRUE(parsed<WriteMemory>("X1000,0:").bytes.empty());

  EXPECT_EQ(error_of("m1000").message(), "packet: '1000' lacks ADDR,LENGTH");
  EXPECT_EQ(error_of("m,4").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("m1000,").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("m10000000000000000,1").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Mzz").message(), "packet: M/X without ':'");
  EXPECT_EQ(error_of("M1000,2:abc").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("M1000,2:zzzz").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("M1000,3:abcd").message(), "packet: length 3 but 2 bytes");
  EXPECT_EQ(error_of("X1000,1:ab").message(), "packet: length 1 but 2 bytes");
}

TEST(ParseRequest, BreakpointsAndWatches) {
  const Point z0 = parsed<Point>("Z0,401000,1");
  EXPECT_TRUE(z0.insert);
  EXPECT_EQ(z0.type, PointType::kSoftware);
  EXPECT_EQ(z0.addr, 0x401000u);
  EXPECT_EQ(z0.length, 1u);
  EXPECT_TRUE(z0.agent.conditions.empty());
  const Point z2 = parsed<Point>("z2,601000,8");
  EXPECT_FALSE(z2.insert);
  EXPECT_EQ(z2.type, PointType::kWrite);
  EXPECT_EQ(parsed<Point>("Z4,0,1").type, PointType::kAccess);
  const Point conditional = parsed<Point>("Z1,401000,1;X2,2201;cmds:0,X1,27");
  EXPECT_EQ(conditional.type, PointType::kHardware);
  ASSERT_EQ(conditional.agent.conditions.size(), 1u);
  EXPECT_EQ(conditional.agent.conditions[0], (AgentExpr{0x22, 0x01}));
  // Conditions belong to Z0/Z1 only: elsewhere the text after ';' is left alone.
  EXPECT_TRUE(parsed<Point>("Z2,601000,8;X2,zz").agent.conditions.empty());
  EXPECT_TRUE(parsed<Point>("z0,401000,1;X2,zz").agent.conditions.empty());

  EXPECT_EQ(error_of("Z0,xyz,1").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Z0,401000").message(), "packet: '401000' lacks ADDR,LENGTH");
  EXPECT_EQ(error_of("Z0,401000,1;X2,zz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, OldResumeForms) {
  EXPECT_EQ(parsed<Continue>("c").kind, 'c');
  EXPECT_EQ(parsed<Continue>("s").kind, 's');
  const Continue c = parsed<Continue>("C0b");
  EXPECT_EQ(c.kind, 'C');
  EXPECT_EQ(c.signal, 0xbu);
  EXPECT_EQ(parsed<Continue>("S05").signal, 5u);
  EXPECT_EQ(parsed<Continue>("C0b;").signal, 0xbu);
  EXPECT_EQ(error_of("c1000").message(), "packet: resuming at an address is not served");
  EXPECT_EQ(error_of("s1000").message(), "packet: resuming at an address is not served");
  EXPECT_EQ(error_of("C0b;1000").message(), "packet: resuming at an address is not served");
  EXPECT_EQ(error_of("C").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("Szz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, VContActions) {
  const VCont v = parsed<VCont>("vCont;s:65;C0b:p64.66;t:-1;c");
  ASSERT_EQ(v.actions.size(), 4u);
  EXPECT_EQ(v.actions[0].kind, 's');
  EXPECT_EQ(v.actions[0].tid, 0x65);
  EXPECT_EQ(v.actions[0].process, 0);
  EXPECT_EQ(v.actions[1].kind, 'C');
  EXPECT_EQ(v.actions[1].signal, 0xbu);
  EXPECT_EQ(v.actions[1].process, 0x64);
  EXPECT_EQ(v.actions[1].tid, 0x66);
  EXPECT_EQ(v.actions[2].kind, 't');
  EXPECT_EQ(v.actions[2].tid, -1);
  EXPECT_EQ(v.actions[3].kind, 'c');
  EXPECT_EQ(v.actions[3].tid, -1);
  EXPECT_EQ(parsed<VCont>("vCont;;c;").actions.size(), 1u);
  const VCont whole = parsed<VCont>("vCont;c:p64");
  EXPECT_EQ(whole.actions[0].process, 0x64);
  EXPECT_EQ(whole.actions[0].tid, -1);

  EXPECT_EQ(error_of("vCont;").message(), "vCont: no action");
  EXPECT_EQ(error_of("vCont;x").message(), "vCont: unknown action 'x'");
  EXPECT_EQ(error_of("vCont;c65").message(), "vCont: action 'c65' is malformed");
  EXPECT_EQ(error_of("vCont;C:65").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("vCont;Czz").code(), ErrorCode::kInval);
  EXPECT_EQ(error_of("vCont;c:zz").code(), ErrorCode::kInval);
}

TEST(ParseRequest, VContRangeStepping) {
  const VCont v = parsed<VCont>("vCont;r401000,401010:p64.65;c");
  ASSERT_EQ(v.actions.size(), 2u);
  EXPECT_EQ(v.actions[0].kind, 'r');
  EXPECT_EQ(v.actions[0].range_start, 0x401000u);
  EXPECT_EQ(v.actions[0].range_end, 0x401010u);
  EXPECT_EQ(v.actions[0].process, 0x64);
  EXPECT_EQ(v.actions[0].tid, 0x65);
  EXPECT_EQ(error_of("vCont;r401000:65").message(), "vCont: range 'r401000:65' is not START,END");
  EXPECT_EQ(error_of("vCont;r:65").code(), ErrorCode::kInval);
}

TEST(ParseRequest, NonStopRequests) {
  EXPECT_TRUE(parsed<NonStop>("QNonStop:1").on);
  EXPECT_FALSE(parsed<NonStop>("QNonStop:0").on);
  EXPECT_TRUE(parsed<ThreadEvents>("QThreadEvents:1").on);
  EXPECT_FALSE(parsed<ThreadEvents>("QThreadEvents:0").on);
  EXPECT_TRUE(is<Stopped>("vStopped"));
  EXPECT_TRUE(is<CtrlC>("vCtrlC"));
  EXPECT_EQ(error_of("QNonStop:2").message(), "QNonStop: 0 or 1");
  EXPECT_EQ(error_of("QThreadEvents:").message(), "QThreadEvents: 0 or 1");
}

TEST(ParseRequest, ProcessesStartAttachKillDetach) {
  EXPECT_EQ(parsed<gdb::Run>("vRun;2f62696e2f70726f67;61").argv,
            (std::vector<std::string>{"/bin/prog", "a"}));
  EXPECT_EQ(parsed<gdb::Run>("vRun;").argv, (std::vector<std::string>{""}));
  const Error run = error_of("vRun;2f6");
  EXPECT_EQ(run.code(), ErrorCode::kInval);
  EXPECT_TRUE(run.message().starts_with("vRun: ")) << run.message();
  EXPECT_EQ(parsed<Attach>("vAttach;c8").pid, 200);
  EXPECT_EQ(error_of("vAttach;0").message(), "vAttach: 0");
  EXPECT_EQ(error_of("vAttach;-1").message(), "vAttach: -1");
  EXPECT_EQ(error_of("vAttach;zz").code(), ErrorCode::kInval);

  EXPECT_EQ(parsed<VKill>("vKill;64").process, 0x64);
  EXPECT_FALSE(parsed<VKill>("vKill").process);
  EXPECT_FALSE(parsed<VKill>("vKill;0").process);
  EXPECT_FALSE(parsed<VKill>("vKill;zz").process);
  EXPECT_EQ(parsed<Detach>("D;65").process, 0x65);
  EXPECT_FALSE(parsed<Detach>("D").process);
  EXPECT_FALSE(parsed<Detach>("D;-1").process);
}

TEST(ParseRequest, HostFiles) {
  using Op = HostFile::Op;
  EXPECT_EQ(parsed<HostFile>("vFile:setfs:0").op, Op::kSetFs);
  const HostFile open = parsed<HostFile>("vFile:open:2f6574632f686f7374,0,1ed");
  EXPECT_EQ(open.op, Op::kOpen);
  EXPECT_EQ(open.path, "/etc/host");
  EXPECT_EQ(open.flags, 0u);
  EXPECT_EQ(open.mode, 0755u);
  EXPECT_FALSE(open.error);
  EXPECT_EQ(parsed<HostFile>("vFile:open:2f78,201").mode, 0u);
  EXPECT_EQ(parsed<HostFile>("vFile:open:2f78,0,81a4").mode, 0644u);  // permission bits only
  const HostFile pread = parsed<HostFile>("vFile:pread:7,3,1");
  EXPECT_EQ(pread.op, Op::kPread);
  EXPECT_EQ(pread.fd, 7);
  EXPECT_EQ(pread.count, 3u);
  EXPECT_EQ(pread.offset, 1u);
  const HostFile pwrite = parsed<HostFile>("vFile:pwrite:7,5,a,}\x03");
  EXPECT_EQ(pwrite.offset, 5u);
  EXPECT_EQ(pwrite.data, "a,#");
  EXPECT_EQ(parsed<HostFile>("vFile:fstat:7").op, Op::kFstat);
  EXPECT_EQ(parsed<HostFile>("vFile:close:7").op, Op::kClose);
  EXPECT_EQ(parsed<HostFile>("vFile:unlink:2f78").path, "/x");
  EXPECT_EQ(parsed<HostFile>("vFile:readlink:2f70").path, "/p");
  const HostFile other = parsed<HostFile>("vFile:sync:7");
  EXPECT_EQ(other.op, Op::kOther);
  EXPECT_EQ(other.fd, 7);

  // Malformed: the error (F-1,16), and the descriptor when it parsed (checked first: F-1,9).
  const HostFile bad_path = parsed<HostFile>("vFile:open:2f7,0,0");
  ASSERT_TRUE(bad_path.error);
  EXPECT_EQ(bad_path.error->code(), ErrorCode::kInval);
  const HostFile no_flags = parsed<HostFile>("vFile:open:2f78");
  ASSERT_TRUE(no_flags.error);
  EXPECT_EQ(no_flags.error->message(), "vFile: missing argument");
  EXPECT_TRUE(parsed<HostFile>("vFile:readlink:2f7").error);
  const HostFile bad_fd = parsed<HostFile>("vFile:close:zz");
  EXPECT_TRUE(bad_fd.error);
  EXPECT_FALSE(bad_fd.fd);
  const HostFile no_offset = parsed<HostFile>("vFile:pread:7,3");
  EXPECT_EQ(no_offset.fd, 7);
  ASSERT_TRUE(no_offset.error);
  EXPECT_EQ(no_offset.error->message(), "vFile: missing argument");
  const HostFile no_data = parsed<HostFile>("vFile:pwrite:7,5");
  ASSERT_TRUE(no_data.error);
  EXPECT_EQ(no_data.error->message(), "vFile: pwrite without data");
}

}  // namespace
}  // namespace hwarb::gdb

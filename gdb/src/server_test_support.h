// server_test_support.h — a fake Target and Connection for gdb::Server's unit tests (test-only).
// FakeTarget keeps a process in memory (threads, registers, bytes of memory) and records every
// request the server makes of it as one line in `calls`; its stops are scripted (`stops`), and
// an error can be set for any request by name (`fail`). FakeConnection is a script of bytes from
// the client (`input`, a piece per read) and what the server sent (`output`).
#pragma once

#include <csignal>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/gdb/rsp.h"
#include "hwarb/gdb/target.h"

namespace hwarb::gdb::testing {

class FakeConnection final : public Connection {
 public:
  std::deque<std::string> input;  // what each read gives, in order (none left: end of input)
  std::string output;
  bool interrupt_flag = false;

  Result<Read> read(bool, std::string& out) override {
    if (input.empty()) return Read::kEnd;
    out += input.front();
    input.pop_front();
    return Read::kData;
  }
  Result<void> write(std::string_view bytes) override {
    output += bytes;
    return {};
  }
  bool lost() const override { return false; }
  bool interrupt_requested() const override { return interrupt_flag; }
  int poll_fd() const override { return -1; }
  void log(const std::string& line) override { logged.push_back(line); }
  std::vector<std::string> logged;
};

class FakeTarget final : public Target {
 public:
  // The process: one (pid 100) with threads 100 and 101 unless a test says otherwise.
  bool process = true;
  bool is_spawned = true;
  int attach_signo = 0;  // attach_signal's (0: none)
  bool startable = false;
  Tid first = 100;
  std::vector<Tid> thread_list{100, 101};
  std::map<Tid, Tid> group;  // thread -> process (none: `first`)
  std::map<Tid, Registers> regs;
  std::map<std::uint64_t, std::uint8_t> memory;  // readable bytes
  std::deque<StopEvent> stops;                   // what wait() returns, in order
  int quiet_waits = 0;                           // waits that give the client's input first
  bool owes = false;  // owe_interrupt()'s answer: the Ctrl-C waits for another process
  std::map<std::string, Error> fail;  // a request's name -> its error
  std::vector<std::string> calls;
  std::vector<std::vector<AgentExpr>> conditions;  // of each insert_point
  std::vector<std::vector<AgentExpr>> commands;    // of each insert_point
  std::vector<std::vector<ResumeAction>> resumes;
  ServerEnd end;  // what finish() returns (how set from its argument)

  Registers& regs_of(Tid tid) {
    auto [it, added] = regs.try_emplace(tid);
    if (added) {
      it->second.regs.rbp = 0x7ffe0010;
      it->second.regs.rsp = 0x7ffe0000;
      it->second.regs.rip = 0x401000 + static_cast<std::uint64_t>(tid);
    }
    return it->second;
  }

  bool has_process() const override { return process; }
  Tid pid() const override { return first; }
  bool spawned() const override { return is_spawned; }
  std::vector<Tid> threads() const override { return thread_list; }
  Tid group_of(Tid tid) const override {
    auto it = group.find(tid);
    return it == group.end() ? first : it->second;
  }
  Tid process_of(Tid tid) const override { return group_of(tid); }
  bool is_stopped(Tid) const override { return true; }
  void set_features(const ClientFeatures& f, bool announced) override {
    calls.push_back("set_features " + std::to_string(f.multiprocess) +
                    std::to_string(f.fork_events) + std::to_string(f.vfork_events) +
                    std::to_string(f.no_resumed) + (announced ? " announced" : ""));
  }
  void set_catch_syscalls(std::optional<std::set<long>> numbers) override {
    std::string line = "catch_syscalls";
    if (!numbers) line += " off";
    for (long n : numbers.value_or(std::set<long>())) line += " " + std::to_string(n);
    calls.push_back(line);
  }
  void set_event_log(std::function<void(const std::string&)> log) override {
    calls.push_back(log ? "event_log on" : "event_log off");
  }
  Result<x86::Regs> general_registers(Tid tid) override { return regs_of(tid).regs; }
  Result<Registers> read_registers(Tid tid, bool ext) override {
    calls.push_back("read_registers " + std::to_string(tid) + (ext ? " ext" : ""));
    if (auto e = error("read_registers")) return std::unexpected(*e);
    return regs_of(tid);
  }
  Result<void> write_registers(Tid tid, const Registers& now, const Registers& before) override {
    calls.push_back("write_registers " + std::to_string(tid));
    if (auto e = error("write_registers")) return std::unexpected(*e);
    if (before != regs_of(tid)) return make_error(ErrorCode::kInval, "before: not what was read");
    regs_of(tid) = now;
    return {};
  }
  Result<std::vector<std::uint8_t>> read_memory(Tid process, std::uint64_t addr,
                                                std::uint64_t len) override {
    calls.push_back("read_memory " + std::to_string(process) + " " + hex_u64(addr) + " " +
                    std::to_string(len));
    std::vector<std::uint8_t> out;
    for (std::uint64_t a = addr; a < addr + len; ++a) {
      auto it = memory.find(a);
      if (it == memory.end()) break;
      out.push_back(it->second);
    }
    if (out.empty()) return make_error(ErrorCode::kFault, "addr: not readable");
    return out;
  }
  Result<void> write_memory(Tid process, std::uint64_t addr,
                            const std::vector<std::uint8_t>& bytes) override {
    calls.push_back("write_memory " + std::to_string(process) + " " + hex_u64(addr) + " " +
                    to_hex(bytes));
    if (auto e = error("write_memory")) return std::unexpected(*e);
    for (std::size_t i = 0; i < bytes.size(); ++i) memory[addr + i] = bytes[i];
    return {};
  }
  Result<void> insert_point(Tid process, PointType type, std::uint64_t addr, std::uint64_t len,
                            PointAgent agent) override {
    calls.push_back("insert_point " + std::to_string(process) + " " + static_cast<char>(type) +
                    " " + hex_u64(addr) + " " + std::to_string(len));
    conditions.push_back(agent.conditions);
    commands.push_back(std::move(agent.commands));
    if (auto e = error("insert_point")) return std::unexpected(*e);
    return {};
  }
  Result<void> remove_point(Tid process, PointType type, std::uint64_t addr,
                            std::uint64_t len) override {
    calls.push_back("remove_point " + std::to_string(process) + " " + static_cast<char>(type) +
                    " " + hex_u64(addr) + " " + std::to_string(len));
    if (auto e = error("remove_point")) return std::unexpected(*e);
    return {};
  }
  Result<std::optional<StopEvent>> resume(const std::vector<ResumeAction>& actions) override {
    std::string line = "resume";
    for (const ResumeAction& a : actions) {
      line += std::string(" ") + a.kind + std::to_string(a.signal) + ":" +
              std::to_string(a.process) + "." + std::to_string(a.tid);
    }
    calls.push_back(line);
    resumes.push_back(actions);
    if (auto e = error("resume")) return std::unexpected(*e);
    return std::optional<StopEvent>();
  }
  Result<Waited> wait(int) override {
    calls.push_back("wait");
    if (auto e = error("wait")) return std::unexpected(*e);
    if (stops.empty() || quiet_waits > 0) {  // the client speaks
      if (quiet_waits > 0) --quiet_waits;
      return Waited{};
    }
    StopEvent stop = stops.front();
    stops.pop_front();
    return Waited{.stop = stop};
  }
  Result<StopEvent> interrupt() override {
    calls.push_back("interrupt");
    StopEvent stop;
    stop.tid = first;
    stop.signal = SIGINT;
    return stop;
  }
  bool owe_interrupt() override {
    calls.push_back("owe_interrupt");
    return owes;
  }
  Result<void> set_non_stop(bool on) override {
    calls.push_back(std::string("non_stop ") + (on ? "1" : "0"));
    if (auto e = error("non_stop")) return std::unexpected(*e);
    return {};
  }
  Result<void> interrupt_process() override {
    calls.push_back("interrupt_process");
    return {};
  }
  Result<ServerEnd> finish(ServerEnd::How how) override {
    calls.push_back("finish " + std::to_string(static_cast<int>(how)));
    ServerEnd out = end;
    out.how = how;
    return out;
  }
  Result<void> detach_process(Tid process) override {
    calls.push_back("detach_process " + std::to_string(process));
    return {};
  }
  Result<void> kill_process(Tid process) override {
    calls.push_back("kill_process " + std::to_string(process));
    return {};
  }
  Result<ServerEnd> drop_process(ServerEnd::How how) override {
    calls.push_back("drop_process " + std::to_string(static_cast<int>(how)));
    process = false;
    return end;
  }
  bool can_start() const override { return startable; }
  Result<Tid> start(std::vector<std::string> argv) override {
    std::string line = "start";
    for (const std::string& a : argv) line += " [" + a + "]";
    calls.push_back(line);
    if (auto e = error("start")) return std::unexpected(*e);
    process = true;
    return first;
  }
  Result<void> restart() override {
    calls.push_back("restart");
    process = true;
    return {};
  }
  Result<Tid> attach(Tid pid) override {
    calls.push_back("attach " + std::to_string(pid));
    if (auto e = error("attach")) return std::unexpected(*e);
    process = true;
    is_spawned = false;
    first = pid;
    thread_list = {pid};
    return pid;
  }
  std::optional<StopEvent> attach_signal(Tid process) override {
    if (attach_signo == 0) return std::nullopt;
    StopEvent stop;
    stop.kind = StopEvent::Kind::kSignal;
    stop.tid = process;
    stop.signal = attach_signo;
    return stop;
  }
  void set_program_signals(std::set<int> signals) override {
    std::string line = "program_signals";
    for (int s : signals) line += " " + std::to_string(s);
    calls.push_back(line);
  }
  void set_disable_randomization(bool on) override {
    calls.push_back(std::string("disable_randomization ") + (on ? "1" : "0"));
  }
  void set_startup_with_shell(bool on) override {
    calls.push_back(std::string("startup_with_shell ") + (on ? "1" : "0"));
  }
  void set_working_directory(const std::string& dir) override {
    calls.push_back("working_directory [" + dir + "]");
  }
  void reset_environment() override { calls.push_back("reset_environment"); }
  void set_environment(const std::string& name_value) override {
    calls.push_back("set_environment " + name_value);
  }
  void unset_environment(const std::string& name) override {
    calls.push_back("unset_environment " + name);
  }
  Result<std::string> auxv(Tid process) override {
    calls.push_back("auxv " + std::to_string(process));
    return std::string("\x06\0\0\0\0\0\0\0", 8);
  }
  Result<std::string> libraries_svr4(Tid process, bool without_main_lm) override {
    calls.push_back("libraries_svr4 " + std::to_string(process) +
                    (without_main_lm ? " without_main_lm" : ""));
    return std::string("<library-list-svr4 version=\"1.0\"/>");
  }
  Result<std::string> exec_file(Tid process) override {
    calls.push_back("exec_file " + std::to_string(process));
    return std::string("/bin/prog");
  }
  Result<std::string> siginfo(Tid tid) override {
    calls.push_back("siginfo " + std::to_string(tid));
    return std::string(128, '\x01');
  }
  Result<std::size_t> write_siginfo(Tid tid, std::uint64_t offset, std::string_view data) override {
    calls.push_back("write_siginfo " + std::to_string(tid) + " " + hex_u64(offset) + " " +
                    std::to_string(data.size()));
    if (offset > 128) return make_error(ErrorCode::kInval, "offset: past the siginfo");
    return std::min<std::size_t>(data.size(), 128 - offset);
  }
  std::string thread_name(Tid tid) override { return tid == first ? "main<1>" : ""; }
  Result<MemoryRegion> memory_region(std::uint64_t addr) override {
    calls.push_back("memory_region " + hex_u64(addr));
    MemoryRegion r;
    r.start = addr & ~std::uint64_t{0xfff};
    r.size = 0x1000;
    r.mapped = addr < 0x500000;
    r.read = r.exec = true;
    if (r.mapped) r.path = "/bin/prog";
    return r;
  }
  Result<OsData> os_data(const std::string& name) override {
    calls.push_back("os_data " + name);
    if (name != "processes") return make_error(ErrorCode::kNoEnt, "annex: no table named " + name);
    OsData t{"processes", {"pid", "command"}, {}};
    for (int i = 0; i < 300; ++i)
      t.rows.push_back({std::to_string(i), "prog <" + std::to_string(i) + ">"});
    return t;
  }
  Result<std::uint64_t> tls_address(Tid tid, std::uint64_t offset, std::uint64_t lm) override {
    calls.push_back("tls_address " + std::to_string(tid) + " " + hex_u64(offset) + " " +
                    hex_u64(lm));
    if (auto e = error("tls_address")) return std::unexpected(*e);
    return 0x7f0000000000 + static_cast<std::uint64_t>(tid) * 0x1000 + offset;
  }
  std::string describe_watches() override { return "no watchpoints\n"; }
  std::string describe_slots() override { return "debug registers per thread: 4\n"; }
  Result<int> open_file(const std::string& path, unsigned flags, unsigned mode) override {
    calls.push_back("open_file " + path + " " + std::to_string(flags) + " " + std::to_string(mode));
    if (auto e = error("open_file")) return std::unexpected(*e);
    files[7] = "hello";
    return 7;
  }
  bool has_file(int fd) const override { return files.contains(fd); }
  Result<void> close_file(int fd) override {
    files.erase(fd);
    return {};
  }
  Result<std::size_t> pread_file(int fd, std::uint64_t offset,
                                 std::vector<std::uint8_t>& out) override {
    const std::string& text = files.at(fd);
    std::size_t n = 0;
    for (; n < out.size() && offset + n < text.size(); ++n) {
      out[n] = static_cast<std::uint8_t>(text[offset + n]);
    }
    return n;
  }
  Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::string_view data) override {
    std::string& text = files.at(fd);
    if (text.size() < offset + data.size()) text.resize(offset + data.size());
    text.replace(offset, data.size(), data);
    return data.size();
  }
  Result<FileStatus> stat_file(int) override {
    FileStatus st;
    st.size = 5;
    st.mode = 0100644;
    return st;
  }
  Result<void> unlink_file(const std::string& path) override {
    calls.push_back("unlink_file " + path);
    return make_error(ErrorCode::kNoEnt, "path: no such file");
  }
  Result<std::string> read_link(const std::string& path) override {
    calls.push_back("read_link " + path);
    return std::string("/work");
  }
  void close_files() override { files.clear(); }
  std::map<int, std::string> files;

 private:
  std::optional<Error> error(const std::string& name) const {
    auto it = fail.find(name);
    if (it == fail.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace hwarb::gdb::testing

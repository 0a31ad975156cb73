// runner.h — the runner behind run_scenario (scenario.h). Internal to hwarb_scenario:
// runner.cpp executes the commands (tasks, requests, watchpoints);
// bts_run.cpp the BTS ones (events, tracing contexts, `run`);
// ptrace_run.cpp the ptrace ones; output.cpp makes the output lines (hits,
// `show`, the --explain reasons).
//
// Contract: one Runner per run; run() executes every command on a fresh sim::System and returns
// the output lines, or the first error as "FILE:LINE: message" (a run-time scenario error) or
// "internal error: FILE:LINE: message". A refusal's reason is computed only with --explain.
// Output past Limits::output_bytes is dropped and ends the run with a run-time scenario error.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/scenario/scenario.h"
#include "hwarb/sim/sim_tracee.h"
#include "hwarb/sim/system.h"

namespace hwarb::scenario::internal {

// What a request name holds at run time.
struct Held {
  CommandKind kind = CommandKind::kBp;
  arbiter::Request request;              // the slot request (wide: the per-CPU template, cpu unset)
  std::vector<pmu::EventHandle> events;  // bp: one; wide: one per CPU
  std::vector<arbiter::Reservation> parts;  // bts/pt/lbr
  std::optional<breakpoints::WatchId> watch;
  bool live() const { return !events.empty() || !parts.empty() || watch.has_value(); }
};

class Runner {
 public:
  Runner(const Scenario& scenario, const RunOptions& options)
      : scenario_(scenario), options_(options) {}

  Result<std::vector<std::string>> run();

  static constexpr std::string_view kInternal = "internal error";

 private:
  using Reason = std::function<std::string()>;

  sim::Machine& machine() { return sys_->machine(); }
  arbiter::Arbiter& arbiter() { return sys_->arbiter(); }

  // runner.cpp
  Result<void> execute(const Command& cmd);
  std::unexpected<Error> run_error(ErrorCode code, std::string message);
  Result<TaskId> live_task(const std::string& name);
  std::string task_name(TaskId id) const;
  void add_task(const std::string& name, TaskId id);
  Result<void> task(const Command& cmd);
  std::optional<TaskId> task_id(const std::optional<std::string>& name) const;
  // Keeps what NAME holds (live_ too).
  void keep(const Command& cmd, Held h);
  pmu::EventAttr new_attr(const Command& cmd) const;
  arbiter::Request slot_request(const pmu::EventAttr& a, std::optional<TaskId> task,
                                std::optional<CpuId> cpu) const;
  void bp(const Command& cmd);
  void wide(const Command& cmd);
  Result<void> modify(const Command& cmd);
  void settle_open(const Command& cmd, Held h, Result<pmu::EventHandle> r);
  void exclusive(const Command& cmd);
  Result<void> watch(const Command& cmd);

  // bts_run.cpp
  void bts_event(const Command& cmd);
  std::vector<arbiter::Request> context_requests(std::optional<TaskId> task);
  Result<void> bts_open(const Command& cmd);
  std::optional<bts::ContextId> context_of(const Command& cmd);
  Result<void> bts_close(const Command& cmd);
  Result<void> bts_drain(const Command& cmd);
  Result<void> bts_status(const Command& cmd);
  Result<void> run_walk(const Command& cmd);

  // ptrace_run.cpp
  static std::string signal_name(int sig);
  static std::string stop_text(const std::optional<ptrace_compat::Stop>& stop);
  Result<void> check_not_stopped(const Command& cmd, TaskId t);
  ptrace_compat::UserLayout default_layout() const;
  static std::uint64_t user_offset(const Command& cmd, ptrace_compat::UserLayout layout);
  std::string reg_label(const Command& cmd, ptrace_compat::UserLayout layout);
  std::string ptrace_reason(const std::string& name, TaskId task, const Error& error);
  void ptrace_refuse(const Command& cmd, const std::string& what, TaskId task, const Error& e);
  Result<void> ptrace(const Command& cmd);
  void ptrace_bts(const Command& cmd, TaskId t);

  // guest.cpp
  Result<void> guest(const Command& cmd);
  // A run-time scenario error for host work (switch, exit, access, exec, branch, run) on a CPU
  // that is in a guest.
  Result<void> guest_conflict(const Command& cmd);
  // ksym_run.cpp
  Result<void> ksym(const Command& cmd);

  // output.cpp
  void emit(std::string line);
  void ok(const std::string& name);
  // "NAME ERRNO", with " — reason" (computed only then) for --explain.
  void refuse(const std::string& name, ErrorCode code, const Reason& why);
  std::string hit_line(const std::string& name, const pmu::Sample& s) const;
  pmu::OverflowHandler hit_printer(const std::string& name);
  std::string event_name(const pmu::Event& e) const;
  void show();
  // The SlotStep after `cmd` for RunOptions::on_step (output.cpp).
  void record_step(const Command& cmd);
  std::string request_name(RequestId id) const;
  std::string reason(const arbiter::Request& request, const Error& error);
  std::string reason_any(const std::vector<arbiter::Request>& requests, const Error& error);
  std::string format(const arbiter::Request& request, const arbiter::Explanation& ex);
  std::vector<std::string> task_holders(TaskId task, std::optional<CpuId> cpu) const;
  std::string format_nospc(const arbiter::Explanation& ex, bool name_task_holders = false);
  std::string format_busy(const arbiter::Explanation& ex) const;

  static constexpr std::uint64_t kExclusiveIds = std::uint64_t{1} << 62;

  const Scenario& scenario_;
  RunOptions options_;
  std::unique_ptr<sim::System> sys_;
  std::map<std::string, TaskId> tasks_;
  std::map<TaskId, std::string> task_names_;    // the reverse of tasks_, for hit lines
  std::map<std::uint64_t, std::string> names_;  // event id (or exclusive request id) -> name
  std::map<breakpoints::WatchId, std::string> watch_names_;
  std::map<std::string, Held> held_;  // declared after sys_: destroyed before it
  // The names that hold something, by kind and request id (the holders --explain names).
  std::map<arbiter::ResourceKind, std::map<std::uint64_t, std::string>> live_;
  std::map<std::string, sim::SimTracee> tracees_;   // by task name; likewise (they detach)
  std::map<std::string, bts::ContextId> contexts_;  // `bts open` contexts by name
  int paranoid_ = pmu::kDefaultParanoid;            // sysctl perf_event_paranoid=
  bool run_error_ = false;  // the error being returned is a run-time scenario error
  std::vector<std::string> out_;
  std::size_t out_bytes_ = 0;                     // of every line emitted, dropped ones included
  std::vector<SlotStep::Refusal> step_refusals_;  // of the running command, for on_step
};

}  // namespace hwarb::scenario::internal

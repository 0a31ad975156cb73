// The scenario runner's ptrace commands: a debugger's view of a task (sim::SimTracee).
#include <csignal>

#include "bts.h"
#include "hwarb/base/format.h"
#include "hwarb/ptrace_compat/bts_ptrace.h"
#include "runner.h"

namespace hwarb::scenario::internal {

std::string Runner::signal_name(int sig) {
  switch (sig) {
    case SIGTRAP:
      return "SIGTRAP";
    case SIGSTOP:
      return "SIGSTOP";
    case ptrace_compat::kBtsFullSignal:
      return "SIGIO";
    default:
      return "signal " + std::to_string(sig);
  }
}

// "stopped SIGTRAP dr6=0x...", "running", or how it ended ("exited 0"). A scenario erases a
// task's tracee when the task exits, so the end is never printed today; named for completeness.
std::string Runner::stop_text(const std::optional<ptrace_compat::Stop>& stop) {
  if (!stop) return "running";
  switch (stop->kind) {
    case ptrace_compat::StopKind::kStopped:
      break;
    case ptrace_compat::StopKind::kExited:
      return "exited " + std::to_string(stop->status);
    case ptrace_compat::StopKind::kKilled:
      return "killed " + signal_name(stop->signal);
  }
  return "stopped " + signal_name(stop->signal) + " dr6=" + hex_padded(stop->dr6, 16);
}

// An access or exec by a task in a ptrace stop: the machine refuses it (EBUSY); the file alone
// cannot tell (a hit may have stopped the task), so this is a run-time scenario error.
Result<void> Runner::check_not_stopped(const Command& cmd, TaskId t) {
  auto stopped = machine().stopped(t);
  if (!stopped) return std::unexpected(stopped.error());
  if (!*stopped) return {};
  std::string what;
  if (auto s = sys_->ptrace_wait(t, ptrace_compat::WaitMode::kNoHang); s && *s && !(*s)->ended()) {
    what = " (" + signal_name((*s)->signal) + ")";
  }
  return run_error(ErrorCode::kBusy, std::string(to_string(cmd.kind)) + ": task '" + *cmd.task +
                                         "' is in a ptrace stop" + what +
                                         "; resume it with `ptrace " + *cmd.task +
                                         " cont` (or step) first");
}

ptrace_compat::UserLayout Runner::default_layout() const {
  return scenario_.machine.arch == Arch::kI386 ? ptrace_compat::UserLayout::kI386
                                               : ptrace_compat::UserLayout::kX86_64;
}

// The struct user offset a peek/poke addresses, and how its output line names it: drN for a
// debug register (by name or by an offset that decodes to one), else the offset as written.
std::uint64_t Runner::user_offset(const Command& cmd, ptrace_compat::UserLayout layout) {
  if (cmd.debugreg) {
    return ptrace_compat::debugreg_offset(ptrace_compat::user_area(layout), *cmd.debugreg);
  }
  return cmd.offset;
}

std::string Runner::reg_label(const Command& cmd, ptrace_compat::UserLayout layout) {
  if (cmd.debugreg) return "dr" + std::to_string(*cmd.debugreg);
  auto where = ptrace_compat::decode_offset(layout, sys_->ptrace().abi(layout), cmd.offset);
  if (where && where->kind == ptrace_compat::OffsetKind::kDebugReg) {
    return "dr" + std::to_string(where->debugreg);
  }
  return cmd.reg;
}

// The reason of a refused ptrace request of task `name`.
std::string Runner::ptrace_reason(const std::string& name, TaskId task, const Error& error) {
  switch (error.code()) {
    case ErrorCode::kSrch:  // the tracee is live and attached: it runs
      return "task '" + name + "' is running, not in a ptrace stop";
    case ErrorCode::kNoSpc: {
      // A ptrace breakpoint: a pinned breakpoint of the task on all CPUs.
      arbiter::Request r;
      r.kind = arbiter::ResourceKind::kBreakpoint;
      r.type = arbiter::SlotType::kData;
      r.task = task;
      r.weight = 1;
      r.pinned = true;
      const arbiter::Explanation ex = arbiter().explain(r);
      if (ex.admitted || ex.code != error.code()) return error.message();
      return format_nospc(ex, /*name_task_holders=*/true);
    }
    default:
      return error.message();
  }
}

void Runner::ptrace_refuse(const Command& cmd, const std::string& what, TaskId task,
                           const Error& e) {
  refuse(what, e.code(), [&] { return ptrace_reason(cmd.name, task, e); });
}

Result<void> Runner::ptrace(const Command& cmd) {
  auto t = live_task(cmd.name);
  if (!t) return std::unexpected(t.error());
  auto it = tracees_.find(cmd.name);
  // `attach`, or the first command on an untraced task: attach (it stops with SIGSTOP).
  if (cmd.ptrace_op == PtraceOp::kAttach || it == tracees_.end()) {
    auto tr = sim::SimTracee::attach(*sys_, *t, cmd.layout.value_or(default_layout()));
    if (!tr) {
      if (cmd.ptrace_op != PtraceOp::kAttach) return std::unexpected(tr.error());
      const bool again = tr.error().code() == ErrorCode::kPerm;
      refuse("attach", tr.error().code(), [&] {
        return again ? "task '" + cmd.name + "' is traced already" : tr.error().message();
      });
      return {};
    }
    it = tracees_.insert_or_assign(cmd.name, std::move(*tr)).first;
    if (cmd.ptrace_op == PtraceOp::kAttach) return {};
  }
  sim::SimTracee& tracee = it->second;
  const std::string op(to_string(cmd.ptrace_op));
  switch (cmd.ptrace_op) {
    case PtraceOp::kAttach:
      return {};
    case PtraceOp::kPeek: {
      const std::string what = "peek " + reg_label(cmd, tracee.layout());
      auto v = tracee.peek_user(user_offset(cmd, tracee.layout()));
      if (!v) {
        ptrace_refuse(cmd, what, *t, v.error());
      } else {
        emit(what + " = " + hex_padded(*v, 16));
      }
      return {};
    }
    case PtraceOp::kPoke: {
      const std::string what = "poke " + reg_label(cmd, tracee.layout());
      auto r = tracee.poke_user(user_offset(cmd, tracee.layout()), *cmd.value);
      if (!r) {
        ptrace_refuse(cmd, what, *t, r.error());
      } else {
        ok(what);
      }
      return {};
    }
    case PtraceOp::kWait: {
      auto s = tracee.wait(ptrace_compat::WaitMode::kNoHang);
      if (!s) {
        ptrace_refuse(cmd, op, *t, s.error());
      } else {
        emit(stop_text(*s));
      }
      return {};
    }
    case PtraceOp::kCont:
    case PtraceOp::kStep: {
      auto r = cmd.ptrace_op == PtraceOp::kCont ? tracee.cont() : tracee.step();
      if (!r) ptrace_refuse(cmd, op, *t, r.error());
      return {};
    }
    case PtraceOp::kBtsConfig:
    case PtraceOp::kBtsStatus:
    case PtraceOp::kBtsSize:
    case PtraceOp::kBtsGet:
    case PtraceOp::kBtsDrain:
    case PtraceOp::kBtsClear:
      ptrace_bts(cmd, *t);
      return {};
    case PtraceOp::kDetach: {
      auto r = tracee.detach();
      if (!r) {
        ptrace_refuse(cmd, op, *t, r.error());
      } else {
        tracees_.erase(it);
      }
      return {};
    }
  }
  return {};
}

// PTRACE_BTS_*: like PEEKUSER, they need the tracee in a ptrace stop (ESRCH otherwise).
void Runner::ptrace_bts(const Command& cmd, TaskId t) {
  std::string what(to_string(cmd.ptrace_op));
  if (cmd.ptrace_op == PtraceOp::kBtsGet) what += " " + std::to_string(cmd.index);
  if (auto s = sys_->ptrace_check_stopped(t); !s) {
    ptrace_refuse(cmd, what, t, s.error());
    return;
  }
  ptrace_compat::PtraceBts& pb = sys_->ptrace_bts();
  const TaskNamer namer = [this](TaskId id) { return task_name(id); };
  Result<void> r;
  switch (cmd.ptrace_op) {
    case PtraceOp::kBtsConfig:
      r = pb.config(t, {.size = *cmd.size, .flags = cmd.ptrace_bts_flags});
      if (r) ok(what);
      break;
    case PtraceOp::kBtsStatus: {
      auto st = pb.status(t);
      if (!st) {
        r = std::unexpected(st.error());
        break;
      }
      emit(what + " size=" + std::to_string(st->size) +
           " flags=" + ptrace_bts_flags_text(st->flags));
      break;
    }
    case PtraceOp::kBtsSize: {
      auto n = pb.size(t);
      if (!n) {
        r = std::unexpected(n.error());
        break;
      }
      emit(what + " = " + std::to_string(*n));
      break;
    }
    case PtraceOp::kBtsGet: {
      auto rec = pb.get(t, cmd.index);
      if (!rec) {
        r = std::unexpected(rec.error());
        break;
      }
      emit(what + " " + record_text(*rec, namer));
      break;
    }
    case PtraceOp::kBtsDrain: {
      auto recs = pb.drain(t);
      if (!recs) {
        r = std::unexpected(recs.error());
        break;
      }
      for (const bts::TraceRecord& rec : *recs) emit(what + " " + record_text(rec, namer));
      emit(what + " " + std::to_string(recs->size()) + " records");
      break;
    }
    case PtraceOp::kBtsClear:
      r = pb.clear(t);
      if (r) ok(what);
      break;
    default:
      break;
  }
  if (!r) ptrace_refuse(cmd, what, t, r.error());
}

}  // namespace hwarb::scenario::internal

// Inferior's translation of wait statuses into events: translate() dispatches on the kind of
// status, one function per kind; each keeps the Inferior's records of its threads exact.
#include "hwarb/linux/inferior.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <optional>
#include <utility>
#include <vector>

#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"
#include "ptrace_stops.h"

namespace hwarb::native {

using detail::kSyscallTrap;
using detail::ptrace_event;
using detail::thread_group_of;

namespace {

using MaybeEvent = Result<std::optional<Event>>;

MaybeEvent no_event() {
  return std::optional<Event>();
}

MaybeEvent event_of(EventKind kind, pid_t tid) {
  Event ev;
  ev.kind = kind;
  ev.tid = tid;
  return std::optional<Event>(ev);
}

}  // namespace

Result<std::optional<Event>> Inferior::translate(pid_t tid, int status) {
  // Cases, in the order they are told apart:
  //  1. a forked child not released yet: its stops and its end wait for release();
  //  2. a task not known yet: a new thread's first stop, a fork child's stop before its parent's
  //     fork event, or the end of a thread forgotten unreaped;
  //  3. the end of a thread (of a process when it is the leader);
  //  4. a syscall-entry or syscall-exit stop (TRACESYSGOOD's trap);
  //  5. a ptrace event stop: clone, fork or vfork, vfork-done, exec, or PTRACE_EVENT_STOP (an
  //     interrupt or a group-stop);
  //  6. a signal-delivery stop.
  if (children_.contains(tid)) return translate_unreleased(tid, status);
  std::optional<pid_t> creator;
  if (auto announced = announced_.extract(tid)) creator = announced.mapped();
  // An ended leader's status: its group's exit, or another thread's exec under its id.
  if (auto ended = ended_leaders_.extract(tid)) threads_.emplace(tid, std::move(ended.mapped()));
  Thread* t = thread(tid);
  if (t == nullptr) return translate_unknown(tid, status, creator);
  if (WIFEXITED(status) || WIFSIGNALED(status)) return translate_exit(tid, status);
  if (!WIFSTOPPED(status)) return no_event();
  t->stopped = true;
  if (t->step_mask) {
    // Before anything else is done in this stop (a signal delivered from it saves the mask).
    ignore_error(ptrace_setsigmask(tid, *std::exchange(t->step_mask, std::nullopt)),
                 "a thread that is gone has no mask");
  }
  const bool emulated = std::exchange(t->sysemu, false);
  const int sig = WSTOPSIG(status);
  const int event = ptrace_event(status);
  if (sig == kSyscallTrap) return translate_syscall(tid, *t, emulated);
  // Event stops inside a call (clone, fork, exec) keep `entered` for its exit; any other stop
  // is outside every call.
  if (event == 0 || event == PTRACE_EVENT_STOP) t->entered = -1;
  switch (event) {
    case PTRACE_EVENT_CLONE:
      return translate_clone(tid, *t);
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
      return translate_fork(tid, event == PTRACE_EVENT_VFORK);
    case PTRACE_EVENT_VFORK_DONE:
      return translate_vfork_done(tid, *t);
    case PTRACE_EVENT_EXEC:
      return translate_exec(tid);
    case PTRACE_EVENT_STOP:
      return translate_event_stop(tid, *t, sig);
    default:
      break;
  }
  return translate_signal(tid, *t, sig);
}

Result<std::optional<Event>> Inferior::translate_unreleased(pid_t tid, int status) {
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    children_.erase(tid);
  } else {
    children_[tid].stopped = true;
  }
  return no_event();
}

Result<std::optional<Event>> Inferior::translate_unknown(pid_t tid, int status,
                                                         std::optional<pid_t> creator) {
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    unreaped_.erase(tid);
    return no_event();
  }
  // A first stop of a task not seen yet: a new thread of this process, a task a clone event
  // announced (a thread, or a raw clone without CLONE_THREAD: a thread group of its own, taken
  // as a thread of its creator's process, as gdbserver takes it), or a forked child whose
  // parent's fork event has not been read yet.
  const pid_t group = thread_group_of(tid);
  if (group == pid_ || memory_.follows(group) || creator) {
    Thread& fresh = threads_[tid];
    fresh.stopped = true;
    fresh.stop = StopKind::kEvent;
    fresh.process = group == pid_ ? 0 : memory_.follows(group) ? group : creator.value_or(0);
    return event_of(EventKind::kNewThread, tid);
  }
  Thread& early = children_[tid];
  early.stopped = true;
  early.stop = StopKind::kEvent;
  return no_event();
}

Result<std::optional<Event>> Inferior::translate_exit(pid_t tid, int status) {
  const Thread& t = threads_.at(tid);
  const bool vfork_child = t.vfork_child;
  if (t.process == tid) {  // a followed process's leader: the last of its threads
    forget_process(tid);
  }
  threads_.erase(tid);
  if (vfork_child) end_vfork(tid);
  Event ev;
  ev.tid = tid;
  if (WIFEXITED(status)) {
    ev.status = WEXITSTATUS(status);
  } else {
    ev.signal = WTERMSIG(status);
  }
  if (tid == pid_ && !vfork_child) {
    exited_ = true;
    ev.kind = WIFEXITED(status) ? EventKind::kExited : EventKind::kKilled;
    // Followed processes (and vfork children) that outlive it stay, for detach().
    std::erase_if(threads_, [](const auto& entry) {
      return entry.second.process == 0 && !entry.second.vfork_child;
    });
  } else {
    ev.kind = EventKind::kThreadExit;
  }
  return std::optional<Event>(ev);
}

Result<std::optional<Event>> Inferior::translate_syscall(pid_t tid, Thread& t, bool emulated) {
  __ptrace_syscall_info info{};
  if (auto got = ptrace_get_syscall_info(tid, info); !got) return std::unexpected(got.error());
  Event ev;
  ev.tid = tid;
  if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
    if (emulated) {
      if (auto r = rerun_emulated_syscall(tid); !r) return std::unexpected(r.error());
      return no_event();  // its entry stop comes next
    }
    t.stop = StopKind::kSyscallEnter;
    t.entered = static_cast<long>(info.entry.nr);
    t.entry_sp = info.stack_pointer;
    ev.kind = EventKind::kSyscallEnter;
    ev.syscall = static_cast<long>(info.entry.nr);
    for (int i = 0; i < 6; ++i) ev.args[static_cast<std::size_t>(i)] = info.entry.args[i];
  } else {
    t.stop = StopKind::kSyscallExit;
    ev.kind = EventKind::kSyscallExit;
    ev.ret = info.exit.rval;
    if (t.entered >= 0) {
      ev.syscall = std::exchange(t.entered, -1);
    } else if (auto regs = get_regs(tid)) {
      // An exit without its entry (a new thread's return from clone): orig_rax.
      ev.syscall = static_cast<long>(regs->orig_rax);
    }
  }
  return std::optional<Event>(ev);
}

Result<std::optional<Event>> Inferior::translate_clone(pid_t tid, Thread& t) {
  t.stop = StopKind::kEvent;
  // A caller's own waitpid may have handed the new thread's first stop in already
  // (take_status).
  MaybeEvent early = no_event();
  // The new thread, held in its first stop, as a thread of its creator's process.
  const auto hold_new = [&](pid_t ctid, pid_t process) {
    Thread& fresh = threads_[ctid];
    fresh.stopped = true;
    fresh.stop = StopKind::kEvent;
    fresh.process = process;
    early = event_of(EventKind::kNewThread, ctid);
  };
  if (auto created = ptrace_event_message(tid)) {
    const auto ctid = static_cast<pid_t>(*created);
    if (ctid > 0 && children_.contains(ctid)) {
      // A raw clone's task (a thread group of its own) whose first stop came before this event
      // and was kept as a forked child's: a thread of its creator's process after all.
      children_.erase(ctid);
      hold_new(ctid, t.process);
    } else if (ctid > 0 && !threads_.contains(ctid)) {
      // Its first stop is read now (the kernel stops a traced clone before it runs, so it comes
      // at once), as gdbserver does: the thread is in threads(), and held by stop_all, before
      // any later event of its creator (a real child's statuses are read before a traced
      // thread's, so a creator making threads fast would otherwise be reported first).
      const pid_t process = t.process;
      auto status = wait_stop(ctid);
      if (!status && status.error().code() != ErrorCode::kChild) {
        return std::unexpected(status.error());
      }
      if (!status) {
        announced_.emplace(ctid, process);  // not waitable yet: read when it comes
      } else if (WIFSTOPPED(*status)) {
        hold_new(ctid, process);
      }
    }
  }
  if (auto r = resume(tid, t.last); !r) return std::unexpected(r.error());
  return early;
}

Result<std::optional<Event>> Inferior::translate_fork(pid_t tid, bool vfork) {
  Thread* t = thread(tid);
  // A fork returns its child's id as the parent leaves this stop; a vfork's parent, left, would
  // sleep in the kernel until its child execs or ends.
  t->stop = vfork ? StopKind::kEvent : StopKind::kSyscallEvent;
  auto child = ptrace_event_message(tid);
  if (!child) return std::unexpected(child.error());
  const auto cpid = static_cast<pid_t>(*child);
  if (!children_.contains(cpid)) {
    auto st = wait_stop(cpid);
    if (!st) return std::unexpected(st.error());
  }
  children_.erase(cpid);
  Event ev;
  ev.tid = tid;
  ev.kind = EventKind::kFork;
  ev.child = cpid;
  ev.vfork = vfork;
  if (ev.vfork) {
    Thread& c = threads_[cpid];
    c.stopped = true;
    c.stop = StopKind::kEvent;
    c.vfork_child = true;
    t = thread(tid);         // threads_ changed
    c.process = t->process;  // it shares its parent's memory
    t->vfork_wait = cpid;
  } else {
    Thread& c = children_[cpid];
    c.stopped = true;
    c.stop = StopKind::kEvent;
  }
  // Held: the caller resumes the parent (see hold_forks).
  if (!hold_forks_) {
    if (auto r = resume(tid, t->last); !r) return std::unexpected(r.error());
  }
  return std::optional<Event>(ev);
}

Result<std::optional<Event>> Inferior::translate_vfork_done(pid_t tid, Thread& t) {
  t.stop = StopKind::kSyscallEvent;
  t.vfork_wait = 0;
  if (hold_forks_) return event_of(EventKind::kVforkDone, tid);
  if (auto r = resume(tid, t.last); !r) return std::unexpected(r.error());
  return no_event();
}

Result<std::optional<Event>> Inferior::translate_exec(pid_t tid) {
  Thread* t = thread(tid);
  t->stop = StopKind::kEvent;
  if (follow_execs_ && (t->vfork_child || t->process != 0)) {
    // Kept: the exec'ing thread takes its leader's id (the id reported); the process's other
    // threads are gone.
    const pid_t group = t->vfork_child ? tid : t->process;
    if (t->vfork_child) end_vfork(tid);
    Thread leader = *t;
    leader.vfork_child = false;
    leader.process = group;
    std::vector<pid_t> gone;
    for (const auto& [other, o] : threads_) {
      if (other != tid && other != group && o.process == group) gone.push_back(other);
    }
    forget_threads(gone);
    std::erase_if(threads_, [&](const auto& entry) {
      return entry.first == tid || entry.second.process == group;
    });
    threads_[group] = leader;
    injector_.forget(group);
    if (auto m = memory_.follow(group); !m) return std::unexpected(m.error());
    ++process_changes_;
    if (auto r = leave_exec_stop(group); !r) return std::unexpected(r.error());
    return event_of(EventKind::kExec, group);
  }
  if (t->vfork_child) {
    ignore_error(ptrace_detach(tid), "forgotten either way; ESRCH when it is gone");
    threads_.erase(tid);
    end_vfork(tid);
    return event_of(EventKind::kThreadExit, tid);
  }
  if (t->process != 0) {
    // A followed process: released with its new image (every other thread of it is gone).
    const pid_t group = t->process;
    ignore_error(ptrace_detach(tid), "released either way; ESRCH when it is gone");
    std::vector<pid_t> gone;
    for (const auto& [other, o] : threads_) {
      if (other != tid && o.process == group) gone.push_back(other);
    }
    forget_threads(gone);
    std::erase_if(threads_, [&](const auto& entry) { return entry.second.process == group; });
    forget_process(group);
    return event_of(EventKind::kThreadExit, tid);
  }
  // The exec'ing thread takes the leader's id; every other thread of the process is gone. The
  // record kept is the exec'ing thread's (how it was resumed), under the leader's id.
  Thread leader = *t;
  if (auto former = ptrace_event_message(tid); former && static_cast<pid_t>(*former) != tid) {
    if (const Thread* execer = thread(static_cast<pid_t>(*former))) {
      leader = *execer;
      leader.stopped = true;
      leader.stop = StopKind::kEvent;
    }
  }
  std::vector<pid_t> gone;
  for (const auto& [other, o] : threads_) {
    if (other != pid_ && o.process == 0 && !o.vfork_child) gone.push_back(other);
  }
  forget_threads(gone);
  std::erase_if(threads_, [](const auto& entry) { return entry.second.process == 0; });
  threads_[pid_] = leader;
  injector_.forget(pid_);
  if (auto m = open_mem(); !m) return std::unexpected(m.error());
  if (auto r = leave_exec_stop(pid_); !r) return std::unexpected(r.error());
  return event_of(EventKind::kExec, pid_);
}

Result<std::optional<Event>> Inferior::translate_event_stop(pid_t tid, Thread& t, int sig) {
  siginfo_t info{};
  // A group-stop of a seized thread reports its stopping signal (an interrupt SIGTRAP);
  // some kernels also fill its siginfo, older ones refuse it with EINVAL.
  if (auto got = ptrace_getsiginfo(tid, info);
      sig != SIGTRAP || (!got && got.error().code() == ErrorCode::kInval)) {
    // A group-stop: keep job control (the thread stays stopped until SIGCONT).
    t.stopped = false;
    t.stop = StopKind::kNone;
    ignore_error(ptrace_listen(tid), "a thread that is gone is reported by its exit");
    return no_event();
  }
  // An interrupt nobody waits for any more (it stayed pending across another stop).
  t.interrupt_pending = false;
  t.stop = StopKind::kEvent;
  if (auto r = resume(tid, t.last); !r) return std::unexpected(r.error());
  return no_event();
}

Result<std::optional<Event>> Inferior::translate_signal(pid_t tid, Thread& t, int sig) {
  t.stop = StopKind::kSignal;
  t.stop_signal = sig;
  if (t.raised_signal == sig) {
    // Raised by resume() to be delivered: it is, the thread going on as it was resumed.
    t.raised_signal = 0;
    if (auto r = resume(tid, t.last, sig); !r) return std::unexpected(r.error());
    return no_event();
  }
  Event ev;
  ev.tid = tid;
  siginfo_t info{};
  if (ptrace_getsiginfo(tid, info)) {
    ev.code = info.si_code;
    ev.fault_addr = reinterpret_cast<std::uint64_t>(info.si_addr);
  }
  ev.kind = EventKind::kSignal;
  ev.signal = sig;
  return std::optional<Event>(ev);
}

void Inferior::end_vfork(pid_t child) {
  for (auto& [tid, t] : threads_) {
    if (t.vfork_wait == child) t.vfork_wait = 0;
  }
}

}  // namespace hwarb::native

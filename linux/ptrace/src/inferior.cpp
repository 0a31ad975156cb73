#include "hwarb/linux/inferior.h"

#include <elf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/signals.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"
#include "ptrace_stops.h"

namespace hwarb::native {

using detail::kSyscallTrap;
using detail::ptrace_event;
using detail::thread_group_of;
using detail::tid_text;

namespace {

constexpr long kOptions = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                          PTRACE_O_TRACEVFORKDONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD;

}  // namespace

class Inferior::InjectorTracer final : public SyscallInjector::Tracer {
 public:
  explicit InjectorTracer(Inferior& inferior) : inferior_(inferior) {}
  Result<int> wait_stop(pid_t tid) override { return inferior_.wait_stop(tid); }
  Result<x86::Regs> get_regs(pid_t tid) override { return inferior_.get_regs(tid); }
  Result<void> set_regs(pid_t tid, const x86::Regs& regs) override {
    return inferior_.set_regs(tid, regs);
  }
  Result<std::uint64_t> find_code(pid_t process, std::span<const std::uint8_t> code) override {
    return inferior_.memory_.find_code(process, code);
  }

 private:
  Inferior& inferior_;
};

Inferior::Inferior(pid_t pid, bool spawned) : pid_(pid), spawned_(spawned) {}

Inferior::Inferior(Inferior&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      spawned_(other.spawned_),
      exited_(other.exited_),
      memory_(std::move(other.memory_)),
      threads_(std::move(other.threads_)),
      queued_(std::move(other.queued_)),
      raw_queue_(std::move(other.raw_queue_)),
      children_(std::move(other.children_)),
      announced_(std::move(other.announced_)),
      unreaped_(std::move(other.unreaped_)),
      injector_(std::move(other.injector_)),
      process_changes_(other.process_changes_),
      follow_execs_(other.follow_execs_),
      spin_(other.spin_) {
  other.threads_.clear();
}

Inferior& Inferior::operator=(Inferior&& other) noexcept {
  if (this != &other) {
    forget();
    pid_ = std::exchange(other.pid_, -1);
    spawned_ = other.spawned_;
    exited_ = other.exited_;
    memory_ = std::move(other.memory_);
    threads_ = std::move(other.threads_);
    queued_ = std::move(other.queued_);
    raw_queue_ = std::move(other.raw_queue_);
    children_ = std::move(other.children_);
    announced_ = std::move(other.announced_);
    unreaped_ = std::move(other.unreaped_);
    injector_ = std::move(other.injector_);
    process_changes_ = other.process_changes_;
    follow_execs_ = other.follow_execs_;
    hold_forks_ = other.hold_forks_;
    spin_ = other.spin_;
    other.threads_.clear();
  }
  return *this;
}

Inferior::~Inferior() {
  forget();
}

void Inferior::forget() {
  if (pid_ <= 0) return;
  if (!exited_) {
    if (spawned_) {
      ignore_error(kill(), "forget() has no error path: a process that will not die is left");
    } else {
      ignore_error(detach(), "forget() has no error path: a process that is gone needs none");
    }
  }
  for (auto& [child, unused] : children_) {
    ignore_error(ptrace_detach(child), "a child that is gone needs no detach");
  }
  children_.clear();
  pid_ = -1;
}

Result<Inferior> Inferior::spawn(const std::vector<std::string>& argv,
                                 const InferiorOptions& options) {
  if (argv.empty()) return make_error(ErrorCode::kInval, "command: no command given");
  auto path = resolve_command(argv[0]);
  if (!path) return std::unexpected(path.error());
  // The child unblocks SIGCHLD before its exec: wait_or_poll may have blocked it in hwarb.
  auto spawned = spawn_stopped(*path, argv,
                               {.stdout_fd = options.stdout_fd,
                                .disable_aslr = options.disable_aslr,
                                .die_with_parent = options.kill_on_exit,
                                .environment = options.environment,
                                .own_process_group = options.own_process_group,
                                .working_directory = options.working_directory});
  if (!spawned) return std::unexpected(spawned.error());
  const pid_t pid = *spawned;
  Inferior inferior(pid, true);
  inferior.set_spin(options.spin_us);
  const long options_bits = kOptions | (options.kill_on_exit ? PTRACE_O_EXITKILL : 0);
  if (auto seized = ptrace_seize(pid, static_cast<std::uint64_t>(options_bits)); !seized) {
    ignore_error(send_signal(pid, SIGKILL), "the seize error is the one reported");
    ignore_error(native::wait_for(pid, false),
                 "reaping the child killed above; nothing else waits");
    inferior.pid_ = -1;
    return std::unexpected(seized.error());
  }
  inferior.threads_[pid] = Thread{};
  ignore_error(send_signal(pid, SIGCONT), "our own child: it exists, SIGCONT cannot be refused");
  // Until the exec stop: the SIGCONT and the group-stop reports are job control, not the
  // program's; they are suppressed.
  for (;;) {
    auto waited = wait_once(pid, false);
    if (!waited) return std::unexpected(waited.error().with_context("command"));
    const int status = waited->status.raw;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      inferior.exited_ = true;
      return make_error(ErrorCode::kNoEnt, "command: '" + argv[0] +
                                               "' exited before it could be traced (exec failed)");
    }
    if (ptrace_event(status) == PTRACE_EVENT_EXEC) break;
    if (auto cont = ptrace_cont(pid); !cont) return std::unexpected(cont.error());
  }
  Thread& t = inferior.threads_[pid];
  t.stopped = true;
  t.stop = StopKind::kEvent;
  if (auto mem = inferior.open_mem(); !mem) return std::unexpected(mem.error());
  if (auto r = inferior.leave_exec_stop(pid); !r) return std::unexpected(r.error());
  return inferior;
}

Result<Inferior> Inferior::attach(pid_t pid, const InferiorOptions& options) {
  if (pid <= 0) return make_error(ErrorCode::kInval, "pid: must be positive");
  if (pid == own_pid()) return make_error(ErrorCode::kInval, "pid: hwarb cannot trace itself");
  if (thread_group_of(pid) != pid) {
    return make_error(ErrorCode::kSrch, "pid: no process " + std::to_string(pid) +
                                            " (or it is a thread: give its process id)");
  }
  Inferior inferior(pid, false);
  inferior.set_spin(options.spin_us);
  // Three cases for a listed thread not seized yet:
  //  1. it is seized now. Its creator may have been seized inside clone(), after the kernel
  //     decided the new thread goes untraced and before it joined the listing: the listing is
  //     made again once every seized thread is stopped (no clone is in progress then), until
  //     one finds no thread unseized;
  //  2. its seize fails with ESRCH: it exited meanwhile (the process did if it is the leader).
  //     Its creator was not seized in time either, so the thread it may have made before its
  //     end is untraced: a program whose threads each make the next and end (a chain) keeps one
  //     untraced thread alive at any time, and the listing is made again until a link of the
  //     chain is seized;
  //  3. its seize fails with EPERM: traced by us already (a clone made it after its creator
  //     was seized; its creator's clone event announces it), or exiting (the kernel refuses an
  //     exiting thread: it leaves the listing soon, and the listing is made again), or traced
  //     by another debugger (the attach fails).
  constexpr int kExitingRetries = 1000;
  constexpr int kListings = 100000;
  std::map<pid_t, int> exiting;
  int listings = 0;
  bool opened = false;
  for (bool stopped = false;;) {
    if (++listings > kListings) {
      return make_error(ErrorCode::kAgain, "pid: " + std::to_string(pid) +
                                               " makes threads faster than they can be seized");
    }
    auto tids = list_threads(pid);
    if (!tids) {
      if (inferior.threads_.empty()) return std::unexpected(tids.error());
      if (stopped) break;
    }
    bool again = false;
    for (pid_t tid : tids ? *tids : std::vector<pid_t>{}) {
      if (inferior.threads_.contains(tid)) continue;
      auto seized = ptrace_seize(tid, static_cast<std::uint64_t>(kOptions));
      if (seized) {  // case 1
        inferior.threads_[tid] = Thread{};
        again = true;
        continue;
      }
      const ErrorCode code = seized.error().code();
      if (code == ErrorCode::kSrch && tid != pid) {  // case 2
        again = true;
        continue;
      }
      if (code == ErrorCode::kPerm && tid != pid) {  // case 3
        auto tracer = tracer_of(tid);
        if (!tracer || *tracer == own_pid()) continue;
        if (*tracer == 0 && ++exiting[tid] < kExitingRetries) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          again = true;
          continue;
        }
      }
      return std::unexpected(seized.error());
    }
    if (again) {
      stopped = false;
      continue;
    }
    if (stopped) break;
    if (!opened) {
      if (auto mem = inferior.open_mem(); !mem) return std::unexpected(mem.error());
      opened = true;
    }
    if (auto s = inferior.stop_all(); !s) return std::unexpected(s.error());
    stopped = true;
  }
  return inferior;
}

Result<void> Inferior::leave_exec_stop(pid_t tid) {
  // The exec stop is inside execve: the call's return value would overwrite rax after any
  // resume, so nothing can be injected there. One single-step completes the call and runs the
  // new image's first instruction, leaving the thread in an ordinary SIGTRAP stop.
  Thread* t = thread(tid);
  for (;;) {
    auto saved = ptrace_singlestep_unblocked(tid);
    if (!saved) return std::unexpected(saved.error());
    auto status = wait_stop(tid);
    if (*saved && status && WIFSTOPPED(*status)) {
      ignore_error(ptrace_setsigmask(tid, **saved), "a thread that is gone has no mask");
    }
    if (!status) return std::unexpected(status.error());
    if (!WIFSTOPPED(*status)) {
      return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " ended at its exec");
    }
    const int sig = WSTOPSIG(*status);
    if (sig == SIGTRAP && ptrace_event(*status) == 0) break;
    if (ptrace_event(*status) == 0 && sig != kSyscallTrap) t->kept_signal = sig;
  }
  t->stopped = true;
  t->stop = StopKind::kSignal;
  t->stop_signal = SIGTRAP;
  t->entered = -1;  // execve's exit was stepped over
  return {};
}

Result<void> Inferior::open_mem() {
  return memory_.open(pid_);
}

std::vector<pid_t> Inferior::threads() const {
  std::vector<pid_t> out;
  for (const auto& [tid, unused] : threads_) out.push_back(tid);
  return out;
}

bool Inferior::is_stopped(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.stopped;
}

Inferior::Thread* Inferior::thread(pid_t tid) {
  if (auto it = threads_.find(tid); it != threads_.end()) return &it->second;
  if (auto it = children_.find(tid); it != children_.end()) return &it->second;
  return nullptr;
}

pid_t Inferior::process_of(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.process != 0) return it->second.process;
  return pid_;
}

Result<void> Inferior::follow(pid_t child) {
  auto it = children_.find(child);
  if (it == children_.end()) {
    return make_error(ErrorCode::kSrch, "pid: " + std::to_string(child) + " is not a forked child");
  }
  if (auto m = memory_.follow(child); !m) return m;
  Thread t = it->second;
  children_.erase(it);
  t.process = child;
  threads_[child] = t;
  ++process_changes_;
  return {};
}

pid_t Inferior::vfork_child_of(pid_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? 0 : it->second.vfork_wait;
}

pid_t Inferior::group_of(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return pid_;
  if (it->second.vfork_child) return tid;
  return it->second.process != 0 ? it->second.process : pid_;
}

Result<void> Inferior::detach_process(pid_t process) {
  std::vector<pid_t> tids;
  for (const auto& [tid, t] : threads_) {
    if (group_of(tid) == process) tids.push_back(tid);
  }
  if (tids.empty()) {
    return make_error(ErrorCode::kSrch, "pid: " + std::to_string(process) + " is not traced");
  }
  // The leader last: a zombie leader can be reaped only once its group is empty.
  std::stable_partition(tids.begin(), tids.end(), [&](pid_t t) { return t != process; });
  Result<void> first;
  for (pid_t tid : tids) {
    int sig = 0;
    for (const Event& ev : discard_queued(tid)) {
      if (ev.kind == EventKind::kSignal && sig == 0) sig = ev.signal;
      if (ev.kind == EventKind::kFork) let_go_unreported(ev);
    }
    Thread& t = threads_[tid];
    if (sig == 0) sig = t.kept_signal;
    if (t.stop != StopKind::kSignal && sig != 0) {
      ignore_error(send_thread_signal(thread_group_of(tid), tid, sig),
                   "a thread that is gone has no signal to get");
      sig = 0;
    }
    // A vfork child's parent stays asleep in the kernel until the child execs or exits: its
    // vfork_wait stays (kVforkDone, or its end, clears it).
    if (auto r = detach_thread(tid, sig); !r && first && r.error().code() != ErrorCode::kSrch) {
      first = r;
    }
    threads_.erase(tid);
  }
  if (process != pid_) {
    forget_process(process);
    return first;
  }
  exited_ = true;
  (void)adopt_followed();
  return first;
}

void Inferior::let_go_unreported(const Event& fork) {
  if (!fork.vfork) {
    children_.erase(fork.child);
    ignore_error(ptrace_detach(fork.child), "a child that is gone needs no detach");
    return;
  }
  if (threads_.contains(fork.child)) {
    ignore_error(detach_thread(fork.child, 0), "a child that is gone needs no detach");
    threads_.erase(fork.child);
    end_vfork(fork.child);
  }
}

Result<void> Inferior::detach_thread(pid_t tid, int sig) {
  auto detached = ptrace_detach(tid, sig);
  if (detached || detached.error().code() != ErrorCode::kSrch) return detached;
  // Held stopped, yet no detach: it died meanwhile (a detached thread's exit_group, a SIGKILL
  // from outside), a zombie still ours to reap, or the program's parent would never learn of
  // the process's end. Its status comes at once; a leader's once its group is empty (its
  // threads are detached first), so each is given a bounded while.
  for (int tries = 0; tries < 200; ++tries) {
    auto got = wait_once(tid, true);
    if (!got && got.error().code() == ErrorCode::kIntr) continue;
    if (!got || got->pid == tid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return detached;
}

void Inferior::forget_process(pid_t process) {
  memory_.forget(process);
  injector_.forget(process);
  ++process_changes_;
}

bool Inferior::adopt_followed() {
  if (!exited_) return false;
  pid_t next = 0;
  for (const auto& [tid, t] : threads_) {
    if (t.process != 0 && !t.vfork_child && (next == 0 || t.process < next)) next = t.process;
  }
  if (next == 0 || !memory_.adopt(next)) return false;
  pid_ = next;
  for (auto& [tid, t] : threads_) {
    if (t.process == next) t.process = 0;
  }
  exited_ = false;
  ++process_changes_;
  return true;
}

Result<x86::Regs> Inferior::get_regs(pid_t tid) {
  x86::Regs regs{};
  auto got = ptrace_get_regset(tid, NT_PRSTATUS, std::as_writable_bytes(std::span(&regs, 1)));
  if (!got) return std::unexpected(got.error());
  return regs;
}

Result<void> Inferior::set_regs(pid_t tid, const x86::Regs& regs) {
  return ptrace_set_regset(tid, NT_PRSTATUS, std::as_bytes(std::span(&regs, 1)));
}

Result<RseqArea> Inferior::rseq_area(pid_t tid) {
  auto area = ptrace_get_rseq(tid);
  // A kernel older than 5.13 cannot tell (EIO): no area known.
  if (!area && area.error().code() == ErrorCode::kIo) return RseqArea{};
  return area;
}

Result<Fxsave> Inferior::get_fxsave(pid_t tid) {
  Fxsave area{};
  auto got = ptrace_get_regset(tid, NT_PRFPREG, std::as_writable_bytes(std::span(area)));
  if (!got) return std::unexpected(got.error());
  return area;
}

Result<void> Inferior::set_fxsave(pid_t tid, const Fxsave& area) {
  return ptrace_set_regset(tid, NT_PRFPREG, std::as_bytes(std::span(area)));
}

Result<std::vector<std::uint8_t>> Inferior::get_xstate(pid_t tid) {
  // Larger than any XSAVE area the kernel has (AMX's tiles make it 11 KiB); the kernel says how
  // much it filled.
  std::vector<std::uint8_t> area(16384);
  auto got = ptrace_get_regset(tid, NT_X86_XSTATE, std::as_writable_bytes(std::span(area)));
  if (!got) {
    if (got.error().code() == ErrorCode::kInval || got.error().code() == ErrorCode::kNoDev) {
      return make_error(ErrorCode::kNoDev, "xstate: the kernel has no XSAVE register set here");
    }
    return std::unexpected(got.error());
  }
  area.resize(*got);
  return area;
}

Result<void> Inferior::set_xstate(pid_t tid, std::span<const std::uint8_t> area) {
  return ptrace_set_regset(tid, NT_X86_XSTATE, std::as_bytes(area));
}

Result<std::int64_t> Inferior::inject_syscall(pid_t tid, long nr,
                                              std::array<std::uint64_t, 6> args) {
  Thread* t = thread(tid);
  if (t == nullptr || !t->stopped) {
    return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " is not in a stop");
  }
  if (t->vfork_wait != 0 && t->stop != StopKind::kSignal) {
    // A vfork's parent held at its event stop sleeps in the kernel, once resumed for the call,
    // until its child execs or ends (a stopped child: never). A call on the memory, which the
    // child shares until then, runs in the child; any other cannot run now.
    const pid_t child = t->vfork_wait;
    const bool memory = nr == SYS_mprotect || nr == SYS_mmap || nr == SYS_munmap ||
                        nr == SYS_madvise || nr == SYS_mremap || nr == SYS_pkey_mprotect;
    if (memory && is_stopped(child)) return inject_syscall(child, nr, args);
    return make_error(ErrorCode::kBusy, "pid: thread " + tid_text(tid) +
                                            " waits for its vfork child " + tid_text(child) +
                                            " (a call there would wait for its exec or end)");
  }
  // A forked child not followed yet has its parent's layout (and is not in threads_).
  const pid_t process = threads_.contains(tid) ? process_of(tid) : pid_;
  InjectorTracer tracer(*this);
  return injector_.inject(tracer, tid, process, *t, nr, args);
}

Result<void> Inferior::resume(pid_t tid, Resume how, int signal) {
  Thread* t = thread(tid);
  if (t == nullptr || !t->stopped) {
    return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " is not in a stop");
  }
  int deliver = signal;
  if (t->kept_signal != 0) {
    // A signal kept from an injected call: delivered directly from a signal-delivery-stop (when
    // the caller passes none), else re-raised for the thread.
    if (t->stop == StopKind::kSignal && deliver == 0) {
      deliver = t->kept_signal;
    } else {
      ignore_error(send_thread_signal(pid_, tid, t->kept_signal),
                   "a thread that is gone has no signal to get");
    }
    t->kept_signal = 0;
  }
  if (t->stop != StopKind::kSignal && deliver != 0) {
    // Only a signal-delivery-stop injects: the signal is raised, and delivered at its stop.
    if (auto sent = send_thread_signal(process_of(tid), tid, deliver); !sent) return sent;
    t->raised_signal = deliver;
    deliver = 0;
  }
  Result<void> resumed;
  if (how == Resume::kStep && deliver == 0) {
    // SIGTRAP unblocked for the step (ptrace_singlestep_unblocked); its mask back at the next stop.
    auto saved = ptrace_singlestep_unblocked(tid);
    if (!saved) return std::unexpected(saved.error());
    t->step_mask = *saved;
  } else {
    resumed = how == Resume::kCont   ? ptrace_cont(tid, deliver)
              : how == Resume::kStep ? ptrace_singlestep(tid, deliver)
                                     : ptrace_syscall(tid, deliver);
  }
  if (!resumed) return resumed;
  t->stopped = false;
  t->stop = StopKind::kNone;
  t->last = how;
  t->sysemu = false;  // every other request clears the kernel's SYSEMU mode
  return {};
}

bool Inferior::signal_due_after_sigreturn(pid_t tid) {
  // The queued signals first (process-directed ones, the usual flood of timers and kill, then
  // the thread's): most returns have none, and that is the whole cost then.
  std::uint64_t queued = 0;
  for (const bool shared : {true, false}) {
    std::array<siginfo_t, 8> infos{};
    auto n = ptrace_peeksiginfo(tid, shared, infos);
    for (std::size_t i = 0; n && i < *n; ++i) {
      const int sig = infos[i].si_signo;
      if (sig >= 1 && sig <= 64) queued |= 1ULL << (sig - 1);
    }
  }
  if (queued == 0) return false;
  // The handler's `ret` popped the restorer's address: the stack pointer is at the frame's
  // ucontext (the kernel's rt_sigreturn reads it there too), whose uc_sigmask follows uc_flags,
  // uc_link, uc_stack (24 bytes) and uc_mcontext (256 bytes). A frame that is no signal's (a
  // program calling rt_sigreturn itself) only makes the answer wrong, never the outcome: see
  // rerun_emulated_syscall.
  constexpr std::uint64_t kUcSigmask = 8 + 8 + 24 + 256;
  auto mask = read_word(thread(tid)->entry_sp + kUcSigmask, 8, process_of(tid));
  if (!mask) return false;
  const std::uint64_t unblockable = (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1));
  return (queued & (~*mask | unblockable)) != 0;
}

bool Inferior::returns_to_a_call(pid_t tid) {
  // The frame's uc_mcontext follows uc_flags, uc_link and uc_stack (40 bytes); its rip is the
  // 17th register (r8-r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip). A call the handler
  // interrupted that restarts (SA_RESTART) was rewound onto its `syscall` instruction (0f 05)
  // when the frame was built. Unreadable: the answer that costs nothing if wrong.
  constexpr std::uint64_t kUcRip = 8 + 8 + 24 + 16 * 8;
  auto rip = read_word(thread(tid)->entry_sp + kUcRip, 8, process_of(tid));
  if (!rip) return true;
  auto insn = read_word(*rip, 2, process_of(tid));
  return !insn || *insn == 0x050f;
}

Result<void> Inferior::resume_from_sigreturn(pid_t tid) {
  Thread* t = thread(tid);
  // A kept signal is raised again by resume(): the plain path (it may be the one due anyway).
  if (t == nullptr || !t->stopped || t->stop != StopKind::kSyscallEnter ||
      t->entered != SYS_rt_sigreturn || t->kept_signal != 0) {
    return resume(tid, Resume::kSyscall);
  }
  // Skipping the exit stop pays off (cases):
  //  1. when a signal is due: its delivery stop comes first, and resuming from it leaves SYSEMU;
  //  2. when the handler interrupted the program's own code: its next stop is most often a fault
  //     or a signal (a storm of timers), rarely a system call (which then costs two stops more:
  //     rerun_emulated_syscall);
  //  3. not when it returns onto a restarted call: that call's entry comes at once, and would
  //     cost those two stops every time; the plain path, unless case 1 holds.
  if (returns_to_a_call(tid) && !signal_due_after_sigreturn(tid)) {
    return resume(tid, Resume::kSyscall);
  }
  // Resumed from the entry stop with PTRACE_SYSEMU, the call still runs (the kernel decided
  // that at its entry, under PTRACE_SYSCALL) and has no exit stop; the signal's delivery stop
  // comes next, and whatever resumes from it leaves SYSEMU mode.
  if (::ptrace(PTRACE_SYSEMU, tid, 0, 0) != 0) {
    return std::unexpected(
        syscall_return_error(-errno, "pid", "PTRACE_SYSEMU of " + tid_text(tid)));
  }
  t->stopped = false;
  t->stop = StopKind::kNone;
  t->last = Resume::kSyscall;
  t->sysemu = true;
  return {};
}

Result<void> Inferior::rerun_emulated_syscall(pid_t tid) {
  // The signal resume_from_sigreturn expected was taken by another thread (or the frame's mask
  // was not the one restored), and the thread entered a system call in SYSEMU mode: the kernel
  // will skip it. It is rewound to its `syscall` instruction with its number in rax (as the
  // kernel restarts a call) and resumed with PTRACE_SYSCALL: the skipped call's exit stop is
  // passed over here, and the call runs again from a syscall-entry stop that wait() reports as
  // usual.
  Thread* t = thread(tid);
  InjectorTracer tracer(*this);
  auto rerun = SyscallInjector::rerun_skipped(tracer, tid);
  if (!rerun) return std::unexpected(rerun.error());
  t->stopped = false;
  t->stop = StopKind::kNone;
  if (*rerun) {
    // Killed meanwhile: for wait() to report.
    raw_queue_.emplace_front(tid, **rerun);
    return {};
  }
  t->last = Resume::kSyscall;
  return {};
}

Result<void> Inferior::resume_all(Resume how) {
  std::set<pid_t> held;
  for (const Event& ev : queued_) {
    held.insert(ev.tid);
    if (ev.kind == EventKind::kFork) held.insert(ev.child);
  }
  for (const auto& [tid, status] : raw_queue_) held.insert(tid);
  for (auto& [tid, t] : threads_) {
    if (!t.stopped || held.contains(tid)) continue;
    if (auto r = resume(tid, how); !r) return r;
  }
  return {};
}

Result<std::vector<pid_t>> Inferior::stop_all(pid_t except) {
  return stop_threads(except);
}

Result<void> Inferior::resume_as_before(pid_t tid) {
  Thread* t = thread(tid);
  if (t == nullptr) return make_error(ErrorCode::kSrch, "pid: no " + tid_text(tid));
  return resume(tid, t->last);
}

bool Inferior::has_queued(pid_t tid) const {
  return std::any_of(queued_.begin(), queued_.end(),
                     [&](const Event& e) { return e.tid == tid; }) ||
         std::any_of(raw_queue_.begin(), raw_queue_.end(),
                     [&](const std::pair<pid_t, int>& r) { return r.first == tid; });
}

std::vector<Event> Inferior::discard_queued(pid_t tid) {
  std::vector<Event> out;
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (it->tid == tid) {
      out.push_back(*it);
      it = queued_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

namespace {

// The signals pending for thread `tid` of process `pid` (its own and its process's) and the
// ones it blocks, from /proc/PID/task/TID/status (bit n-1 for signal n).
struct SignalState {
  std::uint64_t pending = 0;
  std::uint64_t blocked = 0;
};
Result<SignalState> signal_state(pid_t pid, pid_t tid) {
  const std::string path =
      "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status";
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kSrch, "tid: " + path + " is gone");
  std::uint64_t pending = 0, blocked = 0;
  std::string line;
  while (std::getline(in, line)) {
    const bool own = line.rfind("SigPnd:", 0) == 0;
    const bool shared = line.rfind("ShdPnd:", 0) == 0;
    const bool block = line.rfind("SigBlk:", 0) == 0;
    if (!own && !shared && !block) continue;
    const std::uint64_t bits = std::strtoull(line.c_str() + 7, nullptr, 16);
    if (block) {
      blocked = bits;
    } else {
      pending |= bits;
    }
  }
  return SignalState{pending, blocked};
}

// Pending and not blocked: delivered at the thread's next return to user mode.
Result<std::uint64_t> deliverable_signals(pid_t pid, pid_t tid) {
  auto state = signal_state(pid, tid);
  if (!state) return std::unexpected(state.error());
  return state->pending & ~state->blocked;
}

// Pending and blocked: held back until the thread unblocks them.
Result<std::uint64_t> held_signals(pid_t pid, pid_t tid) {
  auto state = signal_state(pid, tid);
  if (!state) return std::unexpected(state.error());
  return state->pending & state->blocked;
}

}  // namespace

Result<std::optional<Event>> Inferior::surface_blocked(pid_t tid, int signal, int code) {
  const std::uint64_t bit = std::uint64_t{1} << (signal - 1);
  Thread* t = thread(tid);
  if (t == nullptr) return make_error(ErrorCode::kSrch, "tid: no " + tid_text(tid));
  // Cases, each leaving the thread as it was:
  //  1. stopped other than in an interrupt's stop, with an event queued, or asleep for its vfork
  //     child: not ours to resume;
  //  2. a stop of its own waits to be read (the common case: a hit's stop that comes right
  //     after its ring sample), or /proc says the signal is not both pending and blocked;
  //  3. running, it stops for an event of its own before the interrupt (queued for wait());
  //  4. no entry of the thread's own queue is (signal, code): the program's own signal.
  const bool was_stopped = t->stopped;
  if ((was_stopped && (t->stop != StopKind::kEvent || has_queued(tid))) || t->vfork_wait != 0 ||
      t->last == Resume::kStep) {
    return std::nullopt;
  }
  if (!was_stopped) {
    auto waiting = has_wait_status(tid);
    if (!waiting) return std::unexpected(waiting.error());
    if (*waiting || has_queued(tid)) return std::nullopt;
  }
  auto held = held_signals(thread_group_of(tid), tid);
  if (!held) return std::unexpected(held.error());
  if ((*held & bit) == 0) return std::nullopt;
  if (!was_stopped) {
    auto stopped = stop_threads(-1, tid);
    if (!stopped) return std::unexpected(stopped.error());
    if (stopped->empty()) return std::nullopt;
  }
  std::array<siginfo_t, 32> infos{};
  auto n = ptrace_peeksiginfo(tid, false, infos);
  if (!n) return std::unexpected(n.error());
  const bool ours = std::any_of(infos.begin(), infos.begin() + *n, [&](const siginfo_t& info) {
    return info.si_signo == signal && info.si_code == code;
  });
  // A thread stopped for this is resumed as it was last; one found stopped, with a plain
  // continue (the caller resumes it from its signal-delivery stop as it would have from the
  // interrupt's).
  const Resume how = was_stopped ? Resume::kCont : t->last;
  if (!ours) {
    if (!was_stopped) {
      if (auto r = resume(tid, how); !r) return std::unexpected(r.error());
    }
    return std::nullopt;
  }
  auto mask = ptrace_getsigmask(tid);
  if (!mask) return std::unexpected(mask.error());
  if (auto r = ptrace_setsigmask(tid, *mask & ~bit); !r) return std::unexpected(r.error());
  t->step_mask = *mask;  // put back at the next stop, before anything else
  if (auto r = resume(tid, how); !r) return std::unexpected(r.error());
  auto ev = wait_for(tid);
  if (!ev) return std::unexpected(ev.error());
  if (ev->kind != EventKind::kSignal || ev->signal != signal) {
    requeue(*ev);  // it ended, or another signal came first: the caller's; the check runs again
    return std::nullopt;
  }
  return std::optional<Event>(*ev);
}

Result<std::vector<Event>> Inferior::surface_pending(pid_t tid, std::uint64_t mask) {
  std::vector<Event> out;
  for (const Event& ev : queued_) {
    // Resuming would suppress the signal of that stop: the caller's to handle first.
    if (ev.tid == tid && ev.kind == EventKind::kSignal) return out;
  }
  // Each round reports one signal; a thread has at most 64 kinds pending.
  for (int round = 0; round < 64; ++round) {
    // A followed process's thread (or a vfork child) is no thread of pid_: its own group's path.
    auto pending = deliverable_signals(thread_group_of(tid), tid);
    if (!pending) return std::unexpected(pending.error());
    if ((*pending & mask) == 0) break;
    if (auto r = resume(tid, Resume::kCont); !r) return std::unexpected(r.error());
    auto ev = wait_for(tid);
    if (!ev) return std::unexpected(ev.error());
    if (ev->kind != EventKind::kSignal) {
      requeue(*ev);  // the thread ended, or stopped for something else: the caller's to handle
      break;
    }
    out.push_back(*ev);
  }
  return out;
}

Result<std::vector<pid_t>> Inferior::stop_threads(pid_t except, pid_t only) {
  // PTRACE_INTERRUPT asks for one trap, and the kernel clears the request at *any* trap of the
  // thread (ptrace_stop: "any trap clears pending STOP trap"). Four cases for a thread we wait
  // for:
  //  1. it reports PTRACE_EVENT_STOP: our interrupt (or a group-stop, as good while we hold it);
  //  2. it reports another stop that leaves it stopped (a signal, a syscall stop): its event is
  //     queued, and it counts as stopped;
  //  3. it reports a stop that translate() resumes by itself (a clone or fork event, a rerun
  //     system call): if that trap came after our interrupt it consumed it, and no stop would
  //     ever follow. It is interrupted again; the kernel keeps one request however often it is
  //     made, so at most one PTRACE_EVENT_STOP follows either way. A vfork parent asleep for its
  //     child cannot stop and is left as it is;
  //  4. it is a group leader that ended while other threads of its group live: a zombie that
  //     reports nothing until they are gone. It leaves threads_ for ended_leaders_.
  // A vfork parent skipped that way wakes when its child's exec or exit is read during the wait
  // (end_vfork clears its vfork_wait): it runs the program again, so the threads are gone over
  // once more until a pass finds none to interrupt.
  const auto interrupt = [this](pid_t tid) -> Result<bool> {
    if (auto r = ptrace_interrupt(tid); !r) {
      if (r.error().code() == ErrorCode::kSrch) return false;
      return std::unexpected(r.error());
    }
    thread(tid)->interrupt_pending = true;
    return true;
  };
  std::vector<pid_t> stopped;
  for (;;) {
    std::vector<pid_t> waiting;
    for (auto& [tid, t] : threads_) {
      if (tid == except || t.stopped || t.vfork_wait != 0) continue;
      if (only != 0 && tid != only) continue;
      auto sent = interrupt(tid);
      if (!sent) return std::unexpected(sent.error());
      if (*sent) waiting.push_back(tid);
    }
    if (waiting.empty()) break;
    for (pid_t tid : waiting) {
      for (;;) {
        Thread* t = thread(tid);
        if (t == nullptr || t->stopped || t->vfork_wait != 0) break;
        // Case 4: a leader that ended (pthread_exit) while its group runs on never stops.
        std::optional<int> leader_status;
        if (is_group_leader(tid)) {
          auto waited = wait_leader_stop(tid);
          if (!waited) return std::unexpected(waited.error());
          if (!*waited) {
            drop_ended_leaders();
            break;
          }
          leader_status = *waited;
        }
        Result<int> status = leader_status ? Result<int>(*leader_status) : wait_stop(tid);
        if (!status) {
          if (status.error().code() == ErrorCode::kChild) {
            threads_.erase(tid);
            break;
          }
          return std::unexpected(status.error());
        }
        if (WIFSTOPPED(*status) && ptrace_event(*status) == PTRACE_EVENT_STOP) {
          siginfo_t info{};
          auto got = ptrace_getsiginfo(tid, info);
          const bool group = !got && got.error().code() == ErrorCode::kInval;
          if (!group || t->interrupt_pending) {
            // Our interrupt (a group-stop is as good a stop as any while we hold the threads).
            t->stopped = true;
            t->stop = StopKind::kEvent;
            t->interrupt_pending = false;
            stopped.push_back(tid);
            break;
          }
        }
        auto ev = translate(tid, *status);
        if (!ev) return std::unexpected(ev.error());
        if (*ev) queued_.push_back(**ev);
        if (exited_ && threads_.empty()) return stopped;
        t = thread(tid);
        if (t != nullptr && !t->stopped && t->vfork_wait == 0 && WIFSTOPPED(*status)) {
          auto sent = interrupt(tid);  // case 3
          if (!sent) return std::unexpected(sent.error());
        }
      }
    }
  }
  return stopped;
}

Result<void> Inferior::outlive_tracer() {
  if (!spawned_ || exited_) return {};
  if (auto r = inject_syscall(pid_, SYS_prctl, {PR_SET_PDEATHSIG, 0, 0, 0, 0, 0}); !r) {
    return std::unexpected(r.error());
  }
  return {};
}

Result<void> Inferior::release(pid_t child) {
  if (!children_.contains(child)) {
    return make_error(ErrorCode::kSrch, "pid: " + std::to_string(child) + " is not a forked child");
  }
  children_.erase(child);
  return ptrace_detach(child);
}

Result<void> Inferior::detach() {
  if (pid_ <= 0 || (exited_ && threads_.empty())) return {};
  if (auto s = stop_all(); !s) return std::unexpected(s.error());
  // Signals the caller has not handled yet go to the threads as they leave, except the trap of
  // a single step hwarb asked for: it is hwarb's, and delivered it would kill the program
  // (SIGTRAP's default action). Such a trap is in one of two places:
  //  1. reported already (the step ended before stop_all's interrupt): in queued_;
  //  2. pending behind the interrupt stop (the kernel reports a ptrace interrupt before the
  //     signals queued with it): surfaced here, then dropped like case 1.
  std::set<pid_t> stepped;
  for (const auto& [tid, t] : threads_) {
    if (t.stopped && t.last == Resume::kStep) stepped.insert(tid);
  }
  for (pid_t tid : stepped) {
    auto surfaced = surface_pending(tid, 1ull << (SIGTRAP - 1));
    if (!surfaced) continue;  // the thread is gone: nothing to deliver
    for (const Event& ev : *surfaced) queued_.push_back(ev);
  }
  std::map<pid_t, int> pending;
  for (const Event& ev : queued_) {
    if (ev.kind != EventKind::kSignal) continue;
    // x86 reports a step with TRAP_TRACE, and a step that ends in a system call's exit with
    // TRAP_BRKPT (a program's own int3 is SI_KERNEL).
    const bool step_code = ev.code == TRAP_TRACE || ev.code == TRAP_BRKPT;
    const bool own_step = ev.signal == SIGTRAP && step_code && stepped.contains(ev.tid);
    if (!own_step) pending[ev.tid] = ev.signal;
  }
  for (const Event& ev : queued_) {
    if (ev.kind == EventKind::kFork) let_go_unreported(ev);
  }
  queued_.clear();
  // Forked children nobody was told of (their fork events were read by a stop_all) go too.
  for (const auto& [child, c] : children_) {
    ignore_error(ptrace_detach(child), "a child that is gone needs no detach");
  }
  children_.clear();
  Result<void> first;
  std::vector<pid_t> in_vfork;
  // Leaders last: a zombie leader can be reaped only once its group is empty.
  std::vector<pid_t> order;
  for (const auto& [tid, t] : threads_) order.push_back(tid);
  std::stable_partition(order.begin(), order.end(), [&](pid_t t) { return !is_group_leader(t); });
  for (pid_t tid : order) {
    Thread& t = threads_.at(tid);
    if (!t.stopped) {
      if (t.vfork_wait != 0) in_vfork.push_back(tid);
      continue;
    }
    int sig = pending.contains(tid) ? pending[tid] : 0;
    if (sig == 0 && t.kept_signal != 0) sig = t.kept_signal;
    if (t.stop != StopKind::kSignal && sig != 0) {
      ignore_error(send_thread_signal(thread_group_of(tid), tid, sig),
                   "a thread that is gone has no signal to get");
      sig = 0;
    }
    if (auto r = detach_thread(tid, sig); !r && first && r.error().code() != ErrorCode::kSrch) {
      first = r;
    }
  }
  // A vfork parent stops once its child (detached above, running) execs or exits: it is
  // interrupted and detached then, within a bound; past it, it stays traced until hwarb exits
  // (the kernel detaches it then).
  for (pid_t tid : in_vfork) {
    if (!ptrace_interrupt(tid)) continue;
    for (int tries = 0; tries < 2000; ++tries) {
      auto got = wait_once(tid, true);
      if (!got && got.error().code() == ErrorCode::kIntr) continue;
      if (!got || got->pid != tid) {
        if (!got) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (WIFSTOPPED(got->status.raw))
        ignore_error(ptrace_detach(tid, 0), "let go either way; ESRCH when it is gone");
      break;
    }
  }
  threads_.clear();
  exited_ = true;
  return first;
}

Result<void> Inferior::kill() {
  if (pid_ <= 0 || exited_) return {};
  ignore_error(send_signal(pid_, SIGKILL), "the wait below sees the end either way");
  // Processes of its own that are still ours: vfork children, forks not released yet.
  for (const auto& [tid, t] : threads_) {
    if (t.vfork_child)
      ignore_error(send_signal(tid, SIGKILL), "a process that is gone needs no kill");
  }
  for (const auto& [child, unused] : children_)
    ignore_error(send_signal(child, SIGKILL), "a process that is gone needs no kill");
  for (pid_t process : memory_.followed())
    ignore_error(send_signal(process, SIGKILL), "a process that is gone needs no kill");
  for (;;) {
    auto got = wait_ours(pid_);
    if (!got) {
      if (got.error().code() == ErrorCode::kIntr) continue;
      break;
    }
    const auto [tid, status] = *got;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (tid == pid_) break;
      threads_.erase(tid);
      children_.erase(tid);
      announced_.erase(tid);
      unreaped_.erase(tid);
    }
  }
  threads_.clear();
  exited_ = true;
  return {};
}

}  // namespace hwarb::native

#include "hwarb/linux/soft_watch.h"

#include <linux/futex.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/page.h"
#include "hwarb/linux/syscall_buffers.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

constexpr int kSegvAccErr = 2;   // SEGV_ACCERR: a protection fault on a mapped page
constexpr int kSiKernel = 0x80;  // SI_KERNEL: the SIGTRAP of an int3
constexpr std::uint64_t kSigDfl = kSigDflHandler;
constexpr std::uint64_t kSigIgn = kSigIgnHandler;

bool overlaps(std::uint64_t a, std::uint64_t alen, std::uint64_t b, std::uint64_t blen) {
  return a < b + blen && b < a + alen;
}

unsigned access_bits(x86::Access access) {
  switch (access) {
    case x86::Access::kRead:
      return kWatchRead;
    case x86::Access::kWrite:
      return kWatchWrite;
    case x86::Access::kReadWrite:
      return kWatchRead | kWatchWrite;
  }
  return 0;
}

// What an XSAVE-family instruction (`form`, its area at `base`, run with `regs`) did to
// [addr, addr + len), of `bits`: its operand is the whole state area, but the processor writes
// only the components it saved, which the header it left tells (x86/xsave.h). `process`'s
// memory is read after the instruction ran; on a failed read `bits` stay as they are.
unsigned xsave_bits(Inferior& inferior, pid_t process, x86::XsaveForm form, std::uint64_t base,
                    const x86::Regs& regs, std::uint64_t addr, std::uint64_t len, unsigned bits) {
  if (form == x86::XsaveForm::kNone) return bits;
  auto bv = inferior.read_word(base + 512, 8, process);
  if (!bv) return bits;
  const x86::XsaveLayout& layout = x86::host_xsave_layout();
  const std::uint64_t rfbm = x86::xsave_rfbm(regs.rax, regs.rdx, layout);
  const auto touches = [&](const std::vector<x86::AreaSpan>& spans) {
    return std::any_of(spans.begin(), spans.end(), [&](const x86::AreaSpan& s) {
      return overlaps(base + s.offset, s.size, addr, len);
    });
  };
  unsigned out = 0;
  if (touches(x86::xsave_written(form, rfbm, *bv, layout))) out |= kWatchWrite;
  if (touches(x86::xsave_read(form))) out |= kWatchRead;
  return bits & out;
}

// PROT_* while watched: no access when any watch on the page reads, else no writes.
int watched_protection(int original, unsigned access) {
  if ((access & kWatchRead) != 0) return PROT_NONE;
  return original & ~PROT_WRITE;
}

// A system call's return value that is an error (-4095..-1).
bool failed(std::int64_t ret) {
  return ret < 0 && ret >= -4095;
}

std::uint64_t page_round_up(std::uint64_t len) {
  return (len + kPage - 1) & ~(kPage - 1);
}

bool is_stack(const Mapping& m, const std::vector<std::uint64_t>& stack_pointers) {
  if (m.path == "[stack]") return true;
  return std::any_of(stack_pointers.begin(), stack_pointers.end(),
                     [&](std::uint64_t sp) { return m.contains(sp); });
}

}  // namespace

const char* watch_method_name(WatchMethod method) {
  switch (method) {
    case WatchMethod::kPageProtect:
      return "page protection";
    case WatchMethod::kSingleStep:
      return "single-step";
    case WatchMethod::kInt3:
      return "int3";
  }
  return "?";
}

SoftWatch::SoftWatch(Inferior& inferior, std::vector<WatchRange> ranges)
    : inferior_(&inferior), ranges_(std::move(ranges)), start_(std::chrono::steady_clock::now()) {}

std::uint64_t SoftWatch::now_ns() const {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - start_)
                                        .count());
}

Result<SoftWatch> SoftWatch::arm(Inferior& inferior, std::vector<WatchRange> ranges,
                                 const SoftWatchOptions& options) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const WatchRange& r = ranges[i];
    const std::string which = "range " + std::to_string(i) + " (" + hex(r.addr) + ")";
    if (r.len == 0) return make_error(ErrorCode::kInval, "len: " + which + " has length 0");
    if (r.addr + r.len < r.addr) {
      return make_error(ErrorCode::kInval, "len: " + which + " wraps around the address space");
    }
    if (r.access == 0 || (r.access & ~(kWatchRead | kWatchWrite | kWatchExec)) != 0) {
      return make_error(ErrorCode::kInval, "access: " + which + " has no valid access");
    }
    if ((r.access & kWatchExec) != 0 && (r.access & ~kWatchExec) != 0) {
      return make_error(ErrorCode::kInval,
                        "access: " + which + " mixes execution with reads or writes");
    }
  }
  std::vector<pid_t> tids = inferior.threads();
  pid_t tid = -1;
  std::vector<std::uint64_t> stack_pointers;
  std::vector<RseqArea> rseq_areas;
  for (pid_t t : tids) {
    if (!inferior.is_stopped(t)) continue;
    if (tid < 0) tid = t;
    if (auto regs = inferior.get_regs(t)) stack_pointers.push_back(regs->rsp);
    if (auto area = inferior.rseq_area(t); area && area->len != 0) rseq_areas.push_back(*area);
  }
  if (tid < 0) return make_error(ErrorCode::kSrch, "pid: no stopped thread to arm the watch in");
  if (options.inject_in > 0 && inferior.is_stopped(options.inject_in)) tid = options.inject_in;
  auto maps = read_maps(inferior.pid());
  if (!maps) return std::unexpected(maps.error());

  SoftWatch w(inferior, std::move(ranges));
  w.image_ = executable_path(inferior.pid()).value_or("");
  inferior.follow_execs(true);
  w.methods_.assign(w.ranges_.size(), WatchMethod::kPageProtect);
  std::string why;
  for (std::size_t i = 0; i < w.ranges_.size(); ++i) {
    const WatchRange& r = w.ranges_[i];
    if ((r.access & kWatchExec) != 0) {
      w.methods_[i] = WatchMethod::kInt3;
      continue;
    }
    for (const std::uint64_t p : pages_of(r.addr, r.len)) {
      auto m = find_mapping(*maps, p);
      if (!m) {
        // Nothing there to access yet (a library not loaded, a null pointer's page): watched
        // from the mmap that maps it, as a watched page that was unmapped is.
        w.gone_.insert(p);
        continue;
      }
      // A page that holds a thread's rseq area cannot be protected: the kernel's write of it at
      // each return to that thread would fail, and the kernel kills the process (SIGSEGV).
      const bool rseq = std::any_of(rseq_areas.begin(), rseq_areas.end(), [&](const RseqArea& a) {
        return overlaps(p, kPage, a.addr, a.len);
      });
      if (is_stack(*m, stack_pointers) || rseq || ((r.access & kWatchRead) != 0 && m->exec) ||
          options.force_single_step) {
        w.methods_[i] = WatchMethod::kSingleStep;
      }
    }
  }
  w.stop_at_hits_ = options.stop_at_hits;
  w.cpu_accesses_ = options.cpu_accesses;
  w.single_step_ =
      std::find(w.methods_.begin(), w.methods_.end(), WatchMethod::kSingleStep) != w.methods_.end();
  if (w.single_step_) {
    // Every instruction is stepped anyway: all ranges are checked by decoding, execution
    // watches by the instruction pointer.
    for (std::size_t i = 0; i < w.ranges_.size(); ++i) w.methods_[i] = WatchMethod::kSingleStep;
    for (pid_t t : tids) {
      if (inferior.is_stopped(t)) {
        if (auto r = w.prepare_step(t); !r) return std::unexpected(r.error());
      }
    }
    return w;
  }
  // The pages and the protection each needs.
  std::map<std::uint64_t, unsigned> page_access;
  for (const WatchRange& r : w.ranges_) {
    if ((r.access & kWatchExec) != 0) continue;
    for (const std::uint64_t p : pages_of(r.addr, r.len)) {
      page_access[p] |= r.access;
    }
  }
  auto undo = [&](SoftWatch& partial) {
    for (auto& [p, page] : partial.pages_)
      ignore_error(partial.protect(tid, p, page.original),
                   "undo of a failed arm: its error is the one reported");
    for (auto& [a, trap] : partial.traps_) {
      ignore_error(inferior.write_memory(a, std::span<const std::uint8_t>(&trap.original, 1)),
                   "undo of a failed arm: its error is the one reported");
    }
  };
  for (auto& [p, access] : page_access) {
    auto m = find_mapping(*maps, p);
    if (!m) continue;  // in gone_
    Page page;
    page.original = m->prot();
    page.protection = watched_protection(page.original, access);
    if (auto r = w.protect(tid, p, page.protection); !r) {
      undo(w);
      return std::unexpected(r.error());
    }
    w.pages_[p] = page;
  }
  for (std::size_t i = 0; i < w.ranges_.size(); ++i) {
    if (w.methods_[i] != WatchMethod::kInt3) continue;
    const std::uint64_t a = w.ranges_[i].addr;
    if (auto it = w.traps_.find(a); it != w.traps_.end()) {
      it->second.ranges.push_back(i);
      continue;
    }
    std::uint8_t original = 0;
    if (auto r = inferior.read_memory(a, std::span(&original, 1)); !r) {
      undo(w);
      return std::unexpected(r.error());
    }
    const std::uint8_t int3 = 0xCC;
    if (auto r = inferior.write_memory(a, std::span<const std::uint8_t>(&int3, 1)); !r) {
      undo(w);
      return std::unexpected(r.error());
    }
    w.traps_[a] = Trap{original, {i}};
  }
  if (!w.gone_.empty()) {
    w.note_pages(std::vector<std::uint64_t>(w.gone_.begin(), w.gone_.end()),
                 "not mapped yet: watched from the mmap that maps it");
  }
  if (!w.pages_.empty() || !w.gone_.empty()) {
    if (auto r = w.learn_segv_action(tid); !r) {
      undo(w);
      return std::unexpected(r.error());
    }
  }
  return w;
}

bool SoftWatch::open_for_other_call(pid_t tid, std::uint64_t page) const {
  const pid_t process = inferior_->process_of(tid);
  return std::any_of(open_.begin(), open_.end(), [&](const auto& entry) {
    const auto& [other, call] = entry;
    return other != tid && inferior_->process_of(other) == process &&
           std::find(call.pages.begin(), call.pages.end(), page) != call.pages.end();
  });
}

Result<void> SoftWatch::protect(pid_t tid, std::uint64_t page, int prot, std::uint64_t count) {
  auto r = inferior_->inject_syscall(
      tid, SYS_mprotect, {page, count * kPage, static_cast<std::uint64_t>(prot), 0, 0, 0});
  if (!r) return std::unexpected(r.error());
  if (*r < 0) {
    return std::unexpected(syscall_return_error(
        *r, "addr", "mprotect of " + hex(page) + " in thread " + std::to_string(tid)));
  }
  return {};
}

// The program's SIGSEGV action across the watch's own faults.
//
// A fault on a protected page is a SIGSEGV the kernel forces (force_sig_info_to_task). When the
// thread blocks SIGSEGV (as inside the program's own SIGSEGV handler) or the process ignores it,
// the kernel first resets the action to SIG_DFL and unblocks SIGSEGV in the thread, all before
// the ptrace stop that shows the fault to the watcher. The program would then die of its next
// SIGSEGV instead of handling (or ignoring) it. The watcher cannot read the action before the
// fault, so it keeps it known instead (segv_, per process):
//  1. arm() reads it: /proc/PID/status SigCgt and SigIgn say whether it is the default (nothing
//     to read); otherwise an injected rt_sigaction(SIGSEGV, NULL, &old) gives the whole struct.
//  2. The program's own rt_sigaction(SIGSEGV, act, ...) is read at entry and kept when it
//     succeeds; a followed fork (or a vfork child) starts with its parent's; an exec resets a
//     handler to the default (SIG_IGN stays), as the kernel does; a SIGSEGV delivered to an
//     SA_RESETHAND handler resets it.
//  3. At each watch fault of a process whose action is not the default, SigCgt/SigIgn (one read
//     of /proc) tell whether the kernel reset it. If it did, the kept struct is set again with an
//     injected rt_sigaction, and, for a handler (caught and reset: the thread blocked SIGSEGV),
//     SIGSEGV is blocked again in the thread (PTRACE_SETSIGMASK). The program's next SIGSEGV is
//     then its handler's, exactly as unwatched; a program without a SIGSEGV handler pays nothing.
// Limits: whether an ignored SIGSEGV was also blocked is lost (it stays unblocked), as is a
// blocked SIGSEGV of the default action (no reset to see); another thread's SIGSEGV between the
// fault and the restore still reaches the restored action, since its signal-delivery-stop is
// reported to the watcher first and the action is looked up only after it.
Result<void> SoftWatch::learn_segv_action(pid_t tid) {
  const pid_t process = inferior_->process_of(tid);
  auto dispositions = signal_dispositions(process);
  if (!dispositions) return std::unexpected(dispositions.error());
  constexpr std::uint64_t kBit = std::uint64_t{1} << (SIGSEGV - 1);
  if (((dispositions->caught | dispositions->ignored) & kBit) == 0) {
    segv_[process] = KernelSigaction{};
    return {};
  }
  auto old = inject_sigaction(*inferior_, tid, SIGSEGV, nullptr);
  if (!old) return std::unexpected(old.error());
  segv_[process] = *old;
  return {};
}

Result<void> SoftWatch::keep_segv_action(pid_t tid) {
  const pid_t process = inferior_->process_of(tid);
  auto it = segv_.find(process);
  if (it == segv_.end() || it->second.handler == kSigDfl) {
    return {};
  }
  const bool ignored = it->second.handler == kSigIgn;
  auto now = signal_dispositions(process);
  if (!now) return std::unexpected(now.error());
  constexpr std::uint64_t kBit = std::uint64_t{1} << (SIGSEGV - 1);
  if (((ignored ? now->ignored : now->caught) & kBit) != 0) return {};  // not reset
  const KernelSigaction action = it->second;
  if (auto r = inject_sigaction(*inferior_, tid, SIGSEGV, &action); !r) {
    return std::unexpected(r.error());
  }
  if (!ignored) {
    auto mask = ptrace_getsigmask(tid);
    if (!mask) return std::unexpected(mask.error());
    if (auto r = ptrace_setsigmask(tid, *mask | kBit); !r) return r;
  }
  return {};
}

// The parachute (signal_action.h). Per process, parachutes_ holds which of SIGSEGV and SIGTRAP
// it is the action of now, and the program's own action of each: what the program's
// rt_sigaction must see and what is put back. Rules:
//  1. It goes up for a signal while the program's action for it is the default or a handler of
//     the program's own (a server's crash reporter, say: a stale fault handed to it would end the
//     program as surely as the default); a program's SIG_IGN is never replaced.
//  2. A signal of the program's own (not the watch's) is passed through only after the parachute
//     for it is down: its default action then kills, or stops, as without hwarb.
//  3. The program's rt_sigaction of the signal runs as it is; at its exit the old action it got
//     is replaced by its own, and the parachute goes up again unless it set SIG_IGN. After a
//     signal of the program's own (rule 2) it stays down in that process.
//  4. A forked child inherits its parent's actions, so its parachute too; an exec resets them
//     (a handler becomes the default), and the parachute goes up again in a re-armed image.
//  5. disarm() and the watchdog (restore_plan()) put the program's action back.
Result<void> SoftWatch::deploy_parachute() {
  parachute_ = true;
  std::set<pid_t> done;
  Result<void> first;
  for (pid_t t : inferior_->threads()) {
    const pid_t process = inferior_->process_of(t);
    // A vfork child has signal actions of its own (its parent's, copied): the parent's thread
    // is the one to set them in.
    const bool vfork_child = inferior_->group_of(t) != process;
    if (!inferior_->is_stopped(t) || vfork_child || unwatched_.contains(process) ||
        done.contains(process)) {
      continue;
    }
    done.insert(process);
    if (auto r = deploy_parachute_in(t); !r && first) first = r;
  }
  return first;
}

Result<void> SoftWatch::deploy_parachute_in(pid_t tid) {
  for (int sig : {SIGSEGV, SIGTRAP}) {
    auto program = inject_sigaction(*inferior_, tid, sig, nullptr);
    if (!program) return std::unexpected(program.error());
    if (program->handler == kSigIgn) continue;
    if (auto r = raise_parachute(tid, sig, *program); !r) return r;
  }
  return {};
}

Result<void> SoftWatch::raise_parachute(pid_t tid, int sig, const KernelSigaction& program) {
  const pid_t process = inferior_->process_of(tid);
  Parachute& p = parachutes_[process];
  p.program[sig] = program;
  if (p.action.handler == kSigDfl) {
    auto action = parachute_action(*inferior_, process);
    if (!action) {
      if (!ranges_.empty()) {
        notes_.push_back(
            {ranges_[0].id, "process " + std::to_string(process) +
                                " runs without a parachute: " + action.error().message()});
      }
      p.action.handler = kSigIgn;  // looked for, not found
      return {};
    }
    p.action = *action;
  }
  if (p.action.handler == kSigIgn) return {};
  if (auto r = inject_sigaction(*inferior_, tid, sig, &p.action); !r) {
    return std::unexpected(r.error());
  }
  p.signals |= signal_bit(sig);
  ++generation_;
  return {};
}

Result<void> SoftWatch::lower_parachute(pid_t tid, int sig) {
  auto it = parachutes_.find(inferior_->process_of(tid));
  if (it == parachutes_.end() || (it->second.signals & signal_bit(sig)) == 0) return {};
  const KernelSigaction program = it->second.program[sig];
  if (auto r = inject_sigaction(*inferior_, tid, sig, &program); !r) {
    return std::unexpected(r.error());
  }
  // A vfork child's actions are its own: its parent keeps the parachute.
  if (inferior_->group_of(tid) != inferior_->process_of(tid)) return {};
  it->second.signals &= ~signal_bit(sig);
  ++generation_;
  return {};
}

Result<void> SoftWatch::after_sigaction(pid_t tid, const OpenSyscall& st) {
  const pid_t process = inferior_->process_of(tid);
  Parachute& p = parachutes_[process];
  const int sig = st.sigaction_signal;
  if ((p.signals & signal_bit(sig)) != 0) {
    if (st.sigaction_old != 0) {
      // The kernel gave the parachute as the old action: the program gets its own.
      const KernelSigaction own = p.program[sig];
      auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(&own), sizeof own);
      if (auto r = inferior_->write_memory(st.sigaction_old, bytes, process); !r) return r;
    }
    if (!st.sigaction_set) return {};  // a query: the parachute stays
    p.signals &= ~signal_bit(sig);     // the kernel holds the program's action now
  }
  if (st.sigaction_set) {
    p.program[sig] = *st.sigaction_set;
    if (st.sigaction_set->handler != kSigIgn) {
      if (auto r = raise_parachute(tid, sig, *st.sigaction_set); !r) return r;
    }
  }
  return {};
}

bool SoftWatch::page_protected(std::uint64_t addr) const {
  return pages_.contains(page_of(addr));
}

Resume SoftWatch::resume_mode(pid_t tid) const {
  const Resume mode = resume_mode();
  if (mode != Resume::kStep) return mode;
  if (in_caught_call_.contains(tid)) return Resume::kSyscall;
  const auto it = step_.find(tid);
  if (it != step_.end() && it->second.syscall && caller_catches(it->second.call)) {
    return Resume::kSyscall;
  }
  return mode;
}

Resume SoftWatch::resume_mode() const {
  if (ended_) return Resume::kCont;
  if (single_step_) return Resume::kStep;
  // Unmapped watched pages: the mmap that brings them back must be seen.
  if (!pages_.empty() || !gone_.empty()) return Resume::kSyscall;
  return Resume::kCont;
}

std::string SoftWatch::describe() const {
  if (single_step_) {
    return "single-step (a watched range is on a stack, on a page the kernel writes for a "
           "thread's rseq area, or is code read as data: every instruction is stepped, about "
           "30 000 per second)";
  }
  std::string out;
  if (!pages_.empty() || !gone_.empty()) {
    out = "page protection (" + std::to_string(pages_.size()) +
          (pages_.size() == 1 ? " page" : " pages") +
          (gone_.empty() ? std::string()
                         : ", " + std::to_string(gone_.size()) + " more once mapped") +
          ")";
  }
  if (!traps_.empty()) {
    if (!out.empty()) out += " + ";
    out += "int3 (" + std::to_string(traps_.size()) + ")";
  }
  if (cpu_accesses_ && !pages_.empty()) out += ", each access made by the CPU";
  return out;
}

RestorePlan SoftWatch::restore_plan() const {
  RestorePlan plan;
  if (ended_) return plan;
  for (pid_t t : inferior_->threads()) {
    const pid_t process = inferior_->process_of(t);
    if (unwatched_.contains(process)) continue;
    if (std::find(plan.processes.begin(), plan.processes.end(), process) == plan.processes.end()) {
      plan.processes.push_back(process);
    }
  }
  for (const auto& [addr, page] : pages_) plan.pages.push_back({addr, page.original});
  for (const auto& [addr, trap] : traps_) plan.bytes.push_back({addr, trap.original});
  for (const auto& [process, p] : parachutes_) {
    if (p.signals != 0 && !unwatched_.contains(process)) {
      const auto own = [&](int sig) {
        const auto it = p.program.find(sig);
        return it == p.program.end() ? KernelSigaction{} : it->second;
      };
      plan.signals.push_back(
          {.process = process, .signals = p.signals, .segv = own(SIGSEGV), .trap = own(SIGTRAP)});
    }
  }
  return plan;
}

std::vector<SoftWatch::Note> SoftWatch::take_notes() {
  return std::exchange(notes_, {});
}

void SoftWatch::note_pages(const std::vector<std::uint64_t>& pages, const std::string& what) {
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if (methods_[i] != WatchMethod::kPageProtect) continue;
    const bool on = std::any_of(pages.begin(), pages.end(), [&](std::uint64_t p) {
      return overlaps(p, kPage, ranges_[i].addr, ranges_[i].len);
    });
    if (on) notes_.push_back(Note{ranges_[i].id, hex(ranges_[i].addr) + ": " + what});
  }
}

Result<std::vector<std::uint8_t>> SoftWatch::read_range(std::size_t range, pid_t tid) {
  std::vector<std::uint8_t> bytes(ranges_[range].len);
  if (auto r = inferior_->read_memory(ranges_[range].addr, bytes, inferior_->process_of(tid)); !r) {
    return std::unexpected(r.error());
  }
  return bytes;
}

void SoftWatch::add_hit(std::vector<WatchHit>& hits, std::size_t range, pid_t tid, std::uint64_t ip,
                        std::uint64_t addr, unsigned access, std::vector<std::uint8_t> before,
                        std::vector<std::uint8_t> after, std::string syscall) {
  WatchHit hit;
  hit.id = ranges_[range].id;
  hit.tid = tid;
  hit.time_ns = now_ns();
  hit.ip = ip;
  hit.addr = addr;
  hit.access = access;
  hit.old_value = std::move(before);
  hit.new_value = std::move(after);
  hit.syscall = std::move(syscall);
  hits.push_back(std::move(hit));
}

Result<void> SoftWatch::resume_others(const std::vector<pid_t>& others) {
  for (pid_t other : others) {
    // ESRCH: killed in its stop (the process is ending); its exit event follows.
    if (auto r = inferior_->resume_as_before(other); !r && r.error().code() != ErrorCode::kSrch) {
      return r;
    }
  }
  return {};
}

Result<bool> SoftWatch::handle(const Event& ev, std::vector<WatchHit>& hits) {
  auto handled = handle_event(ev, hits);
  // ESRCH from the ptrace calls on the event's stopped thread: the process is being killed (its
  // exit_group or a SIGKILL took the thread out of its stop). The event is done with; the exit
  // events follow.
  if (!handled && handled.error().code() == ErrorCode::kSrch) {
    return true;
  }
  return handled;
}

Result<bool> SoftWatch::handle_event(const Event& ev, std::vector<WatchHit>& hits) {
  if (ended_) return false;
  const bool live = ev.kind == EventKind::kSignal || ev.kind == EventKind::kSyscallEnter ||
                    ev.kind == EventKind::kSyscallExit || ev.kind == EventKind::kNewThread ||
                    ev.kind == EventKind::kFork;
  if (live && unwatched_.contains(inferior_->process_of(ev.tid))) {
    return false;  // an image that could not be watched again after its exec: runs as it is
  }
  switch (ev.kind) {
    case EventKind::kSignal:
      if (ev.signal == SIGSEGV && ev.code == kSegvAccErr && page_protected(ev.fault_addr)) {
        return on_fault(ev, hits);
      }
      if (ev.signal == SIGSEGV) {
        // The program's SIGSEGV, passed through: an SA_RESETHAND handler is taken once.
        auto it = segv_.find(inferior_->process_of(ev.tid));
        if (it != segv_.end() && (it->second.flags & SA_RESETHAND) != 0) {
          it->second = KernelSigaction{};
        }
      }
      if (ev.signal == SIGTRAP && single_step_ && step_.contains(ev.tid) && ev.code != kSiKernel) {
        return on_step(ev.tid, hits);
      }
      if (ev.signal == SIGTRAP && ev.code == kSiKernel && !traps_.empty()) {
        return on_trap(ev, hits);
      }
      if (ev.signal == SIGSEGV || ev.signal == SIGTRAP) {
        // The program's own: its action, not the parachute, must take it.
        if (auto r = lower_parachute(ev.tid, ev.signal); !r) return std::unexpected(r.error());
      }
      return false;
    case EventKind::kSyscallEnter:
      return on_syscall_enter(ev);
    case EventKind::kSyscallExit:
      return on_syscall_exit(ev, hits);
    case EventKind::kNewThread:
      if (single_step_) {
        if (auto r = prepare_step(ev.tid); !r) return std::unexpected(r.error());
      }
      if (auto r = inferior_->resume(ev.tid, resume_mode()); !r) return std::unexpected(r.error());
      return true;
    case EventKind::kFork:
      // A vfork child shares this process's memory until it execs: watched like a thread. A
      // forked child has copies of the protected pages and int3 bytes: it is followed, watched
      // like this process.
      if (!ev.vfork) {
        if (auto r = inferior_->follow(ev.child); !r) return std::unexpected(r.error());
        ++generation_;  // one more process to restore
      }
      if (auto it = segv_.find(inferior_->process_of(ev.tid)); it != segv_.end()) {
        const KernelSigaction parent = it->second;
        segv_[inferior_->process_of(ev.child)] = parent;
      }
      if (auto it = parachutes_.find(inferior_->process_of(ev.tid)); it != parachutes_.end()) {
        const Parachute parent = it->second;
        parachutes_[inferior_->process_of(ev.child)] = parent;
      }
      if (single_step_) {
        if (auto r = prepare_step(ev.child); !r) return std::unexpected(r.error());
      }
      // Held forks: the child waits for the caller too (a debugger reporting the fork).
      if (inferior_->holds_forks()) return true;
      if (auto r = inferior_->resume(ev.child, resume_mode()); !r) {
        return std::unexpected(r.error());
      }
      return true;
    case EventKind::kExec:
      return on_exec(ev.tid);
    case EventKind::kVforkDone:
      return false;  // the caller's (Inferior::hold_forks)
    case EventKind::kThreadExit:
    case EventKind::kLeaderEnded:  // its process goes on: only the thread's own state goes
      open_.erase(ev.tid);
      step_.erase(ev.tid);
      rep_.erase(ev.tid);
      in_caught_call_.erase(ev.tid);
      return false;
    case EventKind::kExited:
    case EventKind::kKilled:
      // Followed forks that outlive the process are still protected: disarm() restores them.
      if (inferior_->threads().empty()) ended_ = true;
      return false;
  }
  return false;
}

bool SoftWatch::is_fault(const Event& ev) const {
  return !ended_ && ev.kind == EventKind::kSignal && ev.signal == SIGSEGV &&
         ev.code == kSegvAccErr && page_protected(ev.fault_addr) &&
         !unwatched_.contains(inferior_->process_of(ev.tid));
}

unsigned SoftWatch::page_access(std::uint64_t page) const {
  unsigned access = 0;
  for (const WatchRange& r : ranges_) {
    if ((r.access & kWatchExec) == 0 && overlaps(page, kPage, r.addr, r.len)) access |= r.access;
  }
  return access;
}

Result<bool> SoftWatch::rearm(pid_t process) {
  if (image_.empty()) return false;
  auto exe = executable_path(process);
  if (!exe || *exe != image_) return false;
  if (single_step_) {
    if (auto r = prepare_step(process); !r) return std::unexpected(r.error());
    return true;
  }
  auto maps = read_maps(process);
  if (!maps) return false;
  for (const auto& [p, page] : pages_) {
    if (!find_mapping(*maps, p)) return false;
  }
  for (auto& [p, page] : pages_) {
    page.original = find_mapping(*maps, p)->prot();
    page.protection = watched_protection(page.original, page_access(p));
    if (auto r = protect(process, p, page.protection); !r) return std::unexpected(r.error());
  }
  const std::uint8_t int3 = 0xCC;
  for (auto& [a, trap] : traps_) {
    if (auto r = inferior_->write_memory(a, std::span<const std::uint8_t>(&int3, 1), process); !r) {
      return std::unexpected(r.error());
    }
  }
  return true;
}

Result<bool> SoftWatch::on_exec(pid_t process) {
  if (auto it = segv_.find(process); it != segv_.end() && it->second.handler != kSigIgn) {
    it->second = KernelSigaction{};  // an exec resets handlers; SIG_IGN stays
  }
  parachutes_.erase(process);  // an exec resets handlers: the parachute is gone with them
  open_.erase(process);
  step_.erase(process);
  rep_.erase(process);
  ++generation_;
  // The same executable at the same addresses (address randomisation is off for spawned
  // commands): the watch goes on in the new image.
  auto again = rearm(process);
  if (!again) return std::unexpected(again.error());
  if (*again) {
    unwatched_.erase(process);
    if (parachute_) {
      if (auto r = deploy_parachute_in(process); !r) return std::unexpected(r.error());
    }
    if (auto r = inferior_->resume(process, resume_mode()); !r) return std::unexpected(r.error());
    return true;
  }
  unwatched_.insert(process);
  const auto tids = inferior_->threads();
  const bool others = std::any_of(tids.begin(), tids.end(), [&](pid_t t) {
    return !unwatched_.contains(inferior_->process_of(t));
  });
  if (!others) {
    ended_ = true;
    pages_.clear();
    gone_.clear();
    traps_.clear();
    open_.clear();
    step_.clear();
    rep_.clear();
  }
  return false;
}

Result<bool> SoftWatch::on_fault(const Event& ev, std::vector<WatchHit>& hits) {
  auto done = complete_fault(ev, hits);
  if (!done) return std::unexpected(done.error());
  if (done->stopped) {
    if (auto r = inferior_->resume(ev.tid, resume_mode(), done->signal); !r) {
      return std::unexpected(r.error());
    }
  }
  return true;
}

Result<SoftWatch::Completed> SoftWatch::complete_fault(const Event& ev,
                                                       std::vector<WatchHit>& hits) {
  const pid_t tid = ev.tid;
  ++stats_.faults;
  if (auto r = keep_segv_action(tid); !r) return std::unexpected(r.error());
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t fault_ip = regs->rip;
  const pid_t process = inferior_->process_of(tid);
  auto insn = inferior_->decode_at(regs->rip, process);
  std::vector<x86::MemRef> refs;
  if (insn) {
    auto r = x86::effective_addresses(*insn, *regs);
    if (r) refs = std::move(*r);
  }
  if (refs.empty()) {
    // Undecodable: assume a read-write of the faulting byte.
    refs.push_back(x86::MemRef{ev.fault_addr, 1, x86::Access::kReadWrite});
  }
  struct Match {
    std::size_t range;
    unsigned access;
    std::uint64_t first;
  };
  std::vector<Match> matches;
  for (const x86::MemRef& ref : refs) {
    for (std::size_t i = 0; i < ranges_.size(); ++i) {
      const WatchRange& r = ranges_[i];
      if (methods_[i] != WatchMethod::kPageProtect) continue;
      if (!overlaps(ref.address, ref.size, r.addr, r.len)) continue;
      const unsigned bits = access_bits(ref.access) & r.access;
      if (bits == 0) continue;
      auto it = std::find_if(matches.begin(), matches.end(),
                             [&](const Match& m) { return m.range == i; });
      if (it != matches.end()) {
        it->access |= bits;
      } else {
        matches.push_back(Match{i, bits, std::max(ref.address, r.addr)});
      }
    }
  }
  if (matches.empty()) ++stats_.false_sharing;
  std::vector<std::vector<std::uint8_t>> before;
  for (const Match& m : matches) {
    auto b = read_range(m.range, tid);
    if (!b) return std::unexpected(b.error());
    before.push_back(std::move(*b));
  }

  // The pages the instruction touches, and whether their original protection allows it.
  auto allowed = [&](const x86::MemRef& ref, int need) {
    for (const std::uint64_t p : pages_of(ref.address, ref.size)) {
      auto it = pages_.find(p);
      if (it != pages_.end() && (it->second.original & need) != need) return false;
    }
    return true;
  };
  bool done = false;
  int pass_signal = 0;
  const bool string_op = insn && x86::is_rep_string(*insn);
  std::vector<unsigned> touched(matches.size(), 0);  // string_op: per match, what it did
  if (insn && refs.size() == 1 && !string_op && !cpu_accesses_) {
    if (auto st = x86::emulate_store(*insn, *regs); st && allowed(refs[0], PROT_WRITE)) {
      std::uint8_t bytes[8];
      std::memcpy(bytes, &st->value, sizeof(bytes));
      if (auto r = inferior_->write_memory(st->address,
                                           std::span<const std::uint8_t>(bytes, st->size), process);
          !r) {
        return std::unexpected(r.error());
      }
      regs->rip += insn->length;
      done = true;
    } else if (auto ld = x86::emulate_load(*insn, *regs); ld && allowed(refs[0], PROT_READ)) {
      auto value = inferior_->read_word(ld->address, static_cast<int>(ld->size), process);
      if (!value) return std::unexpected(value.error());
      if (auto r = x86::apply_load(*insn, *value, *regs); !r) return std::unexpected(r.error());
      done = true;
    }
    if (done) {
      if (auto r = inferior_->set_regs(tid, *regs); !r) return std::unexpected(r.error());
      ++stats_.emulated;
    }
  }
  if (!done) {
    // Single-step with the touched pages open; nobody else runs meanwhile.
    std::vector<std::uint64_t> open;
    for (const x86::MemRef& ref : refs) {
      for (const std::uint64_t p : pages_of(ref.address, ref.size)) {
        if (pages_.contains(p) && std::find(open.begin(), open.end(), p) == open.end()) {
          open.push_back(p);
        }
      }
    }
    if (std::find(open.begin(), open.end(), page_of(ev.fault_addr)) == open.end()) {
      open.push_back(page_of(ev.fault_addr));
    }
    std::vector<pid_t> others;
    if (inferior_->threads().size() > 1) {
      auto stopped = inferior_->stop_all(tid);
      if (!stopped) return std::unexpected(stopped.error());
      others = std::move(*stopped);
    }
    for (std::uint64_t p : open) {
      if (auto r = protect(tid, p, pages_[p].original); !r) return std::unexpected(r.error());
    }
    // A REP string instruction is stepped iteration by iteration, with its pages open, until it
    // ends, leaves the open pages, or a signal interrupts it; each completed iteration's operands
    // say what it did to the watched ranges.
    x86::Regs at = *regs;
    bool alive = true;
    for (;;) {
      std::vector<x86::MemRef> iteration;
      if (string_op) {
        x86::Regs one = at;
        one.rcx = 1;
        if (auto r = x86::effective_addresses(*insn, one)) iteration = std::move(*r);
      }
      if (auto r = inferior_->resume(tid, Resume::kStep); !r) return std::unexpected(r.error());
      auto after = inferior_->wait_for(tid);
      if (!after) return std::unexpected(after.error());
      if (after->kind != EventKind::kSignal) {
        inferior_->requeue(*after);
        alive = false;
        break;
      }
      if (after->signal != SIGTRAP) {
        pass_signal = after->signal;  // the program's own fault, or a signal before the step
        break;
      }
      if (!string_op) break;
      for (const x86::MemRef& ref : iteration) {
        for (std::size_t k = 0; k < matches.size(); ++k) {
          const WatchRange& r = ranges_[matches[k].range];
          if (!overlaps(ref.address, ref.size, r.addr, r.len)) continue;
          const unsigned bits = access_bits(ref.access) & r.access;
          if (bits == 0) continue;
          if (touched[k] == 0) matches[k].first = std::max(ref.address, r.addr);
          touched[k] |= bits;
        }
      }
      auto now = inferior_->get_regs(tid);
      if (!now) return std::unexpected(now.error());
      at = *now;
      if (at.rip != fault_ip) break;  // the instruction ended
      // Iterations remain: on while they may touch an open page.
      auto rest = x86::effective_addresses(*insn, at);
      if (!rest) break;
      const bool on_open = std::any_of(rest->begin(), rest->end(), [&](const x86::MemRef& ref) {
        return std::any_of(open.begin(), open.end(), [&](std::uint64_t p) {
          return overlaps(p, kPage, ref.address, std::max<std::uint64_t>(ref.size, 1));
        });
      });
      if (!on_open) break;
    }
    if (alive) {
      for (std::uint64_t p : open) {
        if (open_for_other_call(tid, p)) continue;
        if (auto r = protect(tid, p, pages_[p].protection); !r) return std::unexpected(r.error());
      }
    }
    if (auto r = resume_others(others); !r) return std::unexpected(r.error());
    ++stats_.stepped;
    if (!alive) return Completed{};
    // A signal instead of the step's trap: the instruction faulted (on the program's own
    // protection, say) or a signal came before it ran. Either way it did not happen (the thread
    // is still on it, to run it again after the signal), so it is not a hit: a plain instruction
    // reports nothing, a REP string instruction only the iterations that completed (touched).
    if (pass_signal != 0 && !string_op) {
      auto now = inferior_->get_regs(tid);
      if (!now) return std::unexpected(now.error());
      if (now->rip == fault_ip) matches.clear();
    }
  }
  for (std::size_t k = 0; k < matches.size(); ++k) {
    // A REP string instruction: what its iterations did (none may have reached the range yet).
    unsigned access = string_op ? touched[k] : matches[k].access;
    if (insn && insn->xsave != x86::XsaveForm::kNone && !refs.empty()) {
      const WatchRange& r = ranges_[matches[k].range];
      access = xsave_bits(*inferior_, process, insn->xsave, refs[0].address, *regs, r.addr, r.len,
                          access);
    }
    if (access == 0) continue;
    auto now = read_range(matches[k].range, tid);
    if (!now) return std::unexpected(now.error());
    add_hit(hits, matches[k].range, tid, fault_ip, matches[k].first, access, std::move(before[k]),
            std::move(*now), "");
  }
  return Completed{true, pass_signal};
}

Result<bool> SoftWatch::on_trap(const Event& ev, std::vector<WatchHit>& hits) {
  const pid_t tid = ev.tid;
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t at = regs->rip - 1;
  auto it = traps_.find(at);
  if (it == traps_.end()) return false;  // the program's own int3
  ++stats_.traps;
  for (std::size_t range : it->second.ranges) {
    add_hit(hits, range, tid, at, at, kWatchExec, {}, {}, "");
  }
  // Step the original instruction: restore its byte, step, plant the int3 again.
  regs->rip = at;
  if (auto r = inferior_->set_regs(tid, *regs); !r) return std::unexpected(r.error());
  std::vector<pid_t> others;
  if (inferior_->threads().size() > 1) {
    auto stopped = inferior_->stop_all(tid);
    if (!stopped) return std::unexpected(stopped.error());
    others = std::move(*stopped);
  }
  const std::uint8_t original = it->second.original;
  const std::uint8_t int3 = 0xCC;
  const pid_t process = inferior_->process_of(tid);
  if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&original, 1), process);
      !r) {
    return std::unexpected(r.error());
  }
  if (auto r = inferior_->resume(tid, Resume::kStep); !r) return std::unexpected(r.error());
  auto after = inferior_->wait_for(tid);
  if (!after) return std::unexpected(after.error());
  int pass_signal = 0;
  bool resume_thread = after->kind == EventKind::kSignal;
  if (resume_thread && after->signal == SIGSEGV && after->code == kSegvAccErr &&
      page_protected(after->fault_addr)) {
    // The instruction also touches a watched page: completed by the fault path.
    auto handled = on_fault(*after, hits);
    if (!handled) return std::unexpected(handled.error());
    resume_thread = false;
  } else if (resume_thread && after->signal != SIGTRAP) {
    pass_signal = after->signal;
  }
  if (inferior_->alive()) {
    if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&int3, 1), process);
        !r) {
      return std::unexpected(r.error());
    }
  }
  if (after->kind != EventKind::kSignal) inferior_->requeue(*after);
  if (auto r = resume_others(others); !r) return std::unexpected(r.error());
  if (resume_thread) {
    if (auto r = inferior_->resume(tid, resume_mode(), pass_signal); !r) {
      return std::unexpected(r.error());
    }
  }
  return true;
}

Result<bool> SoftWatch::on_syscall_enter(const Event& ev) {
  const pid_t tid = ev.tid;
  // Single-step method: the entry of a caught call its step was turned into (resume_mode(tid)).
  if (single_step_) {
    const auto step = step_.find(tid);
    if (step != step_.end() && step->second.syscall) in_caught_call_.insert(tid);
  }
  if (open_.contains(tid)) {
    // A restarted call: its pages are still open.
    if (auto r = after_syscall_stop(tid, ev.syscall, Resume::kSyscall); !r) {
      return std::unexpected(r.error());
    }
    return true;
  }
  OpenSyscall st;
  st.nr = ev.syscall;
  // A page is opened only when the call needs an access (PROT_READ, PROT_WRITE) that the watch's
  // protection denies: a write watch leaves the page readable, so calls that only read it (futex
  // waits and wakes, write(2)) run on it as it is, and other threads' writes meanwhile are still
  // seen.
  auto add_page = [&](std::uint64_t p, int need = PROT_READ | PROT_WRITE) {
    auto it = pages_.find(p);
    if (it == pages_.end() || (it->second.protection & need) == need) return;
    if (std::find(st.pages.begin(), st.pages.end(), p) == st.pages.end()) st.pages.push_back(p);
  };
  if (ev.syscall == SYS_rt_sigaction && ev.args[0] == SIGSEGV && ev.args[1] != 0) {
    // The program sets its SIGSEGV action: kept at exit when the call succeeds
    // (keep_segv_action). An unreadable struct fails the call (EFAULT).
    KernelSigaction act;
    if (inferior_->read_memory(ev.args[1],
                               std::span(reinterpret_cast<std::uint8_t*>(&act), sizeof act),
                               inferior_->process_of(tid))) {
      st.segv_action = act;
    }
  }
  if (ev.syscall == SYS_rt_sigaction && parachute_ &&
      (ev.args[0] == SIGSEGV || ev.args[0] == SIGTRAP)) {
    st.sigaction_signal = static_cast<int>(ev.args[0]);
    st.sigaction_old = ev.args[2];
    if (ev.args[1] != 0) {
      KernelSigaction act;
      if (!inferior_->read_memory(ev.args[1],
                                  std::span(reinterpret_cast<std::uint8_t*>(&act), sizeof act),
                                  inferior_->process_of(tid))) {
        st.sigaction_signal = 0;  // the call fails (EFAULT): nothing changes
      } else {
        st.sigaction_set = act;
      }
    }
  }
  if (ev.syscall == SYS_perf_event_open && !cpu_accesses_ && !ranges_.empty()) {
    // The program opens a perf event: a breakpoint (struct perf_event_attr's first word, its
    // type, is PERF_TYPE_BREAKPOINT) may be on a protected page, and a store the watcher
    // performed would be invisible to it. From now on the CPU makes every access.
    std::uint32_t type = 0;
    if (inferior_->read_memory(ev.args[0],
                               std::span(reinterpret_cast<std::uint8_t*>(&type), sizeof type),
                               inferior_->process_of(tid)) &&
        type == PERF_TYPE_BREAKPOINT) {
      cpu_accesses_ = true;
      notes_.push_back(
          {ranges_[0].id, "thread " + std::to_string(tid) +
                              " opened a perf breakpoint: accesses to the watched pages are made "
                              "by the CPU from now on (each stepped), for it to see them"});
    }
  }
  if (ev.syscall == SYS_rt_sigreturn) {
    // No arguments (its registers are the interrupted code's) and no buffer: nothing to open.
  } else if (ev.syscall == SYS_mprotect || ev.syscall == SYS_munmap) {
    const std::uint64_t addr = ev.args[0];
    const std::uint64_t len = (ev.args[1] + kPage - 1) & ~(kPage - 1);
    for (auto& [p, page] : pages_) {
      if (overlaps(p, kPage, addr, len)) {
        st.effect_nr = ev.syscall;
        st.effect_addr = addr;
        st.effect_len = len;
        st.effect_prot = static_cast<int>(ev.args[2]);
        break;
      }
    }
  } else if (ev.syscall == SYS_mmap || ev.syscall == SYS_mremap) {
    // A mapping may appear over a watched address (again): seen at exit.
    if (!pages_.empty() || !gone_.empty()) {
      st.effect_nr = ev.syscall;
      st.effect_addr = ev.args[0];
      st.effect_len = page_round_up(ev.args[1]);
      st.effect_prot = static_cast<int>(ev.args[2]);
      st.effect_new_len = page_round_up(ev.args[2]);
    }
  } else if (ev.syscall == SYS_futex) {
    for (const auto& [addr, need] : futex_words(ev.args)) {
      add_page(page_of(addr), need);
      add_page(page_of(addr + 3), need);
    }
  } else if (has_buffer_arguments(ev.syscall)) {
    st.call = call_buffers(*inferior_, tid, ev.syscall, ev.args);
  } else {
    if (has_vector_arguments(ev.syscall)) {
      st.call = call_buffers(*inferior_, tid, ev.syscall, ev.args);
    }
    for (std::uint64_t a : ev.args) {
      add_page(page_of(a));
      add_page(page_of(a) + kPage);
    }
  }
  if (st.call) {
    const int buffer_need = st.call->kernel_reads ? PROT_READ : PROT_WRITE;
    for (const auto& [buf, len] : st.call->buffers) {
      for (auto& [p, page] : pages_) {
        if (len > 0 && overlaps(p, kPage, buf, len)) add_page(p, buffer_need);
      }
    }
  }
  if (st.pages.empty() && st.effect_nr < 0 && !st.segv_action && st.sigaction_signal == 0) {
    // Nothing to do at its exit. rt_sigreturn's exit stop is left out where the next signal is
    // already pending (a signal flood would otherwise cost three stops per signal, not two).
    auto r = ev.syscall == SYS_rt_sigreturn && !caller_catches(ev.syscall)
                 ? inferior_->resume_from_sigreturn(tid)
                 : after_syscall_stop(tid, ev.syscall, Resume::kSyscall);
    if (!r) return std::unexpected(r.error());
    return true;
  }
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  st.ip = regs->rip - 2;
  st.before.resize(ranges_.size());
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if (methods_[i] != WatchMethod::kPageProtect) continue;
    bool on_open = false;
    for (std::uint64_t p : st.pages) on_open |= overlaps(p, kPage, ranges_[i].addr, ranges_[i].len);
    if (!on_open) continue;
    auto b = read_range(i, tid);
    if (!b) return std::unexpected(b.error());
    st.before[i] = std::move(*b);
  }
  for (std::uint64_t p : st.pages) {
    if (auto r = protect(tid, p, pages_[p].original); !r) return std::unexpected(r.error());
  }
  if (!st.pages.empty()) ++stats_.syscalls_opened;
  open_[tid] = std::move(st);
  if (auto r = after_syscall_stop(tid, ev.syscall, Resume::kSyscall); !r) {
    return std::unexpected(r.error());
  }
  return true;
}

Result<bool> SoftWatch::on_syscall_exit(const Event& ev, std::vector<WatchHit>& hits) {
  const pid_t tid = ev.tid;
  if (in_caught_call_.erase(tid) != 0 && step_.contains(tid)) {
    // Single-step method: the call's exit ends the step of its instruction: its hits (what the
    // call wrote), then the next instruction's check, as at a step's trap.
    const std::size_t hits_before = hits.size();
    if (auto r = step_hits(tid, hits); !r) return std::unexpected(r.error());
    if (auto r = prepare_step(tid); !r) return std::unexpected(r.error());
    if (stop_at_hits_ && hits.size() > hits_before) return true;  // stopped after the call
  }
  // The caller's step from the call's stop goes on from its exit stop.
  const Resume after = caller_steps_.contains(tid) ? Resume::kStep : resume_mode(tid);
  auto it = open_.find(tid);
  if (it == open_.end()) {
    if (auto r = after_syscall_stop(tid, ev.syscall, after); !r) {
      return std::unexpected(r.error());
    }
    return true;
  }
  OpenSyscall st = std::move(it->second);
  open_.erase(it);
  if (st.segv_action && ev.ret == 0) segv_[inferior_->process_of(tid)] = *st.segv_action;
  if (st.sigaction_signal != 0 && ev.ret == 0) {
    if (auto r = after_sigaction(tid, st); !r) return std::unexpected(r.error());
  }
  const std::string name = syscall_name(st.nr);
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if (st.before.size() <= i || st.before[i].empty()) continue;
    auto now = read_range(i, tid);
    if (!now) return std::unexpected(now.error());
    // Written: by the call's result for a read-like call of a known buffer (wrote_data), else
    // by the bytes changing (other calls' pointers: what they wrote is not known).
    const bool wrote = *now != st.before[i] ||
                       (st.call && wrote_data(*st.call, ev.ret, ranges_[i].addr, ranges_[i].len));
    const bool read =
        st.call && st.call->kernel_reads && ev.ret >= 0 &&
        std::any_of(st.call->buffers.begin(), st.call->buffers.end(), [&](const auto& b) {
          return overlaps(b.first, b.second, ranges_[i].addr, ranges_[i].len);
        });
    unsigned access = 0;
    if (wrote) access |= kWatchWrite;
    if (read) access |= kWatchRead;
    access &= ranges_[i].access;
    if (access == 0) continue;
    add_hit(hits, i, tid, st.ip, ranges_[i].addr, access, std::move(st.before[i]), std::move(*now),
            name);
  }
  // A page another thread's call still has open stays open: that call's exit protects it (a
  // futex word beside a watched variable, waited on by several threads at once).
  for (std::uint64_t p : st.pages) {
    if (open_for_other_call(tid, p)) continue;
    if (auto r = protect(tid, p, pages_[p].protection); !r) return std::unexpected(r.error());
  }
  if (st.effect_nr == SYS_munmap || st.effect_nr == SYS_mmap || st.effect_nr == SYS_mremap) {
    if (auto r = follow_mapping(tid, st, ev.ret); !r) return std::unexpected(r.error());
  } else if (st.effect_nr >= 0 && ev.ret == 0) {
    // The program changed the protection of watched pages itself.
    ++generation_;
    for (auto p_it = pages_.begin(); p_it != pages_.end();) {
      if (!overlaps(p_it->first, kPage, st.effect_addr, st.effect_len)) {
        ++p_it;
        continue;
      }
      p_it->second.original = st.effect_prot;
      unsigned access = 0;
      for (const WatchRange& r : ranges_) {
        if ((r.access & kWatchExec) == 0 && overlaps(p_it->first, kPage, r.addr, r.len)) {
          access |= r.access;
        }
      }
      p_it->second.protection = watched_protection(st.effect_prot, access);
      if (!open_for_other_call(tid, p_it->first)) {
        if (auto r = protect(tid, p_it->first, p_it->second.protection); !r) {
          return std::unexpected(r.error());
        }
      }
      ++p_it;
    }
  }
  if (auto r = after_syscall_stop(tid, ev.syscall, after); !r) {
    return std::unexpected(r.error());
  }
  return true;
}

bool SoftWatch::caller_catches(long nr) const {
  return caller_syscalls_ && (caller_syscalls_->empty() || caller_syscalls_->contains(nr));
}

Result<void> SoftWatch::after_syscall_stop(pid_t tid, long nr, Resume mode) {
  if (caller_catches(nr)) return {};  // the caller's stop too: it resumes the thread
  return inferior_->resume(tid, mode);
}

Result<void> SoftWatch::follow_mapping(pid_t tid, const OpenSyscall& st, std::int64_t ret) {
  if (failed(ret)) return {};  // nothing was mapped or unmapped
  const std::string by = syscall_name(st.effect_nr) + " in thread " + std::to_string(tid);
  const auto result = static_cast<std::uint64_t>(ret);
  // What the call unmapped, and what it mapped.
  std::uint64_t unmapped = 0, unmapped_len = 0, mapped = 0, mapped_len = 0;
  if (st.effect_nr == SYS_munmap) {
    unmapped = st.effect_addr;
    unmapped_len = st.effect_len;
  } else if (st.effect_nr == SYS_mmap) {
    mapped = result;
    mapped_len = st.effect_len;
  } else if (result != st.effect_addr) {  // mremap moved the mapping: the old range is gone
    unmapped = st.effect_addr;
    unmapped_len = st.effect_len;
    mapped = result;
    mapped_len = st.effect_new_len;
  } else if (st.effect_new_len < st.effect_len) {  // mremap shrank it in place
    unmapped = st.effect_addr + st.effect_new_len;
    unmapped_len = st.effect_len - st.effect_new_len;
  } else {  // mremap grew it in place: only the new tail is new
    mapped = st.effect_addr + st.effect_len;
    mapped_len = st.effect_new_len - st.effect_len;
  }
  ++generation_;
  std::vector<std::uint64_t> lost;
  for (auto it = pages_.begin(); it != pages_.end();) {
    if (unmapped_len != 0 && overlaps(it->first, kPage, unmapped, unmapped_len)) {
      gone_.insert(it->first);
      lost.push_back(it->first);
      it = pages_.erase(it);
    } else {
      ++it;
    }
  }
  if (!lost.empty()) {
    note_pages(lost, "its memory was unmapped (" + by +
                         "): not watched until memory is mapped there again");
  }
  // Watched addresses the call mapped: unmapped ones coming back, or watched pages replaced
  // (MAP_FIXED) with a fresh mapping and protection.
  std::vector<std::uint64_t> back, replaced;
  for (std::uint64_t p : gone_) {
    if (mapped_len != 0 && overlaps(p, kPage, mapped, mapped_len)) back.push_back(p);
  }
  for (const auto& [p, page] : pages_) {
    if (mapped_len != 0 && overlaps(p, kPage, mapped, mapped_len)) replaced.push_back(p);
  }
  if (back.empty() && replaced.empty()) return {};
  auto maps = read_maps(inferior_->process_of(tid));
  if (!maps) return std::unexpected(maps.error());
  std::vector<std::uint64_t> watched_again;
  for (const std::vector<std::uint64_t>* list : {&back, &replaced}) {
    for (std::uint64_t p : *list) {
      auto m = find_mapping(*maps, p);
      if (!m) continue;  // not there after all: stays as it was
      Page page;
      page.original = m->prot();
      page.protection = watched_protection(page.original, page_access(p));
      if (auto r = protect(tid, p, page.protection); !r) return std::unexpected(r.error());
      pages_[p] = page;
      if (gone_.erase(p) != 0) watched_again.push_back(p);
    }
  }
  if (!watched_again.empty()) {
    note_pages(watched_again, "memory mapped there again (" + by + "): watched again");
  }
  return {};
}

Result<void> SoftWatch::prepare_step(pid_t tid) {
  StepCheck check;
  auto regs = inferior_->get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  check.ip = regs->rip;
  auto insn = inferior_->decode_at(regs->rip, inferior_->process_of(tid));
  if (insn) {
    check.syscall = insn->branch == x86::BranchKind::kSyscall;
    if (check.syscall) check.call = static_cast<long>(regs->rax);
    // A REP string instruction runs one iteration per step: the step's operands are one
    // iteration's (none when rcx is 0).
    check.rep = x86::is_rep_string(*insn);
    x86::Regs one = *regs;
    if (check.rep) one.rcx = std::min<std::uint64_t>(one.rcx, 1);
    auto refs = x86::effective_addresses(*insn, one);
    if (refs && insn->xsave != x86::XsaveForm::kNone && !refs->empty()) {
      check.xsave = insn->xsave;
      check.xsave_base = refs->front().address;
      check.regs = *regs;
    }
    if (refs) {
      for (const x86::MemRef& ref : *refs) {
        for (std::size_t i = 0; i < ranges_.size(); ++i) {
          if ((ranges_[i].access & kWatchExec) != 0) continue;
          if (!overlaps(ref.address, ref.size, ranges_[i].addr, ranges_[i].len)) continue;
          const unsigned bits = access_bits(ref.access) & ranges_[i].access;
          if (bits == 0) continue;
          auto it = std::find_if(check.ranges.begin(), check.ranges.end(),
                                 [&](const auto& p) { return p.first == i; });
          if (it != check.ranges.end()) {
            it->second |= bits;
          } else {
            check.ranges.emplace_back(i, bits);
          }
        }
      }
    }
  }
  if (check.syscall) {
    for (std::size_t i = 0; i < ranges_.size(); ++i) {
      if ((ranges_[i].access & kWatchWrite) != 0) check.ranges.emplace_back(i, kWatchWrite);
    }
  }
  for (const auto& [range, bits] : check.ranges) {
    auto b = read_range(range, tid);
    if (!b) return std::unexpected(b.error());
    check.before.push_back(std::move(*b));
  }
  step_[tid] = std::move(check);
  return {};
}

Result<void> SoftWatch::finish_step(pid_t tid, std::vector<WatchHit>& hits) {
  if (!single_step_ || !step_.contains(tid)) return {};
  auto r = step_hits(tid, hits);
  step_.erase(tid);
  rep_.erase(tid);
  return r;
}

Result<bool> SoftWatch::on_step(pid_t tid, std::vector<WatchHit>& hits) {
  const std::size_t hits_before = hits.size();
  if (auto r = step_hits(tid, hits); !r) return std::unexpected(r.error());
  if (auto r = prepare_step(tid); !r) return std::unexpected(r.error());
  // A data hit with stop_at_hits: the thread stays stopped after the instruction, checked as
  // ready for its next step (the caller resumes it with resume_mode()).
  if (stop_at_hits_ && hits.size() > hits_before) return true;
  // The caller's own step is over too: the thread stays stopped for it.
  if (caller_steps_.contains(tid)) return true;
  // Execution watches: the instruction about to run.
  const std::uint64_t ip = step_[tid].ip;
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    if ((ranges_[i].access & kWatchExec) != 0 && ip == ranges_[i].addr) {
      add_hit(hits, i, tid, ip, ip, kWatchExec, {}, {}, "");
    }
  }
  // A system call the caller catches runs from its entry stop to its exit stop.
  if (auto r = inferior_->resume(tid, resume_mode(tid)); !r) return std::unexpected(r.error());
  return true;
}

Result<void> SoftWatch::step_hits(pid_t tid, std::vector<WatchHit>& hits) {
  ++stats_.steps;
  StepCheck& check = step_[tid];
  std::string via;
  std::optional<SyscallBuffers> call;  // a read-like call's buffers, and its result
  std::int64_t ret = 0;
  if (check.syscall) {
    auto regs = inferior_->get_regs(tid);
    if (regs) {
      const long nr = static_cast<long>(regs->orig_rax);
      via = syscall_name(nr);
      ret = static_cast<std::int64_t>(regs->rax);
      call = call_buffers(*inferior_, tid, nr,
                          {regs->rdi, regs->rsi, regs->rdx, regs->r10, regs->r8, regs->r9});
    }
  }
  if (check.rep) {
    // One hit per REP string instruction and range, as the hardware reports it: the iterations'
    // accesses add up while the thread stays on the instruction, the old value from before the
    // first iteration that touched the range, the new one when the instruction is done.
    auto& progress = rep_[tid];
    for (std::size_t k = 0; k < check.ranges.size(); ++k) {
      const auto [range, bits] = check.ranges[k];
      auto [it, fresh] = progress.try_emplace(range);
      if (fresh) it->second.before = std::move(check.before[k]);
      it->second.bits |= bits;
    }
    auto regs = inferior_->get_regs(tid);
    if (!regs) return std::unexpected(regs.error());
    if (regs->rip != check.ip) {
      for (auto& [range, done] : progress) {
        auto now = read_range(range, tid);
        if (!now) return std::unexpected(now.error());
        add_hit(hits, range, tid, check.ip, ranges_[range].addr, done.bits, std::move(done.before),
                std::move(*now), "");
      }
      rep_.erase(tid);
    }
  } else {
    for (std::size_t k = 0; k < check.ranges.size(); ++k) {
      auto [range, bits] = check.ranges[k];
      bits = xsave_bits(*inferior_, inferior_->process_of(tid), check.xsave, check.xsave_base,
                        check.regs, ranges_[range].addr, ranges_[range].len, bits);
      if (bits == 0) continue;
      auto now = read_range(range, tid);
      if (!now) return std::unexpected(now.error());
      // A system call: a hit when it wrote the range (wrote_data), or changed it.
      if (check.syscall && *now == check.before[k] &&
          !(call && wrote_data(*call, ret, ranges_[range].addr, ranges_[range].len))) {
        continue;
      }
      add_hit(hits, range, tid, check.ip, ranges_[range].addr, bits, std::move(check.before[k]),
              std::move(*now), via);
    }
  }
  return {};
}

Result<void> SoftWatch::disarm() {
  if (ended_) return {};
  ended_ = true;
  if (inferior_->threads().empty()) return {};  // followed forks stay after the main process
  // One stopped thread per process (this one and the followed forks) to restore it in. Two
  // kinds of thread are passed over:
  //  1. one whose exec is read but not handled yet (its kExec queued): its process has a new
  //     image, with nothing of the watch in it;
  //  2. a vfork child, where a thread of its parent is stopped: the child shares the parent's
  //     memory until its exec, but the parent's own thread is the one sure to map it.
  std::set<pid_t> execed;
  for (const Event& ev : inferior_->queued_events()) {
    if (ev.kind == EventKind::kExec) execed.insert(inferior_->process_of(ev.tid));
  }
  std::map<pid_t, pid_t> processes;
  for (pid_t t : inferior_->threads()) {
    const pid_t process = inferior_->process_of(t);
    if (!inferior_->is_stopped(t) || unwatched_.contains(process) || execed.contains(process)) {
      continue;
    }
    const bool vfork_child = inferior_->group_of(t) != process;
    auto [it, added] = processes.emplace(process, t);
    if (!added && !vfork_child && inferior_->group_of(it->second) != process) it->second = t;
  }
  if (inject_in_ > 0 && inferior_->is_stopped(inject_in_) &&
      processes.contains(inferior_->process_of(inject_in_))) {
    processes[inferior_->process_of(inject_in_)] = inject_in_;
  }
  if (processes.empty() && unwatched_.empty()) {
    return make_error(ErrorCode::kSrch, "pid: no stopped thread to disarm the watch in");
  }
  // Faults of the watch raised but not reported yet: a thread that faulted as stop_all
  // interrupted it reports the interrupt first and keeps the SIGSEGV pending, which would reach
  // the program after the detach (or on the step of an injected call below). They are made to
  // show now, before anything is injected, and dropped with the queued ones below.
  if (!pages_.empty()) {
    for (pid_t t : inferior_->threads()) {
      if (!inferior_->is_stopped(t) || unwatched_.contains(inferior_->process_of(t))) continue;
      auto surfaced = inferior_->surface_pending(t, std::uint64_t{1} << (SIGSEGV - 1));
      if (!surfaced) continue;  // the thread is gone
      for (auto it = surfaced->rbegin(); it != surfaced->rend(); ++it) inferior_->requeue(*it);
    }
  }
  Result<void> first;
  for (const auto& [process, tid] : processes) {
    for (int sig : {SIGSEGV, SIGTRAP}) {
      if (auto r = lower_parachute(tid, sig); !r && first) first = r;
    }
    for (auto& [p, page] : pages_) {
      if (auto r = protect(tid, p, page.original); !r && first) first = r;
    }
    for (auto& [a, trap] : traps_) {
      if (auto r =
              inferior_->write_memory(a, std::span<const std::uint8_t>(&trap.original, 1), process);
          !r && first) {
        first = r;
      }
    }
  }
  // Stops that were the watcher's and are still unread: an int3 hit moves back onto the
  // restored instruction, a protection fault simply re-executes unprotected.
  for (pid_t t : inferior_->threads()) {
    for (const Event& ev : inferior_->discard_queued(t)) {
      if (ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kSiKernel) {
        auto regs = inferior_->get_regs(t);
        if (regs && traps_.contains(regs->rip - 1)) {
          regs->rip -= 1;
          ignore_error(inferior_->set_regs(t, *regs),
                       "a thread that is gone has no trap to rewind");
          continue;
        }
      }
      if (ev.kind == EventKind::kSignal && ev.signal == SIGSEGV && page_protected(ev.fault_addr)) {
        // The kernel may have reset the program's action for it (keep_segv_action).
        if (auto r = keep_segv_action(t); !r && first) first = r;
        continue;
      }
      if (ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && single_step_) continue;
      inferior_->requeue(ev);
    }
  }
  pages_.clear();
  gone_.clear();
  traps_.clear();
  parachutes_.clear();
  ++generation_;
  return first;
}

}  // namespace hwarb::native

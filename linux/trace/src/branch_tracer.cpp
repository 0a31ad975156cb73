#include "hwarb/linux/branch_tracer.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/page.h"

namespace hwarb::native {
namespace {

constexpr int kSiKernel = 0x80;  // SI_KERNEL: the SIGTRAP of an int3
constexpr std::uint8_t kInt3 = 0xCC;
// A block longer than this is not code the tracer understands (e.g. a run of zero bytes, which
// decodes as `add [rax], al`): it is counted as undecodable.
constexpr int kMaxBlockInsns = 4096;

bool is_call(x86::BranchKind kind) {
  return kind == x86::BranchKind::kCall || kind == x86::BranchKind::kIndirectCall;
}

// Whether an error means the thread or process is gone (killed while the tracer worked on it).
bool gone(const Error& error) {
  return error.code() == ErrorCode::kSrch;
}

}  // namespace

BranchTracer::BranchTracer(Inferior& inferior, BranchTracerOptions options, Sink sink)
    : inferior_(&inferior), options_(std::move(options)), sink_(std::move(sink)) {}

Result<BranchTracer> BranchTracer::start(Inferior& inferior, BranchTracerOptions options,
                                         Sink sink) {
  if (options.only && options.only->first >= options.only->second) {
    return make_error(ErrorCode::kInval, "only: the range [" + hex(options.only->first) + ", " +
                                             hex(options.only->second) + ") is empty");
  }
  std::vector<std::pair<pid_t, std::uint64_t>> stopped;
  for (pid_t t : inferior.threads()) {
    if (!inferior.is_stopped(t)) continue;
    auto regs = inferior.get_regs(t);
    if (!regs) return std::unexpected(regs.error());
    stopped.emplace_back(t, regs->rip);
  }
  if (stopped.empty()) {
    return make_error(ErrorCode::kSrch, "pid: no stopped thread to start tracing in");
  }
  BranchTracer tracer(inferior, std::move(options), std::move(sink));
  if (tracer.options_.start_at) {
    const std::uint64_t at = *tracer.options_.start_at;
    std::uint8_t original = 0;
    if (tracer.fetch(at, std::span(&original, 1)) != 1) {
      return make_error(ErrorCode::kFault, "start_at: " + hex(at) + " is not readable in process " +
                                               std::to_string(inferior.pid()));
    }
    if (auto r = inferior.write_memory(at, std::span<const std::uint8_t>(&kInt3, 1)); !r) {
      return std::unexpected(r.error().with_context("start_at"));
    }
    tracer.shadow_[at] = original;
    tracer.start_trap_ = at;
    return tracer;
  }
  tracer.started_ = true;
  for (const auto& [tid, rip] : stopped) {
    tracer.begin(rip);
    tracer.set_flow(tid, rip);
  }
  if (tracer.stats_.planted == 0 && tracer.options_.only) {
    ignore_error(tracer.restore_all(0), "the EINVAL below is the answer");
    return make_error(ErrorCode::kInval, "only: no block of [" + hex(tracer.options_.only->first) +
                                             ", " + hex(tracer.options_.only->second) +
                                             ") could be decoded and planted");
  }
  return tracer;
}

bool BranchTracer::in_range(std::uint64_t addr) const {
  return !options_.only || (addr >= options_.only->first && addr < options_.only->second);
}

const std::vector<std::uint8_t>* BranchTracer::page(std::uint64_t page_addr) {
  if (auto it = pages_.find(page_addr); it != pages_.end()) return &it->second;
  std::vector<std::uint8_t> bytes(kPage);
  if (!inferior_->read_memory(page_addr, bytes)) return nullptr;
  // Bytes planted before the page was first read (the start_at int3).
  for (auto it = shadow_.lower_bound(page_addr);
       it != shadow_.end() && it->first < page_addr + kPage; ++it) {
    bytes[it->first - page_addr] = it->second;
  }
  return &pages_.emplace(page_addr, std::move(bytes)).first->second;
}

std::size_t BranchTracer::fetch(std::uint64_t addr, std::span<std::uint8_t> out) {
  std::size_t have = 0;
  while (have < out.size()) {
    const std::uint64_t at = addr + have;
    const std::vector<std::uint8_t>* bytes = page(page_of(at));
    if (bytes == nullptr) break;
    const std::size_t offset = at - page_of(at);
    const std::size_t n = std::min(out.size() - have, kPage - offset);
    std::memcpy(out.data() + have, bytes->data() + offset, n);
    have += n;
  }
  return have;
}

Result<std::uint64_t> BranchTracer::read_word(void* self, std::uint64_t addr, int size) {
  auto* tracer = static_cast<BranchTracer*>(self);
  auto value = tracer->inferior_->read_word(addr, size);
  if (!value) return value;
  // A word read from text that holds one of the tracer's int3s: the program's own bytes.
  const auto end = addr + static_cast<std::uint64_t>(size);
  for (auto it = tracer->shadow_.lower_bound(addr); it != tracer->shadow_.end() && it->first < end;
       ++it) {
    const unsigned shift = static_cast<unsigned>(it->first - addr) * 8;
    *value = (*value & ~(std::uint64_t{0xff} << shift)) | (std::uint64_t{it->second} << shift);
  }
  return value;
}

bool BranchTracer::plant(std::uint64_t addr, const x86::Insn& insn) {
  if (terms_.contains(addr)) return true;
  std::uint8_t original = 0;
  if (fetch(addr, std::span(&original, 1)) != 1) return false;
  if (!inferior_->write_memory(addr, std::span<const std::uint8_t>(&kInt3, 1))) return false;
  shadow_[addr] = original;
  terms_.emplace(addr, insn);
  ++stats_.planted;
  return true;
}

bool BranchTracer::deferred_active(std::uint64_t addr) const {
  auto it = deferred_.find(addr);
  return it != deferred_.end() && it->second.active;
}

void BranchTracer::ensure_block(std::uint64_t entry, Want want) {
  if (ended_ || !in_range(entry)) return;
  if (auto it = blocks_.find(entry); it != blocks_.end()) {
    if (want == Want::kEntry) make_entry(it->second);
    return;
  }
  std::uint64_t ip = entry;
  std::uint64_t term = 0;
  std::optional<x86::Insn> branch;
  bool understood = false;
  for (int n = 0; n < kMaxBlockInsns; ++n) {
    if (ip != entry) {
      // The rest of the block is one already known.
      if (terms_.contains(ip) || deferred_active(ip)) {
        term = ip;
        understood = true;
        break;
      }
      if (auto it = blocks_.find(ip); it != blocks_.end()) {
        term = it->second;
        understood = true;
        break;
      }
    }
    std::uint8_t code[15];
    const std::size_t have = fetch(ip, code);
    if (have == 0) break;
    auto insn = x86::decode(std::span<const std::uint8_t>(code, have), ip);
    if (!insn) break;
    if (options_.only && ip + insn->length > options_.only->second) {
      understood = true;  // the block leaves the range: nothing to plant
      break;
    }
    const x86::BranchKind kind = insn->branch;
    if (kind == x86::BranchKind::kNone) {
      ip += insn->length;
      continue;
    }
    understood = true;
    if (kind == x86::BranchKind::kSyscall || kind == x86::BranchKind::kInterrupt ||
        kind == x86::BranchKind::kFar) {
      if (kind == x86::BranchKind::kSyscall) syscall_seen_ = true;
      break;  // the kernel decides: not planted (see the header)
    }
    branch = std::move(*insn);
    term = ip;
    break;
  }
  ++stats_.blocks_decoded;
  if (branch && !(want == Want::kNormal && try_defer(*branch)) && !plant(term, *branch)) {
    understood = false;
    term = 0;
  }
  if (!understood) ++stats_.undecodable;
  blocks_[entry] = term;
  if (want == Want::kEntry) make_entry(term);
}

bool BranchTracer::try_defer(const x86::Insn& insn) {
  if (!options_.defer_conditional || insn.branch != x86::BranchKind::kCondJump || !insn.target ||
      insn.text.starts_with("xbegin")) {
    return false;
  }
  const std::uint64_t jump = insn.ip;
  const std::uint64_t taken = *insn.target;
  const std::uint64_t fall = insn.ip + insn.length;
  if (!in_range(taken) || !in_range(fall)) return false;
  ensure_block(taken, Want::kSuccessor);
  ensure_block(fall, Want::kSuccessor);
  if (terms_.contains(jump)) return false;  // a successor's block runs into the jump itself
  auto t = blocks_.find(taken);
  auto f = blocks_.find(fall);
  if (t == blocks_.end() || f == blocks_.end()) return false;
  const std::uint64_t tt = t->second, ft = f->second;
  // Both successors must end in distinct stops that no untraced arrival shares.
  if (tt == 0 || ft == 0 || tt == ft || tt == jump || ft == jump || !terms_.contains(tt) ||
      !terms_.contains(ft) || entry_terms_.contains(tt) || entry_terms_.contains(ft)) {
    return false;
  }
  deferred_[jump] = Deferred{insn, taken, tt, fall, ft, true};
  preds_[tt].push_back(jump);
  preds_[ft].push_back(jump);
  ++stats_.deferred;
  return true;
}

void BranchTracer::undefer(std::uint64_t jump) {
  auto it = deferred_.find(jump);
  if (it == deferred_.end() || !it->second.active) return;
  it->second.active = false;
  --stats_.deferred;
  if (!plant(jump, it->second.insn)) ++stats_.undecodable;
}

void BranchTracer::make_entry(std::uint64_t term) {
  if (term == 0) return;
  // Threads may arrive here without the tracer knowing their path: the terminator must stop,
  // and no deferred jump may be resolved by it.
  undefer(term);
  if (!entry_terms_.insert(term).second) return;
  if (auto it = preds_.find(term); it != preds_.end()) {
    for (std::uint64_t jump : it->second) undefer(jump);
  }
}

void BranchTracer::begin(std::uint64_t rip) {
  ensure_block(rip);
  if (options_.only) ensure_block(options_.only->first, Want::kEntry);
}

void BranchTracer::set_flow(pid_t tid, std::uint64_t entry) {
  Flow flow;
  flow.entry = entry;
  if (auto it = blocks_.find(entry); it != blocks_.end() && in_range(entry)) {
    if (terms_.contains(it->second)) {
      flow.expect = it->second;
    } else if (deferred_active(it->second)) {
      flow.deferred = it->second;
    }
  }
  flow_[tid] = flow;
}

void BranchTracer::unknown_arrival(std::uint64_t term) {
  auto it = preds_.find(term);
  if (it == preds_.end()) return;
  bool any = false;
  for (std::uint64_t jump : it->second) {
    if (!deferred_active(jump)) continue;
    any = true;
    undefer(jump);
  }
  if (any) ++stats_.ambiguous;
}

void BranchTracer::arrive(pid_t tid, std::uint64_t term) {
  auto it = flow_.find(tid);
  const Flow flow = it != flow_.end() ? it->second : Flow{};
  if (auto d_it = deferred_.find(flow.deferred); flow.deferred != 0 && d_it != deferred_.end()) {
    const Deferred& d = d_it->second;
    if (term == flow.deferred) return;  // planted meanwhile, and not passed yet
    if (term == d.taken_term) {
      record(tid, d.insn, d.taken_entry, true);
      return;
    }
    if (term == d.fall_term) {
      record(tid, d.insn, d.fall_entry, false);
      return;
    }
  } else if (flow.expect != 0 && term == flow.expect) {
    return;
  }
  unknown_arrival(term);
}

void BranchTracer::settle(pid_t tid, std::uint64_t rip, bool ending) {
  auto it = flow_.find(tid);
  if (it == flow_.end()) return;
  auto d_it = deferred_.find(it->second.deferred);
  if (it->second.deferred == 0 || d_it == deferred_.end()) {
    // A thread with no deferred jump pending keeps going where it was headed.
    if (it->second.deferred != 0) it->second = Flow{};
    return;
  }
  Flow& flow = it->second;
  const std::uint64_t jump = flow.deferred;
  const Deferred& d = d_it->second;
  const bool before = rip >= flow.entry && rip <= jump;
  const bool taken = rip >= d.taken_entry && rip <= d.taken_term;
  const bool fall = rip >= d.fall_entry && rip <= d.fall_term;
  Flow next;
  if (before + taken + fall != 1) {
    // Overlapping instructions: not decidable from rip.
    if (!ending) {
      ++stats_.ambiguous;
      undefer(jump);
    }
  } else if (before) {
    // Not run yet: a handler may run first, so the jump stops by itself from now on.
    if (!ending) undefer(jump);
    next.entry = flow.entry;
    next.expect = jump;
  } else {
    record(tid, d.insn, taken ? d.taken_entry : d.fall_entry, taken);
    next.entry = taken ? d.taken_entry : d.fall_entry;
    next.expect = taken ? d.taken_term : d.fall_term;
  }
  flow = next;
}

Resume BranchTracer::resume_mode() const {
  // With `only`, system calls matter only when the range makes some.
  return started_ && !ended_ && (!options_.only || syscall_seen_) ? Resume::kSyscall
                                                                  : Resume::kCont;
}

Result<bool> BranchTracer::resume(pid_t tid, int signal) {
  if (auto r = inferior_->resume(tid, resume_mode(), signal); !r && !gone(r.error())) {
    return std::unexpected(r.error());
  }
  return true;
}

std::vector<std::uint64_t> BranchTracer::planted() const {
  std::vector<std::uint64_t> out;
  out.reserve(shadow_.size());
  for (const auto& [addr, original] : shadow_) out.push_back(addr);
  return out;
}

void BranchTracer::record(pid_t tid, const x86::Insn& insn, std::uint64_t next, bool taken) {
  if (!taken) {
    ++stats_.not_taken;
    return;
  }
  ++stats_.taken;
  ++stats_.by_kind[insn.branch];
  if (sink_) sink_(BranchRecord{insn.ip, next, insn.branch, tid});
}

void BranchTracer::follow(const x86::Insn& insn, std::uint64_t next) {
  // The fall-through of a call first: a return into it must be caught even when the callee is
  // not traced (outside `only`).
  if (is_call(insn.branch)) ensure_block(insn.ip + insn.length, Want::kEntry);
  ensure_block(next);
}

Result<bool> BranchTracer::handle(const Event& ev) {
  if (ended_) return false;
  switch (ev.kind) {
    case EventKind::kSignal:
      if (ev.signal == SIGTRAP && ev.code == kSiKernel) {
        auto mine = on_trap(ev);
        if (mine && !*mine) return on_signal(ev);  // the program's own int3
        return mine;
      }
      return on_signal(ev);
    case EventKind::kSyscallEnter:
      ++stats_.stops;
      ++stats_.syscalls;
      in_syscall_[ev.tid] = {ev.syscall, ev.args};
      return resume(ev.tid);
    case EventKind::kSyscallExit: {
      ++stats_.stops;
      if (auto it = in_syscall_.find(ev.tid); it != in_syscall_.end()) {
        const auto [nr, args] = it->second;
        in_syscall_.erase(it);
        // Code that goes away (or is replaced) is decoded again when it runs again.
        if (nr == SYS_munmap && ev.ret == 0) forget_range(args[0], args[1]);
        if (nr == SYS_mmap && ev.ret >= 0 && (args[3] & MAP_FIXED) != 0) {
          forget_range(args[0], args[1]);
        }
      }
      if (started_) {
        auto regs = inferior_->get_regs(ev.tid);
        if (!regs) {
          if (gone(regs.error())) return true;
          return std::unexpected(regs.error());
        }
        ensure_block(regs->rip);
        set_flow(ev.tid, regs->rip);
      }
      return resume(ev.tid);
    }
    case EventKind::kNewThread: {
      ++stats_.stops;
      if (started_) {
        auto regs = inferior_->get_regs(ev.tid);
        if (!regs) {
          if (gone(regs.error())) return true;
          return std::unexpected(regs.error());
        }
        ensure_block(regs->rip);
        set_flow(ev.tid, regs->rip);
      }
      return resume(ev.tid);
    }
    case EventKind::kFork:
      if (ev.vfork) {
        // Shares this memory (and its int3s) until it execs: traced as a thread.
        ++stats_.stops;
        if (started_) {
          if (auto regs = inferior_->get_regs(ev.child)) {
            ensure_block(regs->rip);
            set_flow(ev.child, regs->rip);
          }
        }
        return resume(ev.child);
      }
      if (auto r = release_child(ev.child); !r) return std::unexpected(r.error());
      return true;
    case EventKind::kExec:
      // The image holding the int3s is gone: tracing ends.
      ended_ = true;
      shadow_.clear();
      terms_.clear();
      blocks_.clear();
      deferred_.clear();
      preds_.clear();
      entry_terms_.clear();
      pages_.clear();
      flow_.clear();
      in_syscall_.clear();
      start_trap_.reset();
      return false;
    case EventKind::kVforkDone:
      return false;  // the caller's (Inferior::hold_forks)
    case EventKind::kThreadExit:
    case EventKind::kLeaderEnded:
      in_syscall_.erase(ev.tid);
      flow_.erase(ev.tid);
      return false;
    case EventKind::kExited:
    case EventKind::kKilled:
      ended_ = true;
      return false;
  }
  return false;
}

Result<bool> BranchTracer::on_trap(const Event& ev) {
  const pid_t tid = ev.tid;
  auto regs = inferior_->get_regs(tid);
  if (!regs) {
    if (gone(regs.error())) return true;
    return std::unexpected(regs.error());
  }
  const std::uint64_t at = regs->rip - 1;
  auto it = terms_.find(at);
  if (it == terms_.end()) {
    if (start_trap_ && at == *start_trap_) return on_start(tid, *regs);
    if (start_done_ && at == *start_done_) {
      // Another thread reached start_at before its int3 was removed: run the instruction now.
      ++stats_.stops;
      regs->rip = at;
      if (auto r = inferior_->set_regs(tid, *regs); !r && !gone(r.error())) {
        return std::unexpected(r.error());
      }
      ensure_block(at);
      set_flow(tid, at);
      return resume(tid);
    }
    return false;  // the program's own int3
  }
  ++stats_.stops;
  arrive(tid, at);
  // A reference stays valid while blocks are added (only erasing invalidates it).
  const x86::Insn& insn = it->second;
  regs->rip = at;
  auto outcome = x86::branch_outcome(insn, *regs, &BranchTracer::read_word, this);
  if (!outcome) return step_branch(tid, *regs, insn);
  x86::Regs after = *regs;
  auto push = x86::apply_branch(insn, *outcome, after);
  if (!push) return step_branch(tid, *regs, insn);
  if (*push) {
    std::uint8_t bytes[8];
    std::memcpy(bytes, &(*push)->value, sizeof(bytes));
    // A stack that must grow (or overflows) is left to the CPU: single-stepped.
    if (!inferior_->write_memory((*push)->address, bytes)) return step_branch(tid, *regs, insn);
  }
  if (auto r = inferior_->set_regs(tid, after); !r) {
    if (gone(r.error())) return true;
    return std::unexpected(r.error());
  }
  record(tid, insn, outcome->next, outcome->taken);
  follow(insn, outcome->next);
  after_branch(tid, insn, outcome->next);
  return resume(tid);
}

Result<bool> BranchTracer::on_start(pid_t tid, x86::Regs& regs) {
  ++stats_.stops;
  const std::uint64_t at = *start_trap_;
  const std::uint8_t original = shadow_[at];
  if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&original, 1)); !r) {
    return std::unexpected(r.error());
  }
  shadow_.erase(at);
  start_trap_.reset();
  start_done_ = at;
  regs.rip = at;
  if (auto r = inferior_->set_regs(tid, regs); !r && !gone(r.error())) {
    return std::unexpected(r.error());
  }
  started_ = true;
  begin(at);
  set_flow(tid, at);
  return resume(tid);
}

void BranchTracer::after_branch(pid_t tid, const x86::Insn& insn, std::uint64_t next) {
  // A call out of `only` comes back at its fall-through: that is where the thread is headed.
  if (is_call(insn.branch) && !in_range(next)) {
    set_flow(tid, insn.ip + insn.length);
  } else {
    set_flow(tid, next);
  }
}

Result<std::uint64_t> BranchTracer::signal_handler(pid_t tid, int signal, std::uint64_t rsp) {
  // struct kernel_sigaction {handler, flags, restorer, mask} written by rt_sigaction(sig, NULL,
  // &old, 8) below the thread's red zone, where the kernel would put a signal frame anyway.
  constexpr std::uint64_t kRedZone = 128;
  const std::uint64_t scratch = ((rsp - kRedZone) & ~std::uint64_t{15}) - 32;
  auto r = inferior_->inject_syscall(tid, SYS_rt_sigaction,
                                     {static_cast<std::uint64_t>(signal), 0, scratch, 8, 0, 0});
  if (!r) return std::unexpected(r.error());
  if (*r != 0) return make_error(ErrorCode::kInval, "signal: rt_sigaction refused");
  return inferior_->read_word(scratch, 8);
}

Result<bool> BranchTracer::on_signal(const Event& ev) {
  ++stats_.signals;
  if (started_ && !ended_) {
    auto regs = inferior_->get_regs(ev.tid);
    if (!regs) {
      if (gone(regs.error())) return false;
      return std::unexpected(regs.error());
    }
    settle(ev.tid, regs->rip, false);
    // The caller delivers the signal next: a handler runs from its first instruction, so its
    // entry block is planted and the thread's path starts there (see 5.).
    if (ev.signal != SIGKILL && ev.signal != SIGSTOP) {
      auto handler = signal_handler(ev.tid, ev.signal, regs->rsp);
      if (!handler) {
        if (gone(handler.error())) return false;
      } else if (*handler > 1 && in_range(*handler)) {  // not SIG_DFL (0) nor SIG_IGN (1)
        ensure_block(*handler, Want::kEntry);
        set_flow(ev.tid, *handler);
        ++stats_.handlers;
      }
    }
  }
  return false;
}

Result<bool> BranchTracer::step_branch(pid_t tid, const x86::Regs& regs, const x86::Insn& insn) {
  // Copies: the planted-terminator table may change below.
  const x86::Insn branch = insn;
  const std::uint64_t at = branch.ip;
  ++stats_.stepped;
  ++stats_.stops;
  if (auto r = inferior_->set_regs(tid, regs); !r) {
    if (gone(r.error())) return true;
    return std::unexpected(r.error());
  }
  std::vector<pid_t> others;
  if (inferior_->threads().size() > 1) {
    auto stopped = inferior_->stop_all(tid);
    if (!stopped) return std::unexpected(stopped.error());
    others = std::move(*stopped);
  }
  const std::uint8_t original = shadow_[at];
  if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&original, 1)); !r) {
    return std::unexpected(r.error());
  }
  auto stepped = inferior_->resume(tid, Resume::kStep);
  Result<Event> after =
      stepped ? inferior_->wait_for(tid) : Result<Event>(std::unexpected(stepped.error()));
  if (inferior_->alive()) {
    if (auto r = inferior_->write_memory(at, std::span<const std::uint8_t>(&kInt3, 1)); !r) {
      return std::unexpected(r.error());
    }
  }
  for (pid_t other : others) {
    if (auto r = inferior_->resume_as_before(other); !r && !gone(r.error())) {
      return std::unexpected(r.error());
    }
  }
  if (!after) {
    if (gone(after.error())) return true;
    return std::unexpected(after.error());
  }
  if (after->kind != EventKind::kSignal) {
    inferior_->requeue(*after);  // the thread or process ended
    return true;
  }
  auto now = inferior_->get_regs(tid);
  if (!now) {
    if (gone(now.error())) return true;
    return std::unexpected(now.error());
  }
  const int pass = after->signal == SIGTRAP ? 0 : after->signal;
  if (now->rip != at) {
    record(tid, branch, now->rip, now->rip != at + branch.length);
    follow(branch, now->rip);
    after_branch(tid, branch, now->rip);
  } else {
    flow_[tid] = Flow{at, 0, at};
  }
  // rip == at: the branch did not complete (it faulted, or a signal came first): the signal is
  // delivered and the int3 catches the branch again when it runs.
  return resume(tid, pass);
}

void BranchTracer::forget_range(std::uint64_t addr, std::uint64_t len) {
  const std::uint64_t end = addr + len;
  bool cached = false;
  for (auto it = pages_.begin(); it != pages_.end();) {
    if (it->first + kPage > addr && it->first < end) {
      cached = true;
      it = pages_.erase(it);
    } else {
      ++it;
    }
  }
  if (!cached) return;  // nothing decoded there
  auto inside = [&](std::uint64_t a) { return a >= addr && a < end; };
  // Deferred jumps whose successors go away stop by themselves (their code may stay).
  for (auto& [jump, d] : deferred_) {
    if (d.active && !inside(jump) && (inside(d.taken_term) || inside(d.fall_term))) undefer(jump);
  }
  std::erase_if(terms_, [&](const auto& e) { return inside(e.first); });
  std::erase_if(blocks_, [&](const auto& e) { return inside(e.first) || inside(e.second); });
  std::erase_if(deferred_, [&](const auto& e) { return inside(e.first); });
  std::erase_if(preds_, [&](const auto& e) { return inside(e.first); });
  std::erase_if(entry_terms_, [&](std::uint64_t t) { return inside(t); });
  std::erase_if(shadow_, [&](const auto& e) { return inside(e.first) && e.first != start_trap_; });
}

Result<void> BranchTracer::restore_all(pid_t process) {
  Result<void> first;
  for (const auto& [addr, original] : shadow_) {
    if (auto r =
            inferior_->write_memory(addr, std::span<const std::uint8_t>(&original, 1), process);
        !r && first) {
      first = r;
    }
  }
  return first;
}

Result<void> BranchTracer::release_child(pid_t child) {
  // The child's copy of the text holds the int3s: restored there, it runs as without hwarb.
  if (auto r = restore_all(child); !r) return r;
  return inferior_->release(child);
}

Result<void> BranchTracer::stop() {
  if (ended_ && shadow_.empty()) return {};
  ended_ = true;
  Result<void> first;
  if (inferior_->alive()) {
    // An int3 trap raised as stop_all interrupted the thread stays pending behind the interrupt
    // stop: resumed untraced, the program would die of it. It is made to show now, and taken
    // back with the queued ones below.
    for (pid_t t : inferior_->threads()) {
      if (!inferior_->is_stopped(t)) continue;
      auto surfaced = inferior_->surface_pending(t, std::uint64_t{1} << (SIGTRAP - 1));
      if (!surfaced) continue;  // the thread is gone
      for (auto it = surfaced->rbegin(); it != surfaced->rend(); ++it) inferior_->requeue(*it);
    }
    first = restore_all(0);
    // Stops of the tracer's int3s not handled yet: back onto the restored instruction.
    for (pid_t t : inferior_->threads()) {
      std::vector<Event> keep;
      for (const Event& ev : inferior_->discard_queued(t)) {
        if (ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kSiKernel) {
          auto regs = inferior_->get_regs(t);
          if (regs && (shadow_.contains(regs->rip - 1) || start_done_ == regs->rip - 1)) {
            regs->rip -= 1;
            if (auto r = inferior_->set_regs(t, *regs); !r && first) first = r;
            continue;
          }
        }
        keep.push_back(ev);
      }
      for (auto it = keep.rbegin(); it != keep.rend(); ++it) inferior_->requeue(*it);
      // A deferred jump the thread already ran is recorded.
      if (auto regs = inferior_->get_regs(t)) settle(t, regs->rip, true);
    }
  }
  shadow_.clear();
  terms_.clear();
  blocks_.clear();
  deferred_.clear();
  preds_.clear();
  entry_terms_.clear();
  pages_.clear();
  flow_.clear();
  start_trap_.reset();
  return first;
}

}  // namespace hwarb::native

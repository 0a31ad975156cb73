#include "hwarb/linux/hard_watch.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <utility>

#include "hwarb/base/check.h"
#include "hwarb/base/format.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

// si_code of a perf event's sigtrap (Linux's TRAP_PERF; glibc's headers may lack it).
constexpr int kTrapPerf = 6;

bool perf_trap(const Event& ev) {
  return ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kTrapPerf;
}

// si_code of the SIGTRAP Linux sends for a debug exception whose status (DR6) names no
// breakpoint and no single step: it takes the exception for an INT1 (icebp, 0xf1) and reports it
// at the ip after it.
constexpr int kTrapBrkpt = 1;
constexpr std::uint8_t kInt1 = 0xf1;

// The longest x86 instruction.
constexpr std::size_t kMaxInsn = 15;

// The x86 direction flag (eflags bit 10): string instructions step downwards.
constexpr std::uint64_t kDirectionFlag = 1ull << 10;
// The longest function forward decoding walks to find an instruction's start.
constexpr std::uint64_t kMaxFunction = 1u << 16;

bool is_string(const x86::Insn& insn) {
  return std::any_of(insn.mem.begin(), insn.mem.end(),
                     [](const x86::MemOperand& m) { return m.string_op; });
}

// The registers before the last iteration of string instruction `insn` (made with `regs`): rsi
// and rdi one element back, rcx 1 under a REP prefix.
x86::Regs before_last_iteration(const x86::Insn& insn, x86::Regs regs) {
  std::uint64_t size = 0;
  bool rep = false;
  for (const x86::MemOperand& m : insn.mem) {
    if (!m.string_op) continue;
    size = m.size;
    rep |= m.rep;
  }
  const bool down = (regs.eflags & kDirectionFlag) != 0;
  regs.rdi = down ? regs.rdi + size : regs.rdi - size;
  regs.rsi = down ? regs.rsi + size : regs.rsi - size;
  if (rep) regs.rcx = 1;
  return regs;
}

// The access bits of the memory operands of `insn` (computed with `regs`, rip = insn.ip) that
// touch [addr, addr+len), implicit stack slots included (accessors_before gives them rsp as it
// was before the instruction).
unsigned touching(const x86::Insn& insn, const x86::Regs& regs, std::uint64_t addr,
                  std::uint64_t len) {
  auto refs = x86::effective_addresses(insn, regs);
  if (!refs) return 0;
  unsigned access = 0;
  for (std::size_t i = 0; i < refs->size(); ++i) {
    const x86::MemRef& ref = (*refs)[i];
    if (!(ref.address < addr + len && addr < ref.address + ref.size)) continue;
    if (ref.access == x86::Access::kRead) access |= kWatchRead;
    if (ref.access == x86::Access::kWrite) access |= kWatchWrite;
    if (ref.access == x86::Access::kReadWrite) access |= kWatchRead | kWatchWrite;
  }
  return access;
}

std::uint64_t since(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace

Result<std::vector<HwPiece>> plan_pieces(const std::vector<WatchRange>& ranges, int slots) {
  std::vector<HwPiece> pieces;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const WatchRange& w = ranges[i];
    if (w.access == kWatchExec) {
      pieces.push_back(HwPiece{w.addr, 8, BpType::kX, i, w.thread});
      continue;
    }
    const BpType type = w.access == kWatchWrite ? BpType::kW : BpType::kRw;
    for (const breakpoints::Piece& p : breakpoints::split_range(w.addr, w.len)) {
      pieces.push_back(HwPiece{p.addr, p.len, type, i, w.thread});
    }
  }
  // A thread holds every thread's pieces and its own.
  const ThreadNeed most = fullest_thread(pieces);
  if (slots < 0 || most.pieces > static_cast<std::size_t>(slots)) {
    return make_error(ErrorCode::kNoSpc,
                      "slots: " +
                          (most.thread != 0 ? "thread " + std::to_string(most.thread) + " needs "
                                            : std::string("the expressions need ")) +
                          std::to_string(most.pieces) + " debug registers and a thread has " +
                          std::to_string(slots) + " here");
  }
  return pieces;
}

bool hits_need_stops(const std::vector<WatchRange>& ranges, bool values) {
  bool stops = values;
  for (const WatchRange& w : ranges) stops |= (w.access & kWatchRead) != 0;
  return stops;
}

std::vector<x86::Insn> candidates_before(std::span<const std::uint8_t> code, std::uint64_t end) {
  std::vector<x86::Insn> found;
  const std::size_t longest = std::min<std::uint64_t>({code.size(), kMaxInsn, end});
  for (std::size_t k = longest; k >= 1; --k) {
    auto insn = x86::decode(code.last(k), end - k);
    if (insn && insn->length == k) found.push_back(std::move(*insn));
  }
  return found;
}

std::vector<Accessor> accessors_of(std::span<const x86::Insn> candidates, std::uint64_t addr,
                                   std::uint64_t len, const x86::Regs& regs) {
  std::vector<Accessor> found;
  for (const x86::Insn& insn : candidates) {
    if (insn.mem.empty()) continue;  // touches no memory (most suffixes of the real instruction)
    x86::Regs at = regs;
    at.rip = insn.ip;
    // The registers are those after the instruction: one that pushed (push, call) or popped
    // (pop, ret) moved rsp, and its operands are computed with rsp as it was before.
    for (const x86::MemOperand& m : insn.mem) {
      if (!m.stack || m.string_op) continue;
      if (m.access == x86::Access::kRead) {
        at.rsp -= m.size;
      } else {
        at.rsp += m.size;
      }
      break;
    }
    // A string instruction that ended here made its last iteration just before the stop.
    if (is_string(insn)) at = before_last_iteration(insn, at);
    if (const unsigned access = touching(insn, at, addr, len); access != 0) {
      found.push_back(Accessor{insn.ip, access});
    }
  }
  if (!found.empty()) return found;
  // The trap says some access touched the range; an instruction that loaded into its own address
  // register cannot be checked against it, and is the accessor when no other candidate is.
  for (const x86::Insn& insn : candidates) {
    if (insn.mem.empty() || is_string(insn) || !x86::overwrites_address_register(insn)) continue;
    unsigned access = 0;
    for (const x86::MemOperand& m : insn.mem) {
      if (m.stack) continue;
      if (m.access != x86::Access::kWrite) access |= kWatchRead;
      if (m.access != x86::Access::kRead) access |= kWatchWrite;
    }
    if (access != 0) found.push_back(Accessor{insn.ip, access});
  }
  return found;
}

std::vector<Accessor> accessors_before(std::span<const std::uint8_t> code, std::uint64_t end,
                                       std::uint64_t addr, std::uint64_t len,
                                       const x86::Regs& regs) {
  return accessors_of(candidates_before(code, end), addr, len, regs);
}

std::optional<Accessor> accessor_before(std::span<const std::uint8_t> code, std::uint64_t end,
                                        std::uint64_t addr, std::uint64_t len,
                                        const x86::Regs& regs) {
  auto found = accessors_before(code, end, addr, len, regs);
  if (found.size() != 1) return std::nullopt;
  return found.front();
}

std::optional<Accessor> interrupted_string(const x86::Insn& insn, std::uint64_t addr,
                                           std::uint64_t len, const x86::Regs& regs) {
  if (!x86::is_rep_string(insn) || regs.rcx == 0 || regs.rip != insn.ip) return std::nullopt;
  const unsigned access = touching(insn, before_last_iteration(insn, regs), addr, len);
  if (access == 0) return std::nullopt;
  return Accessor{insn.ip, access};
}

std::optional<StatuslessTrap> classify_statusless(Inferior& inferior, const Event& ev,
                                                  std::span<const HwPiece> pieces) {
  if (ev.kind != EventKind::kSignal || ev.signal != SIGTRAP || ev.code != kTrapBrkpt) {
    return std::nullopt;
  }
  auto regs = inferior.get_regs(ev.tid);
  if (!regs || ev.fault_addr != regs->rip) return std::nullopt;
  std::array<std::uint8_t, kMaxInsn> code{};
  if (regs->rip < code.size() ||
      !inferior.read_memory(regs->rip - code.size(), code, inferior.process_of(ev.tid))) {
    return StatuslessTrap{StatuslessTrap::Kind::kStray, 0};
  }
  // Case 1: the instruction before the stop touched a data piece: its hit. (An execution
  // breakpoint faults before its instruction, which runs again and traps again, with its
  // status: its statusless trap is case 3.)
  const std::vector<x86::Insn> before = candidates_before(code, regs->rip);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].type == BpType::kX) continue;
    if (!accessors_of(before, pieces[i].addr, pieces[i].len, *regs).empty()) {
      return StatuslessTrap{StatuslessTrap::Kind::kHit, i};
    }
  }
  // Case 2: the program's own INT1.
  if (code.back() == kInt1) return StatuslessTrap{StatuslessTrap::Kind::kInt1, 0};
  // Case 3: a debug exception of the breakpoints that no access explains.
  return StatuslessTrap{StatuslessTrap::Kind::kStray, 0};
}

HardWatchEngine::HardWatchEngine(Inferior& inferior, PerfWatch perf, std::vector<WatchRange> ranges,
                                 WatchObserver& observer)
    : inferior_(inferior),
      pieces_(perf.pieces()),
      ranges_(std::move(ranges)),
      observer_(observer),
      start_(std::chrono::steady_clock::now()),
      image_(executable_path(inferior.pid()).value_or("")) {
  // A vfork child or followed fork that execs stays traced (kExec), so that it can be watched
  // again in its new image.
  inferior_.follow_execs(true);
  watches_.emplace(inferior_.pid(), std::move(perf));
  watch_process(inferior_.pid());
}

HardWatchEngine::Process& HardWatchEngine::watch_process(pid_t process) {
  Process& p = processes_[process];
  p = Process{};
  for (const WatchRange& w : ranges_) {
    std::vector<std::uint8_t> bytes(w.access == kWatchExec ? 0 : w.len);
    if (!bytes.empty() && !inferior_.read_memory(w.addr, bytes, process)) bytes.clear();
    p.shadow.push_back(std::move(bytes));
  }
  return p;
}

Result<void> HardWatchEngine::open_on(pid_t task, const char* what) {
  auto watch = PerfWatch::open(task, pieces_, {.sigtrap = true});
  if (!watch) {
    if (watch.error().code() == ErrorCode::kSrch) return {};  // gone already: nothing to watch
    return std::unexpected(watch.error().with_context(what));
  }
  watches_.insert_or_assign(task, std::move(*watch));
  return {};
}

std::optional<std::uint64_t> HardWatchEngine::start_before(pid_t process, Process& p,
                                                           std::uint64_t end) {
  if (auto it = p.starts.find(end); it != p.starts.end()) return it->second;
  if (!p.symbols || (p.symbols->locate(end - 1).module.empty() && p.symbol_loads < 4)) {
    ++p.symbol_loads;
    if (auto table = SymbolTable::load(process)) p.symbols = std::move(*table);
  }
  std::optional<std::uint64_t> start;
  const Location loc = p.symbols ? p.symbols->locate(end - 1) : Location{};
  if (loc.symbol && loc.symbol->address < end && end - loc.symbol->address <= kMaxFunction) {
    const std::uint64_t base = loc.symbol->address;
    std::vector<std::uint8_t> text(end - base);
    if (inferior_.read_memory(base, text, process)) {
      std::uint64_t ip = base;
      while (ip < end) {
        const std::size_t avail = std::min<std::uint64_t>(kMaxInsn, end - ip);
        auto insn = x86::decode(std::span(text).subspan(ip - base, avail), ip);
        if (!insn || insn->length == 0) break;
        if (ip + insn->length == end) start = ip;
        ip += insn->length;
      }
    }
  }
  p.starts[end] = start;
  return start;
}

std::span<const x86::Insn> HardWatchEngine::candidates(Process& p,
                                                       std::span<const std::uint8_t> code,
                                                       std::uint64_t end) {
  // on_hit reads the whole window before the stop or nothing (a stop near address 0, or text it
  // could not read): without bytes there is no candidate.
  if (code.empty()) return {};
  HWARB_CHECK(code.size() == kMaxInsn, "the code window before a stop is read whole");
  auto it = p.tails.find(end);
  if (it != p.tails.end() && std::equal(code.begin(), code.end(), it->second.code.begin())) {
    return it->second.insns;
  }
  if (it == p.tails.end() && p.tails.size() >= kMaxTails) p.tails.clear();
  Process::Tail& tail = p.tails[end];
  std::copy(code.begin(), code.end(), tail.code.begin());
  tail.insns = candidates_before(code, end);
  return tail.insns;
}

std::optional<Accessor> HardWatchEngine::accessor(pid_t process, Process& p,
                                                  std::span<const std::uint8_t> code,
                                                  const x86::Regs& regs, const WatchRange& w) {
  const std::vector<Accessor> found =
      accessors_of(candidates(p, code, regs.rip), w.addr, w.len, regs);
  if (found.size() == 1) return found.front();
  if (found.size() > 1) {
    // Decoding backwards is ambiguous (a prefix-less suffix of a store is often a store of the
    // same bytes): decoding forwards from the function's start tells where the instruction began.
    if (auto start = start_before(process, p, regs.rip)) {
      for (const Accessor& a : found) {
        if (a.ip == *start) return a;
      }
    }
    const bool agree = std::all_of(found.begin(), found.end(), [&](const Accessor& a) {
      return a.access == found.front().access;
    });
    if (agree) return found.front();
    return std::nullopt;
  }
  // A REP string instruction that trapped between iterations: the stop is at the instruction.
  auto insn = inferior_.decode_at(regs.rip, process);
  if (!insn) return std::nullopt;
  return interrupted_string(*insn, w.addr, w.len, regs);
}

TrapReset forced_trap_reset(const KernelSigaction& seen, std::uint64_t mask,
                            const KernelSigaction& now, bool after_syscall) {
  if ((mask & signal_bit(SIGTRAP)) != 0) return TrapReset::kKept;
  if (after_syscall) return TrapReset::kProgram;
  KernelSigaction reset = seen;
  reset.handler = kSigDflHandler;  // all the kernel changes of the action
  if (now != reset) return TrapReset::kProgram;
  return seen.handler == kSigDflHandler ? TrapReset::kUnknown : TrapReset::kKernel;
}

Result<bool> HardWatchEngine::handle(const Event& ev) {
  switch (ev.kind) {
    case EventKind::kFork:
      return on_fork(ev);
    case EventKind::kExec:
      return on_exec(ev.tid);
    case EventKind::kThreadExit:
      // Samples of the thread that no stop took are hits, reported while its process can still
      // be read (surface_blocked_hits, case 3).
      if (drain_rings()) report_ended(ev.tid);
      blocking_.erase(ev.tid);
      // A vfork child, or a followed process's leader (the last of its threads): its breakpoints
      // go with it.
      if (ev.tid != inferior_.pid()) {
        watches_.erase(ev.tid);
        processes_.erase(ev.tid);
      }
      return false;
    case EventKind::kSignal:
      if (perf_trap(ev)) return on_hit(ev, true);
      return on_statusless(ev);
    default:
      return false;
  }
}

std::optional<Event> HardWatchEngine::recover(const Event& ev, bool& drop) {
  drop = false;
  if (!processes_.contains(inferior_.process_of(ev.tid))) return std::nullopt;
  const auto trap = classify_statusless(inferior_, ev, pieces_);
  if (!trap || trap->kind == StatuslessTrap::Kind::kInt1) return std::nullopt;
  // Said, as it may have harmed the program: the kernel forced its SIGTRAP, and a forced signal
  // that the thread blocks (or the process ignores) has its action reset to the default and is
  // unblocked before the stop that shows it here; that is beyond repair from here.
  const bool stray = trap->kind == StatuslessTrap::Kind::kStray;
  std::optional<TrapReset> reset;
  if (auto regs = inferior_.get_regs(ev.tid)) reset = repair_forced_trap(ev.tid, *regs);
  std::string harm;
  if (!reset) {
    harm =
        "; if the thread blocked SIGTRAP, the kernel unblocked it and reset the program's "
        "SIGTRAP action";
  } else if (*reset == TrapReset::kKernel) {
    harm =
        "; the kernel's reset of the program's SIGTRAP action, and of the thread's mask, "
        "undone";
  } else if (*reset == TrapReset::kUnknown) {
    harm =
        "; SIGTRAP, which the thread blocked, is unblocked now (by the kernel, or by the "
        "program since): left as it is";
  }
  observer_.note(
      ranges_[pieces_[trap->piece].expr].id,
      "thread " + std::to_string(ev.tid) +
          ": the machine lost the status (DR6) of a debug exception at " + hex(ev.fault_addr) +
          (stray ? ", which no access explains (dropped)" : " (its hit recovered)") + harm);
  if (stray) {
    drop = true;
    return std::nullopt;
  }
  Event hit = ev;
  hit.code = kTrapPerf;
  hit.fault_addr = pieces_[trap->piece].addr;
  return hit;
}

Result<bool> HardWatchEngine::on_statusless(const Event& ev) {
  bool drop = false;
  if (auto hit = recover(ev, drop)) return on_hit(*hit, true);
  if (!drop) return false;  // not one, or the program's own INT1: the program's signal
  if (auto r = inferior_.resume(ev.tid, Resume::kCont); !r) return std::unexpected(r.error());
  return true;
}

Result<bool> HardWatchEngine::on_fork(const Event& ev) {
  // A child of a process left unwatched (an exec of another image) is let go (run_target).
  if (!processes_.contains(inferior_.process_of(ev.tid))) return false;
  if (ev.vfork) {
    // A vfork child shares the memory until it execs (its breakpoints then go, remove_on_exec):
    // watched as a thread of its parent, with breakpoints of its own (it inherits none,
    // inherit_thread). run_target resumes it.
    if (auto r = open_on(ev.child, "vfork child"); !r) return std::unexpected(r.error());
    return false;
  }
  // A forked child has its own copy of the memory: followed, watched at the same addresses with
  // breakpoints of its own, its values its own.
  if (auto r = inferior_.follow(ev.child); !r) return std::unexpected(r.error());
  if (auto r = watch_fork(ev); !r) return std::unexpected(r.error());
  if (inferior_.holds_forks()) return true;  // the caller's, as the parent is
  if (auto r = inferior_.resume(ev.child, Resume::kCont);
      !r && r.error().code() != ErrorCode::kSrch) {
    return std::unexpected(r.error());
  }
  return true;
}

Result<void> HardWatchEngine::watch_fork(const Event& ev) {
  if (!processes_.contains(inferior_.process_of(ev.tid))) return {};
  watch_process(ev.child);
  return open_on(ev.child, "forked child");
}

Result<bool> HardWatchEngine::on_exec(pid_t process) {
  // The exec removed the breakpoints (remove_on_exec). The same executable is watched again in
  // its new image, at the same addresses; any other leaves the process unwatched.
  watches_.erase(process);
  processes_.erase(process);
  // The exec reset the program's handlers: an action read before it is no longer its.
  std::erase_if(blocking_, [&](const auto& entry) {
    return entry.first == process || inferior_.process_of(entry.first) == process;
  });
  auto exe = executable_path(process);
  if (image_.empty() || !exe || *exe != image_) return false;
  watch_process(process);
  if (auto r = open_on(process, "exec"); !r) return std::unexpected(r.error());
  return false;  // run_target resumes it
}

Result<bool> HardWatchEngine::on_hit(const Event& ev, bool resume) {
  const pid_t process = inferior_.process_of(ev.tid);
  auto found = processes_.find(process);
  if (found == processes_.end()) return false;  // no breakpoint of ours there: the program's own
  Process& p = found->second;
  auto regs = inferior_.get_regs(ev.tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t time = since(start_);
  // This stop takes its thread's samples so far (surface_blocked_hits, case 2); its own sample,
  // if not drained yet, is matched at the next look (case 1).
  std::vector<PerfHit> samples;
  if (auto kept = pending_.find(ev.tid); kept != pending_.end()) {
    samples = std::move(kept->second);
    pending_.erase(kept);
  }
  std::optional<std::uint64_t> late;  // a held hit surfaced: its sample's ip
  if (surfaced_.erase(ev.tid) > 0) {
    seen_blocking(ev.tid, time);
    // Each held hit but the last is reported from its sample; the last is this stop's.
    late = regs->rip;
    if (!samples.empty()) {
      late = samples.back().ip;
      samples.pop_back();
      report_samples(ev.tid, samples, false);
    }
  } else {
    if (blocking_.contains(ev.tid) && repair_forced_trap(ev.tid, *regs) == TrapReset::kKernel) {
      const auto piece = std::find_if(pieces_.begin(), pieces_.end(), [&](const HwPiece& hp) {
        return ev.fault_addr >= hp.addr && ev.fault_addr < hp.addr + hp.len;
      });
      observer_.note(ranges_[piece != pieces_.end() ? piece->expr : 0].id,
                     "thread " + std::to_string(ev.tid) +
                         ": the kernel reset the program's SIGTRAP action and unblocked SIGTRAP "
                         "in the thread (its answer to a debug exception whose status, DR6, the "
                         "machine lost, with that hit); both undone");
    }
    if (std::none_of(samples.begin(), samples.end(),
                     [&](const PerfHit& h) { return h.ip == regs->rip; })) {
      handled_.insert({ev.tid, regs->rip});
    }
  }
  // One gathered read (one system call) of the instruction bytes before the stop, for the
  // accessor (none near address 0), and of the value of every range the hit touched; each
  // part alone where that fails (a part unreadable, or a page the software path protects).
  std::array<std::uint8_t, kMaxInsn> window{};
  const bool want_code = regs->rip >= window.size();
  std::vector<std::vector<std::uint8_t>> values(ranges_.size());
  std::vector<RemoteRead> parts;
  if (want_code) parts.push_back({regs->rip - window.size(), window});
  for (const HwPiece& piece : pieces_) {
    if (ev.fault_addr < piece.addr || ev.fault_addr >= piece.addr + piece.len) continue;
    const WatchRange& w = ranges_[piece.expr];
    if (w.access == kWatchExec || !values[piece.expr].empty()) continue;
    values[piece.expr].resize(w.len);
    parts.push_back({w.addr, values[piece.expr]});
  }
  std::span<const std::uint8_t> code;
  if (inferior_.read_memory(parts, process)) {
    if (want_code) code = window;
  } else {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const bool ok = inferior_.read_memory(parts[k].addr, parts[k].out, process).has_value();
      if (want_code && k == 0) {
        if (ok) code = window;
        continue;
      }
      if (!ok) {
        for (auto& v : values) {
          if (v.data() == parts[k].out.data()) v.clear();  // unknown
        }
      }
    }
  }
  std::vector<bool> seen(ranges_.size(), false);
  bool reported = false;
  for (const HwPiece& piece : pieces_) {
    if (ev.fault_addr < piece.addr || ev.fault_addr >= piece.addr + piece.len) continue;
    const std::size_t i = piece.expr;
    if (seen[i]) continue;
    seen[i] = true;
    const WatchRange& w = ranges_[i];
    WatchHit h;
    h.id = w.id;
    h.tid = ev.tid;
    h.time_ns = time;
    h.addr = ev.fault_addr;
    if (w.access == kWatchExec) {
      h.ip = w.addr;
      h.access = kWatchExec;
      observer_.hit(h);
      reported = true;
      continue;
    }
    h.ip = regs->rip;
    std::vector<std::uint8_t> now = std::move(values[i]);
    // The accessing instruction's operands say read or write; a write-only breakpoint fires on
    // writes only. An instruction that cannot be found is both (never guessed from the values).
    const bool write_only = piece.type == BpType::kW;
    h.access = write_only ? kWatchWrite : kWatchRead | kWatchWrite;
    if (late) {
      place_late(process, p, *late, write_only, h);  // held while the program blocked SIGTRAP
    } else if (auto acc = accessor(process, p, code, *regs, w)) {
      h.ip = acc->ip;
      if (!write_only) h.access = acc->access;
    }
    h.access &= w.access;
    h.old_value = std::move(p.shadow[i]);
    h.new_value = now;
    p.shadow[i] = std::move(now);
    if (h.access != 0) {
      observer_.hit(h);
      reported = true;
    }
  }
  if (!resume || (stop_at_hits_ && reported)) return true;  // the caller resumes it
  if (auto r = inferior_.resume(ev.tid, Resume::kCont); !r) return std::unexpected(r.error());
  return true;
}

void HardWatchEngine::place_late(pid_t process, Process& p, std::uint64_t end, bool write_only,
                                 WatchHit& h) {
  // The instruction is the one that ends at the sample's ip, its access what its operands say.
  h.ip = end;
  auto start = start_before(process, p, end);
  if (!start) return;
  h.ip = *start;
  if (write_only) return;
  if (auto insn = inferior_.decode_at(*start, process)) {
    unsigned access = 0;
    for (const x86::MemOperand& m : insn->mem) {
      if (!m.stack) access |= static_cast<unsigned>(m.access);
    }
    if (access != 0) h.access = access;
  }
}

void HardWatchEngine::report_samples(pid_t tid, const std::vector<PerfHit>& samples, bool values) {
  const std::uint64_t start_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count());
  for (const PerfHit& s : samples) {
    const pid_t process = s.pid != 0 ? s.pid : inferior_.process_of(tid);
    auto found = processes_.find(process);
    if (found == processes_.end()) continue;
    Process& p = found->second;
    std::vector<bool> seen(ranges_.size(), false);
    for (const HwPiece& piece : pieces_) {
      if (s.addr < piece.addr || s.addr >= piece.addr + piece.len || seen[piece.expr]) continue;
      seen[piece.expr] = true;
      const WatchRange& w = ranges_[piece.expr];
      WatchHit h;
      h.id = w.id;
      h.tid = tid;
      h.time_ns = s.time_ns > start_ns ? s.time_ns - start_ns : 0;
      h.addr = s.addr;
      if (w.access == kWatchExec) {
        h.ip = w.addr;
        h.access = kWatchExec;
        observer_.hit(h);
        continue;
      }
      const bool write_only = piece.type == BpType::kW;
      h.access = write_only ? kWatchWrite : kWatchRead | kWatchWrite;
      place_late(process, p, s.ip, write_only, h);
      h.access &= w.access;
      if (h.access == 0) continue;
      // Values where they tell: the range read now against what was last reported (the first
      // such hit of a range, unless the process is gone); none for the others.
      if (!values) {
        observer_.hit(h);
        continue;
      }
      std::vector<std::uint8_t> now(w.len);
      if (!inferior_.read_memory(w.addr, now, process)) now.clear();
      std::vector<std::uint8_t>& shadow = p.shadow[piece.expr];
      if (!now.empty() && !shadow.empty() && now != shadow) {
        h.old_value = shadow;
        h.new_value = now;
      }
      if (!now.empty()) shadow = std::move(now);
      observer_.hit(h);
    }
  }
}

void HardWatchEngine::report_ended(pid_t tid) {
  auto it = pending_.find(tid);
  if (it == pending_.end()) return;
  report_samples(tid, it->second, true);
  pending_.erase(it);
}

Result<std::uint64_t> HardWatchEngine::drain_rings() {
  std::uint64_t lost = 0;
  for (auto& [task, watch] : watches_) {
    auto hits = watch.poll(0);
    if (!hits) return std::unexpected(hits.error());
    for (const PerfHit& h : *hits) {
      if (auto it = handled_.find({h.tid, h.ip}); it != handled_.end()) {
        handled_.erase(it);
        continue;
      }
      pending_[h.tid].push_back(h);
    }
    lost += watch.lost();
  }
  handled_.clear();  // stops whose samples the rings dropped
  return lost;
}

void HardWatchEngine::seen_blocking(pid_t tid, std::uint64_t time) {
  auto known = blocking_.find(tid);
  if (known != blocking_.end() && time - known->second.read_ns < kActionAge) return;
  auto action = inject_sigaction(inferior_, tid, SIGTRAP, nullptr);
  if (!action) {
    blocking_.erase(tid);  // unknown: nothing will be put back
    return;
  }
  blocking_[tid] = Blocking{*action, time};
}

std::optional<TrapReset> HardWatchEngine::repair_forced_trap(pid_t tid, const x86::Regs& regs) {
  auto known = blocking_.find(tid);
  if (known == blocking_.end()) return std::nullopt;
  auto mask = ptrace_getsigmask(tid);
  if (!mask) return std::nullopt;
  if ((*mask & signal_bit(SIGTRAP)) != 0) return TrapReset::kKept;
  // An exception's or an interrupt's entry leaves orig_rax -1; a system call's, its number.
  const bool after_syscall = regs.orig_rax != ~std::uint64_t{0};
  KernelSigaction now = known->second.action;
  if (!after_syscall) {
    auto read = inject_sigaction(inferior_, tid, SIGTRAP, nullptr);
    if (!read) return std::nullopt;
    now = *read;
  }
  const TrapReset verdict = forced_trap_reset(known->second.action, *mask, now, after_syscall);
  if (verdict != TrapReset::kKernel) {
    blocking_.erase(known);  // it no longer blocks SIGTRAP
    return verdict;
  }
  // The thread has not run since the kernel's reset (it stopped on its way back to user mode):
  // putting both back leaves the program as if the trap had never been.
  if (!inject_sigaction(inferior_, tid, SIGTRAP, &known->second.action) ||
      !ptrace_setsigmask(tid, *mask | signal_bit(SIGTRAP))) {
    blocking_.erase(known);
    return std::nullopt;
  }
  return verdict;
}

Result<std::size_t> HardWatchEngine::surface_blocked_hits() {
  // Samples and stops. Every hit writes a sample, before its stop comes (if one comes):
  //  1. a sample whose stop on_hit took since the last look (the same thread and ip, handled_)
  //     is that hit's: dropped;
  //  2. any other is kept in pending_ until a stop of its thread takes it (on_hit: a stop takes
  //     every sample of its thread so far, held hits merged into it) — its own stop still on
  //     its way, or a hit held by a thread that blocks SIGTRAP;
  //  3. the thread ended first: each of its kept samples is a hit no stop will bring, reported
  //     from the sample (report_samples).
  // The threads to look at: those with kept samples, those a look could not take then, and
  // every thread when the rings dropped samples (a blocked hit's among them, perhaps).
  auto lost = drain_rings();
  if (!lost) return std::unexpected(lost.error());
  std::set<pid_t> look = std::exchange(recheck_, {});
  for (const auto& [tid, samples] : pending_) look.insert(tid);
  if (*lost != lost_seen_) {
    lost_seen_ = *lost;
    for (pid_t tid : inferior_.threads()) look.insert(tid);
  }
  std::size_t surfaced = 0;
  const std::vector<pid_t> threads = inferior_.threads();
  for (pid_t tid : look) {
    if (!std::binary_search(threads.begin(), threads.end(), tid)) {
      report_ended(tid);
      continue;
    }
    if (inferior_.is_stopped(tid)) {
      recheck_.insert(tid);  // its stopper resumes it; looked at again then
      continue;
    }
    auto ev = inferior_.surface_blocked(tid, SIGTRAP, kTrapPerf);
    if (!ev) {
      if (ev.error().code() == ErrorCode::kSrch) {
        report_ended(tid);
        continue;
      }
      return std::unexpected(ev.error());
    }
    if (!*ev) {
      // Nothing held (a stop on its way, or none), or the thread stopped for something else
      // first: a thread whose hit is still held is found by /proc the next time too.
      if (inferior_.has_queued(tid)) recheck_.insert(tid);
      continue;
    }
    surfaced_.insert(tid);
    inferior_.requeue(**ev);
    ++surfaced;
  }
  if (surfaced > 0) {
    // Hits of the surfaced threads between the drain above and their stops: their samples too.
    if (auto more = drain_rings(); !more) return std::unexpected(more.error());
  }
  return surfaced;
}

std::vector<int> HardWatchEngine::wake_fds() const {
  std::vector<int> fds;
  for (const auto& [task, watch] : watches_) {
    const std::vector<int> ring = watch.ring_fds();
    fds.insert(fds.end(), ring.begin(), ring.end());
  }
  return fds;
}

void HardWatchEngine::tick() {
  ignore_error(surface_blocked_hits(), "a look that fails is made again at the next tick");
}

Result<void> HardWatchEngine::finish() {
  return close(nullptr);
}

Result<std::vector<HardWatchEngine::Taken>> HardWatchEngine::finish_taking_hits() {
  std::vector<Taken> taken;
  if (auto r = close(&taken); !r) return std::unexpected(r.error());
  return taken;
}

Result<void> HardWatchEngine::close(std::vector<Taken>* taken) {
  // The rings' last samples first: those of threads that ended are hits no stop will bring.
  ignore_error(surface_blocked_hits(), "a held hit is looked for once more below");
  watches_.clear();  // the breakpoints go; hits already queued for a thread are taken below
  Result<void> first;
  const auto take = [&](const Event& ev, bool queued) {
    if (taken == nullptr) return;  // dropped
    if (auto r = on_hit(ev, false); !r && first) first = std::unexpected(r.error());
    taken->push_back({ev, queued});
  };
  for (pid_t tid : inferior_.threads()) {
    std::vector<Event> events = inferior_.discard_queued(tid);
    // Put back in their order (requeue puts an event first).
    // A statusless trap of a hit is taken as its perf trap would be; a stray one is dropped.
    std::vector<std::optional<Event>> hits;
    for (const Event& ev : events) {
      bool drop = false;
      std::optional<Event> hit = perf_trap(ev) ? std::optional<Event>(ev) : recover(ev, drop);
      if (drop) hit = Event{};
      hits.push_back(std::move(hit));
    }
    for (std::size_t k = events.size(); k-- > 0;) {
      if (!hits[k]) inferior_.requeue(events[k]);
    }
    for (const std::optional<Event>& hit : hits) {
      if (hit && hit->kind == EventKind::kSignal) take(*hit, true);
    }
  }
  // A hit's SIGTRAP raised as the thread was being stopped is pending but not reported yet:
  // after the detach it would kill the program. Each is made to surface, and dropped or taken.
  for (pid_t tid : inferior_.threads()) {
    auto surfaced = inferior_.surface_pending(tid, 1ull << (SIGTRAP - 1));
    if (!surfaced) {
      if (surfaced.error().code() != ErrorCode::kSrch && first) {
        first = std::unexpected(surfaced.error());
      }
      continue;
    }
    for (const Event& ev : *surfaced) {
      if (perf_trap(ev)) {
        take(ev, false);
      } else {
        inferior_.requeue(ev);
      }
    }
    // One held by a thread that blocks SIGTRAP would kill the program when it unblocks it.
    auto held = inferior_.surface_blocked(tid, SIGTRAP, kTrapPerf);
    if (!held) {
      if (held.error().code() != ErrorCode::kSrch && first) first = std::unexpected(held.error());
      continue;
    }
    if (*held) {
      surfaced_.insert(tid);  // its samples name its hits (on_hit)
      take(**held, false);
    }
  }
  return first;
}

HardCountEngine::HardCountEngine(Inferior& inferior, PerfCount count,
                                 std::vector<WatchRange> ranges)
    : inferior_(inferior), count_(std::move(count)), ranges_(std::move(ranges)) {}

Result<std::vector<RangeCount>> HardCountEngine::close() {
  auto so_far = counts();
  if (!so_far) return so_far;
  count_.close();
  closed_ = true;
  return so_far;
}

Result<bool> HardCountEngine::handle(const Event& ev) {
  if (closed_) return false;
  Result<void> added;
  if (ev.kind == EventKind::kSignal) return on_statusless(ev);
  if (ev.kind == EventKind::kNewThread) added = count_.add_thread(ev.tid);
  if (ev.kind == EventKind::kFork) added = count_.add_process(ev.child);
  if (!added && added.error().code() != ErrorCode::kSrch) return std::unexpected(added.error());
  return false;  // run_target resumes the thread, releases or resumes the child
}

Result<bool> HardCountEngine::on_statusless(const Event& ev) {
  const auto trap = classify_statusless(inferior_, ev, count_.pieces());
  if (!trap || trap->kind == StatuslessTrap::Kind::kInt1) return false;  // the program's
  if (trap->kind == StatuslessTrap::Kind::kHit) {
    // Counted on the task whose events counted the thread's other hits.
    const std::vector<pid_t>& tasks = count_.tasks();
    const pid_t task = std::find(tasks.begin(), tasks.end(), ev.tid) != tasks.end()
                           ? ev.tid
                           : inferior_.process_of(ev.tid);
    ++recovered_[{trap->piece, task}];
  }
  if (auto r = inferior_.resume(ev.tid, Resume::kCont); !r) return std::unexpected(r.error());
  return true;
}

Result<std::vector<RangeCount>> HardCountEngine::counts() const {
  auto raw = count_.counts();
  if (!raw) return std::unexpected(raw.error());
  for (const auto& [at, n] : recovered_) raw->push_back(PerfCount::Count{at.second, at.first, n});
  const std::vector<HwPiece>& pieces = count_.pieces();
  std::vector<RangeCount> out;
  for (const PerfCount::Count& c : *raw) {
    if (c.count == 0) continue;
    const WatchRange& w = ranges_[pieces[c.piece].expr];
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const RangeCount& r) { return r.id == w.id && r.tid == c.tid; });
    if (it == out.end()) {
      out.push_back(RangeCount{w.id, c.tid, w.access == kWatchExec ? kWatchExec : kWatchWrite, 0});
      it = out.end() - 1;
    }
    it->count += c.count;
  }
  return out;
}

Result<CountResult> count_untraced(Inferior& inferior, PerfWatch perf,
                                   const std::vector<WatchRange>& ranges, WatchObserver& observer,
                                   const std::function<void()>& tick) {
  const pid_t pid = inferior.pid();
  const bool spawned = inferior.spawned();
  if (auto d = inferior.detach(); !d) return std::unexpected(d.error());
  arm_interrupt();
  const std::uint64_t start_ns =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  std::optional<PerfWatch> watch(std::move(perf));
  const std::vector<HwPiece> pieces = watch->pieces();
  CountResult out;
  out.end.pid = pid;
  auto take = [&](const std::vector<PerfHit>& hits) {
    for (const PerfHit& ph : hits) {
      const WatchRange& w = ranges[pieces[ph.piece].expr];
      WatchHit h;
      h.id = w.id;
      h.tid = ph.tid;
      h.time_ns = ph.time_ns > start_ns ? ph.time_ns - start_ns : 0;
      h.ip = ph.ip;
      h.addr = ph.addr;
      h.access = w.access == kWatchExec ? kWatchExec : kWatchWrite;
      observer.hit(h);
    }
  };
  for (;;) {
    if (interrupted()) {
      out.end.interrupted = true;
      break;
    }
    if (observer.done()) break;
    auto hits = watch->poll(100);
    if (!hits) return std::unexpected(hits.error());
    take(*hits);
    if (tick) tick();
    if (spawned) {
      if (wait_end(pid, true, out.end)) {
        if (auto rest = watch->poll(0)) take(*rest);
        break;
      }
    } else if (watch->exited()) {
      out.end.exited = true;
      break;
    }
  }
  out.lost = watch->lost();
  watch.reset();  // the breakpoints go now
  if (spawned && !out.end.exited) {
    if (out.end.interrupted)
      ignore_error(send_signal(pid, SIGKILL), "the wait below sees the end either way");
    (void)wait_end(pid, false, out.end);
  }
  return out;
}

}  // namespace hwarb::native

#include "hwarb/linux/hard_watch.h"

#include <signal.h>

#include <array>
#include <string>
#include <utility>

#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::linux {
namespace {

// si_code of a perf event's sigtrap (Linux's TRAP_PERF; glibc's headers may lack it).
constexpr int kTrapPerf = 6;

bool perf_trap(const Event& ev) {
  return ev.kind == EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kTrapPerf;
}

// The longest x86 instruction.
constexpr std::size_t kMaxInsn = 15;

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
      pieces.push_back(HwPiece{w.addr, 8, BpType::kX, i});
      continue;
    }
    const BpType type = w.access == kWatchWrite ? BpType::kW : BpType::kRw;
    for (const breakpoints::Piece& p : breakpoints::split_range(w.addr, w.len)) {
      pieces.push_back(HwPiece{p.addr, p.len, type, i});
    }
  }
  if (slots < 0 || pieces.size() > static_cast<std::size_t>(slots)) {
    return make_error(ErrorCode::kNoSpc,
                      "slots: the expressions need " + std::to_string(pieces.size()) +
                          " debug registers and a thread has " + std::to_string(slots) + " here");
  }
  return pieces;
}

bool hits_need_stops(const std::vector<WatchRange>& ranges, bool values) {
  bool stops = values;
  for (const WatchRange& w : ranges) stops |= (w.access & kWatchRead) != 0;
  return stops;
}

std::optional<Accessor> accessor_before(std::span<const std::uint8_t> code, std::uint64_t end,
                                        std::uint64_t addr, std::uint64_t len,
                                        const x86::Regs& regs) {
  std::optional<Accessor> found;
  x86::Regs at = regs;
  for (std::size_t k = 1; k <= code.size() && k <= kMaxInsn && k <= end; ++k) {
    const std::uint64_t ip = end - k;
    auto insn = x86::decode(code.last(k), ip);
    if (!insn || insn->length != k) continue;
    at.rip = ip;
    auto refs = x86::effective_addresses(*insn, at);
    if (!refs) continue;
    unsigned access = 0;
    for (std::size_t i = 0; i < refs->size(); ++i) {
      if (insn->mem.size() > i && insn->mem[i].stack) continue;
      const x86::MemRef& ref = (*refs)[i];
      if (!(ref.address < addr + len && addr < ref.address + ref.size)) continue;
      if (ref.access == x86::Access::kRead) access |= kWatchRead;
      if (ref.access == x86::Access::kWrite) access |= kWatchWrite;
      if (ref.access == x86::Access::kReadWrite) access |= kWatchRead | kWatchWrite;
    }
    if (access == 0) continue;
    if (found) return std::nullopt;  // two candidates: nothing is certain
    found = Accessor{ip, access};
  }
  return found;
}

HardWatchEngine::HardWatchEngine(Inferior& inferior, PerfWatch perf, std::vector<WatchRange> ranges,
                                 WatchObserver& observer)
    : inferior_(inferior),
      perf_(std::move(perf)),
      pieces_(perf_->pieces()),
      ranges_(std::move(ranges)),
      observer_(observer),
      start_(std::chrono::steady_clock::now()) {
  for (const WatchRange& w : ranges_) {
    std::vector<std::uint8_t> bytes(w.access == kWatchExec ? 0 : w.len);
    if (!bytes.empty() && !inferior_.read_memory(w.addr, bytes)) bytes.clear();
    shadow_.push_back(std::move(bytes));
  }
}

Result<bool> HardWatchEngine::handle(const Event& ev) {
  if (!perf_trap(ev)) return false;
  auto regs = inferior_.get_regs(ev.tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t time = since(start_);
  // The instruction bytes before the stop, for accessor_before (fewer near address 0).
  std::array<std::uint8_t, kMaxInsn> window{};
  std::span<const std::uint8_t> code;
  if (regs->rip >= window.size() && inferior_.read_memory(regs->rip - window.size(), window)) {
    code = window;
  }
  std::vector<bool> seen(ranges_.size(), false);
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
      continue;
    }
    h.ip = regs->rip;
    std::vector<std::uint8_t> now(w.len);
    if (!inferior_.read_memory(w.addr, now)) now.clear();
    const bool write_only = piece.type == BpType::kW;
    h.access = write_only ? kWatchWrite : kWatchRead | kWatchWrite;
    if (auto acc = accessor_before(code, regs->rip, w.addr, w.len, *regs)) {
      h.ip = acc->ip;
      if (!write_only) h.access = acc->access;
    } else if (!write_only && !now.empty() && !shadow_[i].empty()) {
      h.access = now != shadow_[i] ? kWatchWrite : kWatchRead;
    }
    h.access &= w.access;
    h.old_value = std::move(shadow_[i]);
    h.new_value = now;
    shadow_[i] = std::move(now);
    if (h.access != 0) observer_.hit(h);
  }
  if (auto r = inferior_.resume(ev.tid, Resume::kCont); !r) return std::unexpected(r.error());
  return true;
}

Result<void> HardWatchEngine::finish() {
  perf_.reset();  // the breakpoints go; hits already queued for a thread are dropped below
  for (pid_t tid : inferior_.threads()) {
    for (const Event& ev : inferior_.discard_queued(tid)) {
      if (!perf_trap(ev)) inferior_.requeue(ev);
    }
  }
  // A hit's SIGTRAP raised as the thread was being stopped is pending but not reported yet:
  // after the detach it would kill the program. Each is made to surface and dropped.
  Result<void> first;
  for (pid_t tid : inferior_.threads()) {
    auto surfaced = inferior_.surface_pending(tid, 1ull << (SIGTRAP - 1));
    if (!surfaced) {
      if (surfaced.error().code() != ErrorCode::kSrch && first) {
        first = std::unexpected(surfaced.error());
      }
      continue;
    }
    for (const Event& ev : *surfaced) {
      if (!perf_trap(ev)) inferior_.requeue(ev);
    }
  }
  return first;
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
    if (out.end.interrupted) (void)send_signal(pid, SIGKILL);
    (void)wait_end(pid, false, out.end);
  }
  return out;
}

}  // namespace hwarb::linux

#include "hwarb/linux/watchdog.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <thread>

#include "hwarb/base/format.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/owner_lock.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/signal_action.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {

namespace {

// One copy of a plan in the shared memory (fixed size: the watchdog reads it without allocating
// from hwarb's heap state).
struct Slot {
  std::uint32_t processes = 0, pages = 0, bytes = 0, signals = 0;
  std::array<pid_t, Watchdog::kMaxProcesses> pid{};
  std::array<RestorePage, Watchdog::kMaxPages> page{};
  std::array<RestoreByte, Watchdog::kMaxBytes> byte{};
  std::array<RestoreSignals, Watchdog::kMaxProcesses> signal{};
};

}  // namespace

// Shared between hwarb and its watchdog (MAP_SHARED). Locking rules:
//  1. Only hwarb writes, and only the slot that `current` does not name.
//  2. `current` and `published` are stored with release after a slot is complete, and loaded
//     with acquire by the watchdog, which reads only once it holds `owner` (no writer left:
//     hwarb died, or released it).
struct Watchdog::Shared {
  alignas(64) unsigned char owner_storage[sizeof(OwnerLock)];  // OwnerLock::init's
  // hwarb's lock; the watchdog waits for it.
  OwnerLock& owner() { return *std::launder(reinterpret_cast<OwnerLock*>(owner_storage)); }
  std::atomic<std::uint32_t> current{0};
  // 1 once a plan is published; 0 before, and again once released (the watchdog then exits
  // touching nothing).
  std::atomic<std::uint32_t> published{0};
  std::array<Slot, 2> slot;
  // The thread of an injection in progress (Watchdog::injecting): 0, or 1 with `tid` and its
  // registers to put back. Written by hwarb only, in order: fields, then `injecting` (release);
  // cleared first.
  std::atomic<std::uint32_t> injecting{0};
  pid_t injecting_tid = 0;
  x86::Regs injecting_regs{};
  std::optional<RestoreThread> injecting_thread() const {
    if (injecting.load(std::memory_order_acquire) == 0) return std::nullopt;
    return RestoreThread{injecting_tid, injecting_regs};
  }
};

namespace {

RestorePlan plan_of(const Slot& s) {
  RestorePlan plan;
  plan.processes.assign(s.pid.begin(), s.pid.begin() + s.processes);
  plan.pages.assign(s.page.begin(), s.page.begin() + s.pages);
  plan.bytes.assign(s.byte.begin(), s.byte.begin() + s.bytes);
  plan.signals.assign(s.signal.begin(), s.signal.begin() + s.signals);
  return plan;
}

// Waits (bounded) until `pid` has no tracer: hwarb's exit detaches it after closing its files.
bool untraced(pid_t pid) {
  using namespace std::chrono;
  const auto until = steady_clock::now() + seconds(10);
  while (steady_clock::now() < until) {
    auto tracer = tracer_of(pid);
    if (!tracer) return false;  // gone
    if (*tracer == 0) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return false;
}

// The watchdog process: waits until hwarb releases its lock or dies holding it.
[[noreturn]] void watch_over(Watchdog::Shared& shared) {
  // It must win a race with the tracees' detach: real-time where allowed (root), else as is.
  ignore_error(make_realtime(), "EPERM without root: it runs as is");
  auto got = shared.owner().wait();
  if (!got || *got == OwnerLock::Outcome::kReleased ||
      shared.published.load(std::memory_order_acquire) == 0) {
    exit_now(0);
  }
  const Slot& slot = shared.slot[shared.current.load(std::memory_order_acquire)];
  // First of all: stop them, before any runs on into a watched page.
  for (std::uint32_t i = 0; i < slot.processes; ++i)
    ignore_error(send_signal(slot.pid[i], SIGSTOP), "a process that is gone needs no stop");
  const RestorePlan plan = plan_of(slot);
  RestorePlan free_ones = plan;
  free_ones.processes.clear();
  for (pid_t p : plan.processes) {
    if (untraced(p)) free_ones.processes.push_back(p);
  }
  auto restored = restore_processes(free_ones, true, shared.injecting_thread());
  std::string line = "hwarb: watchdog: hwarb ended without undoing its changes; ";
  if (restored) {
    line += "restored " + std::to_string(plan.pages.size()) + " page protection(s) and " +
            std::to_string(plan.bytes.size()) + " byte(s) in " + std::to_string(*restored) +
            " of " + std::to_string(plan.processes.size()) + " process(es), which run on\n";
  } else {
    line += "restoring failed: " + restored.error().to_string() + "\n";
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  exit_now(restored ? 0 : 1);
}

// The signals the watch's own stops left pending when hwarb died (a stop not collected yet keeps
// its signal, which the kernel then delivers: with the parachute, again and again for a fault
// on a page still protected) are made to show and dropped; the others are requeued, and detach
// delivers them.
void drop_stale_signals(Inferior& inferior, const RestorePlan& plan) {
  constexpr int kSegvAccErr = 2;
  constexpr int kSiKernel = 0x80;
  const auto on_plan_page = [&](std::uint64_t addr) {
    return std::any_of(plan.pages.begin(), plan.pages.end(), [&](const RestorePage& p) {
      return addr >= p.addr && addr - p.addr < page_size();
    });
  };
  const auto stale = [&](const Event& ev) {
    if (ev.kind != EventKind::kSignal) return false;
    const bool fault =
        ev.signal == SIGSEGV && ev.code == kSegvAccErr && on_plan_page(ev.fault_addr);
    const bool trap = ev.signal == SIGTRAP && (ev.code > 0 || ev.code == kSiKernel);
    return fault || trap;
  };
  for (pid_t tid : inferior.threads()) {
    // Stops already read (while attaching, say) and queued: detach would deliver their signals.
    std::vector<Event> keep;
    for (const Event& ev : inferior.discard_queued(tid)) {
      if (!stale(ev)) keep.push_back(ev);
    }
    for (auto it = keep.rbegin(); it != keep.rend(); ++it) inferior.requeue(*it);
    auto surfaced = inferior.surface_pending(tid, signal_bit(SIGSEGV) | signal_bit(SIGTRAP));
    if (!surfaced) continue;  // the thread is gone
    for (auto it = surfaced->rbegin(); it != surfaced->rend(); ++it) {
      if (!stale(*it)) inferior.requeue(*it);
    }
  }
}

}  // namespace

Result<std::size_t> restore_processes(const RestorePlan& plan, bool stopped_by_us,
                                      const std::optional<RestoreThread>& injecting) {
  std::size_t done = 0;
  Result<std::size_t> first = done;
  for (pid_t pid : plan.processes) {
    // TracerPid reads 0 a moment before the kernel has finished the detach (PTRACE_SEIZE is
    // EPERM meanwhile): retried for up to a second.
    auto inferior = Inferior::attach(pid);
    for (int i = 0; i < 1000 && !inferior && inferior.error().code() == ErrorCode::kPerm; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      inferior = Inferior::attach(pid);
    }
    if (!inferior) {
      if (inferior.error().code() != ErrorCode::kSrch && first) {
        first = std::unexpected(inferior.error());
      }
      continue;
    }
    const std::vector<pid_t> threads = inferior->threads();
    Result<void> ok;
    if (injecting && std::find(threads.begin(), threads.end(), injecting->tid) != threads.end()) {
      // First, before anything is injected here: that thread's own registers back.
      ok = inferior->set_regs(injecting->tid, injecting->regs);
    }
    for (const RestorePage& p : plan.pages) {
      if (threads.empty() || !ok) break;
      auto r = inferior->inject_syscall(
          threads.front(), SYS_mprotect,
          {p.addr, page_size(), static_cast<std::uint64_t>(p.protection), 0, 0, 0});
      if (!r) ok = std::unexpected(r.error());
    }
    for (const RestoreByte& b : plan.bytes) {
      if (!ok) break;
      ok = inferior->write_memory(b.addr, std::span<const std::uint8_t>(&b.original, 1));
    }
    for (const RestoreSignals& r : plan.signals) {
      if (r.process != pid) continue;
      for (int sig : {SIGSEGV, SIGTRAP}) {
        if (!ok || threads.empty() || (r.signals & signal_bit(sig)) == 0) continue;
        const KernelSigaction& program = sig == SIGSEGV ? r.segv : r.trap;
        if (auto set = inject_sigaction(*inferior, threads.front(), sig, &program); !set) {
          ok = std::unexpected(set.error());
        }
      }
    }
    // SIGCONT first: its threads stay in their ptrace stops until resumed, but a thread resumed
    // while the group stop is in effect stops for it again at once, without a report, and would
    // never show its pending signal to drop_stale_signals.
    if (stopped_by_us) {
      ignore_error(send_signal(pid, SIGCONT), "a process that is gone needs no SIGCONT");
    }
    if (ok) drop_stale_signals(*inferior, plan);
    auto detached = inferior->detach();
    if (!ok && first)
      first = std::unexpected(ok.error().with_context("process " + std::to_string(pid)));
    if (!detached && first) first = std::unexpected(detached.error());
    if (ok) ++done;
  }
  if (!first) return first;
  return done;
}

Result<Watchdog> Watchdog::start() {
  auto mem = map_shared_anonymous(sizeof(Shared));
  if (!mem) return std::unexpected(mem.error());
  auto* shared = new (*mem) Shared();
  if (auto owner = OwnerLock::init(shared->owner_storage); !owner) {
    unmap(*mem, sizeof(Shared));
    return std::unexpected(owner.error());
  }
  auto side = fork_detached({});
  if (!side) {
    shared->owner().unlock();
    unmap(*mem, sizeof(Shared));
    return std::unexpected(side.error());
  }
  if (*side == ForkSide::kDetached) watch_over(*shared);
  return Watchdog(shared);
}

Watchdog::Watchdog(Watchdog&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}

Watchdog& Watchdog::operator=(Watchdog&& other) noexcept {
  if (this != &other) {
    release();
    shared_ = std::exchange(other.shared_, nullptr);
  }
  return *this;
}

Watchdog::~Watchdog() {
  release();
}

Result<void> Watchdog::publish(const RestorePlan& plan) {
  if (!shared_) return make_error(ErrorCode::kInval, "watchdog: released");
  if (plan.processes.size() > kMaxProcesses || plan.signals.size() > kMaxProcesses ||
      plan.pages.size() > kMaxPages || plan.bytes.size() > kMaxBytes) {
    return make_error(ErrorCode::kNoSpc,
                      "plan: " + std::to_string(plan.processes.size()) + " processes, " +
                          std::to_string(plan.pages.size()) + " pages, " +
                          std::to_string(plan.bytes.size()) +
                          " bytes; the watchdog holds at most " + std::to_string(kMaxProcesses) +
                          ", " + std::to_string(kMaxPages) + " and " + std::to_string(kMaxBytes));
  }
  const std::uint32_t next = 1 - shared_->current.load(std::memory_order_relaxed);
  Slot& s = shared_->slot[next];
  s.processes = static_cast<std::uint32_t>(plan.processes.size());
  s.pages = static_cast<std::uint32_t>(plan.pages.size());
  s.bytes = static_cast<std::uint32_t>(plan.bytes.size());
  s.signals = static_cast<std::uint32_t>(plan.signals.size());
  std::copy(plan.processes.begin(), plan.processes.end(), s.pid.begin());
  std::copy(plan.pages.begin(), plan.pages.end(), s.page.begin());
  std::copy(plan.bytes.begin(), plan.bytes.end(), s.byte.begin());
  std::copy(plan.signals.begin(), plan.signals.end(), s.signal.begin());
  shared_->current.store(next, std::memory_order_release);
  shared_->published.store(1, std::memory_order_release);
  return {};
}

void Watchdog::injecting(pid_t tid, const x86::Regs* restore) {
  if (!shared_) return;
  shared_->injecting.store(0, std::memory_order_release);
  if (restore == nullptr) return;
  shared_->injecting_tid = tid;
  shared_->injecting_regs = *restore;
  shared_->injecting.store(1, std::memory_order_release);
}

std::optional<RestoreThread> Watchdog::injecting_thread() const {
  if (!shared_) return std::nullopt;
  return shared_->injecting_thread();
}

RestorePlan Watchdog::published_plan() const {
  if (!shared_ || shared_->published.load(std::memory_order_acquire) == 0) return {};
  return plan_of(shared_->slot[shared_->current.load(std::memory_order_acquire)]);
}

void Watchdog::withdraw() {
  if (shared_) shared_->published.store(0, std::memory_order_release);
}

void Watchdog::release() {
  if (!shared_) return;
  shared_->published.store(0, std::memory_order_release);
  shared_->owner().unlock();  // the watchdog wakes and exits
  unmap(shared_, sizeof(Shared));
  shared_ = nullptr;
}

}  // namespace hwarb::native

#include "hwarb/linux/watch_session.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <tuple>
#include <utility>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/format.h"
#include "hwarb/linux/hard_watch.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/trap_parachute.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::native {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMaxWatchLen = std::uint64_t{1} << 30;
constexpr int kSiKernel = 0x80;  // SI_KERNEL: the SIGTRAP of an int3
// A hardware watch that may move to software (yield_registers): one not insisting on hardware.
bool movable(const WatchInfo& w) {
  return w.placement == Placement::kHardware && w.spec.mode != WatchMode::kHardware;
}
// Arbiter request ids of registers given up to the program: far above any WatchId.
constexpr std::size_t kProgramRequestIds = std::size_t{1} << 48;

// Whether two events are the same stop of the same thread.
bool same_stop(const Event& a, const Event& b) {
  return a.tid == b.tid && a.kind == b.kind && a.signal == b.signal && a.code == b.code &&
         a.fault_addr == b.fault_addr;
}

bool is_exec(const WatchSpec& s) {
  return s.access == kWatchExec;
}

// Whether two watches touch a common page (data watches), or are the same instruction (execute
// watches: one int3 and one execute breakpoint cannot share an address).
bool share_page(const WatchSpec& a, const WatchSpec& b) {
  if (is_exec(a) != is_exec(b)) return false;
  if (is_exec(a)) return a.addr == b.addr;
  const std::uint64_t a_first = a.addr & ~(kPage - 1), a_last = (a.addr + a.len - 1) & ~(kPage - 1);
  const std::uint64_t b_first = b.addr & ~(kPage - 1), b_last = (b.addr + b.len - 1) & ~(kPage - 1);
  return a_first <= b_last && b_first <= a_last;
}

std::string watch_name(WatchId id) {
  return "watch #" + std::to_string(static_cast<std::size_t>(id));
}

WatchRange range_of(const WatchInfo& w) {
  return WatchRange{.addr = w.spec.addr,
                    .len = w.spec.len,
                    .access = w.spec.access,
                    .id = static_cast<std::size_t>(w.id),
                    .thread = w.spec.thread};
}

Result<void> check_spec(const WatchSpec& s) {
  const unsigned rw = kWatchRead | kWatchWrite;
  if (s.access == 0 || (s.access & ~(rw | kWatchExec)) != 0 ||
      ((s.access & kWatchExec) != 0 && s.access != kWatchExec)) {
    return make_error(ErrorCode::kInval,
                      "access: " + std::to_string(s.access) + " is not r, w, rw or x alone");
  }
  if (s.len == 0) return make_error(ErrorCode::kInval, "len: 0 (a watch covers at least a byte)");
  if (s.len > kMaxWatchLen) {
    return make_error(ErrorCode::kInval,
                      "len: " + std::to_string(s.len) + " is more than a watch covers (1 GiB)");
  }
  if (is_exec(s) && s.len != 1) {
    return make_error(ErrorCode::kInval, "len: " + std::to_string(s.len) +
                                             " for an execute watch (it is one instruction: 1)");
  }
  if (s.addr > ~std::uint64_t{0} - (s.len - 1)) {
    return make_error(ErrorCode::kInval, "addr: " + hex(s.addr) + " + len " +
                                             std::to_string(s.len) +
                                             " wraps past the end of the address space");
  }
  return {};
}

// Collects the hardware path's hits (HardWatchEngine reports to an observer), or hands them on
// at once to the session's sink (report_to).
class Collector final : public WatchObserver {
 public:
  void hit(const WatchHit& h) override {
    ++seen;
    if (sink != nullptr) {
      sink->hit(h);
    } else {
      hits.push_back(h);
    }
  }
  std::vector<WatchHit> hits;
  std::size_t seen = 0;  // hits of the current event, sunk or kept
  WatchObserver* sink = nullptr;
};

}  // namespace

const char* placement_name(Placement placement) {
  return placement == Placement::kHardware ? "hardware" : "software";
}

WatchSessionOptions session_options(const ProbeReport& report) {
  WatchSessionOptions o;
  o.slots = report.breakpoint_slots > 0 ? report.breakpoint_slots : x86::kSlots;
  o.hardware = report.hits_delivered && report.breakpoint_slots > 0;
  if (!report.breakpoint_pmu) {
    o.no_hardware = "this machine has no breakpoint PMU";
  } else if (report.breakpoint_slots == 0 && report.slots_held_elsewhere) {
    o.no_hardware = slots_held_text(report);
  } else if (!report.hits_delivered && report.canary_writes == 0) {
    // Whether hits are delivered is unknown: the canary did not run (its breakpoint refused as
    // another user took the slots meanwhile, say).
    std::string why;
    for (const std::string& note : report.notes) {
      if (note.starts_with("the canary")) why = " (" + note + ")";
    }
    o.no_hardware = "no canary could show whether breakpoint hits are delivered" + why;
  } else if (!report.hits_delivered) {
    o.no_hardware = std::string("breakpoints open on this machine but their hits are ") +
                    (report.canary_hits == 0 ? "never delivered (" : "not all delivered (") +
                    std::to_string(report.canary_hits) + " of " +
                    std::to_string(report.canary_writes) + " canary writes)";
  } else if (report.breakpoint_slots == 0) {
    o.no_hardware = "the probe could open no breakpoint on a thread (" + report.slots_error + ")";
  }
  if (report.slots_held_elsewhere) {
    o.cpu_accesses = true;
    o.cpu_accesses_why = slots_held_text(report);
  }
  return o;
}

std::string placement_policy(const WatchSessionOptions& options) {
  return options.hardware ? "debug registers while they last, then software"
                          : "software (" + options.no_hardware + ")";
}

const char* placement_mode(const std::vector<WatchInfo>& watches) {
  bool hard = false, soft = false;
  for (const WatchInfo& w : watches) (w.placement == Placement::kHardware ? hard : soft) = true;
  return hard && soft ? "mixed" : hard ? "hardware" : "software";
}

std::string software_reasons(const std::vector<WatchInfo>& watches,
                             const std::function<std::string(WatchId)>& name) {
  const auto label = [&](WatchId id) { return name ? name(id) : watch_name(id); };
  std::vector<const WatchInfo*> soft;
  for (const WatchInfo& w : watches) {
    if (w.placement == Placement::kSoftware) soft.push_back(&w);
  }
  if (soft.empty()) return "";
  const bool one = std::all_of(soft.begin(), soft.end(),
                               [&](const WatchInfo* w) { return w->why == soft.front()->why; });
  if (one && soft.front() == &watches.front()) return soft.front()->why;
  std::string out;
  for (const WatchInfo* w : soft) {
    // The other watches a reason names ("a page shared with watch #2"), by their names too.
    std::string why = w->why;
    for (const WatchInfo& other : watches) {
      const std::string own = watch_name(other.id);
      const std::string named = label(other.id);
      for (std::size_t at = why.find(own); at != std::string::npos; at = why.find(own, at)) {
        const std::size_t end = at + own.size();
        if (end < why.size() && std::isdigit(static_cast<unsigned char>(why[end])) != 0) {
          at = end;  // "watch #12" is not "watch #1"
          continue;
        }
        why.replace(at, own.size(), named);
        at += named.size();
      }
    }
    out += (out.empty() ? "" : "; ") + label(w->id) + ": " + why;
  }
  return out;
}

struct Watch {
  WatchInfo info;
  arbiter::Reservation reservation;  // held while the watch is hardware (rule 2)
};

// The session's state, on the heap so that the engines' references to it (the collector) stay
// valid when the session moves.
struct WatchSession::State {
  Inferior* inferior = nullptr;
  WatchSessionOptions options;
  std::unique_ptr<arbiter::Arbiter> arbiter;  // null: no pool (rule 2 then refuses)
  std::string arbiter_error;
  std::vector<Watch> watches;  // id order
  std::size_t next_id = 1;
  std::optional<SoftWatch> soft;
  Collector collector;
  std::unique_ptr<HardWatchEngine> hard;
  std::size_t perf_events = 0;
  int registers = 0;
  std::uint64_t rebuilds = 0;
  pid_t last_tid = 0;  // the thread of the last event: where the software path injects calls
  std::set<pid_t> caller_steps;  // the threads the caller single-steps (set_stepping)
  std::optional<std::set<long>> caller_syscalls;  // set_caller_syscalls
  bool soft_steps = false;                        // the software path single-steps (rule 4)
  // A stop of one of the paths that a rebuild (or uninstall) found queued for its thread (a hit
  // or a fault that stop_all queued) and took out of the Inferior's queue, where the paths would
  // have dropped it (their thread stopped for good, with no event to tell): a rebuild puts it
  // back in the queue, and handle() finishes it (the hits of watches still there, the thread
  // resumed); uninstall resumes its thread. A hardware hit's values are read when it is taken.
  struct Held {
    Event event;
    std::vector<WatchHit> hits;
  };
  std::vector<Held> held;
  // Hardware hits whose SIGTRAP was pending behind an interrupt stop (the thread is the
  // caller's, stopped by stop_all): reported by the next handle().
  std::vector<WatchHit> pending_hits;
  // The watchdog of options.guard (started at construction), and the one published to: dog's
  // while publishing goes well, null otherwise.
  std::optional<Watchdog> dog;
  Watchdog* watchdog = nullptr;
  std::optional<Error> guard_error;
  // Registers given up to the program (yield_registers), held for it in the arbiter.
  std::vector<arbiter::Reservation> yielded;
  int yielded_registers = 0;
  // What the published plan was made from: (rebuilds, the software plan's generation, the
  // Inferior's process changes for a hardware-only plan, which names the processes, the changes
  // of the SIGTRAP parachute).
  std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t> published{0, 0, 0, 0};
  // The hardware path's SIGTRAP parachute (guarded, no software path: the software path's own
  // parachute covers SIGTRAP too), and how many times it changed.
  TrapParachute trap_parachute;
  std::uint64_t trap_changes = 0;
  std::optional<Error> watchdog_error;
  RestorePlan caller_plan;      // set_caller_plan()
  bool caller_changed = false;  // caller_plan not published yet

  // Every thread stopped, or asleep in vfork for a child that is stopped (it runs nothing until
  // the child runs, and the child, sharing its memory, takes the software path's calls).
  Result<void> check_stopped() const {
    for (pid_t tid : inferior->threads()) {
      const pid_t vfork_child = inferior->vfork_child_of(tid);
      if (vfork_child != 0 && inferior->is_stopped(vfork_child)) continue;
      if (!inferior->is_stopped(tid)) {
        return make_error(ErrorCode::kBusy, "threads: thread " + std::to_string(tid) +
                                                " is running (watches change only while every "
                                                "thread is stopped)");
      }
    }
    return {};
  }

  // A watch's thread: 0 (every thread) or a thread of the process.
  Result<void> check_thread(pid_t thread) const {
    if (thread == 0) return {};
    const auto threads = inferior->threads();
    const bool known = thread > 0 &&
                       std::find(threads.begin(), threads.end(), thread) != threads.end() &&
                       inferior->process_of(thread) == inferior->pid();
    if (known) return {};
    return make_error(ErrorCode::kSrch, "thread: " + std::to_string(thread) +
                                            " is not a thread of process " +
                                            std::to_string(inferior->pid()));
  }

  // Rules 1 and 2 for a new watch: its placement, and the reservation of a hardware one.
  Result<Watch> place(const WatchSpec& spec, WatchId id) {
    Watch w;
    w.info.id = id;
    w.info.spec = spec;
    w.info.placement = Placement::kSoftware;
    if (spec.mode == WatchMode::kSoftware) {
      w.info.why = "software asked for";
      return w;
    }
    const auto refuse = [&](ErrorCode code, const std::string& why) -> Result<Watch> {
      if (spec.mode == WatchMode::kHardware) {
        return make_error(code, "mode: hardware not possible for " + watch_name(id) + ": " + why);
      }
      w.info.why = why;
      return std::move(w);
    };
    if (!options.hardware) return refuse(ErrorCode::kNoDev, options.no_hardware);
    if (!arbiter) return refuse(ErrorCode::kNoSpc, arbiter_error);
    // Past 8 bytes a register, more than the registers there are: not split at all.
    if (!is_exec(spec) && spec.len > 8 * static_cast<std::uint64_t>(options.slots) + 8) {
      return refuse(ErrorCode::kNoSpc, "it needs more than the " + std::to_string(options.slots) +
                                           " debug registers there are");
    }
    auto pieces = plan_pieces({range_of(w.info)}, options.slots);
    if (!pieces) return refuse(ErrorCode::kNoSpc, pieces.error().message());
    // A thread's own watch is a request of that thread (the arbiter's task); the arbiter counts
    // each task alone, so the registers a thread also holds for every thread's watches are
    // counted here (registers_of) before it is asked.
    const arbiter::Request request{
        .kind = arbiter::ResourceKind::kBreakpoint,
        .type = is_exec(spec) ? arbiter::SlotType::kInst : arbiter::SlotType::kData,
        .task = TaskId(spec.thread != 0 ? spec.thread : inferior->pid()),
        .cpu = std::nullopt,
        .weight = static_cast<int>(pieces->size()),
        .pinned = true,
        .id = RequestId(static_cast<std::size_t>(id)),
    };
    // Held by the session's watches: for a thread's own watch, in that thread; else in the
    // fullest thread.
    const int held =
        spec.thread != 0 ? registers_of(spec.thread) - yielded_registers : used_registers();
    const std::string whose =
        spec.thread != 0 ? " of thread " + std::to_string(spec.thread) + "'s " : " of ";
    const auto full = [&] {
      return refuse(ErrorCode::kNoSpc, "it needs " + std::to_string(pieces->size()) +
                                           " debug registers; " + std::to_string(held) + whose +
                                           std::to_string(options.slots) +
                                           " are held by other watches" + given_up());
    };
    if (held + yielded_registers + static_cast<int>(pieces->size()) > options.slots) {
      return full();
    }
    auto reservation = arbiter->reserve(request);
    if (!reservation) {
      if (reservation.error().code() != ErrorCode::kNoSpc) {
        return std::unexpected(reservation.error());
      }
      return full();
    }
    w.reservation = std::move(*reservation);
    w.info.placement = Placement::kHardware;
    w.info.registers = static_cast<int>(pieces->size());
    w.info.why = std::to_string(pieces->size()) + " debug registers admitted (" +
                 std::to_string(held + w.info.registers) + whose + std::to_string(options.slots) +
                 " held)";
    return w;
  }

  // ", N given up to the program" after a yield_registers; empty before.
  std::string given_up() const {
    if (yielded_registers == 0) return {};
    return ", " + std::to_string(yielded_registers) + " given up to the program";
  }

  // The placements a rebuild of `plan` (the watches in order) settled: a watch that went
  // software gives its reservation back.
  void settle(const std::vector<WatchInfo>& plan) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      if (plan[i].placement == Placement::kSoftware) watches[i].reservation.release();
      watches[i].info = plan[i];
    }
  }

  // The registers thread `thread` holds: every thread's hardware watches, its own, and those
  // given up to the program (thread 0: every thread's watches only).
  int registers_of(pid_t thread) const {
    int n = yielded_registers;
    for (const Watch& w : watches) {
      const pid_t t = w.info.spec.thread;
      if (w.reservation && (t == 0 || t == thread)) n += w.reservation.request().weight;
    }
    return n;
  }

  // The registers the fullest thread holds (yielded ones aside).
  int used_registers() const {
    int most = registers_of(0);
    for (const Watch& w : watches) {
      if (w.info.spec.thread != 0) most = std::max(most, registers_of(w.info.spec.thread));
    }
    return most - yielded_registers;
  }

  // The watch a hit names; null when it was removed.
  const Watch* watch_of(const WatchHit& hit) const {
    for (const Watch& w : watches) {
      if (static_cast<std::size_t>(w.info.id) == hit.id) return &w;
    }
    return nullptr;
  }

  // Whether `hit` is an access its watch sees: a thread's own watch sees its thread's only.
  bool sees(const WatchHit& hit) const {
    const Watch* w = watch_of(hit);
    return w == nullptr || w->info.spec.thread == 0 || w->info.spec.thread == hit.tid;
  }

  // Drops the hits of threads' own watches by other threads (the software path's pages are the
  // process's).
  void drop_foreign(std::vector<WatchHit>& hits) const {
    std::erase_if(hits, [&](const WatchHit& h) { return !sees(h); });
  }

  // The hits to report of those kept across changes (a held stop's, a pending one's): a hit of a
  // watch removed since goes to a watch inserted since on the bytes it touched with its access
  // (a debugger that took its watches out and put them back, as gdb does at each resume, gets
  // the hit of the thread it has not heard of yet), else it is dropped; and a thread's own
  // watch keeps its thread's hits only.
  void settle_hits(std::vector<WatchHit>& hits) const {
    std::erase_if(hits, [&](WatchHit& h) {
      if (watch_of(h) != nullptr) return !sees(h);
      for (const Watch& w : watches) {
        const WatchSpec& spec = w.info.spec;
        if (h.addr < spec.addr || h.addr - spec.addr >= spec.len || (spec.access & h.access) == 0 ||
            (spec.thread != 0 && spec.thread != h.tid)) {
          continue;
        }
        h.id = static_cast<std::size_t>(w.info.id);
        return false;
      }
      return true;
    });
  }

  // Whether `ev` is a stop of the software path that disarm() would drop: a fault on a page it
  // protects, an int3 it planted (`planted`), a single-step trap while it steps.
  bool soft_stop(const Event& ev, const std::vector<RestoreByte>& planted) {
    if (!soft || ev.kind != EventKind::kSignal) return false;
    if (soft->is_fault(ev)) return true;
    if (ev.signal != SIGTRAP) return false;
    if (ev.code != kSiKernel) return soft_steps;
    auto regs = inferior->get_regs(ev.tid);
    return regs && std::any_of(planted.begin(), planted.end(),
                               [&](const RestoreByte& b) { return b.addr == regs->rip - 1; });
  }

  // Before a teardown: the events held already, and the software path's own stops, out of the
  // Inferior's queue (into `held`); the other events stay queued in their order. An int3 trap
  // is moved back onto its instruction, as disarm() does: resumed, the thread runs the original
  // instruction, or traps again at the int3 a rebuild planted there anew.
  void hold_path_events() {
    const std::vector<RestoreByte> planted =
        soft ? soft->restore_plan().bytes : std::vector<RestoreByte>{};
    if (soft && soft_steps) {
      // A step's trap raised as stop_all's interrupt stopped the thread is pending, not reported:
      // the path being replaced stepped that instruction, the next one would take the trap for
      // a step of its own. It is made to surface and held with the others.
      for (pid_t tid : inferior->threads()) {
        auto surfaced = inferior->surface_pending(tid, 1ull << (SIGTRAP - 1));
        if (!surfaced) continue;  // a thread that is gone has no trap
        for (const Event& ev : *surfaced) inferior->requeue(ev);
      }
    }
    for (pid_t tid : inferior->threads()) {
      if (!inferior->has_queued(tid)) continue;
      std::vector<Event> events = inferior->discard_queued(tid);
      std::vector<Event> kept;
      for (const Event& ev : events) {
        const bool held_already = std::any_of(
            held.begin(), held.end(), [&](const Held& h) { return same_stop(h.event, ev); });
        if (held_already) continue;
        if (!soft_stop(ev, planted)) {
          kept.push_back(ev);
          continue;
        }
        std::vector<WatchHit> hits;
        if (ev.signal == SIGTRAP && ev.code == kSiKernel) {
          if (auto regs = inferior->get_regs(tid)) {
            regs->rip -= 1;
            ignore_error(inferior->set_regs(tid, *regs),
                         "a thread that is gone has no trap to rewind");
          }
        } else if (ev.signal == SIGTRAP && soft_steps) {
          // A single step's trap: the instruction ran, its hits are the path's being replaced.
          ignore_error(soft->finish_step(tid, hits), "a thread that is gone made no access");
        }
        held.push_back({ev, std::move(hits)});
      }
      for (auto it = kept.rbegin(); it != kept.rend(); ++it) inferior->requeue(*it);
    }
  }

  // After a rebuild: the held events back in the queue, first, in their order.
  void requeue_held() {
    for (auto it = held.rbegin(); it != held.rend(); ++it) inferior->requeue(it->event);
  }

  // After uninstall: the held stops are dropped (the watches are gone: nothing is left to
  // finish, and passed on, e.g. by a detach, their signals would kill the program). Their
  // threads stay stopped, as uninstall() leaves every thread, or with `resume` run on.
  Result<void> release_held(bool resume) {
    Result<void> first;
    for (const Held& h : held) {
      if (!resume || !inferior->is_stopped(h.event.tid)) continue;
      if (auto r = inferior->resume(h.event.tid, Resume::kCont);
          !r && r.error().code() != ErrorCode::kSrch && first) {
        first = r;
      }
    }
    held.clear();
    pending_hits.clear();
    return first;
  }

  // Takes both paths off the tracee (every thread stopped): breakpoints closed, protections and
  // int3 bytes restored. Their stops still queued are held (hold_path_events() first; the
  // hardware hits are taken with their values). The first error is returned; the rest is still
  // done.
  // With a watchdog and hardware watches alone: the SIGTRAP parachute in every process with a
  // stopped thread (trap_parachute.h). Without it the watch is as good, only less safe from a
  // kill -9.
  void raise_trap_parachute() {
    if (watchdog == nullptr || !hard || soft) return;
    for (pid_t tid : inferior->threads()) {
      const pid_t process = inferior->process_of(tid);
      if (!inferior->is_stopped(tid) || inferior->group_of(tid) != process ||
          trap_parachute.up(process)) {
        continue;
      }
      auto raised = trap_parachute.raise(*inferior, tid);
      if (raised && *raised) ++trap_changes;
      ignore_error(raised, "the watch goes on without a parachute");
    }
  }

  Result<void> teardown() {
    Result<void> first;
    if (!trap_parachute.empty()) {
      ++trap_changes;
      ignore_error(trap_parachute.lower_all(*inferior),
                   "what cannot be set back is set back by the watchdog, or stays");
    }
    if (soft) soft->inject_in(last_tid);
    if (hard) {
      collector.hits.clear();
      auto taken = hard->finish_taking_hits();
      hard.reset();
      if (!taken) {
        first = std::unexpected(taken.error());
      } else {
        for (const HardWatchEngine::Taken& t : *taken) {
          std::vector<WatchHit> hits;
          for (auto it = collector.hits.begin(); it != collector.hits.end();) {
            if (it->tid == t.event.tid) {
              hits.push_back(std::move(*it));
              it = collector.hits.erase(it);
            } else {
              ++it;
            }
          }
          if (t.queued) {
            held.push_back({t.event, std::move(hits)});
          } else {
            for (WatchHit& h : hits) pending_hits.push_back(std::move(h));
          }
        }
      }
      collector.hits.clear();
    }
    if (soft) {
      // A breakpoint the program opened is still there: the next software path keeps letting the
      // CPU make the accesses.
      if (soft->cpu_accesses() && !options.cpu_accesses) {
        options.cpu_accesses = true;
        options.cpu_accesses_why = "the program opened a perf breakpoint";
      }
      auto r = soft->disarm();
      soft.reset();
      if (!r && first) first = r;
    }
    perf_events = 0;
    registers = 0;
    soft_steps = false;
    ++rebuilds;
    return first;
  }

  // Demotes every hardware watch of `plan` to software with `why` (rules 3-5): EBUSY/`code`
  // when one of them insists on hardware.
  static Result<bool> demote(std::vector<WatchInfo>& plan, std::size_t i, ErrorCode code,
                             const std::string& why) {
    WatchInfo& w = plan[i];
    if (w.placement != Placement::kHardware) return false;
    if (w.spec.mode == WatchMode::kHardware) {
      return make_error(code, "mode: hardware not possible for " + watch_name(w.id) + ": " + why);
    }
    w.placement = Placement::kSoftware;
    w.registers = 0;
    w.why = why;
    return true;
  }

  // Sets up both paths for `plan` (nothing is set up when called), applying rules 3-5, which
  // may move watches of `plan` to software. On error nothing is left set up.
  Result<void> build(std::vector<WatchInfo>& plan) {
    for (int round = 0; round < 3; ++round) {
      // Rule 3: a hardware watch on a page the software path protects.
      for (bool moved = true; moved;) {
        moved = false;
        for (std::size_t i = 0; i < plan.size(); ++i) {
          if (plan[i].placement != Placement::kHardware) continue;
          for (const WatchInfo& s : plan) {
            if (s.placement != Placement::kSoftware || !share_page(plan[i].spec, s.spec)) continue;
            auto d = demote(
                plan, i, ErrorCode::kBusy,
                std::string(is_exec(s.spec) ? "the same instruction as " : "a page shared with ") +
                    watch_name(s.id) + ", which is software");
            if (!d) return std::unexpected(d.error());
            moved = moved || *d;
            break;
          }
        }
      }
      std::vector<WatchRange> soft_ranges, hard_ranges;
      for (const WatchInfo& w : plan) {
        (w.placement == Placement::kHardware ? hard_ranges : soft_ranges).push_back(range_of(w));
      }
      if (!soft_ranges.empty()) {
        auto s = SoftWatch::arm(*inferior, soft_ranges,
                                {.inject_in = last_tid,
                                 .stop_at_hits = options.stop_at_hits,
                                 .cpu_accesses = options.cpu_accesses});
        if (!s) return std::unexpected(s.error());
        soft.emplace(std::move(*s));
        soft->set_caller_steps(caller_steps);
        soft->set_caller_syscalls(caller_syscalls);
        if (watchdog != nullptr) {
          // Guarded: the parachute for the stops of the watch (signal_action.h). Without it the
          // watch is as good, only less safe from a kill -9.
          ignore_error(soft->deploy_parachute(), "the watch goes on without a parachute");
        }
      }
      // Rule 4: the single-step method sees every access of every thread.
      bool steps = false;
      for (std::size_t i = 0; i < soft_ranges.size(); ++i) {
        steps = steps || soft->method(i) == WatchMethod::kSingleStep;
      }
      auto undo_soft = [&] {
        if (!soft) return;
        ignore_error(soft->disarm(), "undo after a failure: that failure is the one reported");
        soft.reset();
      };
      soft_steps = steps;
      if (steps && !hard_ranges.empty()) {
        undo_soft();
        for (std::size_t i = 0; i < plan.size(); ++i) {
          auto d = demote(plan, i, ErrorCode::kBusy,
                          "the software path single-steps every instruction (a watch on a "
                          "stack), which sees this range too");
          if (!d) return std::unexpected(d.error());
        }
        continue;
      }
      if (hard_ranges.empty()) return {};
      auto pieces = plan_pieces(hard_ranges, options.slots);
      Result<PerfWatch> perf = pieces ? PerfWatch::open(inferior->pid(), *pieces, {.sigtrap = true})
                                      : Result<PerfWatch>(std::unexpected(pieces.error()));
      if (!perf) {
        // Rule 5: the kernel (or the registers' count) refuses.
        undo_soft();
        const std::string why = "the kernel refused the breakpoints: " + perf.error().to_string();
        for (std::size_t i = 0; i < plan.size(); ++i) {
          auto d = demote(plan, i, perf.error().code(), why);
          if (!d) return std::unexpected(d.error());
        }
        continue;
      }
      perf_events = perf->events();
      registers = static_cast<int>(pieces->size());
      hard = std::make_unique<HardWatchEngine>(*inferior, std::move(*perf), hard_ranges, collector);
      hard->stop_at_hits(options.stop_at_hits);
      raise_trap_parachute();
      return {};
    }
    return make_error(ErrorCode::kAgain, "watches: no placement settled");
  }

  // Replaces the set up paths by `plan`'s (every thread stopped). All or nothing: on error the
  // previous set (`old`) is set up again.
  Result<void> rebuild(std::vector<WatchInfo>& plan) {
    hold_path_events();
    auto r = rebuild_held(plan);
    requeue_held();
    return r;
  }

  Result<void> rebuild_held(std::vector<WatchInfo>& plan) {
    std::vector<WatchInfo> old;
    for (const Watch& w : watches) old.push_back(w.info);
    if (auto r = teardown(); !r) return r;
    auto built = build(plan);
    if (built) {
      publish();
      return {};
    }
    ignore_error(teardown(), "the build error is the one reported; the old plan is rebuilt next");
    if (auto again = build(old); !again) {
      publish();
      return std::unexpected(
          built.error().with_context("and the previous watches could not be set up again (" +
                                     again.error().to_string() + ")"));
    }
    publish();
    return built;
  }

  // Starts the watchdog options.guard asks for (at construction): guard_error on failure.
  void start_guard() {
    const bool wanted =
        options.guard == Guard::kOn || (options.guard == Guard::kAuto && !inferior->spawned());
    if (!wanted || !inferior->alive()) return;
    auto started = Watchdog::start();
    if (!started) {
      guard_error = started.error();
      return;
    }
    dog.emplace(std::move(*started));
    watchdog = &*dog;
    // A thread caught in an injected call when hwarb dies gets its registers back.
    inferior->set_injection_observer([state = this](pid_t tid, const x86::Regs* restore) {
      if (state->watchdog != nullptr) state->watchdog->injecting(tid, restore);
    });
  }

  // The watchdog exits touching nothing: the process is gone, detached, or its changes undone.
  void release_guard() {
    if (!dog) return;
    if (inferior != nullptr) inferior->set_injection_observer(nullptr);
    watchdog = nullptr;
    dog.reset();
  }

  // What the destructor (and a move assignment over the session) does: uninstall() on a tracee
  // still there, its threads stopped for it when they run (and then resumed, with those held:
  // the threads are left as they were found); errors are ignored (there is no one to tell).
  // Then the watchdog is released: what could not be restored stays with the traced process.
  void undo() noexcept {
    watchdog = nullptr;
    if (inferior != nullptr) inferior->set_injection_observer(nullptr);
    const bool changed = hard || soft || !held.empty();
    if (changed && inferior != nullptr && inferior->pid() > 0 && !inferior->threads().empty()) {
      std::vector<pid_t> stopped;
      if (!check_stopped()) {
        auto s = inferior->stop_all();
        if (s) stopped = std::move(*s);
      }
      hold_path_events();
      ignore_error(teardown(), "undo() is noexcept and best effort: what cannot be restored stays");
      ignore_error(release_held(!stopped.empty()),
                   "undo() is best effort: a held thread that is gone needs nothing");
      for (pid_t tid : stopped) {
        if (inferior->is_stopped(tid))
          ignore_error(inferior->resume(tid, Resume::kCont),
                       "undo() is best effort: a thread that is gone needs no resume");
      }
    }
    hard.reset();
    soft.reset();
    held.clear();
    // Reservations go before their arbiter.
    watches.clear();
    release_guard();
  }

  // What the watchdog undoes if hwarb dies: the software path's changes; with hardware watches
  // only, nothing in memory, but the processes are named all the same, so that its SIGSTOP
  // reaches them before a hit of a perf event not closed yet (the kernel closes them late in
  // hwarb's exit) leaves them a SIGTRAP to die of when they are detached.
  // The caller's changes (set_caller_plan) come with them.
  RestorePlan plan() const {
    RestorePlan p;
    if (soft) {
      p = soft->restore_plan();
    } else if (hard) {
      for (pid_t tid : inferior->threads()) {
        const pid_t process = inferior->process_of(tid);
        if (std::find(p.processes.begin(), p.processes.end(), process) == p.processes.end()) {
          p.processes.push_back(process);
        }
      }
      p.signals = trap_parachute.plan();
    }
    for (pid_t process : caller_plan.processes) {
      if (std::find(p.processes.begin(), p.processes.end(), process) == p.processes.end()) {
        p.processes.push_back(process);
      }
    }
    p.pages.insert(p.pages.end(), caller_plan.pages.begin(), caller_plan.pages.end());
    p.bytes.insert(p.bytes.end(), caller_plan.bytes.begin(), caller_plan.bytes.end());
    p.signals.insert(p.signals.end(), caller_plan.signals.begin(), caller_plan.signals.end());
    return p;
  }

  // What plan() depends on now (compared with `published`).
  std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t> plan_key() const {
    return {rebuilds, soft ? soft->plan_generation() : 0, soft ? 0 : inferior->process_changes(),
            trap_changes};
  }

  // The restore plan to the watchdog, when it changed: after a rebuild, a change of the software
  // plan, or, with hardware watches only, a process followed or gone; or the caller's. A plan
  // with no process is withdrawn. Once the process is gone (or detached) the watchdog is
  // released.
  void publish() {
    if (dog && !inferior->alive()) release_guard();
    if (watchdog == nullptr) return;
    const auto now = plan_key();
    if (now == published && !caller_changed) return;
    RestorePlan p = plan();
    if (p.processes.empty()) {
      watchdog->withdraw();
    } else if (auto r = watchdog->publish(p); !r) {
      watchdog_error = r.error();
      watchdog = nullptr;
      return;
    }
    published = now;
    caller_changed = false;
  }
};

WatchSession::WatchSession(Inferior& inferior, WatchSessionOptions options)
    : state_(std::make_unique<State>()) {
  state_->inferior = &inferior;
  state_->options = std::move(options);
  state_->start_guard();
  auto profile =
      state_->options.slots == x86::kSlots
          ? Result<arbiter::ArchProfile>(arbiter::ArchProfile::x86_64())
          : arbiter::ArchProfile::custom(state_->options.slots, state_->options.slots, true);
  if (!profile) {
    state_->arbiter_error = profile.error().to_string();
    return;
  }
  auto arb = arbiter::Arbiter::create({.profile = *profile, .cpus = 1});
  if (!arb) {
    state_->arbiter_error = arb.error().to_string();
    return;
  }
  state_->arbiter = std::move(*arb);
}

WatchSession::WatchSession(WatchSession&&) noexcept = default;

WatchSession& WatchSession::operator=(WatchSession&& other) noexcept {
  if (this != &other) {
    if (state_) state_->undo();
    state_ = std::move(other.state_);
  }
  return *this;
}

WatchSession::~WatchSession() {
  if (state_) state_->undo();
}

Result<WatchInfo> WatchSession::insert(const WatchSpec& spec) {
  auto all = insert_all({spec});
  if (!all) return std::unexpected(all.error());
  return all->front();
}

Result<std::vector<WatchInfo>> WatchSession::insert_all(const std::vector<WatchSpec>& specs) {
  State& s = *state_;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (auto r = check_spec(specs[i]); !r) {
      return std::unexpected(r.error().with_context("specs[" + std::to_string(i) + "]"));
    }
  }
  if (auto r = s.check_stopped(); !r) return std::unexpected(r.error());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (auto r = s.check_thread(specs[i].thread); !r) {
      return std::unexpected(r.error().with_context("specs[" + std::to_string(i) + "]"));
    }
  }
  // Rules 1 and 2, in order: each new watch sees the registers of those before it (its
  // reservation is counted from the list).
  const std::size_t first_new = s.watches.size();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto w = s.place(specs[i], WatchId(s.next_id + i));
    if (!w) {
      s.watches.resize(first_new);  // the new reservations are released
      return std::unexpected(w.error().with_context("specs[" + std::to_string(i) + "]"));
    }
    s.watches.push_back(std::move(*w));
  }
  std::vector<WatchInfo> plan;
  for (const Watch& w : s.watches) plan.push_back(w.info);
  // rebuild() restores the set without the new watches on failure: they leave first.
  std::vector<Watch> added;
  for (std::size_t i = first_new; i < s.watches.size(); ++i)
    added.push_back(std::move(s.watches[i]));
  s.watches.resize(first_new);
  if (auto r = s.rebuild(plan); !r) return std::unexpected(r.error());  // `added` released
  for (Watch& w : added) s.watches.push_back(std::move(w));
  s.settle(plan);
  s.next_id += specs.size();
  std::vector<WatchInfo> out;
  for (std::size_t i = first_new; i < s.watches.size(); ++i) out.push_back(s.watches[i].info);
  return out;
}

Result<void> WatchSession::remove(WatchId id) {
  State& s = *state_;
  const auto it = std::find_if(s.watches.begin(), s.watches.end(),
                               [&](const Watch& w) { return w.info.id == id; });
  if (it == s.watches.end()) {
    return make_error(ErrorCode::kNoEnt, "id: no " + watch_name(id) + " in this session");
  }
  if (auto r = s.check_stopped(); !r) return r;
  std::vector<WatchInfo> plan;
  for (const Watch& w : s.watches) {
    if (w.info.id != id) plan.push_back(w.info);
  }
  Watch gone = std::move(*it);
  s.watches.erase(it);
  if (auto r = s.rebuild(plan); !r) {
    // Back in its place (id order).
    const auto at = std::find_if(s.watches.begin(), s.watches.end(),
                                 [&](const Watch& w) { return w.info.id > id; });
    s.watches.insert(at, std::move(gone));
    return r;
  }
  s.settle(plan);
  return {};
}

int WatchSession::yieldable_registers() const {
  int n = 0;
  for (const Watch& w : state_->watches) {
    if (movable(w.info)) n += w.info.registers;
  }
  return n;
}

int WatchSession::held_registers() const {
  int n = 0;
  for (const Watch& w : state_->watches) {
    if (w.info.placement == Placement::kHardware) n += w.info.registers;
  }
  return n;
}

int WatchSession::registers_given_up() const {
  return state_->yielded_registers;
}

Result<std::optional<WatchInfo>> WatchSession::yield_registers(const std::string& who) {
  State& s = *state_;
  if (auto r = s.check_stopped(); !r) return std::unexpected(r.error());
  std::optional<std::size_t> pick;
  for (std::size_t i = s.watches.size(); i-- > 0;) {
    if (movable(s.watches[i].info)) {
      pick = i;
      break;
    }
  }
  if (!pick) return std::nullopt;
  std::vector<WatchInfo> plan;
  for (const Watch& w : s.watches) plan.push_back(w.info);
  const int freed = plan[*pick].registers;
  plan[*pick].placement = Placement::kSoftware;
  plan[*pick].registers = 0;
  plan[*pick].why = "gave its " + std::to_string(freed) + " debug register" +
                    (freed == 1 ? "" : "s") + " up to " + who;
  if (auto r = s.rebuild(plan); !r) return std::unexpected(r.error());
  s.settle(plan);
  s.yielded_registers += freed;
  if (s.arbiter) {
    const arbiter::Request request{
        .kind = arbiter::ResourceKind::kBreakpoint,
        .type = arbiter::SlotType::kData,
        .task = TaskId(s.inferior->pid()),
        .cpu = std::nullopt,
        .weight = freed,
        .pinned = true,
        .id = RequestId(kProgramRequestIds + s.yielded.size()),
    };
    // Not held, the registers are only less well accounted: a later watch that takes them
    // meets the kernel's refusal (rule 5) instead of the arbiter's.
    if (auto held = s.arbiter->reserve(request)) s.yielded.push_back(std::move(*held));
  }
  return plan[*pick];
}

std::vector<WatchInfo> WatchSession::watches() const {
  std::vector<WatchInfo> out;
  for (const Watch& w : state_->watches) out.push_back(w.info);
  return out;
}

std::optional<WatchInfo> WatchSession::find(WatchId id) const {
  for (const Watch& w : state_->watches) {
    if (w.info.id == id) return w.info;
  }
  return std::nullopt;
}

Result<StopVerdict> WatchSession::handle(const Event& ev) {
  State& s = *state_;
  StopVerdict v;
  const auto held = std::find_if(s.held.begin(), s.held.end(),
                                 [&](const State::Held& h) { return same_stop(h.event, ev); });
  if (held != s.held.end()) {
    // A stop a rebuild held (see State::held): the hits of the watches still there; the thread
    // left stopped at them (stop_at_hits), or resumed (a fault or an int3 runs its instruction
    // again, under the watches as they are now).
    State::Held h = std::move(*held);
    s.held.erase(held);
    v.ours = true;
    v.handled = true;
    for (WatchHit& hit : s.pending_hits) v.hits.push_back(std::move(hit));
    s.pending_hits.clear();
    for (WatchHit& hit : h.hits) v.hits.push_back(std::move(hit));
    s.settle_hits(v.hits);
    const bool at_hit = std::any_of(v.hits.begin(), v.hits.end(),
                                    [&](const WatchHit& hit) { return hit.tid == ev.tid; });
    if (s.inferior->is_stopped(ev.tid)) {
      // The thread the caller single-steps (set_stepping) steps on: a held fault or int3 stopped
      // it before its instruction ran.
      const Resume how = s.caller_steps.contains(ev.tid) ? Resume::kStep : resume_mode();
      if (s.options.stop_at_hits && at_hit) {
        v.stopped = true;
      } else if (auto r = s.inferior->resume(ev.tid, how);
                 !r && r.error().code() != ErrorCode::kSrch) {
        return std::unexpected(r.error());
      }
    }
    if (WatchObserver* sink = s.collector.sink) {
      for (const WatchHit& hit : v.hits) sink->hit(hit);
      v.hits.clear();
    }
    return v;
  }
  if (ev.kind == EventKind::kSignal) s.last_tid = ev.tid;
  s.collector.hits.clear();
  s.collector.seen = 0;
  std::vector<WatchHit> soft_hits;
  const auto hard = [&]() -> Result<bool> { return s.hard ? s.hard->handle(ev) : false; };
  const auto soft = [&]() -> Result<bool> {
    if (!s.soft) return false;
    auto r = s.soft->handle(ev, soft_hits);
    s.drop_foreign(soft_hits);
    return r;
  };
  Result<bool> handled = false;
  switch (ev.kind) {
    case EventKind::kSignal:
      // A hardware hit's SIGTRAP (TRAP_PERF) first; the software path's faults and traps next.
      handled = hard();
      if (handled && *handled && s.options.stop_at_hits && s.collector.seen != 0) {
        v.stopped = true;
      } else if (handled && !*handled && s.options.stop_at_hits && s.soft && s.soft->is_fault(ev)) {
        auto done = s.soft->complete_fault(ev, soft_hits);
        if (!done) return std::unexpected(done.error());
        s.drop_foreign(soft_hits);
        handled = true;
        if (done->stopped && soft_hits.empty() && s.caller_steps.contains(ev.tid)) {
          // False sharing in the caller's single step: the step is over.
          v.stopped = true;
          v.signal = done->signal;
        } else if (done->stopped && soft_hits.empty()) {
          // False sharing: nothing to stop for.
          if (auto r = s.inferior->resume(ev.tid, resume_mode(), done->signal); !r) {
            return std::unexpected(r.error());
          }
        } else if (done->stopped) {
          v.stopped = true;
          v.signal = done->signal;
        }
      } else if (handled && !*handled) {
        handled = soft();
        // The single-step method's data hit, or the end of the caller's own step: the thread
        // stayed stopped after the instruction.
        if (handled && *handled && s.options.stop_at_hits &&
            (!soft_hits.empty() || s.caller_steps.contains(ev.tid)) &&
            s.inferior->is_stopped(ev.tid)) {
          v.stopped = true;
        }
      }
      v.ours = handled && *handled;
      if (handled && !*handled && ev.signal == SIGTRAP &&
          s.trap_parachute.up(s.inferior->process_of(ev.tid))) {
        // The program's own SIGTRAP: it meets the program's own action, as unwatched.
        ++s.trap_changes;
        if (auto r = s.trap_parachute.lower(*s.inferior, ev.tid); !r) {
          return std::unexpected(r.error());
        }
      }
      break;
    case EventKind::kSyscallEnter:
    case EventKind::kSyscallExit:
      handled = soft();
      v.ours = handled && *handled;
      // A call the caller catches: the software path left the thread stopped for it.
      v.caller = v.ours && s.caller_syscalls && s.inferior->is_stopped(ev.tid) &&
                 !s.inferior->has_queued(ev.tid);
      break;
    case EventKind::kFork:
      if (s.hard && s.soft && !ev.vfork) {
        // Both follow the child: breakpoints of its own first (it is stopped), then the software
        // path follows it and resumes it.
        if (auto r = s.hard->watch_fork(ev); !r) return std::unexpected(r.error());
        handled = soft();
        break;
      }
      handled = hard();
      if (handled && !*handled) handled = soft();
      // A followed child has its parent's actions, the parachute too.
      s.trap_parachute.fork(s.inferior->process_of(ev.tid), ev.child);
      break;
    default: {
      // New threads, execs, exits: both paths follow them; neither resumes what the other does
      // (the hardware path resumes none of these).
      auto a = hard();
      if (!a) return std::unexpected(a.error());
      auto b = soft();
      if (!b) return std::unexpected(b.error());
      handled = *a || *b;
      if (ev.kind == EventKind::kExec) {
        // The exec set every handler back to the default; a process watched again in its new
        // image gets the parachute again.
        s.trap_parachute.forget(s.inferior->process_of(ev.tid));
        ++s.trap_changes;
        if (s.inferior->is_stopped(ev.tid)) s.raise_trap_parachute();
      }
      break;
    }
  }
  if (!handled) return std::unexpected(handled.error());
  v.handled = *handled;
  v.hits = std::move(s.pending_hits);
  s.pending_hits.clear();
  for (WatchHit& h : s.collector.hits) v.hits.push_back(std::move(h));
  s.collector.hits.clear();
  for (WatchHit& h : soft_hits) v.hits.push_back(std::move(h));
  s.settle_hits(v.hits);
  if (s.soft) {
    for (SoftWatch::Note& n : s.soft->take_notes()) {
      v.notes.push_back({WatchId(n.id), std::move(n.text)});
    }
  }
  if (WatchObserver* sink = s.collector.sink) {
    for (const WatchHit& h : v.hits) sink->hit(h);
    for (const StopVerdict::Note& n : v.notes) sink->note(static_cast<std::size_t>(n.id), n.text);
    v.hits.clear();
    v.notes.clear();
  }
  s.publish();
  return v;
}

Resume WatchSession::resume_mode() const {
  return state_->soft ? state_->soft->resume_mode() : Resume::kCont;
}

Resume WatchSession::resume_mode(pid_t tid) const {
  return state_->soft ? state_->soft->resume_mode(tid) : Resume::kCont;
}

void WatchSession::drop_own_stops(pid_t process) {
  State& s = *state_;
  const auto of_process = [&](pid_t tid) { return s.inferior->process_of(tid) == process; };
  std::erase_if(s.pending_hits, [&](const WatchHit& h) { return of_process(h.tid); });
  std::vector<Event> own;
  for (auto it = s.held.begin(); it != s.held.end();) {
    if (of_process(it->event.tid)) {
      own.push_back(it->event);
      it = s.held.erase(it);
    } else {
      ++it;
    }
  }
  std::set<pid_t> tids;
  for (const Event& ev : own) tids.insert(ev.tid);
  for (pid_t tid : tids) {
    std::vector<Event> kept;
    for (Event& ev : s.inferior->discard_queued(tid)) {
      const bool mine =
          std::any_of(own.begin(), own.end(), [&](const Event& o) { return same_stop(o, ev); });
      if (!mine) kept.push_back(std::move(ev));
    }
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) s.inferior->requeue(*it);
  }
}

Result<void> WatchSession::uninstall() {
  State& s = *state_;
  s.hold_path_events();
  auto r = s.teardown();
  ignore_error(s.release_held(false), "teardown's error is the one returned");
  s.watches.clear();
  // Undone: nothing left for the watchdog but the caller's changes. After a failure it keeps
  // the last plan.
  if (r) s.publish();
  return r;
}

const WatchSessionOptions& WatchSession::options() const {
  return state_->options;
}

std::string WatchSession::describe() const {
  const State& s = *state_;
  std::string out;
  if (s.hard) out = std::to_string(s.registers) + " debug registers";
  if (s.soft) out += (out.empty() ? "" : " + ") + s.soft->describe();
  return out;
}

Result<std::size_t> WatchSession::surface_blocked_hits() {
  if (!state_->hard) return std::size_t{0};
  return state_->hard->surface_blocked_hits();
}

std::vector<int> WatchSession::wake_fds() const {
  return state_->hard ? state_->hard->wake_fds() : std::vector<int>{};
}

bool WatchSession::has_hardware_watches() const {
  return state_->hard != nullptr;
}

std::size_t WatchSession::perf_events() const {
  return state_->perf_events;
}

std::vector<RestoreByte> WatchSession::planted_bytes() const {
  return state_->soft ? state_->soft->restore_plan().bytes : std::vector<RestoreByte>{};
}

std::uint64_t WatchSession::software_faults() const {
  return state_->soft ? state_->soft->stats().faults : 0;
}

std::string WatchSession::describe_placement() const {
  return placement_policy(state_->options);
}

const Watchdog* WatchSession::watchdog() const {
  return state_->dog ? &*state_->dog : nullptr;
}

const std::optional<Error>& WatchSession::guard_error() const {
  return state_->guard_error;
}

void WatchSession::set_caller_plan(RestorePlan plan) {
  State& s = *state_;
  if (plan == s.caller_plan) return;
  s.caller_plan = std::move(plan);
  s.caller_changed = true;
  s.publish();
}

void WatchSession::set_stepping(pid_t tid) {
  set_stepping(tid == 0 ? std::set<pid_t>() : std::set<pid_t>{tid});
}

void WatchSession::set_stepping(std::set<pid_t> threads) {
  state_->caller_steps = std::move(threads);
  if (state_->soft) state_->soft->set_caller_steps(state_->caller_steps);
}

void WatchSession::set_caller_syscalls(std::optional<std::set<long>> numbers) {
  state_->caller_syscalls = std::move(numbers);
  if (state_->soft) state_->soft->set_caller_syscalls(state_->caller_syscalls);
}

RestorePlan WatchSession::restore_plan() const {
  return state_->plan();
}

const std::optional<Error>& WatchSession::watchdog_error() const {
  return state_->watchdog_error;
}

void WatchSession::report_to(WatchObserver* observer) {
  state_->collector.sink = observer;
}

Result<int> WatchSessionEngine::yield_registers(const std::string& who) {
  const int before = session_.yieldable_registers();
  auto moved = session_.yield_registers(who);
  if (!moved) return std::unexpected(moved.error());
  if (!*moved) return 0;
  observer_.note(static_cast<std::size_t>((*moved)->id), "now software: " + (*moved)->why);
  return before - session_.yieldable_registers();
}

Result<bool> WatchSessionEngine::handle(const Event& event) {
  auto v = session_.handle(event);
  if (!v) return std::unexpected(v.error());
  return v->handled;
}

}  // namespace hwarb::native

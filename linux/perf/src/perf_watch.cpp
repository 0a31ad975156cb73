#include "hwarb/linux/perf_watch.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/breakpoints/validate.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

perf_event_attr watch_attr(const HwPiece& piece, const PerfWatchOptions& options) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.size = sizeof attr;
  attr.bp_type = static_cast<std::uint32_t>(piece.type);
  attr.bp_addr = piece.addr;
  attr.bp_len = piece.len;
  attr.sample_period = 1;
  attr.sample_type = kWatchSampleType;
  attr.wakeup_events = 1;
  attr.disabled = 1;
  attr.pinned = 1;
  // A thread's own piece stays its own: a thread it creates gets no copy.
  attr.inherit = piece.thread == 0 ? 1 : 0;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  if (options.sigtrap) {
    attr.sigtrap = 1;
    attr.remove_on_exec = 1;
    // A forked child is not traced: a copy would kill it with SIGTRAP at its first hit.
    attr.inherit_thread = attr.inherit;
    // Each hit stops its thread, so no reader waits on the rings: a wake-up per sample (an
    // interrupt the kernel raises on itself: a VM exit here, ~25 us a hit) only when half full.
    attr.wakeup_events = 0;
    attr.watermark = 1;
    attr.wakeup_watermark = static_cast<std::uint32_t>(PerfWatch::kRingPages * 4096 / 2);
  }
  return attr;
}

// `exclude_kernel` false: a kernel address passes (a privileged caller's; the kernel decides).
// `threads`: a piece may be one thread's (PerfWatch::open).
Result<void> check_pieces(const std::vector<HwPiece>& pieces, bool exclude_kernel = true,
                          bool threads = false) {
  if (pieces.empty()) return make_error(ErrorCode::kInval, "pieces: none given");
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].thread < 0 || (pieces[i].thread != 0 && !threads)) {
      return make_error(
          ErrorCode::kInval,
          "pieces[" + std::to_string(i) + "].thread: " + std::to_string(pieces[i].thread) +
              (threads ? " is not a thread id" : ": only a watch takes a thread's piece"));
    }
    pmu::EventAttr attr;
    attr.type = pmu::EventType::kBreakpoint;
    attr.bp_addr = pieces[i].addr;
    attr.bp_len = pieces[i].len;
    attr.bp_type = pieces[i].type;
    attr.exclude_kernel = exclude_kernel;
    attr.privileged = !exclude_kernel;
    if (auto ok = breakpoints::check_reservable(attr); !ok) {
      return std::unexpected(ok.error().with_context("pieces[" + std::to_string(i) + "]"));
    }
    if (auto ok = breakpoints::validate_breakpoint(breakpoints::Arch::kX86_64, attr); !ok) {
      return std::unexpected(ok.error().with_context("pieces[" + std::to_string(i) + "]"));
    }
  }
  return {};
}

// hwarb's view: every piece is a pinned request, of task `pid` on all CPUs (pid > 0) or bound
// to one CPU (pid 0: every CPU has the same registers, so one stands for all). With pieces of
// single threads, each such thread is a task of its own holding every thread's pieces and its
// own (another thread holds fewer: every thread's only).
Result<int> account_slots(pid_t pid, const std::vector<HwPiece>& pieces) {
  const arbiter::ArchProfile profile = arbiter::ArchProfile::x86_64();
  auto arb = arbiter::Arbiter::create({.profile = profile, .cpus = 1});
  if (!arb) return std::unexpected(arb.error());
  std::vector<pid_t> tasks;
  for (const HwPiece& piece : pieces) {
    if (piece.thread != 0) tasks.push_back(piece.thread);
  }
  std::sort(tasks.begin(), tasks.end());
  tasks.erase(std::unique(tasks.begin(), tasks.end()), tasks.end());
  if (tasks.empty()) tasks.push_back(pid);
  std::vector<arbiter::Request> requests;
  for (const pid_t task : tasks) {
    for (const HwPiece& piece : pieces) {
      if (piece.thread != 0 && piece.thread != task) continue;
      requests.push_back(arbiter::Request{
          .kind = arbiter::ResourceKind::kBreakpoint,
          .type =
              piece.type == pmu::BpType::kX ? arbiter::SlotType::kInst : arbiter::SlotType::kData,
          .task = pid > 0 ? std::optional<TaskId>(TaskId(task)) : std::nullopt,
          .cpu = pid > 0 ? std::nullopt : std::optional<CpuId>(CpuId(0)),
          .weight = 1,
          .pinned = true,
          .id = RequestId(requests.size() + 1),
      });
    }
  }
  const int pool = profile.slots(arbiter::SlotType::kData);
  auto held = (*arb)->reserve_all(requests);
  if (!held) {
    if (held.error().code() != ErrorCode::kNoSpc) return std::unexpected(held.error());
    const ThreadNeed most = fullest_thread(pieces);
    return make_error(ErrorCode::kNoSpc,
                      "slots: " +
                          (most.thread != 0 ? "thread " + std::to_string(most.thread) + " needs "
                                            : std::string("the expressions need ")) +
                          std::to_string(most.pieces) + " debug registers" +
                          (pid > 0 ? "" : " on each CPU") + "; " + profile.name() + " has " +
                          std::to_string(pool));
  }
  held->clear();
  return pool;
}

}  // namespace

ThreadNeed fullest_thread(const std::vector<HwPiece>& pieces) {
  std::size_t every = 0;
  std::map<pid_t, std::size_t> own;
  for (const HwPiece& piece : pieces) {
    if (piece.thread == 0) {
      ++every;
    } else {
      ++own[piece.thread];
    }
  }
  ThreadNeed most{.thread = 0, .pieces = every};
  for (const auto& [thread, n] : own) {
    if (every + n > most.pieces) most = {.thread = thread, .pieces = every + n};
  }
  return most;
}

Result<PerfWatch> PerfWatch::open(pid_t pid, std::vector<HwPiece> pieces,
                                  const PerfWatchOptions& options) {
  if (pid <= 0) {
    return make_error(ErrorCode::kInval, "pid: " + std::to_string(pid) + " is not a process id");
  }
  if (auto ok = check_pieces(pieces, true, true); !ok) return std::unexpected(ok.error());
  auto pool = account_slots(pid, pieces);
  if (!pool) return std::unexpected(pool.error());
  auto cpus = online_cpus();
  if (!cpus) return std::unexpected(cpus.error());
  auto threads = list_threads(pid);
  if (!threads) return std::unexpected(threads.error());

  PerfWatch watch;
  watch.cpus_ = *cpus;
  const std::size_t ncpus = cpus->size();
  std::vector<int> ring_fd(ncpus, -1);
  std::vector<std::optional<PerfRing>> rings(ncpus);
  for (const pid_t tid : *threads) {
    // This thread's pieces: every thread's and its own.
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].thread == 0 || pieces[i].thread == tid) mine.push_back(i);
    }
    if (mine.empty()) continue;
    const std::size_t npieces = mine.size();
    // Everything of this thread first (disabled), so that a thread that is gone leaves nothing.
    std::vector<Fd> fds;  // [cpu index * npieces + k] for piece mine[k]
    bool gone = false;
    for (std::size_t c = 0; c < ncpus && !gone; ++c) {
      for (const std::size_t i : mine) {
        const perf_event_attr attr = watch_attr(pieces[i], options);
        auto fd = perf_event_open_attr(attr, tid, (*cpus)[c], -1, 0);
        if (fd) {
          fds.push_back(std::move(*fd));
          continue;
        }
        if (fd.error().code() == ErrorCode::kSrch) {
          gone = true;  // the thread exited meanwhile
          break;
        }
        if (fd.error().code() == ErrorCode::kNoSpc) {
          return make_error(
              ErrorCode::kNoSpc,
              "slots: the kernel has no breakpoint slot left for thread " + std::to_string(tid) +
                  " although hwarb uses only " + std::to_string(npieces) + " of " +
                  std::to_string(*pool) +
                  ": the others are held outside this process (a debugger or another perf "
                  "session); refused on CPU " +
                  std::to_string((*cpus)[c]));
        }
        if (fd.error().code() == ErrorCode::kAcces || fd.error().code() == ErrorCode::kPerm) {
          return std::unexpected(name_perf_permission(
              fd.error(),
              "breakpoints on another user's process need CAP_PERFMON or a value <= 1"));
        }
        return std::unexpected(fd.error().with_context("pieces[" + std::to_string(i) + "]"));
      }
    }
    if (gone) continue;
    for (std::size_t c = 0; c < ncpus; ++c) {
      for (std::size_t k = 0; k < npieces; ++k) {
        const int fd = fds[c * npieces + k].get();
        auto id = perf_event_id(fd);
        if (!id) return std::unexpected(id.error());
        watch.piece_of_id_[*id] = mine[k];
        if (!rings[c]) {
          auto mapped = PerfRing::map(fd, kRingPages);
          if (!mapped) return std::unexpected(mapped.error());
          rings[c].emplace(std::move(*mapped));
          ring_fd[c] = fd;
        } else if (auto out = perf_ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT,
                                         static_cast<unsigned long>(ring_fd[c]));
                   !out) {
          return std::unexpected(out.error());
        }
      }
      watch.poll_fds_.push_back(fds[c * npieces].get());
    }
    watch.threads_.push_back(tid);
    for (Fd& fd : fds) watch.fds_.push_back(std::move(fd));
  }
  if (watch.threads_.empty()) {
    return make_error(ErrorCode::kSrch,
                      "pid: every thread of process " + std::to_string(pid) + " exited");
  }
  for (auto& ring : rings) watch.rings_.push_back(std::move(*ring));
  for (const Fd& fd : watch.fds_) {
    if (auto on = perf_ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0); !on) {
      return std::unexpected(on.error());
    }
  }
  watch.live_ = watch.poll_fds_.size();
  watch.pieces_ = std::move(pieces);
  return watch;
}

Result<std::vector<PerfHit>> PerfWatch::poll(int timeout_ms) {
  if (fds_.empty()) return make_error(ErrorCode::kInval, "watch: nothing open (moved from)");
  // Wait for data; an fd that hangs up (its thread and descendants exited) is polled no more.
  while (live_ > 0) {
    const std::vector<int> live(poll_fds_.begin(), poll_fds_.begin() + live_);
    auto ready = poll_in(live, timeout_ms);
    if (!ready) return std::unexpected(ready.error());
    bool readable = false, hung_up = false;
    for (std::size_t i = live.size(); i-- > 0;) {
      const short ev = (*ready)[i];
      readable |= (ev & POLLIN) != 0;
      if ((ev & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
        hung_up = true;
        std::swap(poll_fds_[i], poll_fds_[--live_]);
      }
    }
    if (readable || !hung_up) break;  // data, or the timeout passed
  }
  std::vector<PerfHit> hits;
  for (std::size_t r = 0; r < rings_.size(); ++r) {
    auto batch = rings_[r].drain(kWatchSampleType);
    if (!batch) return std::unexpected(batch.error());
    lost_ += batch->lost;
    for (const PerfSample& s : batch->samples) {
      auto it = piece_of_id_.find(s.id);
      if (it == piece_of_id_.end()) {
        return make_error(ErrorCode::kIo, "ring: a sample carries event id " +
                                              std::to_string(s.id) +
                                              ", which is none of this watch's events");
      }
      hits.push_back(PerfHit{.time_ns = s.time,
                             .tid = static_cast<pid_t>(s.tid),
                             .ip = s.ip,
                             .addr = s.addr,
                             .piece = it->second,
                             .pid = static_cast<pid_t>(s.pid),
                             .cpu = r < cpus_.size() ? cpus_[r] : -1});
    }
  }
  std::stable_sort(hits.begin(), hits.end(),
                   [](const PerfHit& a, const PerfHit& b) { return a.time_ns < b.time_ns; });
  return hits;
}

namespace {

perf_event_attr count_attr(const HwPiece& piece, bool inherit) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.size = sizeof attr;
  attr.bp_type = static_cast<std::uint32_t>(piece.type);
  attr.bp_addr = piece.addr;
  attr.bp_len = piece.len;
  attr.pinned = 1;
  attr.inherit = inherit ? 1 : 0;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return attr;
}

}  // namespace

Result<PerfCount> PerfCount::open(pid_t pid, std::vector<HwPiece> pieces) {
  if (pid <= 0) {
    return make_error(ErrorCode::kInval, "pid: " + std::to_string(pid) + " is not a process id");
  }
  if (auto ok = check_pieces(pieces); !ok) return std::unexpected(ok.error());
  if (auto pool = account_slots(pid, pieces); !pool) return std::unexpected(pool.error());
  auto threads = list_threads(pid);
  if (!threads) return std::unexpected(threads.error());
  PerfCount count;
  count.pieces_ = std::move(pieces);
  for (const pid_t tid : *threads) {
    auto added = count.add(tid, false);
    if (!added && added.error().code() != ErrorCode::kSrch) return std::unexpected(added.error());
  }
  if (count.entries_.empty()) {
    return make_error(ErrorCode::kSrch,
                      "pid: every thread of process " + std::to_string(pid) + " exited");
  }
  return count;
}

Result<void> PerfCount::add_thread(pid_t tid) {
  return add(tid, false);
}

Result<void> PerfCount::add_process(pid_t child) {
  return add(child, true);
}

Result<void> PerfCount::add(pid_t tid, bool inherit) {
  std::vector<Entry> added;  // all of this task's pieces, or none
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    auto fd = perf_event_open_attr(count_attr(pieces_[i], inherit), tid, -1, -1, 0);
    if (!fd) {
      const ErrorCode code = fd.error().code();
      if (code == ErrorCode::kSrch) {
        return make_error(ErrorCode::kSrch, "pid: thread " + std::to_string(tid) + " is gone");
      }
      if (code == ErrorCode::kNoSpc) {
        return make_error(ErrorCode::kNoSpc,
                          "slots: the kernel has no breakpoint slot left for thread " +
                              std::to_string(tid) + " although hwarb uses only " +
                              std::to_string(pieces_.size()) +
                              ": the others are held outside this process (a debugger or "
                              "another perf session)");
      }
      if (code == ErrorCode::kAcces || code == ErrorCode::kPerm) {
        return std::unexpected(name_perf_permission(
            fd.error(), "breakpoints on another user's process need CAP_PERFMON or a value <= 1"));
      }
      return std::unexpected(fd.error().with_context("pieces[" + std::to_string(i) + "]"));
    }
    added.push_back(Entry{tid, i, std::move(*fd)});
  }
  for (Entry& e : added) entries_.push_back(std::move(e));
  return {};
}

Result<std::vector<PerfCount::Count>> PerfCount::counts() const {
  std::vector<Count> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    auto n = perf_read_count(e.fd.get());
    if (!n) return std::unexpected(n.error());
    out.push_back(Count{e.tid, e.piece, *n});
  }
  return out;
}

namespace {

// ENODEV naming `cpus` for the first of `cpus` not in `online` (ascending).
Result<void> check_online(const std::vector<int>& cpus, const std::vector<int>& online) {
  for (const int cpu : cpus) {
    if (!std::binary_search(online.begin(), online.end(), cpu)) {
      return make_error(ErrorCode::kNoDev,
                        "cpus: CPU " + std::to_string(cpu) +
                            " is not online (online: " + std::to_string(online.size()) + " CPUs)");
    }
  }
  return {};
}

}  // namespace

Result<std::vector<int>> select_cpus(std::string_view list) {
  auto online = online_cpus();
  if (!online) return std::unexpected(online.error());
  if (list.empty()) return online;
  auto parsed = parse_cpu_list(list);
  if (!parsed) return std::unexpected(parsed.error());
  if (auto ok = check_online(*parsed, *online); !ok) return std::unexpected(ok.error());
  return parsed;
}

namespace {

// The checks PerfCpuCount::open and PerfWatch::open_cpus share (all before any open): the CPUs
// (given, each once, online; sorted in place), the pieces, the registers of one CPU.
Result<void> check_cpu_events(std::vector<int>& cpus, const std::vector<HwPiece>& pieces,
                              const CpuCountOptions& options) {
  if (cpus.empty()) return make_error(ErrorCode::kInval, "cpus: none given");
  std::sort(cpus.begin(), cpus.end());
  if (std::adjacent_find(cpus.begin(), cpus.end()) != cpus.end()) {
    return make_error(ErrorCode::kInval, "cpus: a CPU is listed twice");
  }
  auto online = online_cpus();
  if (!online) return std::unexpected(online.error());
  if (auto ok = check_online(cpus, *online); !ok) return std::unexpected(ok.error());
  if (auto ok = check_pieces(pieces, options.exclude_kernel); !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = account_slots(0, pieces); !ok) return std::unexpected(ok.error());
  return {};
}

// perf_event_open of piece `i` bound to `cpu` (pid -1), opened disabled; the kernel's refusal
// named (the caller closes what it opened before: all or nothing).
Result<Fd> open_on_cpu(perf_event_attr attr, int cpu, std::size_t i, std::size_t npieces,
                       const CpuCountOptions& options) {
  attr.exclude_kernel = options.exclude_kernel ? 1 : 0;
  attr.disabled = 1;
  attr.inherit = 0;
  auto fd = perf_event_open_attr(attr, -1, cpu, -1, 0);
  if (fd) return fd;
  const ErrorCode code = fd.error().code();
  const std::string on = "CPU " + std::to_string(cpu);
  if (code == ErrorCode::kNoSpc) {
    return make_error(ErrorCode::kNoSpc,
                      "slots: the kernel has no breakpoint slot left on " + on +
                          " although hwarb uses only " + std::to_string(npieces) +
                          ": the others are held by another perf session or a debugger on that "
                          "CPU");
  }
  if (code == ErrorCode::kAcces || code == ErrorCode::kPerm) {
    return std::unexpected(
        name_perf_permission(fd.error(),
                             "events on CPUs need CAP_PERFMON or a value <= 0; the kernel's own "
                             "accesses need CAP_PERFMON or a value <= 1")
            .with_context("cpus"));
  }
  return std::unexpected(fd.error().with_context("pieces[" + std::to_string(i) + "] on " + on));
}

}  // namespace

Result<PerfCpuCount> PerfCpuCount::open(std::vector<int> cpus, std::vector<HwPiece> pieces,
                                        const CpuCountOptions& options) {
  if (auto ok = check_cpu_events(cpus, pieces, options); !ok) return std::unexpected(ok.error());
  PerfCpuCount count;
  count.cpus_ = std::move(cpus);
  count.pieces_ = std::move(pieces);
  for (const int cpu : count.cpus_) {
    for (std::size_t i = 0; i < count.pieces_.size(); ++i) {
      auto fd =
          open_on_cpu(count_attr(count.pieces_[i], false), cpu, i, count.pieces_.size(), options);
      if (!fd) return std::unexpected(fd.error());
      count.entries_.push_back(Entry{cpu, i, std::move(*fd)});
    }
  }
  return count;
}

Result<PerfWatch> PerfWatch::open_cpus(std::vector<int> cpus, std::vector<HwPiece> pieces,
                                       const CpuCountOptions& options) {
  if (auto ok = check_cpu_events(cpus, pieces, options); !ok) return std::unexpected(ok.error());
  PerfWatch watch;
  const std::size_t npieces = pieces.size();
  for (const int cpu : cpus) {
    std::optional<PerfRing> ring;
    int ring_fd = -1;
    for (std::size_t i = 0; i < npieces; ++i) {
      auto fd = open_on_cpu(watch_attr(pieces[i], {}), cpu, i, npieces, options);
      if (!fd) return std::unexpected(fd.error());
      auto id = perf_event_id(fd->get());
      if (!id) return std::unexpected(id.error());
      watch.piece_of_id_[*id] = i;
      if (!ring) {
        auto mapped = PerfRing::map(fd->get(), kRingPages);
        if (!mapped) return std::unexpected(mapped.error());
        ring.emplace(std::move(*mapped));
        ring_fd = fd->get();
        watch.poll_fds_.push_back(ring_fd);
      } else if (auto out = perf_ioctl(fd->get(), PERF_EVENT_IOC_SET_OUTPUT,
                                       static_cast<unsigned long>(ring_fd));
                 !out) {
        return std::unexpected(out.error());
      }
      watch.fds_.push_back(std::move(*fd));
    }
    watch.rings_.push_back(std::move(*ring));
  }
  for (const Fd& fd : watch.fds_) {
    if (auto on = perf_ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0); !on) {
      return std::unexpected(on.error());
    }
  }
  watch.cpus_ = std::move(cpus);
  watch.live_ = watch.poll_fds_.size();
  watch.pieces_ = std::move(pieces);
  return watch;
}

Result<void> PerfCpuCount::enable() {
  for (const Entry& e : entries_) {
    if (auto on = perf_ioctl(e.fd.get(), PERF_EVENT_IOC_ENABLE, 0); !on) {
      return std::unexpected(on.error());
    }
  }
  return {};
}

Result<void> PerfCpuCount::disable() {
  for (const Entry& e : entries_) {
    if (auto off = perf_ioctl(e.fd.get(), PERF_EVENT_IOC_DISABLE, 0); !off) {
      return std::unexpected(off.error());
    }
  }
  return {};
}

Result<std::vector<PerfCpuCount::Count>> PerfCpuCount::counts() const {
  std::vector<Count> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    auto n = perf_read_count(e.fd.get());
    if (!n) return std::unexpected(n.error());
    out.push_back(Count{e.cpu, e.piece, *n});
  }
  return out;
}

std::vector<pid_t> PerfCount::tasks() const {
  std::vector<pid_t> out;
  for (const Entry& e : entries_) {
    if (out.empty() || out.back() != e.tid) out.push_back(e.tid);
  }
  return out;
}

}  // namespace hwarb::native

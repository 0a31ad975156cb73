// hwarb/linux/intel_bts.h — hardware branch tracing through the kernel's intel_bts PMU: one
// perf event per thread, its trace read from the AUX area (perf_aux.h).
//
// Contract:
//  - intel_bts_type() reads the PMU's dynamic type from
//    /sys/bus/event_source/devices/intel_bts/type: ENOENT naming `intel_bts` ("no intel_bts PMU on
//    this machine") where the directory is absent (no BTS, or a VM that does not expose it, as
//    here); EIO naming `intel_bts` for unreadable or malformed contents.
//  - IntelBtsTrace::open checks the PMU (intel_bts_type) and the options; it opens nothing yet.
//    EINVAL naming `aux_pages` / `data_pages` unless powers of two >= 1.
//  - add_thread(tid) opens the event on that thread (pid = tid, cpu = -1, enabled; user branches
//    only unless options.kernel; not inherited: the kernel refuses AUX areas of per-thread
//    inherited events, so the caller adds each new thread itself — hwarb does so at the clone
//    stop, before the thread's first instruction) and maps its rings. All or nothing: on error
//    the thread is not traced and nothing stays open. EEXIST naming `tid` for a thread already
//    traced; perf_event_open's errors (EACCES/EPERM naming perf_event_paranoid, EBUSY: BTS is
//    exclusive with LBR users and one event per CPU, ESRCH: no such thread); the mappings'.
//  - drain() reads every thread's AUX area (in tid order, each in trace order) and hands each
//    record to the sink with its thread; remove_thread(tid) drains that thread, then closes its
//    event. Records of a thread are in its branch order; across threads, grouped per drain (BTS
//    records carry no time).
//  - Loss is reported, never hidden: stretches the kernel flagged TRUNCATED (the AUX area was
//    full: branches are missing after them) and data-ring LOST records are summed in stats();
//    after a truncation the thread's decoder restarts on a record boundary.
//  - fds(): the event descriptors, for poll(2) (the kernel wakes POLLIN when a stretch is handed
//    over).
// Thread-safety: none; one owner.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/perf_aux.h"

namespace hwarb::native {

Result<std::uint32_t> intel_bts_type();

struct IntelBtsOptions {
  std::size_t data_pages = 8;
  std::size_t aux_pages = 512;  // 2 MiB of trace per thread: ~87 000 records between drains
  bool kernel = false;          // also kernel branches (needs perf_event_paranoid < 2 or root)
};

struct IntelBtsStats {
  std::uint64_t records = 0;      // branch records delivered
  std::uint64_t padding = 0;      // all-zero padding records skipped
  std::uint64_t bytes = 0;        // AUX bytes read
  std::uint64_t truncations = 0;  // stretches after which trace was lost
  std::uint64_t lost = 0;         // data-ring records the kernel dropped
};

class IntelBtsTrace {
 public:
  using Sink = std::function<void(pid_t tid, const x86::BtsRecord&)>;

  static Result<IntelBtsTrace> open(const IntelBtsOptions& options = {});

  IntelBtsTrace(IntelBtsTrace&&) noexcept = default;
  IntelBtsTrace& operator=(IntelBtsTrace&&) noexcept = default;

  Result<void> add_thread(pid_t tid);
  Result<void> remove_thread(pid_t tid, const Sink& sink);
  Result<void> drain(const Sink& sink);
  bool traced(pid_t tid) const { return threads_.count(tid) != 0; }
  // The traced threads, ascending.
  std::vector<pid_t> threads() const;
  std::vector<int> fds() const;
  std::uint32_t type() const { return type_; }
  const IntelBtsStats& stats() const { return stats_; }

 private:
  struct Thread {
    Fd fd;
    PerfAuxRing ring;
    BtsStreamDecoder decoder;
  };
  IntelBtsTrace(std::uint32_t type, const IntelBtsOptions& options)
      : type_(type), options_(options) {}
  Result<void> drain_thread(pid_t tid, Thread& thread, const Sink& sink);

  std::uint32_t type_ = 0;
  IntelBtsOptions options_;
  std::map<pid_t, Thread> threads_;
  IntelBtsStats stats_;
};

}  // namespace hwarb::native

#include "hwarb/linux/intel_bts.h"

#include <linux/perf_event.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

constexpr const char* kPmuDir = "/sys/bus/event_source/devices/intel_bts";

}  // namespace

Result<std::uint32_t> intel_bts_type() {
  std::error_code ec;
  if (!std::filesystem::exists(kPmuDir, ec)) {
    return make_error(ErrorCode::kNoEnt,
                      std::string("intel_bts: no intel_bts PMU on this machine (") + kPmuDir +
                          " is absent: the CPU has no BTS, or the "
                          "hypervisor does not expose it)");
  }
  const std::string path = std::string(kPmuDir) + "/type";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::uint32_t type = 0;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), type);
  if (!in || err != std::errc() || end == s.data() ||
      (end != s.data() + s.size() && *end != '\n')) {
    return make_error(ErrorCode::kIo, "intel_bts: " + path + " does not hold a PMU type number");
  }
  return type;
}

Result<IntelBtsTrace> IntelBtsTrace::open(const IntelBtsOptions& options) {
  if (auto r = check_ring_pages("data_pages", options.data_pages); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = check_ring_pages("aux_pages", options.aux_pages); !r) {
    return std::unexpected(r.error());
  }
  auto type = intel_bts_type();
  if (!type) return std::unexpected(type.error());
  return IntelBtsTrace(*type, options);
}

Result<void> IntelBtsTrace::add_thread(pid_t tid) {
  if (threads_.count(tid) != 0) {
    return make_error(ErrorCode::kExist,
                      "tid: thread " + std::to_string(tid) + " is traced already");
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type_;
  attr.config = 0;
  attr.exclude_kernel = options_.kernel ? 0 : 1;
  attr.exclude_hv = 1;
  attr.wakeup_events = 1;  // a POLLIN for each stretch handed over
  auto fd = perf_event_open_attr(attr, tid, -1, -1, 0);
  if (!fd) {
    const ErrorCode code = fd.error().code();
    if (code == ErrorCode::kAcces || code == ErrorCode::kPerm) {
      return std::unexpected(name_perf_permission(
          fd.error(),
          "tracing another user's thread, or kernel branches, needs CAP_PERFMON or a lower value"));
    }
    if (code == ErrorCode::kBusy) {
      return std::unexpected(fd.error().with_context(
          "intel_bts: BTS is taken (it is exclusive with LBR users and another BTS event on "
          "the CPU)"));
    }
    return std::unexpected(fd.error().with_context("thread " + std::to_string(tid)));
  }
  auto ring = PerfAuxRing::map(fd->get(), options_.data_pages, options_.aux_pages);
  if (!ring) return std::unexpected(ring.error().with_context("thread " + std::to_string(tid)));
  threads_.emplace(tid, Thread{std::move(*fd), std::move(*ring), BtsStreamDecoder{}});
  return {};
}

Result<void> IntelBtsTrace::drain_thread(pid_t tid, Thread& thread, const Sink& sink) {
  BtsStreamDecoder& decoder = thread.decoder;
  const auto deliver = [&](const x86::BtsRecord& b) { sink(tid, b); };
  PerfAuxRing::Sink aux_sink;
  aux_sink.begin = [&](const AuxEvent& ev) { decoder.begin(ev); };
  aux_sink.bytes = [&](std::span<const std::uint8_t> bytes) { decoder.feed(bytes, deliver); };
  aux_sink.end = [&](const AuxEvent& ev) { decoder.end(ev); };
  const std::uint64_t records = decoder.records();
  const std::uint64_t padding = decoder.padding();
  auto drained = thread.ring.drain(aux_sink);
  stats_.records += decoder.records() - records;
  stats_.padding += decoder.padding() - padding;
  if (!drained)
    return std::unexpected(drained.error().with_context("thread " + std::to_string(tid)));
  stats_.bytes += drained->bytes;
  stats_.truncations += drained->truncations;
  stats_.lost += drained->lost;
  return {};
}

Result<void> IntelBtsTrace::drain(const Sink& sink) {
  Result<void> first;
  for (auto& [tid, thread] : threads_) {
    if (auto r = drain_thread(tid, thread, sink); !r && first) first = r;
  }
  return first;
}

Result<void> IntelBtsTrace::remove_thread(pid_t tid, const Sink& sink) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) {
    return make_error(ErrorCode::kNoEnt, "tid: thread " + std::to_string(tid) + " is not traced");
  }
  // Disabling first makes the kernel hand over what the hardware still holds.
  ignore_error(perf_ioctl(it->second.fd.get(), PERF_EVENT_IOC_DISABLE, 0),
               "the drain below reads what is there either way");
  auto r = drain_thread(tid, it->second, sink);
  threads_.erase(it);
  return r;
}

std::vector<pid_t> IntelBtsTrace::threads() const {
  std::vector<pid_t> out;
  out.reserve(threads_.size());
  for (const auto& [tid, thread] : threads_) out.push_back(tid);
  return out;
}

std::vector<int> IntelBtsTrace::fds() const {
  std::vector<int> out;
  out.reserve(threads_.size());
  for (const auto& [tid, thread] : threads_) out.push_back(thread.fd.get());
  return out;
}

}  // namespace hwarb::native

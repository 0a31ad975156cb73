// register_yield.cpp — hwarb's debug registers given up to the program that asks for one (see
// register_yield.h).
#include "hwarb/linux/register_yield.h"

#include <linux/perf_event.h>
#include <poll.h>
#include <sys/syscall.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "hwarb/linux/breakpoint_requests.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {

namespace {

constexpr std::uint64_t kRedZone = 128;
constexpr unsigned kSeccompSetModeFilter = 1;   // SECCOMP_SET_MODE_FILTER
constexpr std::uint64_t kDr7EnableBits = 0xff;  // L0/G0 .. L3/G3

// The thread a breakpoint request is for, and how to name it in a note; nullopt when the call
// asks for no register of a thread (case 1).
struct Wanted {
  pid_t thread = 0;
  std::string who;
};

std::optional<Wanted> wanted_by(const BreakpointRequest& request) {
  const auto target = static_cast<pid_t>(static_cast<std::int32_t>(request.args[1]));
  if (request.kind == RequestKind::kPerfEvent) {
    std::uint32_t type = 0;
    auto bytes = std::span(reinterpret_cast<std::uint8_t*>(&type), sizeof type);
    if (!read_process_memory(request.tid, request.args[0], bytes)) return std::nullopt;
    if (type != PERF_TYPE_BREAKPOINT) return std::nullopt;
    if (target < 0) return std::nullopt;  // CPU-wide
    const pid_t thread = target == 0 ? request.tid : target;
    return Wanted{thread, "thread " + std::to_string(request.tid) +
                              "'s perf_event_open of a breakpoint on thread " +
                              std::to_string(thread)};
  }
  const std::uint64_t offset = request.args[2];
  const bool address = offset >= debug_register_offset(0) && offset < debug_register_offset(4);
  const bool control = offset == debug_register_offset(7) && (request.args[3] & kDr7EnableBits);
  if (!address && !control) return std::nullopt;
  return Wanted{target, "thread " + std::to_string(request.tid) +
                            "'s ptrace(PTRACE_POKEUSER) of a debug register of thread " +
                            std::to_string(target)};
}

// Case 2: whether thread `tid` has a debug register left (a breakpoint of hwarb's own opens on
// it; closed at once). Errors other than ENOSPC count as "left": the program's call then meets
// the kernel's answer itself.
bool register_left(pid_t tid) {
  constexpr std::uint64_t kSomeUserAddress = 0x10000;
  auto trial = perf_breakpoint_reserve(tid, kSomeUserAddress, 1, BpType::kW);
  return trial || trial.error().code() != ErrorCode::kNoSpc;
}

// register_left() after a watch gave its registers up: the kernel frees a closed breakpoint's
// slot only once nothing holds the event any more — a breakpoint that stops its thread with a
// SIGTRAP is held until that thread has run its pending perf work on its way back to user mode,
// after the resume. So the trial is made again for a while (at most 200 ms, 1 ms apart).
bool register_left_soon(pid_t tid) {
  for (int i = 0; i < 200; ++i) {
    if (register_left(tid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

bool is_ours(const Inferior& inferior, pid_t tid) {
  for (pid_t t : inferior.threads()) {
    if (t == tid) return true;
  }
  return false;
}

}  // namespace

Result<RegisterYield> RegisterYield::arm(Inferior& inferior, pid_t tid) {
  if (!inferior.spawned()) {
    return make_error(ErrorCode::kPerm,
                      "seccomp: an attached program is not given a filter (it would stay after "
                      "hwarb detaches)");
  }
  auto regs = inferior.get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  const std::uint64_t at = ((regs->rsp - kRedZone - 512) & ~std::uint64_t{15});
  const std::vector<std::uint8_t> image = request_filter_image(at);
  std::vector<std::uint8_t> saved(image.size());
  if (auto r = inferior.read_memory(at, saved); !r) return std::unexpected(r.error());
  if (auto r = inferior.write_memory(at, image); !r) return std::unexpected(r.error());
  auto installed = inferior.inject_syscall(tid, SYS_seccomp,
                                           {kSeccompSetModeFilter, request_filter_flags(), at});
  auto restored = inferior.write_memory(at, saved);
  if (!installed) return std::unexpected(installed.error());
  if (!restored) return std::unexpected(restored.error());
  if (*installed < 0) {
    const ErrorCode code = from_errno(static_cast<int>(-*installed));
    return make_error(code, "seccomp: the program could not take the breakpoint-request filter (" +
                                errno_name(code) + ")");
  }
  const int remote = static_cast<int>(*installed);
  auto listener = take_descriptor(inferior.pid(), remote);
  auto closed = inferior.inject_syscall(tid, SYS_close, {static_cast<std::uint64_t>(remote)});
  if (!listener) return std::unexpected(listener.error());
  if (!closed) return std::unexpected(closed.error());
  auto gate = start_continuer(listener->get());
  if (!gate) return std::unexpected(gate.error());
  return RegisterYield(std::move(*listener), std::move(*gate));
}

Result<void> RegisterYield::serve(Inferior& inferior, Engine& engine) {
  for (;;) {
    const int fds[] = {listener_.get()};
    auto ready = poll_in_once(fds, 0);
    if (!ready) {
      if (ready.error().code() == ErrorCode::kIntr) return {};
      return std::unexpected(ready.error());
    }
    if (((*ready)[0] & POLLIN) == 0) return {};
    auto request = receive_request(listener_.get());
    if (!request) {
      if (request.error().code() == ErrorCode::kNoEnt) continue;
      return std::unexpected(request.error());
    }
    const std::optional<Wanted> wanted = wanted_by(*request);
    // Case 3, as long as there is something to give; cases 1, 2 and 4 fall through.
    bool gave = false;
    while (wanted && is_ours(inferior, wanted->thread) && engine.yieldable_registers() > 0 &&
           !(gave ? register_left_soon(wanted->thread) : register_left(wanted->thread))) {
      auto stopped = inferior.stop_all();
      if (!stopped) return std::unexpected(stopped.error());
      auto freed = engine.yield_registers(wanted->who);
      for (pid_t t : *stopped) {
        if (auto r = engine.resume_stopped(inferior, t);
            !r && r.error().code() != ErrorCode::kSrch) {
          return r;
        }
      }
      if (!freed) return std::unexpected(freed.error());
      if (*freed == 0) break;
      yielded_ += *freed;
      gave = true;
    }
    if (auto r = continue_request(listener_.get(), request->id); !r) return r;
  }
}

}  // namespace hwarb::native

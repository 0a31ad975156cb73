// Differential test of who may open a breakpoint: HwBreakpoints::perf_event_open on the simulated
// machine (pmu/permission.h around the breakpoint PMU's checks) against perf_event_open(2) of
// PERF_TYPE_BREAKPOINT on this kernel, every case on both, which must agree (success, or the same
// errno):
//   caller root (this process) and an unprivileged user (a child dropped to 65534:65534)
//   x kernel.perf_event_paranoid -1, 0, 1, 2, 3 (written to /proc/sys, the original restored
//     afterwards, also when a case fails)
//   x exclude_kernel clear and set x data (rw, len 4) and execute (len 8)
//   x addresses: user space, the last user bytes, TASK_SIZE_MAX, kernel text (_text from
//     /proc/kallsyms, which root reads unmasked) and the top of the address space
//   x task-bound (this process, any CPU) and CPU-bound (cpu 0).
// Then the order against the slots: with cpu 0 full, which of EACCES, ENOSPC and EPERM wins.
// Each answer is printed (the measured table). It needs root (to set the sysctl and drop to a
// user); without it the test skips and says why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>

#include "hwarb/base/format.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/sim/system.h"

namespace hwarb {
namespace {

using pmu::BpType;

constexpr std::uint64_t kTaskSizeMax = 0x00007ffffffff000ULL;
constexpr unsigned kNobody = 65534;

struct Case {
  bool root = true;
  int paranoid = 2;
  bool cpu_event = false;
  BpType type = BpType::kRw;
  bool exclude_kernel = false;
  std::uint64_t addr = 0;
  std::string addr_name;
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "paranoid=" << c.paranoid << (c.root ? " root" : " user")
    << (c.cpu_event ? " cpu " : " task ") << to_string(c.type) << " "
    << (c.exclude_kernel ? "exclude_kernel" : "include_kernel") << " " << c.addr_name << " ("
    << hex(c.addr) << ")";
  return s.str();
}

std::string errno_text(int code) {
  return code == 0 ? "ok" : errno_name(static_cast<ErrorCode>(code));
}

::perf_event_attr real_attr(const Case& c) {
  ::perf_event_attr a{};
  a.type = PERF_TYPE_BREAKPOINT;
  a.size = sizeof a;
  a.bp_addr = c.addr;
  a.bp_type = c.type == BpType::kX ? HW_BREAKPOINT_X : HW_BREAKPOINT_RW;
  a.bp_len = c.type == BpType::kX ? 8 : 4;
  a.sample_period = 1;
  a.exclude_kernel = c.exclude_kernel ? 1 : 0;
  a.disabled = 1;
  return a;
}

// perf_event_open(2) in this process: 0 or the errno.
int open_here(const void* arg) {
  const Case& c = *static_cast<const Case*>(arg);
  auto fd =
      native::perf_event_open_attr(real_attr(c), c.cpu_event ? -1 : 0, c.cpu_event ? 0 : -1, -1, 0);
  return fd ? 0 : static_cast<int>(fd.error().code());
}

// The kernel's answer for the case's caller (a user: in a child dropped to nobody).
Result<int> kernel_answer(const Case& c) {
  if (c.root) return open_here(&c);
  return native::run_as_user(kNobody, kNobody, open_here, &c);
}

// The simulated machine's answer.
int sim_answer(const Case& c, int filled_cpu0 = 0) {
  auto sys =
      sim::System::create({2, breakpoints::Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(sys);
  if (!sys) return -1;
  breakpoints::HwBreakpoints& api = (*sys)->breakpoints();
  std::vector<breakpoints::BreakpointHandle> fill;
  for (int i = 0; i < filled_cpu0; ++i) {
    auto h = api.register_cpu_hw_breakpoint(
        breakpoints::breakpoint_attr(0x1000 + 8 * i, 4, BpType::kRw), {}, CpuId(0));
    EXPECT_TRUE(h);
    if (h) fill.push_back(std::move(*h));
  }
  auto task = (*sys)->machine().create_task();
  EXPECT_TRUE(task);
  pmu::EventAttr a = breakpoints::breakpoint_attr(c.addr, c.type == BpType::kX ? 8 : 4, c.type);
  a.exclude_kernel = c.exclude_kernel;
  a.disabled = true;
  const pmu::EventOwner owner =
      c.cpu_event ? pmu::EventOwner{std::nullopt, CpuId(0)} : pmu::EventOwner{*task, std::nullopt};
  const pmu::Credentials who = c.root ? pmu::Credentials::root() : pmu::Credentials::user();
  auto h = api.perf_event_open(a, {}, owner, who, c.paranoid);
  return h ? 0 : static_cast<int>(h.error().code());
}

// The address of `symbol` in /proc/kallsyms (0 when absent or masked).
std::uint64_t kallsyms(const std::string& symbol) {
  std::ifstream in("/proc/kallsyms");
  std::string addr, kind, name;
  while (in >> addr >> kind >> name) {
    if (name == symbol) return std::stoull(addr, nullptr, 16);
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// Puts the original perf_event_paranoid back however the test ends.
class ParanoidGuard {
 public:
  explicit ParanoidGuard(int original) : original_(original) {}
  ParanoidGuard(const ParanoidGuard&) = delete;
  ParanoidGuard& operator=(const ParanoidGuard&) = delete;
  ~ParanoidGuard() {
    auto r = native::set_perf_event_paranoid(original_);
    EXPECT_TRUE(r) << "could not restore perf_event_paranoid " << original_ << ": "
                   << r.error().to_string();
  }

 private:
  int original_;
};

// Why this machine cannot run the test, or nothing.
std::optional<std::string> refusal(std::optional<int> original) {
  if (!original) return "cannot read /proc/sys/kernel/perf_event_paranoid";
  if (auto w = native::set_perf_event_paranoid(*original); !w) {
    return "needs root to set perf_event_paranoid: " + w.error().to_string();
  }
  Case probe;
  probe.addr = 0x10000;
  probe.exclude_kernel = true;
  auto r = native::run_as_user(kNobody, kNobody, open_here, &probe);
  if (!r) return "cannot run as user " + std::to_string(kNobody) + ": " + r.error().to_string();
  if (open_here(&probe) != 0) {
    return "this machine refuses breakpoint perf events to root: " + errno_text(open_here(&probe));
  }
  return std::nullopt;
}

// Another process on the machine may hold debug-register slots for a moment: an ENOSPC of the
// kernel that the model does not give is asked again, up to 20 times, 50 ms apart.
Result<int> kernel_answer_settled(const Case& c, int model) {
  auto real = kernel_answer(c);
  for (int i = 0; i < 20 && real && *real == ENOSPC && model != ENOSPC; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    real = kernel_answer(c);
  }
  return real;
}

TEST(PerfPermissionDifferential, EveryCallerParanoidAndAddressAgreesWithTheKernel) {
  const std::optional<int> original = native::perf_event_paranoid();
  if (auto why = refusal(original)) GTEST_SKIP() << *why;
  ParanoidGuard guard(*original);
  const std::uint64_t text = kallsyms("_text");
  ASSERT_NE(text, 0u) << "/proc/kallsyms has no _text address (kptr_restrict?)";
  ASSERT_GE(text, kTaskSizeMax);
  const std::vector<std::pair<std::string, std::uint64_t>> addrs = {
      {"user", 0x10000},     {"last_user", kTaskSizeMax - 8}, {"task_size_max", kTaskSizeMax},
      {"kernel_text", text}, {"top", 0xfffffffffffffff8ULL},
  };
  int cases = 0;
  for (int paranoid : {-1, 0, 1, 2, 3}) {
    ASSERT_TRUE(native::set_perf_event_paranoid(paranoid));
    ASSERT_EQ(native::perf_event_paranoid(), paranoid);
    for (bool root : {true, false}) {
      for (bool cpu_event : {false, true}) {
        for (BpType type : {BpType::kRw, BpType::kX}) {
          for (bool ek : {false, true}) {
            for (const auto& [name, addr] : addrs) {
              const Case c{root, paranoid, cpu_event, type, ek, addr, name};
              const int model = sim_answer(c);
              auto real = kernel_answer_settled(c, model);
              ASSERT_TRUE(real) << describe(c) << ": " << real.error().to_string();
              std::cout << describe(c) << " -> " << errno_text(*real) << "\n";
              EXPECT_EQ(errno_text(model), errno_text(*real)) << describe(c);
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 2 * 2 * 2 * 2 * 5);
}

TEST(PerfPermissionDifferential, OnAFullCpuTheChecksKeepLinuxsOrder) {
  const std::optional<int> original = native::perf_event_paranoid();
  if (auto why = refusal(original)) GTEST_SKIP() << *why;
  ParanoidGuard guard(*original);
  // Fill cpu 0 (as root, CPU-bound, disabled: each holds its slot) until the kernel says ENOSPC;
  // other processes' slots count too, so it is full whatever they hold.
  std::vector<native::Fd> fill;
  for (int i = 0; i < 8; ++i) {
    Case f{true, 2, true, BpType::kRw, true, 0x20000 + 8 * static_cast<std::uint64_t>(i), "fill"};
    auto fd = native::perf_event_open_attr(real_attr(f), -1, 0, -1, 0);
    if (!fd) {
      ASSERT_EQ(fd.error().code(), ErrorCode::kNoSpc) << fd.error().to_string();
      break;
    }
    fill.push_back(std::move(*fd));
  }
  ASSERT_GE(fill.size(), 1u);
  const std::uint64_t kernel = kTaskSizeMax;
  const Case cases[] = {
      {false, 2, true, BpType::kRw, false, 0x10000, "user"},          // EACCES before the slots
      {false, 2, true, BpType::kRw, true, 0x10000, "user"},           // ENOSPC before the CPU's
      {false, 1, true, BpType::kRw, true, 0x10000, "user"},           // ENOSPC
      {false, 0, true, BpType::kRw, false, kernel, "task_size_max"},  // ENOSPC before EPERM
      {false, 1, false, BpType::kRw, true, 0x10000, "user"},          // a task on cpu 0 too
      {false, 2, false, BpType::kX, false, kernel, "task_size_max"},  // EACCES
      {true, 2, true, BpType::kX, false, kernel, "task_size_max"},    // ENOSPC before EINVAL
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(native::set_perf_event_paranoid(c.paranoid));
    auto real = kernel_answer(c);
    ASSERT_TRUE(real) << describe(c) << ": " << real.error().to_string();
    const int model = sim_answer(c, 4);
    std::cout << "cpu 0 full: " << describe(c) << " -> " << errno_text(*real) << "\n";
    EXPECT_EQ(errno_text(model), errno_text(*real)) << describe(c);
  }
}

}  // namespace
}  // namespace hwarb

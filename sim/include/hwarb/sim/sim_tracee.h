// hwarb/sim/sim_tracee.h — a task of the simulated machine as a ptrace_compat::Tracee.
//
// attach() makes the caller the task's tracer (System::ptrace_attach: the task stops with
// SIGSTOP); the handle detaches on destruction (as a tracer's exit does, whether the task is
// stopped or not; the ptrace breakpoints stay, as on Linux). Every call follows the Tracee
// contract (ptrace_compat/tracee.h) and System's rules 1-4; the caller holds System::lock() when
// the System is shared between threads. Move-only.
#pragma once

#include <cstdint>
#include <optional>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/ptrace_compat/tracee.h"
#include "hwarb/sim/system.h"

namespace hwarb::sim {

class SimTracee final : public ptrace_compat::Tracee {
 public:
  // ESRCH for an unknown task, EPERM when it is traced already, EINVAL naming `layout` for the
  // x86_64 layout on an i386 machine.
  static Result<SimTracee> attach(
      System& system, TaskId task,
      ptrace_compat::UserLayout layout = ptrace_compat::UserLayout::kX86_64);

  SimTracee(SimTracee&& other) noexcept;
  SimTracee& operator=(SimTracee&& other) noexcept;
  SimTracee(const SimTracee&) = delete;
  SimTracee& operator=(const SimTracee&) = delete;
  ~SimTracee() override;

  TaskId task() const { return task_; }
  ptrace_compat::UserLayout layout() const override { return layout_; }
  Result<std::uint64_t> peek_user(std::uint64_t offset) override;
  Result<void> poke_user(std::uint64_t offset, std::uint64_t value) override;
  Result<std::optional<ptrace_compat::Stop>> wait(
      ptrace_compat::WaitMode mode = ptrace_compat::WaitMode::kNoHang) override;
  Result<void> cont() override;
  Result<void> step() override;
  // PTRACE_DETACH: needs a stop (ESRCH otherwise); the handle is empty afterwards.
  Result<void> detach();

 private:
  SimTracee(System* system, TaskId task, ptrace_compat::UserLayout layout)
      : system_(system), task_(task), layout_(layout) {}
  Result<void> attached() const;
  void release();

  System* system_ = nullptr;  // null once detached or moved from
  TaskId task_{};
  ptrace_compat::UserLayout layout_ = ptrace_compat::UserLayout::kX86_64;
};

}  // namespace hwarb::sim

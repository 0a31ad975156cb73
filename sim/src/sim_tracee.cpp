#include "hwarb/sim/sim_tracee.h"

#include <string>
#include <utility>

namespace hwarb::sim {

Result<SimTracee> SimTracee::attach(System& system, TaskId task, ptrace_compat::UserLayout layout) {
  if (layout == ptrace_compat::UserLayout::kX86_64 &&
      system.config().arch == breakpoints::Arch::kI386) {
    return make_error(ErrorCode::kInval,
                      "layout: x86_64 needs an x86_64 machine; this one is i386 (use i386)");
  }
  if (auto r = system.ptrace_attach(task); !r) return std::unexpected(r.error());
  return SimTracee(&system, task, layout);
}

SimTracee::SimTracee(SimTracee&& other) noexcept
    : system_(std::exchange(other.system_, nullptr)), task_(other.task_), layout_(other.layout_) {}

SimTracee& SimTracee::operator=(SimTracee&& other) noexcept {
  if (this != &other) {
    release();
    system_ = std::exchange(other.system_, nullptr);
    task_ = other.task_;
    layout_ = other.layout_;
  }
  return *this;
}

SimTracee::~SimTracee() {
  release();
}

void SimTracee::release() {
  if (system_ == nullptr) return;
  // A tracer that goes away detaches its tracee whether it is stopped or not.
  system_->ptrace_release(task_);
  system_ = nullptr;
}

Result<void> SimTracee::attached() const {
  if (system_ == nullptr) {
    return make_error(ErrorCode::kSrch,
                      "tracee: detached from task " + std::to_string(task_.value()));
  }
  return {};
}

Result<std::uint64_t> SimTracee::peek_user(std::uint64_t offset) {
  if (auto r = attached(); !r) return std::unexpected(r.error());
  if (auto r = system_->ptrace_check_stopped(task_); !r) return std::unexpected(r.error());
  return system_->ptrace().peek_user(task_, layout_, offset);
}

Result<void> SimTracee::poke_user(std::uint64_t offset, std::uint64_t value) {
  if (auto r = attached(); !r) return r;
  if (auto r = system_->ptrace_check_stopped(task_); !r) return r;
  return system_->ptrace().poke_user(task_, layout_, offset, value);
}

Result<std::optional<ptrace_compat::Stop>> SimTracee::wait(ptrace_compat::WaitMode mode) {
  if (auto r = attached(); !r) return std::unexpected(r.error());
  return system_->ptrace_wait(task_, mode);
}

Result<void> SimTracee::cont() {
  if (auto r = attached(); !r) return r;
  return system_->ptrace_resume(task_, false);
}

Result<void> SimTracee::step() {
  if (auto r = attached(); !r) return r;
  return system_->ptrace_resume(task_, true);
}

Result<void> SimTracee::detach() {
  if (auto r = attached(); !r) return r;
  if (auto r = system_->ptrace_detach(task_); !r) return r;
  system_ = nullptr;
  return {};
}

}  // namespace hwarb::sim

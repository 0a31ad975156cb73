// Guests on the simulated system (hwarb/sim/guest.h): validation of the guest's registers, VM entry
// and exit, and the host's restore (Linux's hw_breakpoint_restore).
#include <string>

#include "hwarb/base/check.h"
#include "hwarb/base/format.h"
#include "hwarb/ptrace_compat/debugreg_emulation.h"
#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {

namespace {

// guest.h, step 2.
Result<void> check_guest_registers(breakpoints::Arch arch, const DebugRegisters& guest) {
  if ((guest.dr7 >> 32) != 0) {
    return make_error(ErrorCode::kInval, "dr7: " + hex(guest.dr7) + " sets reserved bits 32-63");
  }
  for (int slot = 0; slot < x86::kSlots; ++slot) {
    if (!x86::dr7::enabled(guest.dr7, slot)) continue;
    if (auto r = ptrace_compat::decode_dr7_slot(arch, guest.dr7, slot); !r) {
      return std::unexpected(r.error().with_context("dr7"));
    }
  }
  if (arch == breakpoints::Arch::kI386) {
    for (int slot = 0; slot < x86::kSlots; ++slot) {
      if (guest.dr[slot] > 0xffffffff) {
        return make_error(ErrorCode::kInval, "dr" + std::to_string(slot) + ": " +
                                                 hex(guest.dr[slot]) +
                                                 " does not fit in 32 bits (i386)");
      }
    }
  }
  return {};
}

}  // namespace

Result<void> System::guest_enter(CpuId cpu, const DebugRegisters& guest) {
  if (config_.arch == breakpoints::Arch::kArm64) {
    return make_error(ErrorCode::kOpNotSupp,
                      "arch: arm64 has no x86 debug registers for a guest to load");
  }
  if (auto r = check_guest_registers(config_.arch, guest); !r) return r;
  return machine_->enter_guest(cpu, guest);
}

Result<DebugRegisters> System::guest_exit(CpuId cpu, GuestRestore restore) {
  auto task = machine_->current(cpu);
  if (!task) return std::unexpected(task.error());
  auto left = machine_->exit_guest(cpu);
  if (!left) return left;
  // enter_guest needs a running task and nothing can switch it while the guest runs.
  HWARB_CHECK(task->has_value(), "a CPU in a guest runs a task");
  const bool switch_db_regs = x86::dr7::any_enabled(left->dr7);
  if (restore == GuestRestore::kAll || switch_db_regs || tif_debug(**task)) {
    hw_breakpoint_restore(cpu, **task);
  }
  return left;
}

void System::hw_breakpoint_restore(CpuId cpu, TaskId task) {
  const DebugRegisters& image = host_regs_.at(static_cast<std::size_t>(cpu.value()));
  for (int slot = 0; slot < x86::kSlots; ++slot) {
    HWARB_CHECK(machine_->set_debug_address(cpu, slot, image.dr[slot]).has_value(), "restore DRn");
  }
  const breakpoints::PtraceThread* thread = api_->find_ptrace_thread(task);
  const std::uint64_t dr6 = thread != nullptr ? thread->virtual_dr6 : 0;
  HWARB_CHECK(machine_->set_dr6(cpu, dr6).has_value(), "restore DR6");
  HWARB_CHECK(machine_->set_dr7(cpu, image.dr7).has_value(), "restore DR7");
}

Result<DebugRegisters> System::host_debug_registers(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= config_.cpus) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) +
                                             " is not a possible CPU (0.." +
                                             std::to_string(config_.cpus - 1) + ")");
  }
  return host_regs_[static_cast<std::size_t>(cpu.value())];
}

bool System::tif_debug(TaskId task) const {
  const breakpoints::PtraceThread* thread = api_->find_ptrace_thread(task);
  return thread != nullptr && x86::dr7::any_enabled(ptrace_compat::rebuild_dr7(*thread));
}

}  // namespace hwarb::sim

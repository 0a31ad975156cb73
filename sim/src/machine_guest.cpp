// Guest mode of the simulated machine (machine.h, "Guest mode"): VM entry loads the guest's debug
// registers into a CPU, guest accesses match them without reaching the host's handler, VM exit
// hands them back and leaves the restore to the host.
#include <string>

#include "hwarb/base/format.h"
#include "hwarb/sim/machine.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {

namespace {

std::string cpu_text(CpuId cpu) {
  return "cpu: " + std::to_string(cpu.value());
}

}  // namespace

Result<void> Machine::not_in_guest(CpuId cpu, const char* op) const {
  if (!cpus_[static_cast<std::size_t>(cpu.value())].guest) return {};
  return make_error(ErrorCode::kBusy,
                    cpu_text(cpu) + " is running a guest (" + op + " waits for its guest exit)");
}

Result<void> Machine::enter_guest(CpuId cpu, const DebugRegisters& guest) {
  if (auto ok = not_in_callback("enter_guest"); !ok) return ok;
  auto c = find_online_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  if (s.guest) return make_error(ErrorCode::kBusy, cpu_text(cpu) + " is already in a guest");
  if (!s.current) {
    return make_error(ErrorCode::kInval,
                      cpu_text(cpu) + " is idle (a guest runs in a task, its vCPU thread)");
  }
  if ((guest.dr7 >> 32) != 0) {
    return make_error(ErrorCode::kInval, "dr7: " + hex(guest.dr7) + " sets reserved bits 32-63");
  }
  s.regs = guest;
  decode_data_slots(s);
  s.guest = true;
  return {};
}

Result<std::uint64_t> Machine::guest_access(CpuId cpu, AccessKind kind, std::uint64_t addr,
                                            int size) {
  if (auto ok = not_in_callback("guest_access"); !ok) return std::unexpected(ok.error());
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  if (!s.guest) return make_error(ErrorCode::kInval, cpu_text(cpu) + " is not in a guest");
  std::uint64_t bits = 0;
  if (kind == AccessKind::kExec) {
    bits = exec_breakpoint_hits(s.regs, addr);
  } else {
    if (!SparseMemory::valid_size(size)) {
      return make_error(ErrorCode::kInval,
                        "size: " + std::to_string(size) + " is not 1, 2, 4 or 8");
    }
    if (!SparseMemory::valid_range(addr, size)) {
      return make_error(ErrorCode::kInval,
                        "addr: " + hex(addr) + " + " + std::to_string(size) + " wraps past 2^64");
    }
    bits = data_breakpoint_hits(s.regs, kind, addr, size);
  }
  s.regs.dr6 |= bits;
  return bits;
}

Result<DebugRegisters> Machine::exit_guest(CpuId cpu) {
  if (auto ok = not_in_callback("exit_guest"); !ok) return std::unexpected(ok.error());
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  if (!s.guest) return make_error(ErrorCode::kInval, cpu_text(cpu) + " is not in a guest");
  s.guest = false;
  const DebugRegisters left = s.regs;
  s.regs.dr7 = kVmExitDr7;
  decode_data_slots(s);
  return left;
}

Result<bool> Machine::in_guest(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->guest;
}

}  // namespace hwarb::sim

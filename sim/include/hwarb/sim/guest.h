// hwarb/sim/guest.h — a KVM guest on the simulated system: its debug registers, and how the host's
// are written back after it ran (Linux's hw_breakpoint_restore, the 2009 hw-breakpoint rewrite and
// its review).
//
// The host's per-CPU state. System keeps, per CPU, the image the breakpoint PMU programs (Linux's
// per-CPU cpu_debugreg[0..3] and dr7): every PMU write goes to the image, and to the CPU's
// registers unless the CPU is in a guest; the PMU composes DR7 from the image, as Linux composes it
// from its per-CPU dr7, so bits programmed into a CPU's DR7 behind the driver's back are dropped at
// the PMU's next DR7 write there. The virtual DR6 of a task is the ptrace emulation's (Linux's
// current->thread.debugreg6).
//
// System::guest_enter(cpu, regs), in this order, all or nothing:
//  1. not on arm64 (EOPNOTSUPP: the machine has x86 registers only);
//  2. regs: bits 32-63 of DR7 are EINVAL ("dr7: ..."); every ENABLED slot of DR7 (Ln or Gn) is
//     decoded as Linux's ptrace DR7 write decodes it (ptrace_compat::decode_dr7_slot): R/W 10
//     (I/O), execute with LEN != 00 and LEN 10 on i386 are EINVAL ("dr7: RW1: ..."); disabled
//     slots are not decoded (the hardware ignores them); on i386 an address above 32 bits is
//     EINVAL ("dr2: ..."); DR6 is the guest's initial DR6 ("set means happened", usually 0);
//  3. the CPU (Machine::enter_guest): possible (EINVAL), online (ENODEV), running a task, the
//     vCPU thread (EINVAL when idle), not already in a guest (EBUSY).
// Then the guest's registers are in the CPU: the host's installed breakpoints are no longer in
// the hardware.
//
// While a CPU is in a guest (Machine's rules): guest accesses (Machine::guest_access) match the
// guest's registers only and set the guest's DR6; the host never sees them. Host work on that CPU
// (switch, exit of its task, access, exec, branch, run) is EBUSY. Host breakpoint changes that
// touch the CPU (register, modify, unregister, enable, ticks that rotate flexible ones) are done
// on the image only and reach the hardware at guest exit. Other CPUs are unaffected.
//
// System::guest_exit(cpu, restore): VM exit (Machine::exit_guest: DR7 becomes 0x400, DR0-DR3 and
// DR6 keep the guest's values), then the restore, and returns the guest's registers as it left
// them. EINVAL when the CPU is not in a guest (nothing changes).
//  - GuestRestore::kAll (the fix the review asked for): always write back DR0-DR3 from the
//    image, DR6 from the current task's virtual DR6, DR7 from the image. Whatever kind installed
//    the host's breakpoints (ptrace, perf task, perf CPU, wide), they hit again exactly as if the
//    guest had never run.
//  - GuestRestore::kTifDebugOnly: the v3 patch as posted, kept to demonstrate the review's point
//    (tests and `restore=tif_debug` in scenarios): restore only when the guest had enabled
//    breakpoints (KVM's switch_db_regs) or the current task has TIF_DEBUG (an enabled ptrace
//    breakpoint); otherwise the CPU keeps DR7 = 0x400, so the perf and wide breakpoints installed
//    there stay dead until the PMU next writes DR7 on that CPU.
#pragma once

#include <cstdint>

namespace hwarb::sim {

enum class GuestRestore : std::uint8_t {
  kAll,           // hw_breakpoint_restore after every guest run
  kTifDebugOnly,  // only if switch_db_regs || TIF_DEBUG (the v3 patch; wrong)
};

}  // namespace hwarb::sim

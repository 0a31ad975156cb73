// hwarb/ptrace_compat/debugreg_emulation.h — DR0–DR7 of a traced task, with current Linux x86
// semantics (arch/x86/kernel/ptrace.c), on the hw_breakpoint API (docs/architecture.md section 5).
//
// A ptrace breakpoint is a pinned user breakpoint of the task on all CPUs, exclude_kernel, in the
// same arbiter as perf and kernel users: a ptrace user, a perf user and a wide kernel user of the
// same task compete by the arbiter's rules, and the arbiter's explain names the holders. The
// task's state is the breakpoints layer's PtraceThread (ptrace_bps[4], ptrace_dr7, virtual_dr6),
// so flush_ptrace_hw_breakpoint (exit, detach) drops all of it.
//
// Registers (get_debugreg / set_debugreg, n = 0..7):
//  - DR0–DR3 read: the breakpoint's address, 0 without one (an address that was refused is
//    never stored). Write, in Linux's ptrace_set_breakpoint_addr:
//      1. the slot has no breakpoint: register a disabled placeholder (len 1, type w) at the
//         address. It holds a slot like any registered breakpoint (ENOSPC when none is left; the
//         slot check comes before the address check, as register_perf_hw_breakpoint).
//      2. else: modify the breakpoint's address (modify_user_hw_breakpoint: the address is
//         checked against the breakpoint's current len and type).
//    A kernel address is EINVAL (ptrace breakpoints are exclude_kernel).
//  - DR4, DR5: read 0; write EIO.
//  - DR6: virtual. Kept with "set means happened" polarity; read returns it XOR 0xffff0ff0 and a
//    write stores value XOR 0xffff0ff0, so any value written reads back unchanged and a fresh
//    task reads 0xffff0ff0.
//  - DR7 read: the value last written successfully, exactly as written (reserved bits, bits
//    32–63 and all). Write, as Linux's ptrace_write_dr7:
//      1. drop the reserved bits 10–15 (DR_CONTROL_RESERVED) from the value to decode;
//      2. remember the old image, REBUILT from the breakpoints (ptrace_get_dr7): each enabled
//         breakpoint contributes its R/W, LEN, Gn and GE bits; disabled slots contribute 0;
//      3. for slot 0..3 in order: enabled iff Ln or Gn; R/W and LEN decoded
//         (arch_bp_generic_fields: execute needs LEN 00 and becomes len sizeof(long); R/W 10 is
//         EINVAL; LEN 10 is 8 bytes, EINVAL on i386). A slot without a breakpoint: skipped when
//         disabled, else a new breakpoint at address 0 is registered. A slot with one: modified
//         to the decoded len/type and enabled/disabled (so the fields of a disabled slot that has
//         a breakpoint are still decoded and checked: Linux oddity, followed). Stop at the first
//         error;
//      4. on an error, run 3 again with the old image (the second pass) and return the first
//         error. Consequences, all Linux's: DR7 still reads the previous value; breakpoints the
//         first pass registered stay registered, disabled, holding their slots; a slot that was
//         disabled comes back as a disabled execute breakpoint (its rebuilt fields are 00/00).
//         None of this changes what DR0–DR7 read.
//  - The old image is computed in an `int` in Linux, so a slot-3 LEN with bit 31 set sign-extends
//    it to 64 bits. Followed in rebuild_dr7(); invisible, because decoding reads bits 0–31 only.
//
// Hits and stops (the machine's debug-exception path calls these in order):
//  - begin_exception(task); the breakpoint PMU's handle() then runs the ptrace breakpoints'
//    handlers (Linux's ptrace_triggered), which record trap bit n of the slot that fired;
//  - end_exception(task, raised, consumed) gives the exception's virtual DR6 — BS of the raised
//    bits plus the recorded trap bits (Linux's exc_debug_user starts virtual_dr6 from DR_STEP on
//    EVERY user-mode #DB, so a perf-only hit clears it too) — and whether SIGTRAP is due (BS, a
//    ptrace trap bit, or a trap bit no breakpoint consumed). The caller stores the value with
//    set_virtual_dr6 when the exception takes effect (a tracer may hold it back while an earlier
//    stop is pending; sim/system.h).
//
// Not thread-safe: the machine's lock serialises (sim/system.h). All-or-nothing: a failed
// set_debugreg/poke_user leaves every register reading as before.
#pragma once

#include <cstdint>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/ptrace_compat/user_area.h"

namespace hwarb::ptrace_compat {

// Linux's ptrace_get_dr7: the DR7 image of the enabled breakpoints of `thread`, sign-extended
// from 32 bits (see above).
std::uint64_t rebuild_dr7(const breakpoints::PtraceThread& thread);

// Linux's decode_dr7 + arch_bp_generic_fields for slot `slot` of `dr7`: the len and type the
// slot asks for. EINVAL naming the field for execute with LEN != 00, R/W = 10, LEN 10 on i386.
struct SlotRequest {
  bool enabled = false;
  std::uint64_t len = 0;
  pmu::BpType type = pmu::BpType::kEmpty;
};
Result<SlotRequest> decode_dr7_slot(breakpoints::Arch arch, std::uint64_t dr7, int slot);

struct DebugException {
  std::uint64_t virtual_dr6 = 0;  // "set means happened"
  bool sigtrap = false;
};

class DebugRegEmulation {
 public:
  explicit DebugRegEmulation(breakpoints::HwBreakpoints& api) : api_(api) {}

  // PTRACE_PEEKUSER / PTRACE_POKEUSER of `task` in `layout` (user_area.h decodes the offset:
  // the i386 layout as compat on an x86_64 machine, native on an i386 one; x86_64 natively).
  // ESRCH for an unknown task; EOPNOTSUPP for a general register and on arm64; EINVAL for a
  // value that does not fit the layout's word.
  Result<std::uint64_t> peek_user(TaskId task, UserLayout layout, std::uint64_t offset) const;
  Result<void> poke_user(TaskId task, UserLayout layout, std::uint64_t offset, std::uint64_t value);

  // How this machine's kernel decodes offsets of `layout`: compat for i386 on x86_64.
  UserAbi abi(UserLayout layout) const;

  // Linux's ptrace_get_debugreg / ptrace_set_debugreg. EIO for n outside 0..7 (and writes of
  // DR4/DR5), ESRCH for an unknown task.
  Result<std::uint64_t> get_debugreg(TaskId task, int n) const;
  Result<void> set_debugreg(TaskId task, int n, std::uint64_t value);

  void begin_exception(TaskId task);
  DebugException end_exception(TaskId task, std::uint64_t raised, std::uint64_t consumed);
  void set_virtual_dr6(TaskId task, std::uint64_t happened);

  // How many DR7 second passes failed (Linux WARNs there). Expected to stay 0; tests check it.
  int failed_restores() const { return failed_restores_; }

 private:
  Result<void> check(TaskId task) const;
  Result<void> set_breakpoint_addr(TaskId task, int slot, std::uint64_t addr);
  Result<void> write_dr7(TaskId task, std::uint64_t value);
  Result<void> apply_dr7(TaskId task, std::uint64_t dr7);
  pmu::OverflowHandler triggered(int slot);

  breakpoints::HwBreakpoints& api_;
  // The exception in progress: its task and the trap bits its ptrace breakpoints recorded.
  TaskId exception_task_{};
  std::uint64_t exception_bits_ = 0;
  int failed_restores_ = 0;
};

}  // namespace hwarb::ptrace_compat

// hwarb/breakpoints/bp_pmu.h — the breakpoint PMU driver (Linux's arch/x86 hw_breakpoint.c).
//
// It owns the per-CPU slot table (which event sits in which debug register) and programs the
// hardware through a DebugRegisterFile, which a machine implements (sim; the real
// backend in linux/ later). Contract, per pmu.h:
//  - validate/event_init: validate_breakpoint() for the driver's arch (validate.h);
//    check_reservable: validate.h's check_reservable (before the slots, as Linux).
//  - add(event, cpu): installs into the FIRST FREE register of `cpu`: DRn = bp_addr, then DR7 =
//    x86::dr7::install(DR7, n, type, len) (global enable bit Gn, the R/W and LEN fields of slot n,
//    GE 0x200, as Linux's __encode_dr7). No free register: ENOSPC, nothing written. The event
//    starts stopped (start() arms delivery).
//  - del(event, cpu): DR7 = x86::dr7::uninstall(DR7, n) and DRn = 0; the slot is free again. When
//    the last slot goes, DR7 keeps no enable bit (GE is dropped with it).
//  - start/stop: as Linux, a stopped event stays installed but its hits are ignored.
//  - read(event): a breakpoint counts as it fires: handle() gives each hit of a started slot to
//    Event::deliver, which adds it to the event's count at once (as Linux's perf_bp_event), so
//    the registers never hold a count the event lacks and read() folds in nothing — a read after
//    N hits says N, however often it runs (the core reads at every sched-out and user read). The
//    event must be installed on its active CPU (the core reads only active events): anything else
//    is a bug of the caller, checked.
//  - handle(exception): for each trap bit B0..B3 set in the exception's DR6 bits, in slot order,
//    the event in that slot (if any, and started, and not excluding the access's mode: user,
//    or kernel for a DebugTrap with `kernel` set) gets
//    Event::deliver(sample). A bit of an empty slot is skipped, never hiding the bits after it.
//    Returns the bits it consumed (the trap bits of occupied slots) so that the machine's handler
//    can clear them from DR6; BS and other bits are left to their owners (ptrace, single-step).
//  - Without a DebugRegisterFile (arm64 scenarios: the simulated machine has x86 registers only)
//    the driver keeps the same slot table per pool (6 instruction + 4 data registers) and writes
//    nothing; such events never fire.
// Not thread-safe: the Core's caller serialises (see sim/system.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/validate.h"
#include "hwarb/pmu/event.h"
#include "hwarb/pmu/pmu.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {

// The x86 R/W and LEN fields of a validated breakpoint (Linux's arch_build_bp_info: hw->type,
// hw->len): execute is R/W 00 with LEN_1 (X86_BREAKPOINT_LEN_X), w is 01, rw is 11.
x86::DrType dr_type(pmu::BpType type);
x86::DrLen dr_len(const pmu::EventAttr& attr);

// One CPU's debug registers as the driver sees them. Implemented by the machine; calls never
// fail for a CPU in range (the machine checks its own invariants).
class DebugRegisterFile {
 public:
  virtual ~DebugRegisterFile() = default;
  virtual std::uint64_t dr7(CpuId cpu) const = 0;
  virtual void set_dr7(CpuId cpu, std::uint64_t value) = 0;
  virtual void set_address(CpuId cpu, int slot, std::uint64_t addr) = 0;
};

// A debug exception, as the machine reports it to the driver: the DR6 bits it raised and the
// sample every event it hits gets (sample.cpu is the trapping CPU).
struct DebugTrap {
  std::uint64_t dr6 = 0;  // "set means happened" bits of this exception
  pmu::Sample sample;
  bool kernel =
      false;  // a kernel-mode access: events with exclude_kernel eat it (else exclude_user)
};

class BreakpointPmu final : public pmu::Pmu {
 public:
  // hw may be null (accounting only; see above).
  BreakpointPmu(Arch arch, int cpus, DebugRegisterFile* hw);

  std::string_view name() const override { return "breakpoint"; }
  Arch arch() const { return arch_; }

  Result<void> validate(const pmu::EventAttr& attr) const override;
  Result<void> check_reservable(const pmu::EventAttr& attr) const override {
    return breakpoints::check_reservable(attr);
  }
  Result<void> event_init(pmu::Event& event) override;
  Result<void> add(pmu::Event& event, CpuId cpu) override;
  void del(pmu::Event& event, CpuId cpu) override;
  void start(pmu::Event& event, CpuId cpu) override;
  void stop(pmu::Event& event, CpuId cpu) override;
  void read(pmu::Event& event) override;

  // The debug-exception handler; returns the DR6 trap bits it consumed.
  std::uint64_t handle(const DebugTrap& trap);

  // The events installed on `cpu`, one entry per register (nullptr: free). Without hardware,
  // the instruction registers come first, then the data registers.
  std::vector<const pmu::Event*> installed(CpuId cpu) const;
  // Registers per CPU (4 on x86; 6 + 4 on arm64).
  int registers() const { return static_cast<int>(inst_regs_ + data_regs_); }

 private:
  struct Slot {
    pmu::Event* event = nullptr;
    bool started = false;
  };
  Slot* slot_of(const pmu::Event& event, CpuId cpu);

  Arch arch_;
  DebugRegisterFile* hw_;
  std::size_t inst_regs_;                 // arm64 without hardware: separate pools; else 0
  std::size_t data_regs_;                 // x86: the 4 shared registers
  std::vector<std::vector<Slot>> slots_;  // [cpu][register]
};

}  // namespace hwarb::breakpoints

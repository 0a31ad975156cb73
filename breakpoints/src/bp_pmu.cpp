#include "hwarb/breakpoints/bp_pmu.h"

#include <optional>
#include <string>

#include "hwarb/base/check.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {

x86::DrType dr_type(pmu::BpType t) {
  switch (t) {
    case pmu::BpType::kX:
      return x86::DrType::kExecute;
    case pmu::BpType::kW:
      return x86::DrType::kWrite;
    default:
      return x86::DrType::kReadWrite;
  }
}

x86::DrLen dr_len(const pmu::EventAttr& a) {
  if (a.bp_type == pmu::BpType::kX) return x86::DrLen::k1;
  auto len = x86::len_from_bytes(static_cast<int>(a.bp_len));
  HWARB_CHECK(len.has_value(), "the encoding of an unvalidated breakpoint length");
  return *len;
}

BreakpointPmu::BreakpointPmu(Arch arch, int cpus, DebugRegisterFile* hw) : arch_(arch), hw_(hw) {
  if (!hw && arch == Arch::kArm64) {
    inst_regs_ = 6;
    data_regs_ = 4;
  } else {
    inst_regs_ = 0;
    data_regs_ = x86::kSlots;
  }
  slots_.assign(static_cast<std::size_t>(cpus), std::vector<Slot>(inst_regs_ + data_regs_));
}

Result<void> BreakpointPmu::validate(const pmu::EventAttr& attr) const {
  return validate_breakpoint(arch_, attr);
}

Result<void> BreakpointPmu::event_init(pmu::Event& event) {
  return validate(event.attr());
}

Result<void> BreakpointPmu::add(pmu::Event& event, CpuId cpu) {
  auto& regs = slots_.at(static_cast<std::size_t>(cpu.value()));
  // Registers of the event's pool: [first, last).
  std::size_t first = 0, last = regs.size();
  if (inst_regs_ > 0) {
    if (event.attr().bp_type == pmu::BpType::kX) {
      last = inst_regs_;
    } else {
      first = inst_regs_;
    }
  }
  for (std::size_t n = first; n < last; ++n) {
    if (regs[n].event) continue;
    regs[n] = Slot{&event, false};
    event.hw_index = static_cast<int>(n);
    if (hw_) {
      const int slot = static_cast<int>(n);
      hw_->set_address(cpu, slot, event.attr().bp_addr);
      hw_->set_dr7(cpu, x86::dr7::install(hw_->dr7(cpu), slot, dr_type(event.attr().bp_type),
                                          dr_len(event.attr())));
    }
    return {};
  }
  return make_error(ErrorCode::kNoSpc, "cpu " + std::to_string(cpu.value()) +
                                           ": no free debug register for event " +
                                           std::to_string(event.id()));
}

BreakpointPmu::Slot* BreakpointPmu::slot_of(const pmu::Event& event, CpuId cpu) {
  auto& regs = slots_.at(static_cast<std::size_t>(cpu.value()));
  HWARB_CHECK(event.hw_index >= 0 && static_cast<std::size_t>(event.hw_index) < regs.size() &&
                  regs[static_cast<std::size_t>(event.hw_index)].event == &event,
              "breakpoint event is not installed where it says");
  return &regs[static_cast<std::size_t>(event.hw_index)];
}

void BreakpointPmu::del(pmu::Event& event, CpuId cpu) {
  Slot* s = slot_of(event, cpu);
  const int slot = event.hw_index;
  *s = Slot{};
  event.hw_index = -1;
  if (hw_) {
    hw_->set_dr7(cpu, x86::dr7::uninstall(hw_->dr7(cpu), slot));
    hw_->set_address(cpu, slot, 0);
  }
}

void BreakpointPmu::start(pmu::Event& event, CpuId cpu) {
  slot_of(event, cpu)->started = true;
}

void BreakpointPmu::stop(pmu::Event& event, CpuId cpu) {
  slot_of(event, cpu)->started = false;
}

void BreakpointPmu::read(pmu::Event& event) {
  // Every hit is in the count already (handle() -> Event::deliver): nothing is pending here.
  const std::optional<CpuId> cpu = event.active_cpu();
  HWARB_CHECK(cpu.has_value(), "read of a breakpoint event that is not installed");
  (void)slot_of(event, *cpu);
}

std::uint64_t BreakpointPmu::handle(const DebugTrap& trap) {
  auto& regs = slots_.at(static_cast<std::size_t>(trap.sample.cpu.value()));
  std::uint64_t consumed = 0;
  for (int n = 0; n < x86::kSlots && static_cast<std::size_t>(n) < regs.size(); ++n) {
    if (!x86::dr6::trapped(trap.dr6, n)) continue;
    Slot& s = regs[static_cast<std::size_t>(n)];
    // Case 1: an empty slot's bit (a stale or foreign trap): skip it, look at the next bit.
    if (!s.event) continue;
    consumed |= x86::dr6::trap_bit(n);
    // Case 2: a stopped event, or one that excludes the mode of the access: eaten.
    const pmu::EventAttr& a = s.event->attr();
    if (!s.started || (trap.kernel ? a.exclude_kernel : a.exclude_user)) continue;
    // Case 3: deliver.
    s.event->deliver(trap.sample);
  }
  return consumed;
}

std::vector<const pmu::Event*> BreakpointPmu::installed(CpuId cpu) const {
  std::vector<const pmu::Event*> out;
  for (const Slot& s : slots_.at(static_cast<std::size_t>(cpu.value()))) out.push_back(s.event);
  return out;
}

}  // namespace hwarb::breakpoints

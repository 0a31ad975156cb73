// hwarb/bts/software_bts.h — the BTS facility in software, for machines without one: whoever
// observes branches by other means (single-stepping, an emulator: hwarb trace) reports each taken
// branch here, and it is stored exactly as the processor would store it.
//
// Contract:
//  - One facility per CPU, all in the format given to the constructor; a negative cpus counts as
//    0. Every CPU starts switched off (DEBUGCTL 0, empty DS area, no memory).
//  - program() keeps what the owner installs: the DS area (the PEBS fields as given, unused), the
//    memory of the BTS buffer (not owned: it must stay valid until the next program() of that
//    CPU or the SoftwareBts's destruction) and the BTS bits of DEBUGCTL (x86::debugctl::kBtsMask;
//    the other bits belong to this facility and stay 0). set_bts_index moves the index only.
//  - branch() is one taken branch on a CPU (kernel: taken at CPL 0). It applies x86::store_bts,
//    the one place the store rules live, to that CPU's area and memory and returns what the store
//    did. When the store raises the PMI, the interrupt handler (if set) is called with the CPU
//    before branch() returns; the handler may call program, ds_area and set_bts_index (the
//    Tracer flushes from it).
//  - Errors: EINVAL for a CPU out of range (field cpu) and whatever store_bts refuses (an address
//    that does not fit the format, an index outside the installed memory); nothing changes then.
//    program and set_bts_index ignore a CPU out of range and ds_area gives an empty area for it
//    (BtsHardware has no error channel; the Tracer only names its own CPUs).
//  - Not thread-safe: the caller serialises, as for the Tracer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/x86/bts.h"

namespace hwarb::bts {

class SoftwareBts final : public BtsHardware {
 public:
  using InterruptHandler = std::function<void(CpuId)>;

  SoftwareBts(int cpus, x86::BtsFormat format);

  void program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
               std::uint64_t debugctl) override;
  x86::DsArea ds_area(CpuId cpu) const override;
  void set_bts_index(CpuId cpu, std::uint64_t index) override;

  // One taken branch on `cpu`; see the contract.
  Result<x86::BtsStore> branch(CpuId cpu, std::uint64_t from, std::uint64_t to, bool predicted,
                               bool kernel);
  void set_interrupt_handler(InterruptHandler handler) { interrupt_ = std::move(handler); }

  int cpus() const { return static_cast<int>(cpus_.size()); }
  x86::BtsFormat format() const { return format_; }
  // The DEBUGCTL value of `cpu` (0 for a CPU out of range).
  std::uint64_t debugctl(CpuId cpu) const;

 private:
  struct Cpu {
    x86::DsArea area;
    std::span<std::byte> buffer;
    std::uint64_t debugctl = 0;
  };
  bool valid(CpuId cpu) const { return cpu.value() >= 0 && cpu.value() < cpus(); }

  x86::BtsFormat format_;
  std::vector<Cpu> cpus_;
  InterruptHandler interrupt_;
};

}  // namespace hwarb::bts

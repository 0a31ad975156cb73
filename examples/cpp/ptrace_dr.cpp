// ptrace_dr: the ptrace debug-register emulation as a debugger uses it (the way gdb's x86 dregs
// code drives PTRACE_POKEUSER/PEEKUSER on u_debugreg): attach to a task of the simulated machine,
// poke DR1 = the address and DR7 = a 4-byte write breakpoint in slot 1, continue, let the task
// write, see the SIGTRAP stop and DR6's B1 bit, clear DR6, continue. The debug registers behind
// the emulation are shared with perf users through the arbiter. Exits 0 when the trap was seen
// with the right DR6.
#include <csignal>
#include <cstdint>
#include <cstdio>

#include "hwarb/sim/sim_tracee.h"
#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

int main() {
  using namespace hwarb;
  auto system = sim::System::create({.cpus = 1});
  if (!system) return 1;
  sim::Machine& machine = (*system)->machine();
  auto task = machine.create_task();
  if (!task || !machine.switch_to(CpuId(0), *task)) return 1;

  auto tracee = sim::SimTracee::attach(**system, *task);  // stops it with SIGSTOP
  if (!tracee) {
    std::fprintf(stderr, "attach: %s\n", tracee.error().to_string().c_str());
    return 1;
  }
  (void)tracee->wait();  // the attach stop
  const std::uint64_t dr7 = x86::dr7::install(0, 1, x86::DrType::kWrite, x86::DrLen::k4);
  if (auto r = tracee->poke_debugreg(1, 0x5000); !r) return 1;
  if (auto r = tracee->poke_debugreg(7, dr7); !r) {
    std::fprintf(stderr, "poke DR7: %s\n", r.error().to_string().c_str());
    return 1;
  }
  if (!tracee->cont()) return 1;

  // The task writes: the first write misses, the second hits DR1.
  (void)machine.access(CpuId(0), *task, sim::AccessKind::kWrite, 0x6000, 4, 1);
  (void)machine.access(CpuId(0), *task, sim::AccessKind::kWrite, 0x5000, 4, 2);
  auto stop = tracee->wait();
  if (!stop || !*stop) {
    std::fprintf(stderr, "no stop after the write\n");
    return 1;
  }
  auto dr6 = tracee->peek_debugreg(6);
  if (!dr6) return 1;
  std::printf("stopped by signal %d, DR6 = 0x%llx\n", (*stop)->signal,
              static_cast<unsigned long long>(*dr6));
  const bool ok = (*stop)->signal == SIGTRAP && (*dr6 & x86::dr6::trap_bit(1)) != 0;
  // As a debugger does: clear DR6's status bits, remove the breakpoint, continue.
  if (!tracee->poke_debugreg(6, 0) || !tracee->poke_debugreg(7, 0) || !tracee->cont()) return 1;
  return ok ? 0 : 1;
}

// tools/hwarb/src/system_wide.h — `hwarb stat -a` / `-C LIST` count accesses on CPUs, as
// `perf stat -a -e mem:...` does; `hwarb watch -a` / `-C` prints each hit, as `perf record -a`
// samples them. No process is traced (a command is traced only for its exit status).
//
// Contract:
//  - The events are per (CPU, piece), pid -1 (native::PerfCpuCount): every task that runs on
//    those CPUs is counted, and the kernel's own accesses too (copy_to_user into a watched user
//    buffer, kernel data) unless --user. A user address means that address in whatever process
//    runs: give a command and its symbols name it (counted while it runs; the command starts
//    untouched apart from address-space randomisation off); no command counts until SIGINT,
//    SIGTERM or SIGHUP. Kernel symbols come from /proc/kallsyms (a name the command does not
//    have is looked up there).
//  - Only the hardware can count here: where this machine does not deliver breakpoint hits the
//    command says so and exits 1 (there is no software path for other processes or the kernel);
//    --software, -p and -t are usage errors (exit 2), as is a bad CPU list.
//  - Read/write accesses (`:rw`, the default) are counted as accesses: an rw debug register does
//    not say which; `:r` is refused (x86 has no read-only breakpoint and nothing can be stopped
//    to classify). The kernel's refusals are named (ENOSPC: the CPUs' slots held elsewhere;
//    EACCES/EPERM with perf_event_paranoid; EINVAL for execute breakpoints on kernel text).
#pragma once

#include <string>
#include <vector>

#include "hwarb/cli/watch_expr.h"
#include "session.h"

namespace hwarb::cli {

struct SystemWideArgs {
  bool stat = true;  // false: watch (every hit printed)
  std::vector<WatchExpr> exprs;
  bool all_cpus = false;
  std::string cpu_list;  // -C: a kernel CPU list ("0", "0-1,3")
  bool user_only = false;
  bool software = false;
  bool json = false;
  std::string output;
  TargetOptions target;
};

// Runs `hwarb stat|watch -a` / `-C`; returns the exit status.
//  - watch: one sampling event per (CPU, piece); each hit prints its CPU, process, thread, the
//    instruction (kernel ip: /proc/kallsyms symbol+off; the command's: its symbols) and the
//    access (w, rw or x: an rw register does not say which); no values (nothing is stopped).
int run_system_wide(SystemWideArgs& args);

}  // namespace hwarb::cli

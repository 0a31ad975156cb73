// hwarb/gdb/gdb_signals.h — signal numbers as GDB's remote protocol carries them.
//
// gdb's remote protocol numbers signals its own way (gdb's include/gdb/signals.def), the
// traditional Unix numbers, not Linux's: SIGUSR1 is 30 there (10 on Linux), SIGCHLD 20 (17),
// SIGSTOP 17 (19), SIGBUS 10 (7). A stub translates each stop reply's signal, and each signal a
// resume names, between the two; a stub that sent Linux's numbers would make gdb report a
// SIGCHLD as "SIGSTOP" and a SIGUSR1 as "SIGBUS". lldb instead uses the target's own numbers
// when the stub says what the target is (qHostInfo: ostype linux), as lldb-server does.
//
//   Linux (x86-64)                         gdb's remote protocol
//   1-6 HUP INT QUIT ILL TRAP ABRT         1-6 (the same)
//   7 BUS  8 FPE  9 KILL  10 USR1          10  8  9  30
//   11 SEGV  12 USR2  13 PIPE  14 ALRM     11  31  13  14
//   15 TERM  16 STKFLT  17 CHLD  18 CONT   15  none  20  19
//   19 STOP  20 TSTP  21 TTIN  22 TTOU     17  18  21  22
//   23 URG  24 XCPU  25 XFSZ  26 VTALRM    16  24  25  26
//   27 PROF  28 WINCH  29 IO  30 PWR       27  28  23  32
//   31 SYS  32  33..63  64                 12  77  45..75  78
//
// Contract: pure functions. gdb_signal_from_linux(0) is 0; a Linux signal gdb has no number for
// (16, SIGSTKFLT) is 143, gdb's "unknown signal". linux_signal_from_gdb is the inverse (gdb's
// SIGPOLL, 33, is Linux's SIGIO); nullopt for a gdb signal Linux does not have (SIGEMT, ...).
#pragma once

#include <optional>

namespace hwarb::gdb {

inline constexpr int kGdbSignalUnknown = 143;

[[nodiscard]] int gdb_signal_from_linux(int signal);
[[nodiscard]] std::optional<int> linux_signal_from_gdb(int signal);

}  // namespace hwarb::gdb

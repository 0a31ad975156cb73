// hwarb/linux/terminal.h — the process-level pieces a command-line tool needs from the OS:
// whether a stream is a terminal, and a Ctrl-C / SIGTERM / SIGHUP flag.
//
// Contract:
//  - install_interrupt_flag() installs handlers for SIGINT, SIGTERM and SIGHUP (the terminal
//    closed) that only set a flag,
//    WITHOUT SA_RESTART, so a blocking waitpid in the tool returns EINTR and the tool can clean
//    up (restore its tracee) instead of dying. Idempotent.
//  - interrupt_requested() reads the flag (async-signal-safe, lock-free).
//  - interrupt_count() counts the signals taken so far: a waiter that polls instead of blocking
//    (and so gets no EINTR) compares it before and after to learn that one arrived meanwhile.
// Thread-safety: both functions may be called from any thread.
#pragma once

namespace hwarb::native {

bool is_terminal(int fd);
// The terminal on `fd` makes process group `pgrp` its foreground, as gdbserver does for the
// program it starts (Ctrl-C and the terminal's other signals then reach the program, and the
// server hears of them as the program's stops): only when `fd` is a terminal whose foreground is
// the caller's own group, or the group it gave the terminal to before (a program that ended: the
// next one takes it over), else nothing changes (false). From then on the caller ignores SIGTTOU
// and SIGTTIN (it writes to the terminal from the background), and at its exit (atexit) the
// first group it took the terminal from gets it back. Returns whether the terminal was given.
bool give_terminal(int fd, int pgrp);
void install_interrupt_flag();
bool interrupt_requested();
unsigned interrupt_count();

}  // namespace hwarb::native

// hwarb/linux/breakpoint_requests.h — a traced program's requests for debug registers, seen
// before the kernel answers them, so that hwarb can give its own registers up first.
//
// A program asks the kernel for a debug register in two ways: perf_event_open(2) of a
// PERF_TYPE_BREAKPOINT event (a profiler, the program's own instrumentation), and
// ptrace(PTRACE_POKEUSER) of DR0-DR3 or DR7 (a debugger it runs: gdb and lldb write the debug
// registers of their tracee that way). A seccomp filter (SECCOMP_RET_USER_NOTIF) holds each such
// call in the kernel and hands it to a listener descriptor; the listener decides (here: gives up
// a register if the call would find none) and lets the call run unchanged
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Every other system call passes the filter at once.
//
//     perf_event_open ─┐                ┌─ listener (hwarb): receive_request()
//     ptrace(POKEUSER, │ seccomp filter │     (yield a register if need be)
//       DR0-3, DR7) ───┘  USER_NOTIF ───┘   continue_request(): the call runs as asked
//
// A filter cannot be taken back, and without a listener its calls fail with ENOSYS. So the
// listener is never simply dropped: start_continuer() forks a detached process that holds a copy
// and, from the moment hwarb closes the gate (a normal end, or hwarb's death: the kernel closes
// it), lets every such call through until no process uses the filter any more (the listener
// hangs up). The program then sees no difference but the time of those calls and the "Seccomp:"
// line of /proc/PID/status.
//
// Contract:
//  - request_filter_image() is pure: the bytes of a struct sock_fprog placed at `at`, followed by
//    its instructions, for a tracee's memory (seccomp(2) reads it there). The filter matches the
//    x86-64 ABI only; a 32-bit call (int 0x80) passes.
//  - take_descriptor() copies descriptor `fd` of process `pid` into this process
//    (pidfd_getfd(2), close-on-exec). Errors naming `fd`: ESRCH, EBADF, EPERM.
//  - receive_request() blocks until a request is pending (poll the listener first). ENOENT
//    naming `request` when the call went away between the poll and the receive (its thread was
//    interrupted or killed); EINTR as kIntr.
//  - request_valid() is whether request `id` still waits (its thread neither killed nor
//    interrupted since): memory read for it before that answer is the caller's.
//  - continue_request() lets call `id` run as the program made it. A call that went away
//    (ENOENT: interrupted by a ptrace stop, it restarts and asks again) is not an error.
//  - start_continuer(): see above. Returns the gate (its write end); closing it hands the
//    listener over. Errors: pipe2's naming `pipe`, fork's naming `fork`.
// Thread-safety: none needed (no state).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

// What a held call asks for.
enum class RequestKind : std::uint8_t {
  kPerfEvent,    // perf_event_open(attr, pid, cpu, group_fd, flags): args[0..4]
  kPokeDebugReg  // ptrace(PTRACE_POKEUSER, pid, offset of DRn, value): args[1..3]
};

struct BreakpointRequest {
  std::uint64_t id = 0;  // the kernel's cookie for continue_request
  pid_t tid = 0;         // the thread making the call
  RequestKind kind = RequestKind::kPerfEvent;
  std::array<std::uint64_t, 6> args{};
};

// The flags seccomp(2) is called with to install the filter: SECCOMP_FILTER_FLAG_NEW_LISTENER
// (the return value is the listener, a descriptor of the calling process) and TSYNC with
// TSYNC_ESRCH (every thread of the process gets the filter).
[[nodiscard]] unsigned request_filter_flags();
[[nodiscard]] std::vector<std::uint8_t> request_filter_image(std::uint64_t at);

Result<Fd> take_descriptor(pid_t pid, int fd);
Result<BreakpointRequest> receive_request(int listener);
[[nodiscard]] bool request_valid(int listener, std::uint64_t id);
Result<void> continue_request(int listener, std::uint64_t id);
Result<Fd> start_continuer(int listener);

// The offset of DR`n` in struct user (u_debugreg), as PTRACE_POKEUSER takes it.
[[nodiscard]] std::uint64_t debug_register_offset(int n);

}  // namespace hwarb::native

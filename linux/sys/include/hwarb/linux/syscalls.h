// hwarb/linux/syscalls.h — thin wrappers of the Linux system calls hwarb's real backend needs:
// ptrace(2) on the user area, seizing, interrupting, resuming and detaching, registers, siginfo
// and event messages; waitpid(2); kill(2) and tgkill(2); CPU affinity; perf_event_open(2) and its
// rings; poll(2); open(2) of a file.
//
// Contract:
//  - Each wrapper makes exactly one system call (wait_for, poll_in and the perf Fd-returning
//    calls retry on EINTR; wait_once and poll_in_once do not) and converts errno once, here, into
//    an hwarb::Error: the code is from_errno(errno)
//    (an errno outside ErrorCode becomes EIO), the message starts with the field the kernel
//    refused (`offset`, `value`, `pid`, `slots`, `attr`, ...) and ends with the kernel's own
//    errno name and text, so nothing is lost when the code had to be folded into EIO.
//  - Nothing is all-or-nothing beyond what the kernel guarantees for the one call.
//  - ptrace requests must come from the tracer thread (Linux's rule); PEEKUSER/POKEUSER and the
//    resume requests need the tracee in a ptrace-stop, else ESRCH (the kernel's answer).
// Thread-safety: as the system calls themselves (errno is per thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/bp_type.h"
#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/proc_maps.h"

namespace hwarb::native {

// The Error of a system call that this layer did not make but whose -errno reached the caller: a
// call run inside a tracee (Inferior::inject_syscall) returns the kernel's -errno in rax. `ret`
// is that negative return; the code is from_errno(-ret) and the message
// "<field>: <what>: <ERRNAME> (<text>)", as every wrapper's.
[[nodiscard]] Error syscall_return_error(std::int64_t ret, std::string_view field,
                                         std::string_view what);

// PTRACE_PEEKUSER through the raw system call (the word comes back through a pointer, so a
// word of -1 is not mistaken for an error). Typical errors: EIO (offset misaligned or past the
// user area), ESRCH (no such tracee, or not in a ptrace-stop).
Result<std::uint64_t> ptrace_peek_user(pid_t pid, std::uint64_t offset);
// PTRACE_POKEUSER. Typical errors: EIO (offset; DR4/DR5; a field without a register), EINVAL and
// ENOSPC (value: a refused breakpoint), ESRCH.
Result<void> ptrace_poke_user(pid_t pid, std::uint64_t offset, std::uint64_t value);
// PTRACE_CONT / PTRACE_SINGLESTEP / PTRACE_DETACH, delivering `signal` (0: none).
Result<void> ptrace_cont(pid_t pid, int signal = 0);
Result<void> ptrace_singlestep(pid_t pid, int signal = 0);
// PTRACE_SINGLESTEP of stopped thread `pid` with SIGTRAP unblocked for the step, when the thread
// blocks it: the step's trap is a forced SIGTRAP, and the kernel resets a forced signal that the
// thread blocks (or ignores) to the default action, for the whole process, and unblocks it. The
// mask the thread had when it was changed (nullopt when SIGTRAP was not blocked): the caller puts
// it back at the thread's next stop, before anything else (a signal delivered later then saves the
// thread's own mask in its frame). Only for a step that delivers no signal (one delivered at the
// step would save the changed mask). PTRACE_GETSIGMASK's, SETSIGMASK's or SINGLESTEP's errors.
Result<std::optional<std::uint64_t>> ptrace_singlestep_unblocked(pid_t pid);
Result<void> ptrace_detach(pid_t pid, int signal = 0);
// PTRACE_ATTACH (the tracee will report a SIGSTOP stop through wait_for). EPERM when refused.
Result<void> ptrace_attach(pid_t pid);
// PTRACE_SEIZE with PTRACE_O_* `options`: thread `pid` becomes a tracee without being stopped.
// EPERM naming `pid`, the usual reasons in the message (traced already, another user's, Yama's
// ptrace_scope); ESRCH naming `pid` (no such thread); EIO naming `options` (an unknown option).
Result<void> ptrace_seize(pid_t pid, std::uint64_t options);
// PTRACE_INTERRUPT: a seized tracee reports a PTRACE_EVENT_STOP stop (or the stop it was about to
// report). ESRCH naming `pid` (gone, or no tracee of the caller), EIO naming `pid` (not seized).
Result<void> ptrace_interrupt(pid_t pid);
// PTRACE_LISTEN: a seized tracee in a group-stop stays stopped (job control) but reports its next
// stop. EIO naming `pid` when it is in no group-stop, ESRCH naming `pid`.
Result<void> ptrace_listen(pid_t pid);
// PTRACE_SYSCALL: resume (delivering `signal`) until the next system-call entry or exit.
Result<void> ptrace_syscall(pid_t pid, int signal = 0);

// kill(2).
Result<void> send_signal(pid_t pid, int signal);
// tgkill(2): `signal` to thread `tid` of process `tgid` (0: only checks that the thread exists).
// ESRCH/EPERM naming `tid`, EINVAL naming `signal`.
Result<void> send_thread_signal(pid_t tgid, pid_t tid, int signal);
// getpid(2): the calling process's id.
[[nodiscard]] pid_t own_pid();
// getuid(2): the calling process's real user id.
[[nodiscard]] uid_t own_uid();

// sched_getaffinity(2): the CPUs thread `pid` (0: the calling thread) may run on, ascending
// (CPUs below CPU_SETSIZE = 1024).
Result<std::vector<int>> cpu_affinity(pid_t pid);
// sched_setaffinity(2) to the one CPU `cpu`. A thread that is not running moves there only when it
// next runs: a tracee in a stop stays on the CPU it stopped on (StoppedChild::spawn(cpu) pins the
// child before it stops). EINVAL naming `cpu` outside 0..1023 or not allowed.
Result<void> pin_to_cpu(pid_t pid, int cpu);

// Limits this process's address space (RLIMIT_AS, soft and hard) to what is mapped now plus
// `extra` bytes, so that a larger allocation fails with ENOMEM. Irreversible for an unprivileged
// process: meant for a forked test child. ENOENT when /proc/self/status has no VmSize.
Result<void> limit_address_space(std::uint64_t extra);

// What waitpid(2) reported about one child.
enum class WaitKind : std::uint8_t {
  kRunning,  // nohang, and nothing to report
  kStopped,  // a stop; value = the stop signal (SIGTRAP for ptrace event stops)
  kExited,   // value = the exit status
  kKilled,   // value = the signal that killed it
};
struct WaitStatus {
  WaitKind kind = WaitKind::kRunning;
  int value = 0;
  int raw = 0;  // the raw status word (0 for kRunning)
  friend bool operator==(const WaitStatus&, const WaitStatus&) = default;
};
// waitpid(pid, __WALL | (nohang ? WNOHANG : 0)), retried on EINTR. ECHILD naming `pid` when it
// is not a child (or tracee) of the caller, or was reaped already.
Result<WaitStatus> wait_for(pid_t pid, bool nohang);
// What one waitpid(2) reported: the child or tracee it is about (0: nohang, nothing to report).
struct WaitEvent {
  pid_t pid = 0;
  WaitStatus status;
  friend bool operator==(const WaitEvent&, const WaitEvent&) = default;
};
// One waitpid(pid, __WALL | (nohang ? WNOHANG : 0)); pid -1: any child or tracee. EINTR is
// returned, not retried (kIntr naming `pid`), so that a handler without SA_RESTART
// (install_interrupt_flag) ends a blocking wait. ECHILD naming `pid` when there is nothing to
// wait for.
Result<WaitEvent> wait_once(pid_t pid, bool nohang);
// Which child or tracee has a status to report, without reaping it: waitid(P_ALL, WEXITED |
// __WALL | WNOWAIT | (nohang ? WNOHANG : 0)) (a tracee's stops are reported to its tracer
// without WSTOPPED). Its pid, or 0 (nohang, nothing to report); a later waitpid on that pid
// reaps the status. EINTR is returned, not retried (kIntr naming `pid`), as for wait_once; ECHILD
// naming `pid` when there is no child or tracee at all.
Result<pid_t> peek_wait(bool nohang);
// Whether child or tracee `pid` has a status to report now, without reaping it: waitid(P_PID,
// WEXITED | __WALL | WNOWAIT | WNOHANG). ECHILD naming `pid` when it is none of ours.
Result<bool> has_wait_status(pid_t pid);

// perf_event_open(2) of a PERF_TYPE_BREAKPOINT event on thread `pid` (cpu -1: wherever it runs),
// with the attributes Linux's hw_breakpoint_init gives a user breakpoint: pinned, sample_period
// 1, exclude_kernel (as ptrace's breakpoints), enabled at once, close-on-exec. The event holds
// one of the task's debug-register slots until the Fd is closed. Errors: ENOSPC (`slots`: none
// left for the task), EINVAL/EOPNOTSUPP (`attr`: address, len or type refused), ESRCH (`pid`),
// EACCES/EPERM (`pid`: not allowed), ENOENT/ENODEV (`attr`: no breakpoint PMU).
Result<Fd> perf_breakpoint_open(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type);
// The same breakpoint, created disabled: it holds its slot (the kernel reserves a breakpoint's
// slot when it creates the event) but is never written to the thread's debug registers — a
// trial of whether a slot is left that leaves the registers of a running thread alone. Errors
// as perf_breakpoint_open's.
Result<Fd> perf_breakpoint_reserve(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type);

// open(2) of `path` read-only and close-on-exec. The kernel's errno naming `file` (ENOENT,
// EACCES, ...), the message "file: open <path>: <ERRNAME> (<text>)".
Result<Fd> open_file(const std::string& path);
// open(2) of `path` with `flags` (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_EXCL, O_APPEND; always
// close-on-exec) and `mode` for a file it creates: a debugger's remote file write. The kernel's
// errno naming `file`.
Result<Fd> open_file(const std::string& path, int flags, unsigned mode);
// One pwrite(2) of `data` at `offset`: how many bytes were written. The kernel's errno naming
// `fd`.
Result<std::size_t> pwrite_file(int fd, std::uint64_t offset, std::span<const std::uint8_t> data);
// unlink(2) of `path`; the kernel's errno naming `file`.
Result<void> unlink_file(const std::string& path);
// One pread(2) of up to out.size() bytes at `offset`: how many were read (0 at the end). The
// kernel's errno naming `fd`.
Result<std::size_t> pread_file(int fd, std::uint64_t offset, std::span<std::uint8_t> out);
// What fstat(2) says of an open file (the fields a debugger's remote file access reports).
struct FileStat {
  std::uint64_t dev = 0, ino = 0, size = 0, blksize = 0, blocks = 0;
  std::uint32_t mode = 0, nlink = 0, uid = 0, gid = 0, rdev = 0;
  std::int64_t atime = 0, mtime = 0, ctime = 0;
};
// The kernel's errno naming `fd`.
Result<FileStat> file_stat(int fd);

}  // namespace hwarb::native

// probe and perf ring (linux_perf)
// The kernel's own structures, declared here so that this header stays free of <linux/*.h>;
// callers that fill them include <linux/perf_event.h> and <sys/user.h>.
struct perf_event_attr;
struct user_regs_struct;
struct __ptrace_syscall_info;  // <sys/ptrace.h>

#include <csignal>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace hwarb::native {

// perf_event_open(2) with the caller's attributes (any event type), retried on EINTR;
// PERF_FLAG_FD_CLOEXEC is added to `flags`. Errors as perf_breakpoint_open: ENOSPC (`slots`),
// ESRCH/EACCES/EPERM (`pid`), anything else (`attr`).
Result<Fd> perf_event_open_attr(const ::perf_event_attr& attr, pid_t pid, int cpu, int group_fd,
                                unsigned long flags);
// /proc/sys/kernel/perf_event_paranoid; nullopt when unreadable.
std::optional<int> perf_event_paranoid();
// Writes `value` to /proc/sys/kernel/perf_event_paranoid (root only). The errno of open(2) or
// write(2) naming `perf_event_paranoid` (EACCES/EPERM without privilege, EINVAL for a value the
// kernel refuses).
Result<void> set_perf_event_paranoid(int value);
// An EACCES/EPERM of perf_event_open with the knob that decides it named: "perf_event_paranoid
// is N (/proc/sys/kernel/perf_event_paranoid; NEEDS)", `needs` saying what needs which value.
// Other errors are returned unchanged.
Error name_perf_permission(const Error& error, std::string_view needs);
// ioctl(2) on a perf event descriptor (PERF_EVENT_IOC_*); returns the ioctl's value. Errors
// naming `fd` (EBADF, ENOTTY) or `arg` (EINVAL: e.g. SET_OUTPUT to an incompatible event).
Result<int> perf_ioctl(int fd, unsigned long request, unsigned long arg);
// PERF_EVENT_IOC_ID: the event's id, as samples carry it (an inherited copy reports its
// parent's id).
Result<std::uint64_t> perf_event_id(int fd);
// read(2) of a counting event opened with read_format 0: its count (one u64). EIO naming `fd`
// on a short read.
Result<std::uint64_t> perf_read_count(int fd);

// The system's page size (sysconf(_SC_PAGESIZE)).
std::size_t page_size();
// mmap(2) of `bytes` at `offset` of `fd`, shared, readable and writable (a perf ring whose
// data_tail the reader advances; at aux_offset, an AUX area the kernel must not overwrite), and
// not inherited by processes forked afterwards (MADV_DONTFORK: a mapping keeps a perf event
// alive as its descriptor does).
// Errors naming `bytes` (ENOMEM, EAGAIN, EPERM: over perf_event_mlock_kb) or `fd` (any other:
// EBADF, EINVAL, ENODEV for a descriptor without mmap, EOPNOTSUPP for an AUX area of an event
// without one).
Result<void*> map_shared(int fd, std::size_t bytes, std::uint64_t offset = 0);
// mmap(2) of `bytes` of anonymous memory, shared with the processes forked afterwards, readable
// and writable, zero-filled. Errors naming `bytes` (ENOMEM, EAGAIN).
Result<void*> map_shared_anonymous(std::size_t bytes);
// munmap(2); errors are ignored (nothing is left to do about them).
void unmap(void* addr, std::size_t bytes);

// poll(2) for POLLIN on every descriptor in `fds`, retried on EINTR with the full timeout
// (-1: forever). Returns the revents of each descriptor (0: nothing), in the order of `fds`; a
// perf event whose task (and every inherited copy) exited reports POLLHUP.
Result<std::vector<short>> poll_in(const std::vector<int>& fds, int timeout_ms);
// One poll(2), as poll_in, except that an interrupting signal is returned (kIntr naming
// `timeout`), not retried: a handler without SA_RESTART (install_interrupt_flag) ends the wait.
Result<std::vector<short>> poll_in_once(std::span<const int> fds, int timeout_ms);

// A kernel CPU list ("0-3,5,7-8\n"), ascending. EINVAL naming `cpus` for anything else.
Result<std::vector<int>> parse_cpu_list(std::string_view text);
// The online CPUs (/sys/devices/system/cpu/online). ENOENT naming `cpus` when unreadable.
Result<std::vector<int>> online_cpus();

// PTRACE_GETREGS / PTRACE_SETREGS (x86_64 general registers). ESRCH/EPERM naming `pid` (no such
// tracee, or not in a ptrace-stop), EIO/EFAULT naming `regs`.
Result<void> ptrace_getregs(pid_t pid, ::user_regs_struct& regs);
Result<void> ptrace_setregs(pid_t pid, const ::user_regs_struct& regs);
// PTRACE_SINGLEBLOCK (x86: resume with EFLAGS.TF and DEBUGCTL.BTF, a stop after the next taken
// branch where the hardware honours BTF).
Result<void> ptrace_singleblock(pid_t pid, int signal = 0);
// PTRACE_GETREGSET of register set `note` (NT_PRSTATUS = 1: the general registers, in the
// tracee's own layout) into `out`; returns how many bytes the kernel filled (fewer than
// out.size() for a smaller set, e.g. a 32-bit tracee's). ESRCH/EPERM naming `pid`, anything
// else (EINVAL: no such set; EFAULT) naming `regs`.
Result<std::size_t> ptrace_get_regset(pid_t pid, int note, std::span<std::byte> out);
// PTRACE_SETREGSET of register set `note` from `in`. Errors as ptrace_get_regset.
Result<void> ptrace_set_regset(pid_t pid, int note, std::span<const std::byte> in);
// PTRACE_GETSIGINFO: the siginfo of the tracee's stop. EINVAL naming `pid` in a group-stop (it
// has none: how a seized tracee's group-stop is told from its other PTRACE_EVENT_STOP stops),
// ESRCH naming `pid`.
Result<void> ptrace_getsiginfo(pid_t pid, siginfo_t& info);
// PTRACE_SETSIGINFO: the siginfo the tracee's signal-delivery-stop delivers when resumed with
// info.si_signo. ESRCH naming `pid`; EINVAL naming `pid` in a stop without one (a group-stop).
Result<void> ptrace_setsiginfo(pid_t pid, const siginfo_t& info);
// PTRACE_PEEKSIGINFO: up to out.size() of the signals queued for stopped tracee `pid`, oldest
// first, without taking them: its own queue, or its process's (`shared`). Returns how many were
// copied. ESRCH naming `pid`.
Result<std::size_t> ptrace_peeksiginfo(pid_t pid, bool shared, std::span<siginfo_t> out);
// PTRACE_GETSIGMASK / PTRACE_SETSIGMASK: the tracee thread's blocked-signal mask (bit n-1 for
// signal n; SIGKILL and SIGSTOP cannot be blocked: the kernel drops them). ESRCH naming `pid`.
Result<std::uint64_t> ptrace_getsigmask(pid_t pid);
Result<void> ptrace_setsigmask(pid_t pid, std::uint64_t mask);
// PTRACE_GETEVENTMSG: the message of the tracee's last PTRACE_EVENT stop (the new task's id for
// FORK, VFORK and CLONE). ESRCH naming `pid`.
Result<unsigned long> ptrace_event_message(pid_t pid);
// PTRACE_GET_SYSCALL_INFO into `info`: the system call of a syscall-entry or syscall-exit stop
// (info.op says which; PTRACE_SYSCALL_INFO_NONE in other stops). Returns the size of the
// information the kernel has (it fills at most sizeof info). ESRCH naming `pid`.
Result<std::size_t> ptrace_get_syscall_info(pid_t pid, ::__ptrace_syscall_info& info);
// PTRACE_GET_RSEQ_CONFIGURATION (Linux 5.13): ESRCH naming `pid`; EIO naming `pid` on a kernel
// without it.
Result<RseqArea> ptrace_get_rseq(pid_t pid);

}  // namespace hwarb::native

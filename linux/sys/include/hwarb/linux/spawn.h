// hwarb/linux/spawn.h — starting child processes: a program stopped just before its execve, for a
// debugger to seize (Inferior::spawn), and a forked function that runs when its parent says go
// (the probe's canary child).
//
// Contract:
//  - check_runnable() answers before any fork whether execve(2) could run a path, so that a
//    missing or unrunnable program is the caller's error (naming `command`), not an exit status
//    127 of a child.
//  - spawn_stopped() and fork_gated() fork. Between the fork and its execve or exit the child
//    makes only async-signal-safe calls, on data built before the fork, and allocates nothing:
//    safe in a multi-threaded caller.
//  - Neither reaps nor kills the child it returns: that is the caller's (wait_for, send_signal).
// Thread-safety: the functions keep no state; fork(2) copies only the calling thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

struct SpawnOptions {
  int stdout_fd = -1;         // the child's standard output (-1: inherited)
  bool disable_aslr = false;  // personality(ADDR_NO_RANDOMIZE) before the execve
  // false: the parent-death signal is dropped once the child is continued, just before its
  // execve, so that the program may outlive the caller (a debugger's detach); until then it
  // still dies with the caller.
  bool die_with_parent = true;
  // The program's environment, NAME=VALUE each; nullopt: the caller's own (environ).
  std::optional<std::vector<std::string>> environment = std::nullopt;
  // The child leads a process group of its own (setpgid), as gdbserver starts a program: a
  // terminal's signals for the caller's group (Ctrl-C, the hang-up when a session leader ends)
  // do not reach it, nor what it leaves behind (a child a debugger detached).
  bool own_process_group = false;
  // The directory the program starts in (chdir before its execve); nullopt: the caller's.
  // spawn_stopped checks it first: the kernel's errno naming `cwd` (ENOENT, ENOTDIR, EACCES).
  std::optional<std::string> working_directory = std::nullopt;
};

// This process's environment (environ), NAME=VALUE each, in its order.
[[nodiscard]] std::vector<std::string> host_environment();

// Whether execve(2) could run `path`: a regular file (stat(2)) that the caller may execute
// (access(2) X_OK). The errno of stat or access naming `command` (ENOENT, ENOTDIR, EACCES, ...);
// EACCES naming `command` for anything but a regular file.
Result<void> check_runnable(const std::string& path);

// argv[0] resolved the way execvp(3) would (a name with a slash as it is, else the first
// runnable file of that name in a PATH directory, "." for an empty one), so that a missing
// command is an error of the caller (ENOENT naming `command`), not an exit status 127 of a child.
// check_runnable's errors for a name with a slash; EINVAL naming `command` for an empty name.
Result<std::string> resolve_command(const std::string& name);

// gdbserver's reading of a program name (Debian's gdbserver 13.1: gdb's program_path::set): a
// name without a slash that is a regular file in the working directory (stat(2), symbolic links
// followed; executable or not) means that file, as the absolute path working-directory/name,
// before PATH is searched; nullopt for any other name (a name with a slash, one absent here, a
// directory), which is then looked up as execvp(3) does. The program gets the absolute path as
// its argv[0], as under gdbserver.
[[nodiscard]] std::optional<std::string> in_working_directory(const std::string& name);

// fork(2)s a child that asks to die with the calling thread (PR_SET_PDEATHSIG SIGKILL, kept across
// the execve: a spawned target does not outlive hwarb's tracer thread, as with
// PTRACE_O_EXITKILL), makes `stdout_fd` its standard output (dup2), adds ADDR_NO_RANDOMIZE to
// its personality when asked (left as it is when personality(2) refuses), unblocks SIGCHLD (a
// caller that blocked it must not pass that on to the program), stops itself with SIGSTOP and,
// once continued, execve(2)s `path` with `argv` and `options.environment` (the caller's own
// without one), exiting with status
// 127 when the execve fails. Returns the child's pid once waitpid(WSTOPPED) saw its SIGSTOP stop:
// the child is stopped and not traced (PTRACE_SEIZE it, then SIGCONT it). Errors naming
// `command`: fork's errno (EAGAIN, ENOMEM); EIO when the child was not seen in its stop (the
// child is then left as it is).
Result<pid_t> spawn_stopped(const std::string& path, const std::vector<std::string>& argv,
                            const SpawnOptions& options = {});

// Exit statuses of a fork_gated child that did not run its function.
inline constexpr int kGatedOrphaned = 120;    // the caller died before the child asked to die too
inline constexpr int kGatedNotStarted = 121;  // the go pipe closed without a byte

// A fork_gated child: its pid and the write end of its go pipe. Closing `go` without
// start_gated ends the child with kGatedNotStarted.
struct GatedChild {
  pid_t pid = -1;
  Fd go;
};

// fork(2)s a child that asks to die with the caller (PR_SET_PDEATHSIG), waits for one byte on its
// go pipe, then runs `body` and exits with status 0 (exit_group). The child makes raw system calls
// only (no libc wrapper that a sanitizer intercepts, no allocation, no lock), and so must `body`.
// Errors: pipe2's errno naming `pipe` (EMFILE, ENFILE), fork's naming `fork` (EAGAIN, ENOMEM).
Result<GatedChild> fork_gated(void (*body)());
// Writes the go byte: the child runs its function. The errno of write(2) naming `pipe` (EPIPE
// when the child is gone and SIGPIPE is ignored; otherwise SIGPIPE ends the caller, as for any
// write to a pipe without a reader); EIO naming `pipe` when the byte was not written.
Result<void> start_gated(GatedChild& child);

// Which side of fork_detached() a caller is on.
enum class ForkSide : std::uint8_t { kCaller, kDetached };

// A process that outlives its caller and is never its child (a double fork: the intermediate
// child is reaped before this returns, so a caller's waitpid(-1) never sees the new process,
// which init or the nearest subreaper adopts). The caller gets kCaller; the new process gets
// kDetached, in a process group of its own (a terminal's Ctrl-C or hang-up does not reach it),
// with SIGINT, SIGQUIT, SIGHUP, SIGTERM and SIGPIPE ignored and every descriptor closed except
// 2 and those in `keep` — closed before this returns to the caller, so that no copy of the
// caller's descriptors lives on after it (a perf event's keeps its debug register taken). Unlike
// spawn_stopped()'s children it asks for no parent-death signal.
// The new process runs on the caller's copy of memory: it may allocate only if no other thread
// of the caller held an allocator lock across the fork (glibc's malloc is fork-safe).
// Errors naming `fork`: fork's errno (EAGAIN, ENOMEM); EIO when the intermediate child failed.
Result<ForkSide> fork_detached(std::span<const int> keep);
// Runs `body(arg)` in a forked child that first drops every privilege to `uid`/`gid`
// (setgroups to {gid}, setresgid, setresuid: real, effective and saved ids, so no capability is
// left) and asks to die with the caller; returns the int `body` returned, sent back through a
// pipe. For asking the kernel what an unprivileged process gets (the caller must be root).
// Errors: pipe2's errno naming `pipe`, fork's naming `fork`; the errno of the step that failed
// naming `uid` when the child could not drop (EPERM when the caller is not root); EIO naming
// `fork` when the child ended without an answer.
Result<int> run_as_user(uid_t uid, gid_t gid, int (*body)(const void* arg), const void* arg);
// Makes the calling process real-time (SCHED_FIFO at the lowest real-time priority): on a busy
// machine it then runs as soon as it wakes. The errno of sched_setscheduler(2) naming `policy`
// (EPERM without CAP_SYS_NICE or an RLIMIT_RTPRIO).
Result<void> make_realtime();
// _exit(2): ends the calling process at once (no atexit handlers, no stream flush).
[[noreturn]] void exit_now(int status);

}  // namespace hwarb::native

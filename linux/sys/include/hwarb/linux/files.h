// hwarb/linux/files.h — the files a command-line tool writes (its report, with -o), apart from the
// system calls of the debugger (syscalls.h), which the CLI does not include.
//
// Contract:
//  - create_file() opens `path` write-only, created (mode 0666 less the umask) or truncated,
//    close-on-exec (a traced command never inherits it). The kernel's errno naming `file`, the
//    message "file: create <path>: <ERRNAME> (<text>)".
//  - write_stream(), flush_stream() and close_stream() are the report's stdio calls, checked: a
//    failed write is an Error (code from_errno) whose message names the output as the caller
//    calls it and the errno, "<output>: <ERRNAME>: <text>" ("--output /dev/full: ENOSPC: No space
//    left on device"), printed as it is after the command's name. The errno is taken from the
//    call that failed: stdio drops the buffered bytes of a write that failed, and a later fflush
//    then has nothing to write and succeeds, so a failure is seen only where it happens.
//    close_stream() fcloses even when the flush fails (a file system may say ENOSPC or EIO first
//    at close(2)).
// Thread-safety: reentrant.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

Result<Fd> create_file(const std::string& path);

// fwrite(3) of `text` to `stream` (buffered: no flush).
Result<void> write_stream(std::FILE* stream, std::string_view text, std::string_view output);
// fflush(3).
Result<void> flush_stream(std::FILE* stream, std::string_view output);
// fclose(3): `stream` is closed whatever the result.
Result<void> close_stream(std::FILE* stream, std::string_view output);

}  // namespace hwarb::native

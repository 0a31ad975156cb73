// hwarb/linux/files.h — the files a command-line tool writes (its report, with -o), apart from the
// system calls of the debugger (syscalls.h), which the CLI does not include.
//
// Contract:
//  - create_file() opens `path` write-only, created (mode 0666 less the umask) or truncated,
//    close-on-exec (a traced command never inherits it). The kernel's errno naming `file`, the
//    message "file: create <path>: <ERRNAME> (<text>)".
// Thread-safety: reentrant.
#pragma once

#include <string>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

[[nodiscard]] Result<Fd> create_file(const std::string& path);

}  // namespace hwarb::native

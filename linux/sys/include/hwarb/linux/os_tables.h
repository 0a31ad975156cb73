// hwarb/linux/os_tables.h — the machine's tables as gdb's `info os` shows them: processes,
// process groups, threads, open files, internet sockets, System V shared memory, semaphores and
// message queues, kernel modules and CPUs, read from /proc.
//
// Contract:
//  - read_os_table(name) reads /proc afresh at every call: a snapshot, stale at once. A process
//    or thread that exits while it is read is left out (or keeps the cells read before it went);
//    one that /proc refuses (another user's) shows what could be read.
//  - The names, column titles and order are gdbserver's (gdb shows them as they come), so that a
//    session reads the same under either server. Name "" is the list of names: columns Type,
//    Description, Title. An unknown name is ENOENT naming `annex`.
//  - Every row has as many cells as the table has columns.
//  - The parse_* functions are pure (the text of one /proc file in, rows out); a line that does
//    not have the file's fields is skipped, as a file the kernel writes has none.
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

struct OsTable {
  std::string type;  // the table's own name, as gdbserver gives it: "processes", "I sockets", ...
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

Result<OsTable> read_os_table(std::string_view name);

// /proc/net/{tcp,udp,tcp6,udp6}: a row per socket (local address, local port, remote address,
// remote port, state, user, family, protocol). `ipv6` for the *6 files, `stream` for tcp.
std::vector<std::vector<std::string>> parse_inet_sockets(std::string_view text, bool ipv6,
                                                         bool stream);

// /proc/cpuinfo: one row of values per processor, and the keys of the first as the columns.
OsTable parse_cpuinfo(std::string_view text);

}  // namespace hwarb::native

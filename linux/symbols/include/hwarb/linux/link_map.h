// hwarb/linux/link_map.h — the shared objects a process has loaded, from the dynamic linker's
// own list (glibc's r_debug / link_map chain), as a debugger stub serves them
// (qXfer:libraries-svr4:read).
//
// Contract:
//  - read_link_map() finds r_debug through the executable: auxv's AT_PHDR/AT_PHNUM give the
//    program headers in memory, PT_PHDR the load bias, PT_DYNAMIC the dynamic section, whose
//    DT_DEBUG entry the dynamic linker sets to &r_debug. It then walks r_map: the first entry is
//    the executable (main_lm), each later one a library (lm, name, l_addr, l_ld) in load order.
//    glibc's r_debug_extended (r_version 2 and up) chains the namespaces dlmopen made through
//    r_next: their libraries follow, each with its namespace's r_debug as lmid (the base
//    namespace's too), as gdbserver lists them. At most 256 namespaces.
//  - Before the dynamic linker has run (DT_DEBUG still 0) or in a static executable (no
//    PT_DYNAMIC), the list is empty and main_lm 0: not an error.
//  - Only `read` touches the process, so the walk is testable on any memory image. A read that
//    fails is returned (naming `addr`); a chain longer than 4096 entries or a name without its
//    terminating NUL in 4096 bytes is EIO naming `link_map` (a corrupt or hostile list).
//  - svr4_library_xml() is the <library-list-svr4> document gdb reads (names escaped by
//    xml_escape, hwarb/base/format.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

struct LoadedObject {
  std::uint64_t lm = 0;      // the link_map entry's address
  std::string name;          // l_name
  std::uint64_t l_addr = 0;  // load bias
  std::uint64_t l_ld = 0;    // its dynamic section
  std::uint64_t lmid = 0;    // its namespace: that namespace's r_debug
  friend bool operator==(const LoadedObject&, const LoadedObject&) = default;
};

struct LinkMap {
  std::uint64_t main_lm = 0;
  std::vector<LoadedObject> libraries;
};

using MemoryReader = std::function<Result<void>(std::uint64_t addr, std::span<std::uint8_t> out)>;

Result<LinkMap> read_link_map(std::span<const std::uint8_t> auxv, const MemoryReader& read);
std::string svr4_library_xml(const LinkMap& map);

}  // namespace hwarb::native

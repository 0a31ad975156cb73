// dwarf_objects.h (linux_symbols' own) — source-level objects through one module's DWARF (libdw):
// the variable at a link-time address, member and element access on its type, the type of a
// value for printing, and the local variables of functions by name.
//
// Contract:
//  - object_at() finds the DW_TAG_variable whose location is DW_OP_addr `link_addr` (namespaces,
//    classes, functions' statics: every scope); its type and the path walked from there give the
//    SourceObject (see SymbolTable::resolve). `base` is the object of the whole variable
//    (address, size, symbol) that the path starts at; `path` is "", or accesses ".m", "[i]",
//    "->m". Without DWARF for the variable: `base` unchanged when the path is empty, else EINVAL.
//  - local_of() says where `name` is a local variable or parameter ("a local variable of main
//    (names.cpp:97)"), nullopt when DWARF knows no such local in the module.
//  - The caller holds the SymbolTable's dwarf_mutex (libdwfl is not thread-safe).
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/linux/symbols.h"

namespace hwarb::native::dwarf {

Result<SourceObject> object_at(Dwfl_Module* mod, const SourceObject& base, std::string_view path,
                               const MemoryReader& read);

std::optional<std::string> local_of(Dwfl_Module* mod, std::string_view name);

// Optimal string alignment distance, or limit + 1 once it must exceed `limit` (symbols.cpp).
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit);

}  // namespace hwarb::native::dwarf

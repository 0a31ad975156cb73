// typed_value.h — a watched value in its source type, for `hwarb watch`'s hits.
//
// Contract:
//  - typed_value() renders `bytes` (little-endian, as read from the process) as `type` says:
//    signed and unsigned integers in decimal, bool as true/false, float/double, an enum by its
//    enumerator's name (else its number), a pointer in hexadecimal with the symbol it points
//    into ("0x555555558040 (ns::g_cfg+0x24)"), a char array as a quoted string up to its first NUL.
//    Text form by default; with `json`, a JSON value (numbers bare, the rest JSON strings).
//  - nullopt when the type says nothing more than the bytes (kBytes), the value is unknown
//    (empty bytes), or the size does not fit the kind.
// Thread-safety: pure apart from `symbols` (const; see SymbolTable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/linux/symbols.h"

namespace hwarb::cli {

std::optional<std::string> typed_value(const native::ValueType& type,
                                       const std::vector<std::uint8_t>& bytes,
                                       const native::SymbolTable* symbols, bool json);

}  // namespace hwarb::cli

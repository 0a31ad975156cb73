// hwarb/cli/watch_expr.h — the watch expressions of `hwarb watch` (perf's syntax).
//
// Contract:
//  - parse_watch_expr() is pure (no system calls, no symbol look-up): it splits one expression
//    into its parts and checks the syntax and the limits; resolving a symbol is the caller's.
//    Grammar:
//      mem:ADDR[/LEN][:ACCESS]                   ADDR hexadecimal with 0x, or decimal
//      NAME[+OFF|-OFF][/LEN][:ACCESS]            NAME as the source spells it (below)
//    NAME starts with [A-Za-z_.$], '(' or "::" and goes on with [A-Za-z0-9_.$@], the scope
//    operator "::", "->", and brackets (), [], <> holding anything (spaces too) but an unbalanced
//    closing bracket: `counter`, `ns::Counter::total`, `(anonymous namespace)::hidden`,
//    `ns::Box<int>::count`, `g_cfg.limits[2].max`, `p->f`, `(*p).f`. At bracket depth 0 it ends
//    at '+', '/', a ':' that is not half of "::" (so the access suffix is the last ':' with its
//    letters), or a '-' that does not start "->". What NAME means (an ELF symbol, a C++ name,
//    members and elements through DWARF) is the resolver's.
//    Numbers are hexadecimal with 0x/0X or decimal, up to 2^64-1 (OFF: up to 2^63-1, or 2^63 after
//    '-'). LEN is 1 .. kMaxWatchLength. ACCESS is a set of the letters r, w, x in any order, each
//    at most once ("rw" and "wr" are the same); x cannot be combined with r or w. Without ACCESS
//    the access is rw. A name cannot be `mem` when followed by ':' (that is the mem form).
//  - A mem: range must end at or below 2^64-1: ADDR + LEN - 1, LEN the default length when not
//    given (an execute watch counts its first byte alone), else "range ADDR/LEN wraps past the
//    end of the address space" at the column of ADDR.
//  - Errors are EINVAL with the message "expression 'TEXT': at column N: reason", N the 1-based
//    column of the offending character (one past the end when something is missing).
//  - default_length() is perf's: an explicit length wins; an execute watch is sizeof(long) = 8
//    (only the address of its first byte matters to the hardware); a symbol watched at offset 0
//    takes the symbol's size when the caller knows it (nonzero), capped at kMaxWatchLength; at a
//    nonzero offset the symbol's size says nothing of the target, so it is 4 like a plain address.
// Thread-safety: all functions are pure and reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::cli {

enum class WatchAccess : std::uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3, kExec = 4 };

// "r", "w", "rw", "x".
const char* access_name(WatchAccess a);

// The longest range one expression may watch (1 MiB).
inline constexpr std::uint64_t kMaxWatchLength = std::uint64_t{1} << 20;

struct WatchExpr {
  std::string text;                      // as given
  std::optional<std::uint64_t> address;  // mem:ADDR form
  std::string symbol;                    // NAME form, as given ("" for mem:)
  std::int64_t offset = 0;               // +OFF / -OFF after the symbol
  std::optional<std::uint64_t> length;   // /LEN if given
  WatchAccess access = WatchAccess::kReadWrite;
  bool access_given = false;
};

Result<WatchExpr> parse_watch_expr(std::string_view text);

std::uint64_t default_length(const WatchExpr& e, std::optional<std::uint64_t> symbol_size);

}  // namespace hwarb::cli

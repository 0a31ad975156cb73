// hwarb/linux/kallsyms.h — the kernel's symbols, as /proc/kallsyms lists them.
//
// Contract:
//  - parse_kallsyms() is pure: one symbol per line "ADDR TYPE NAME [\[MODULE\]]" (ADDR hex without
//    0x, TYPE one letter as nm prints it). A line that does not have that form is EINVAL naming
//    `kallsyms` with its line number; an empty text is an empty table. Symbols come back sorted
//    by address (stable: the file's order among equal addresses).
//  - KernelSymbols::load() reads the file whole (default /proc/kallsyms). When every address
//    reads 0 the kernel hides them from this caller (kptr_restrict, or not root): hidden() is
//    true and find() answers EACCES naming `symbol` with that reason, so that a watch on a kernel
//    symbol is refused with the cause, never placed at address 0.
//  - find(name) is the first symbol of that name (text before others of the same name: kallsyms
//    lists __pfx_ padding separately, so `schedule` is the function). ENOENT naming `symbol`.
//  - The table gives no sizes; size_of() is the distance to the next higher address (0 at the
//    end), an upper bound that covers the symbol's alignment padding.
//  - describe(addr) is "name+0xoff" (the nearest symbol at or below), or the address in hex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

struct KernelSymbol {
  std::uint64_t address = 0;
  char type = '?';
  std::string name;
  std::string module;  // empty for the kernel image
  friend bool operator==(const KernelSymbol&, const KernelSymbol&) = default;
};

[[nodiscard]] Result<std::vector<KernelSymbol>> parse_kallsyms(std::string_view text);

class KernelSymbols {
 public:
  [[nodiscard]] static Result<KernelSymbols> load(const std::string& path = "/proc/kallsyms");
  [[nodiscard]] static KernelSymbols from(std::vector<KernelSymbol> symbols);

  bool hidden() const { return hidden_; }
  std::size_t size() const { return symbols_.size(); }
  [[nodiscard]] Result<KernelSymbol> find(std::string_view name) const;
  std::uint64_t size_of(const KernelSymbol& symbol) const;
  std::string describe(std::uint64_t addr) const;

 private:
  std::vector<KernelSymbol> symbols_;  // by address
  bool hidden_ = false;
};

}  // namespace hwarb::native

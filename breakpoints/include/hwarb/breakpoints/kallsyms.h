// hwarb/breakpoints/kallsyms.h — a kernel symbol table (Linux's kallsyms) for kernel clients of
// the breakpoint API, such as the ksym tracer (ksym_tracer.h).
//
// Contract:
//  - Kernel symbols live at or above the kernel start (Linux's TASK_SIZE_MAX, task_size_max() of
//    validate.h: 0x00007ffffffff000 on x86_64). add() refuses a user-space address with EINVAL
//    naming the field ("addr: 0x1000 is a user-space address ..."), an empty name or one with a
//    blank, '+' or '=' with EINVAL naming `name`, and a range that wraps past 2^64 (`size`).
//  - Names need not be unique, as in /proc/kallsyms (static functions of different files):
//    lookup(name) gives the first one added, as kallsyms_lookup_name. The same name at the same
//    address again is a no-op.
//  - symbolize(addr) gives the symbol with the greatest start <= addr that covers addr: a symbol
//    with a size covers [addr, addr + size); one without (size 0, as every kallsyms line) runs
//    to the next symbol's start (the last one to the end of the address space). Among symbols at
//    one address the first added wins. Printed as "name+0xOFF" (Linux's %pS without the size).
//  - resolve("SYMBOL[+OFF]"): the symbol's address plus OFF (decimal, or hex with 0x, as the
//    kernel's kstrtoul base 0). Unknown symbol: ENOENT naming it; a malformed spec or an
//    address that wraps: EINVAL naming `symbol`.
//  - parse_kallsyms(text) reads /proc/kallsyms lines "ADDR TYPE NAME [[module]]" (ADDR hex
//    without 0x, TYPE one letter); blank lines are skipped. add_all()/load_kallsyms_file() are
//    all or nothing: on any error (EINVAL "line N: ..." naming the field) nothing is added. A
//    /proc/kallsyms read without privilege shows every address as 0 (kptr_restrict): the first
//    such line is EINVAL saying so. load_kallsyms_file reads at most kMaxKallsymsBytes (EFBIG
//    past it); a file that cannot be read is the open error (ENOENT, EACCES, EISDIR) naming it.
// Not thread-safe; cost: add O(log n), lookup O(log n), symbolize O(log n).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::breakpoints {

inline constexpr std::uint64_t kMaxKallsymsBytes = std::uint64_t{64} << 20;

struct KernelSymbol {
  std::string name;
  std::uint64_t addr = 0;
  std::uint64_t size = 0;  // 0: unknown (runs to the next symbol)
  char type = 'T';         // kallsyms' type letter (t/T text, d/D data, b/B bss, ...)
  std::string module;      // "" for the kernel image
  friend bool operator==(const KernelSymbol&, const KernelSymbol&) = default;
};

// The lines of a kallsyms text, or the first bad line (EINVAL "line N: FIELD: ..."); `lines`, if
// given, gets each symbol's 1-based line number.
Result<std::vector<KernelSymbol>> parse_kallsyms(std::string_view text,
                                                 std::vector<int>* lines = nullptr);

class KernelSymbols {
 public:
  // `kernel_start`: the first kernel address (task_size_max(arch)).
  explicit KernelSymbols(std::uint64_t kernel_start) : kernel_start_(kernel_start) {}

  std::uint64_t kernel_start() const { return kernel_start_; }
  Result<void> add(KernelSymbol symbol);
  // Every symbol or none (the first error, with the symbol's index for the caller's message).
  Result<void> add_all(const std::vector<KernelSymbol>& symbols);
  // parse_kallsyms of the file, then add_all; returns the number of symbols added.
  Result<std::size_t> load_kallsyms_file(const std::string& path);

  std::size_t size() const { return symbols_.size(); }
  // The first symbol added under `name`; ENOENT naming it.
  Result<KernelSymbol> lookup(std::string_view name) const;
  // "SYMBOL[+OFF]" -> address (see the contract).
  Result<std::uint64_t> resolve(std::string_view spec) const;
  // "name+0xOFF" for an address a symbol covers, else nullopt.
  std::optional<std::string> symbolize(std::uint64_t addr) const;

 private:
  Result<void> check(const KernelSymbol& s) const;

  std::uint64_t kernel_start_;
  std::vector<KernelSymbol> symbols_;                        // in the order added
  std::map<std::string, std::size_t, std::less<>> by_name_;  // first index of each name
  std::multimap<std::uint64_t, std::size_t> by_addr_;        // in the order added per address
};

}  // namespace hwarb::breakpoints

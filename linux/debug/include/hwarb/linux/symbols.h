// hwarb/linux/symbols.h — ELF symbols and DWARF lines of a process (elfutils libdw): names to
// run-time addresses and back, for the executable and every shared library mapped in it.
//
// Contract:
//  - load(pid) reads /proc/PID/maps and every ELF file mapped there (executable, shared
//    libraries, the vdso is skipped), with each module's load bias from the maps. A process
//    whose libraries are not mapped yet (stopped at exec) gives the executable and the dynamic
//    loader only; load again later for the rest. load_file() loads one ELF file at `bias`.
//    Errors: ENOENT/ESRCH naming `pid`, EACCES naming `pid`, ENOEXEC-like failures as EINVAL
//    naming `file` (not ELF).
//  - find(name) searches functions and data objects (symtab, else dynsym), the executable
//    first, then the libraries in map order; `name@LIB` is not supported. The PLT stubs of x86_64
//    modules (.plt, .plt.sec, .plt.got) are functions named NAME@plt (perf's and objdump's
//    names), one per stub that jumps through a GOT slot of a JUMP_SLOT or GLOB_DAT relocation,
//    sized as the section's entries; find("NAME@plt") finds them. Unknown: ENOENT naming
//    `symbol` with up to three near matches by edit distance ("did you mean: a, b, c").
//  - locate(addr) gives the symbol containing addr (or the nearest preceding function in the
//    same module when sizes are missing) and, with DWARF, its source file:line.
//  - describe(addr) = "sym+0xoff (file.c:12)", "sym+0xoff", "[module]+0xoff", or "0x..." — never
//    fails.
//  - A SymbolTable is immutable after load; moving is cheap.
// Thread-safety: const methods are safe from several threads only after construction.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

struct Symbol {
  std::string name;
  std::uint64_t address = 0;  // run-time address (link-time value + the module's bias)
  std::uint64_t size = 0;
  bool function = false;  // STT_FUNC (else a data object)
  std::string module;     // the ELF file's path
};

struct Location {
  std::optional<Symbol> symbol;
  std::uint64_t offset = 0;         // addr - symbol->address
  std::string module;               // "" when addr is in no module
  std::uint64_t module_offset = 0;  // addr - the module's bias (its link-time address)
  std::string file;                 // source file (basename), "" without DWARF
  int line = 0;
};

class SymbolTable {
 public:
  static Result<SymbolTable> load(pid_t pid);
  static Result<SymbolTable> load_file(const std::string& path, std::uint64_t bias = 0);

  SymbolTable(SymbolTable&&) noexcept;
  SymbolTable& operator=(SymbolTable&&) noexcept;
  ~SymbolTable();

  Result<Symbol> find(std::string_view name) const;
  Location locate(std::uint64_t addr) const;
  std::string describe(std::uint64_t addr) const;
  // Up to `n` known names closest to `name` (edit distance, an adjacent transposition counting
  // as one edit), best first, ties by name; only names within max(2, length / 3) edits.
  std::vector<std::string> near(std::string_view name, std::size_t n) const;
  // The run-time entry point of the executable (e_entry + bias); nullopt for load_file of a
  // shared object without one.
  std::optional<std::uint64_t> entry() const;

 private:
  struct Impl;
  explicit SymbolTable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hwarb::native

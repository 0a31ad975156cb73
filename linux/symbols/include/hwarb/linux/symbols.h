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
//    C++ names: a mangled symbol is known by its demangled name (as c++filt writes it:
//    `ns::Counter::total`, `ns::Box<int>::count`, `ns::Counter::bump()`) and by its mangled one;
//    Symbol::name is the demangled name, Symbol::linkage_name the one in the ELF file. Spaces do
//    not count in a comparison; a function is also found without its parameter list, and a name
//    in an anonymous namespace without its `(anonymous namespace)::` when that is unique (else
//    EINVAL "ambiguous", naming the candidates). A thread-local variable (STT_TLS) is EOPNOTSUPP
//    ("thread-local ...": it has no address of its own; find_thread_local below); a name DWARF knows only as a local variable or
//    parameter of a function is ENOENT saying so (watch it through `hwarb gdbserver` and gdb).
//  - find_thread_local(name) finds a thread-local variable (STT_TLS) as find finds a global (the
//    executable first, C++ spellings): its offset in its module's thread-local block, its size
//    and its module (path, load bias, whether it is the executable). Where each thread's copy is
//    is ThreadLocals' business (linux/session). ENOENT naming `symbol` when no thread-local has
//    that name, or several do through their anonymous namespaces.
//  - resolve(text, read) gives the object that a source-level name denotes: NAME (anything find
//    knows) followed by member and element accesses `.m`, `[i]`, `->m`, or `(*NAME)` — e.g.
//    `g_cfg.limits[2].max`, `p->next->v`, `m[1][2]` — through the DWARF types of the module that
//    holds NAME. The size is the sizeof of the selected object (the ELF symbol's size for NAME
//    alone without DWARF); the type says how to print its values. A pointer on the path is read
//    once through `read` (an entry of `notes` says so: the watch is not moved if it changes).
//    Errors: find's for NAME; ENOENT for a member that does not exist (naming the nearest ones,
//    or the members there are); ERANGE for an index past an array's bound; EINVAL for an access
//    the type does not have (a member of a non-struct, an index of a scalar), a bad index, a
//    path without DWARF; a read's error for a pointer that cannot be read.
//  - locate(addr) gives the symbol containing addr (or the nearest preceding function in the
//    same module when sizes are missing) and, with DWARF, its source file:line.
//  - describe(addr) = "sym+0xoff (file.c:12)", "sym+0xoff", "[module]+0xoff", or "0x..." — never
//    fails.
//  - A SymbolTable is immutable after load; moving is cheap.
// Thread-safety: const methods are safe from several threads only after construction.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::native {

struct Symbol {
  std::string name;           // demangled (as c++filt writes it) when the ELF name is a C++ one
  std::uint64_t address = 0;  // run-time address (link-time value + the module's bias)
  std::uint64_t size = 0;
  bool function = false;     // STT_FUNC (else a data object)
  std::string module;        // the ELF file's path
  std::string linkage_name;  // the name in the ELF file (mangled), without its symbol version
};

// A thread-local variable: one copy per thread, at `offset` in each thread's block of `module`.
struct ThreadLocalSymbol {
  std::string name;  // demangled
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string module;       // the ELF file's path
  std::uint64_t bias = 0;   // the module's load bias (its link_map entry's l_addr)
  bool executable = false;  // the module is the process's executable (load_file: the file)
};

// How to print a value of a source-level object.
enum class ValueKind : std::uint8_t {
  kBytes,      // unknown or aggregate: the bytes
  kSigned,     // a signed integer (char types included when not in an array)
  kUnsigned,   // an unsigned integer
  kBool,       // bool / _Bool
  kFloat,      // float, double (4 or 8 bytes)
  kEnum,       // an enumeration: by enumerator name
  kPointer,    // an address: with its symbol
  kCharArray,  // char[N]: a string up to its first NUL
};

struct ValueType {
  ValueKind kind = ValueKind::kBytes;
  std::string name;  // as the source spells it: "int", "Limit", "char[16]", "Config*"; "" unknown
  std::vector<std::pair<std::int64_t, std::string>> enumerators;  // kEnum
};

// What a source-level name denotes in the process.
struct SourceObject {
  std::uint64_t address = 0;
  std::uint64_t size = 0;  // sizeof the object (0 unknown)
  Symbol symbol;           // the variable the path starts at
  ValueType type;
  std::vector<std::string> notes;  // e.g. a pointer read once
};

// Reads process memory at a run-time address (for pointers on a path).
using MemoryReader = std::function<Result<void>(std::uint64_t, std::span<std::uint8_t>)>;

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
  Result<ThreadLocalSymbol> find_thread_local(std::string_view name) const;
  Result<SourceObject> resolve(std::string_view text, const MemoryReader& read) const;
  Location locate(std::uint64_t addr) const;
  std::string describe(std::uint64_t addr) const;
  // Up to `n` known names closest to `name` (edit distance, an adjacent transposition counting
  // as one edit), best first, ties by name; only names within max(2, length / 3) edits. A
  // thread-local variable's name is followed by " (thread-local)".
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

#include "hwarb/linux/symbols.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dwarf_objects.h"
#include "hwarb/base/format.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"

// Names are stored without their symbol version ("malloc@@GLIBC_2.2.5" is "malloc"), and so are
// the names asked for. Only functions (STT_FUNC, STT_GNU_IFUNC) and data objects (STT_OBJECT)
// defined in an allocated section are kept: undefined references, TLS offsets, section and file
// symbols have no run-time address of their own.
//
// Separate debug files are looked up by build ID only (/usr/lib/debug/.build-id/), never through
// debuginfod: loading symbols must not touch the network.
//
// The stubs of the procedure linkage table have no symbols of their own: each is named
// "NAME@plt" (as perf, objdump and gdb name them) after the function it jumps to. A stub in .plt,
// .plt.sec or .plt.got is an indirect jump through a GOT slot (`jmp *disp(%rip)`, possibly after
// endbr64 and a bnd prefix); the JUMP_SLOT and GLOB_DAT relocations name the import each slot is
// for. Matching slots rather than counting stubs names lazy (.plt), IBT (.plt.sec) and
// non-lazy (.plt.got) stubs alike, and leaves .plt's resolver trampoline unnamed.
//
// An address in a module but in no symbol is described as "[basename]+0xoff" with off = addr -
// the module's bias, the link-time address that addr2line and objdump use.

namespace hwarb::native {

namespace dwarf {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), or limit + 1 as
// soon as it is certain to exceed `limit`.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t la = a.size(), lb = b.size();
  if ((la > lb ? la - lb : lb - la) > limit) return limit + 1;
  std::vector<std::size_t> prev2(lb + 1), prev(lb + 1), cur(lb + 1);
  for (std::size_t j = 0; j <= lb; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= la; ++i) {
    cur[0] = i;
    std::size_t row_min = cur[0];
    for (std::size_t j = 1; j <= lb; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[lb];
}

}  // namespace dwarf

namespace {

using dwarf::edit_distance;

constexpr std::uint32_t kNoModule = ~std::uint32_t{0};

// Binding preference: global before weak before local definitions of one name.
std::uint8_t binding_rank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

constexpr std::string_view kPltSuffix = "@plt";

// The name without its symbol version; a PLT stub's "@plt" stays.
std::string_view plain_name(std::string_view name) {
  if (name.ends_with(kPltSuffix)) return name;
  return name.substr(0, name.find('@'));
}

std::string_view basename_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::size_t leading_underscores(std::string_view name) {
  return std::min(name.find_first_not_of('_'), name.size());
}

// The name as c++filt writes it; `name` itself when it is not a mangled C++ name.
std::string demangled(std::string_view name) {
  if (!name.starts_with("_Z")) return std::string(name);
  int status = 0;
  char* out = abi::__cxa_demangle(std::string(name).c_str(), nullptr, nullptr, &status);
  if (out == nullptr || status != 0) {
    std::free(out);
    return std::string(name);
  }
  std::string text = out;
  std::free(out);
  return text;
}

constexpr std::string_view kAnonymous = "(anonymous namespace)::";

// The comparison key of a C++ name: without spaces, and without its parameter list when
// `no_params` (a function named without one).
std::string name_key(std::string_view name, bool no_params) {
  std::string out;
  for (char c : name) {
    if (c != ' ') out += c;
  }
  if (no_params && out.ends_with(")")) {
    int depth = 0;
    for (std::size_t i = out.size(); i-- > 0;) {
      if (out[i] == ')') ++depth;
      if (out[i] == '(' && --depth == 0) {
        out.resize(i);
        break;
      }
    }
  }
  return out;
}

// The name without any "(anonymous namespace)::" in it.
std::string without_anonymous(std::string_view name) {
  std::string out(name);
  const std::string key = name_key(kAnonymous, false);
  for (std::size_t at = out.find(key); at != std::string::npos; at = out.find(key)) {
    out.erase(at, key.size());
  }
  return out;
}

void init_libelf() {
  static std::once_flag once;
  std::call_once(once, [] { (void)elf_version(EV_CURRENT); });
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_build_id_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

// GOT slot (link-time address) -> the function imported through it, from the JUMP_SLOT and
// GLOB_DAT relocations of the dynamic symbols in `elf`.
std::unordered_map<std::uint64_t, std::string> got_slots(Elf* elf) {
  std::unordered_map<std::uint64_t, std::string> slots;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
    Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
    GElf_Shdr symsh;
    if (symscn == nullptr || gelf_getshdr(symscn, &symsh) == nullptr ||
        symsh.sh_type != SHT_DYNSYM) {
      continue;
    }
    Elf_Data* relas = elf_getdata(scn, nullptr);
    Elf_Data* syms = elf_getdata(symscn, nullptr);
    if (relas == nullptr || syms == nullptr) continue;
    const std::size_t n = sh.sh_size / sh.sh_entsize;
    for (std::size_t i = 0; i < n; ++i) {
      GElf_Rela rela;
      if (gelf_getrela(relas, static_cast<int>(i), &rela) == nullptr) continue;
      const auto type = GELF_R_TYPE(rela.r_info);
      const auto index = GELF_R_SYM(rela.r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || index == 0) continue;
      GElf_Sym sym;
      if (gelf_getsym(syms, static_cast<int>(index), &sym) == nullptr) continue;
      const char* name = elf_strptr(elf, symsh.sh_link, sym.st_name);
      if (name == nullptr || *name == '\0') continue;
      slots.emplace(rela.r_offset, plain_name(name));
    }
  }
  return slots;
}

// The GOT slot a PLT stub of `size` bytes at link-time address `addr` jumps through: `jmp
// *disp(%rip)` at its start, after endbr64, after bnd, or after both.
std::optional<std::uint64_t> stub_slot(const std::uint8_t* stub, std::size_t size,
                                       std::uint64_t addr) {
  constexpr std::uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  constexpr std::uint8_t kBnd = 0xf2;
  std::size_t at = 0;
  if (size >= 4 && std::equal(std::begin(kEndbr64), std::end(kEndbr64), stub)) at = 4;
  if (at < size && stub[at] == kBnd) ++at;
  if (at + 6 > size || stub[at] != 0xff || stub[at + 1] != 0x25) return std::nullopt;
  std::int32_t disp = 0;
  std::memcpy(&disp, stub + at + 2, sizeof disp);
  return addr + at + 6 + static_cast<std::uint64_t>(static_cast<std::int64_t>(disp));
}

struct DwflDeleter {
  void operator()(Dwfl* d) const { dwfl_end(d); }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflDeleter>;

struct ElfDeleter {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfDeleter>;

// What one ELF file's headers say.
struct ElfHeaders {
  GElf_Ehdr ehdr{};
  std::vector<GElf_Phdr> loads;  // PT_LOAD segments in file order
};

// EINVAL naming `file` when `fd` is not an ELF file.
Result<ElfHeaders> read_headers(int fd, const std::string& path) {
  ElfPtr elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) {
    return make_error(ErrorCode::kInval, "file: " + path + " is not an ELF file");
  }
  ElfHeaders h;
  std::size_t phnum = 0;
  if (gelf_getehdr(elf.get(), &h.ehdr) == nullptr || elf_getphdrnum(elf.get(), &phnum) != 0) {
    return make_error(ErrorCode::kInval,
                      "file: " + path + ": bad ELF header: " + elf_errmsg(elf_errno()));
  }
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) != nullptr && ph.p_type == PT_LOAD) {
      h.loads.push_back(ph);
    }
  }
  return h;
}

// The load bias of a file whose lowest mapping is `m`: the kernel maps each PT_LOAD at its
// page-aligned p_vaddr + bias from its page-aligned p_offset.
std::uint64_t bias_from_mapping(const ElfHeaders& h, const Mapping& m, std::uint64_t page) {
  if (h.ehdr.e_type != ET_DYN || h.loads.empty()) return 0;
  const std::uint64_t mask = ~(page - 1);
  const GElf_Phdr* seg = &h.loads.front();
  for (const GElf_Phdr& ph : h.loads) {
    if ((ph.p_offset & mask) == m.offset) {
      seg = &ph;
      break;
    }
  }
  return m.start - (seg->p_vaddr & mask);
}

}  // namespace

struct SymbolTable::Impl {
  struct Entry {
    std::string name;     // demangled
    std::string linkage;  // the ELF name, when it differs from `name`
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    bool function = false;
    std::uint8_t rank = 0;
    std::uint32_t module = 0;
  };
  struct Module {
    std::string path;
    Dwfl_Module* mod = nullptr;
    std::uint64_t bias = 0;
    std::uint64_t start = 0, end = 0;
    std::uint64_t max_size = 0;  // of its symbols, bounds the backward search in locate()
  };

  DwflPtr dwfl;
  std::vector<Module> modules;         // the executable first, then the libraries in map order
  std::vector<Entry> entries;          // by address
  std::vector<std::uint32_t> by_name;  // indices into entries, by name then preference
  std::optional<std::uint64_t> entry_point;
  struct ThreadLocalEntry {
    std::string name;     // demangled
    std::string linkage;  // the ELF name when it differs
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::uint32_t module = 0;
  };
  std::vector<ThreadLocalEntry> tls;  // thread-local variables (STT_TLS), in module order
  mutable std::mutex dwarf_mutex;     // libdwfl loads DWARF lazily and is not thread-safe

  // Reports `path` (already open as `fd`) at `bias`; the Fd is consumed on success.
  Result<void> report(const std::string& path, const std::string& open_path, Fd& fd,
                      std::uint64_t bias, bool executable) {
    Dwfl_Module* mod = dwfl_report_elf(dwfl.get(), path.c_str(), open_path.c_str(), fd.get(), bias,
                                       /*add_p_vaddr=*/true);
    if (mod == nullptr) {
      return make_error(ErrorCode::kInval, "file: " + path + ": " + dwfl_errmsg(-1));
    }
    (void)fd.release();
    Module m;
    m.path = path;
    m.mod = mod;
    Dwarf_Addr start = 0, end = 0;
    dwfl_module_info(mod, nullptr, &start, &end, nullptr, nullptr, nullptr, nullptr);
    m.start = start;
    m.end = end;
    GElf_Addr elf_bias = 0;
    Elf* elf = dwfl_module_getelf(mod, &elf_bias);
    m.bias = elf_bias;
    if (executable && elf != nullptr) {
      GElf_Ehdr ehdr;
      if (gelf_getehdr(elf, &ehdr) != nullptr && ehdr.e_entry != 0) {
        entry_point = ehdr.e_entry + elf_bias;
      }
    }
    modules.push_back(std::move(m));
    return {};
  }

  // The PLT stubs of module `mi` as "NAME@plt" functions (see the top of this file).
  void collect_plt(std::uint32_t mi) {
    Module& m = modules[mi];
    GElf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(m.mod, &bias);
    GElf_Ehdr ehdr;
    std::size_t shstrndx = 0;
    if (elf == nullptr || gelf_getehdr(elf, &ehdr) == nullptr || ehdr.e_machine != EM_X86_64 ||
        elf_getshdrstrndx(elf, &shstrndx) != 0) {
      return;
    }
    std::unordered_map<std::uint64_t, std::string> slots;
    bool slots_read = false;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_PROGBITS ||
          (sh.sh_flags & SHF_EXECINSTR) == 0) {
        continue;
      }
      const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name == nullptr) continue;
      const std::string_view section = name;
      if (section != ".plt" && section != ".plt.sec" && section != ".plt.got") continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr || data->d_buf == nullptr) continue;
      if (!slots_read) {
        slots = got_slots(elf);
        slots_read = true;
      }
      const std::uint64_t stub_size = sh.sh_entsize != 0 ? sh.sh_entsize : 16;
      const auto* bytes = static_cast<const std::uint8_t*>(data->d_buf);
      const std::size_t size = std::min<std::size_t>(data->d_size, sh.sh_size);
      for (std::size_t off = 0; off + stub_size <= size; off += stub_size) {
        auto slot = stub_slot(bytes + off, stub_size, sh.sh_addr + off);
        if (!slot) continue;
        auto it = slots.find(*slot);
        if (it == slots.end()) continue;
        Entry e;
        e.name = it->second + std::string(kPltSuffix);
        e.address = sh.sh_addr + off + bias;
        e.size = stub_size;
        e.function = true;
        e.rank = binding_rank(GELF_ST_INFO(STB_LOCAL, STT_FUNC));
        e.module = mi;
        m.max_size = std::max(m.max_size, e.size);
        entries.push_back(std::move(e));
      }
    }
  }

  void collect_symbols() {
    for (std::uint32_t mi = 0; mi < modules.size(); ++mi) {
      collect_plt(mi);
      Module& m = modules[mi];
      const int n = dwfl_module_getsymtab(m.mod);
      for (int i = 1; i < n; ++i) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        const char* name = dwfl_module_getsym_info(m.mod, i, &sym, &addr, &shndx, nullptr, nullptr);
        if (name == nullptr || *name == '\0') continue;
        if (shndx == SHN_UNDEF || shndx == SHN_ABS || shndx == static_cast<GElf_Word>(-1)) continue;
        const int type = GELF_ST_TYPE(sym.st_info);
        if (type == STT_TLS) {
          ThreadLocalEntry t{demangled(plain_name(name)), "", sym.st_value, sym.st_size, mi};
          if (t.name != plain_name(name)) t.linkage = plain_name(name);
          tls.push_back(std::move(t));
        }
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT) continue;
        Entry e;
        e.name = demangled(plain_name(name));
        if (e.name.empty()) continue;
        if (e.name != plain_name(name)) e.linkage = plain_name(name);
        e.address = addr;
        e.size = sym.st_size;
        e.function = type != STT_OBJECT;
        e.rank = binding_rank(sym.st_info);
        e.module = mi;
        m.max_size = std::max(m.max_size, e.size);
        entries.push_back(std::move(e));
      }
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.address, a.module, a.name) < std::tie(b.address, b.module, b.name);
    });
    by_name.resize(entries.size());
    for (std::uint32_t i = 0; i < entries.size(); ++i) by_name[i] = i;
    // For one name: the executable's before the libraries', a defined address before 0, global
    // before weak before local, a known size before none.
    std::sort(by_name.begin(), by_name.end(), [this](std::uint32_t x, std::uint32_t y) {
      const Entry& a = entries[x];
      const Entry& b = entries[y];
      const auto key = [](const Entry& e) {
        return std::make_tuple(std::string_view(e.name), e.module, e.address == 0, e.rank,
                               e.size == 0, e.address);
      };
      return key(a) < key(b);
    });
  }

  Symbol to_symbol(const Entry& e) const {
    return Symbol{e.name,
                  e.address,
                  e.size,
                  e.function,
                  modules[e.module].path,
                  e.linkage.empty() ? e.name : e.linkage};
  }

  const Module* module_at(std::uint64_t addr, std::uint32_t* index) const {
    for (std::uint32_t i = 0; i < modules.size(); ++i) {
      if (addr >= modules[i].start && addr < modules[i].end) {
        *index = i;
        return &modules[i];
      }
    }
    *index = kNoModule;
    return nullptr;
  }

  // The symbol of module `mi` holding addr (innermost, then the preferred alias), else the
  // nearest preceding function of that module if it has no size.
  const Entry* symbol_at(std::uint64_t addr, std::uint32_t mi) const {
    auto it = std::upper_bound(entries.begin(), entries.end(), addr,
                               [](std::uint64_t a, const Entry& e) { return a < e.address; });
    const Entry* best = nullptr;
    const Entry* preceding_function = nullptr;
    const std::uint64_t max_size = modules[mi].max_size;
    // A module's symbols are contiguous in address order: the walk ends at another module's, or
    // once no symbol further down can be long enough to hold addr and the nearest function is
    // known.
    while (it != entries.begin()) {
      --it;
      const Entry& e = *it;
      if (e.module != mi) break;
      const std::uint64_t distance = addr - e.address;
      if (e.function && preceding_function == nullptr) preceding_function = &e;
      if (distance < e.size && better(e, best)) best = &e;
      if (distance >= max_size && preceding_function != nullptr) break;
    }
    if (best != nullptr) return best;
    if (preceding_function != nullptr && preceding_function->size == 0) return preceding_function;
    return nullptr;
  }

  static bool better(const Entry& e, const Entry* than) {
    if (than == nullptr) return true;
    const auto key = [](const Entry& x) {
      return std::make_tuple(~x.address, x.rank, leading_underscores(x.name), x.name.size(),
                             std::string_view(x.name));
    };
    return key(e) < key(*than);
  }
};

SymbolTable::SymbolTable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SymbolTable::SymbolTable(SymbolTable&&) noexcept = default;
SymbolTable& SymbolTable::operator=(SymbolTable&&) noexcept = default;
SymbolTable::~SymbolTable() = default;

Result<SymbolTable> SymbolTable::load(pid_t pid) {
  init_libelf();
  auto maps = read_maps(pid);
  if (!maps) return std::unexpected(maps.error());
  auto exe = executable_path(pid);
  if (!exe) return std::unexpected(exe.error());

  // Each file's lowest mapping, in map order, the executable first.
  std::vector<const Mapping*> files;
  for (const Mapping& m : *maps) {
    if (m.path.empty() || m.path.front() != '/') continue;
    auto same = [&](const Mapping* f) { return f->path == m.path; };
    auto it = std::find_if(files.begin(), files.end(), same);
    if (it == files.end()) {
      files.push_back(&m);
    } else if (m.start < (*it)->start) {
      *it = &m;
    }
  }
  std::stable_partition(files.begin(), files.end(),
                        [&](const Mapping* f) { return f->path == *exe; });

  auto impl = std::make_unique<Impl>();
  impl->dwfl.reset(dwfl_begin(&kCallbacks));
  if (!impl->dwfl) return make_error(ErrorCode::kNoMem, std::string("dwfl: ") + dwfl_errmsg(-1));
  const std::uint64_t page = page_size();
  dwfl_report_begin(impl->dwfl.get());
  for (const Mapping* m : files) {
    const bool is_exe = m->path == *exe;
    // A file replaced or deleted since it was mapped is still reachable through map_files.
    std::string open_path = m->path;
    auto opened = open_file(open_path);
    if (!opened) {
      char range[64];
      std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(m->start),
                    static_cast<unsigned long long>(m->end));
      open_path = "/proc/" + std::to_string(pid) + "/map_files/" + range;
      auto reopened = open_file(open_path);
      if (!reopened) {
        if (!is_exe) continue;
        dwfl_report_end(impl->dwfl.get(), nullptr, nullptr);
        return make_error(reopened.error().code(),
                          opened.error().message() + "; " + reopened.error().message());
      }
      opened = std::move(reopened);
    }
    Fd fd = std::move(*opened);
    auto headers = read_headers(fd.get(), m->path);
    Result<void> reported;
    if (headers) {
      reported =
          impl->report(m->path, open_path, fd, bias_from_mapping(*headers, *m, page), is_exe);
    } else {
      reported = std::unexpected(headers.error());
    }
    // A library that is not ELF (a locale archive, a font) is simply not a module.
    if (!reported && is_exe) {
      dwfl_report_end(impl->dwfl.get(), nullptr, nullptr);
      return std::unexpected(reported.error());
    }
  }
  dwfl_report_end(impl->dwfl.get(), nullptr, nullptr);
  impl->collect_symbols();
  return SymbolTable(std::move(impl));
}

Result<SymbolTable> SymbolTable::load_file(const std::string& path, std::uint64_t bias) {
  init_libelf();
  auto opened = open_file(path);
  if (!opened) return std::unexpected(opened.error());
  Fd fd = std::move(*opened);
  auto headers = read_headers(fd.get(), path);
  if (!headers) return std::unexpected(headers.error());
  auto impl = std::make_unique<Impl>();
  impl->dwfl.reset(dwfl_begin(&kCallbacks));
  if (!impl->dwfl) return make_error(ErrorCode::kNoMem, std::string("dwfl: ") + dwfl_errmsg(-1));
  dwfl_report_begin(impl->dwfl.get());
  auto reported = impl->report(path, path, fd, bias, /*executable=*/true);
  dwfl_report_end(impl->dwfl.get(), nullptr, nullptr);
  if (!reported) return std::unexpected(reported.error());
  impl->collect_symbols();
  return SymbolTable(std::move(impl));
}

Result<Symbol> SymbolTable::find(std::string_view name) const {
  const std::string_view wanted = plain_name(name);
  const auto& entries = impl_->entries;
  auto it = std::lower_bound(
      impl_->by_name.begin(), impl_->by_name.end(), wanted,
      [&](std::uint32_t i, std::string_view n) { return std::string_view(entries[i].name) < n; });
  if (!wanted.empty() && it != impl_->by_name.end() && entries[*it].name == wanted) {
    return impl_->to_symbol(entries[*it]);
  }
  if (wanted.empty()) {
    return make_error(ErrorCode::kNoEnt, "symbol: unknown symbol '" + std::string(name) + "'");
  }
  // The ELF (mangled) name, then C++ spellings: spaces aside, a function without its parameter
  // list, a name in an anonymous namespace without it. The by_name order gives the preferred
  // entry of a name first.
  const bool params = wanted.ends_with(")");
  const std::string key = name_key(wanted, false);
  const std::string loose = without_anonymous(key);
  std::vector<std::uint32_t> matches;
  std::string_view previous;
  for (std::uint32_t i : impl_->by_name) {
    const Impl::Entry& e = entries[i];
    if (e.linkage == wanted) return impl_->to_symbol(e);
    if (e.name == previous) continue;
    const std::string k = name_key(e.name, e.function && !params);
    if (k == key || without_anonymous(k) == loose) {
      previous = e.name;
      matches.push_back(i);
    }
  }
  // An exact key (spaces aside) wins over one that only matches without anonymous namespaces.
  std::vector<std::uint32_t> exact;
  for (std::uint32_t i : matches) {
    if (name_key(entries[i].name, entries[i].function && !params) == key) exact.push_back(i);
  }
  if (!exact.empty()) matches = exact;
  if (matches.size() == 1) return impl_->to_symbol(entries[matches.front()]);
  if (matches.size() > 1) {
    std::string message = "symbol: '" + std::string(name) + "' is ambiguous: it names ";
    for (std::size_t i = 0; i < matches.size() && i < 6; ++i) {
      message += (i == 0 ? "" : ", ") + entries[matches[i]].name;
    }
    if (matches.size() > 6) message += ", ...";
    return make_error(ErrorCode::kInval, message + " (give the full name)");
  }
  for (const Impl::ThreadLocalEntry& t : impl_->tls) {
    const std::string k = name_key(t.name, false);
    if (k == key || without_anonymous(k) == loose) {
      return make_error(ErrorCode::kOpNotSupp,
                        "symbol: '" + std::string(name) +
                            "' is a thread-local variable (one copy per thread, no address "
                            "of its own): find_thread_local gives its place in each copy");
    }
  }
  std::string message = "symbol: unknown symbol '" + std::string(name) + "'";
  {
    std::lock_guard lock(impl_->dwarf_mutex);
    for (const Impl::Module& m : impl_->modules) {
      if (auto local = dwarf::local_of(m.mod, wanted)) {
        return make_error(ErrorCode::kNoEnt,
                          "symbol: '" + std::string(name) + "' is " + *local +
                              ", not a global: it exists only while its function runs; watch it "
                              "with `hwarb gdbserver` and gdb (`watch " +
                              std::string(name) + "` in that frame)");
      }
    }
  }
  const std::vector<std::string> close = near(name, 3);
  for (std::size_t i = 0; i < close.size(); ++i) {
    message += i == 0 ? "; did you mean: " : ", ";
    message += close[i];
  }
  return make_error(ErrorCode::kNoEnt, std::move(message));
}

Result<SourceObject> SymbolTable::resolve(std::string_view text, const MemoryReader& read) const {
  // The whole text first (ELF names may hold '.', e.g. "x.0"); else NAME and its path: NAME ends
  // at the first '.', '[' or "->" outside brackets, and "(*NAME)REST" is NAME[0]REST.
  std::string base(text);
  std::string path;
  auto sym = find(text);
  if (!sym && sym.error().code() == ErrorCode::kNoEnt) {
    if (text.starts_with("(*") && text.find(')') != std::string_view::npos) {
      const std::size_t close = text.find(')');
      base = std::string(text.substr(2, close - 2));
      path = "[0]" + std::string(text.substr(close + 1));
    } else {
      int depth = 0;
      for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '(' || c == '<') ++depth;
        if ((c == ')' || c == '>') && depth > 0 && !(c == '>' && i > 0 && text[i - 1] == '-')) {
          --depth;
        }
        if (depth == 0 && (c == '.' || c == '[' || text.substr(i).starts_with("->")) && i > 0) {
          base = std::string(text.substr(0, i));
          path = std::string(text.substr(i));
          break;
        }
      }
    }
    if (!path.empty()) sym = find(base);
  }
  if (!sym) return std::unexpected(sym.error());
  SourceObject whole;
  whole.address = sym->address;
  whole.size = sym->size;
  whole.symbol = *sym;
  if (sym->function) {
    if (!path.empty()) {
      return make_error(ErrorCode::kInval,
                        "symbol: '" + base + "' is a function: it has no '" + path + "'");
    }
    return whole;
  }
  std::uint32_t mi = kNoModule;
  const Impl::Module* module = impl_->module_at(sym->address, &mi);
  if (module == nullptr) {
    if (path.empty()) return whole;
    return make_error(ErrorCode::kInval,
                      "dwarf: '" + base + "' is in no module: no DWARF for '" + path + "'");
  }
  std::lock_guard lock(impl_->dwarf_mutex);
  return dwarf::object_at(module->mod, whole, path, read);
}

Result<ThreadLocalSymbol> SymbolTable::find_thread_local(std::string_view name) const {
  const std::string_view wanted = plain_name(name);
  const std::string key = name_key(wanted, false);
  const std::string loose = without_anonymous(key);
  const Impl::ThreadLocalEntry* loose_match = nullptr;
  std::size_t loose_matches = 0;
  for (const Impl::ThreadLocalEntry& t : impl_->tls) {
    const std::string k = name_key(t.name, false);
    const bool exact = t.linkage == wanted || k == key;
    if (!exact && without_anonymous(k) != loose) continue;
    if (!exact) {
      if (loose_match == nullptr || loose_match->name != t.name) ++loose_matches;
      if (loose_match == nullptr) loose_match = &t;
      continue;
    }
    loose_match = &t;
    loose_matches = 1;
    break;
  }
  if (loose_match == nullptr || loose_matches > 1) {
    return make_error(ErrorCode::kNoEnt, "symbol: '" + std::string(name) +
                                             "' is not a thread-local variable" +
                                             (loose_matches > 1 ? " (ambiguous)" : ""));
  }
  const Impl::Module& m = impl_->modules[loose_match->module];
  return ThreadLocalSymbol{
      loose_match->name,       loose_match->offset, loose_match->size, m.path, m.bias,
      loose_match->module == 0};
}

std::vector<std::string> SymbolTable::near(std::string_view name, std::size_t n) const {
  const std::string_view wanted = plain_name(name);
  // Farther than this is a different name, not a typo.
  const std::size_t limit = std::max<std::size_t>(2, wanted.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> found;
  std::string_view previous;
  for (std::uint32_t i : impl_->by_name) {
    const std::string_view candidate = impl_->entries[i].name;
    if (candidate == previous) continue;
    previous = candidate;
    const std::size_t d = edit_distance(wanted, candidate, limit);
    if (d <= limit) found.emplace_back(d, candidate);
  }
  for (const Impl::ThreadLocalEntry& t : impl_->tls) {
    const std::size_t d = edit_distance(wanted, t.name, limit);
    if (d <= limit) found.emplace_back(d, t.name + " (thread-local)");
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < found.size() && out.size() < n; ++i) {
    out.push_back(std::move(found[i].second));
  }
  return out;
}

Location SymbolTable::locate(std::uint64_t addr) const {
  Location loc;
  std::uint32_t mi = kNoModule;
  const Impl::Module* module = impl_->module_at(addr, &mi);
  if (module == nullptr) return loc;
  loc.module = module->path;
  loc.module_offset = addr - module->bias;
  if (const Impl::Entry* e = impl_->symbol_at(addr, mi)) {
    loc.symbol = impl_->to_symbol(*e);
    loc.offset = addr - e->address;
  }
  std::lock_guard lock(impl_->dwarf_mutex);
  if (Dwfl_Line* line = dwfl_module_getsrc(module->mod, addr)) {
    int lineno = 0;
    if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      loc.file = basename_of(file);
      loc.line = lineno;
    }
  }
  return loc;
}

std::string SymbolTable::describe(std::uint64_t addr) const {
  const Location loc = locate(addr);
  std::string out;
  if (loc.symbol) {
    out = loc.symbol->name + "+" + hex(loc.offset);
  } else if (!loc.module.empty()) {
    out = "[" + std::string(basename_of(loc.module)) + "]+" + hex(loc.module_offset);
  } else {
    return hex(addr);
  }
  if (!loc.file.empty()) out += " (" + loc.file + ":" + std::to_string(loc.line) + ")";
  return out;
}

std::optional<std::uint64_t> SymbolTable::entry() const {
  return impl_->entry_point;
}

}  // namespace hwarb::native

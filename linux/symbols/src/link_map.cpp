#include "hwarb/linux/link_map.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include "hwarb/base/format.h"

namespace hwarb::native {
namespace {

constexpr std::size_t kMaxEntries = 4096;
constexpr std::size_t kMaxName = 4096;
constexpr std::size_t kMaxNamespaces = 256;
// r_debug_extended's r_next: right after the 40 bytes of struct r_debug (x86-64).
constexpr std::uint64_t kRNextOffset = sizeof(struct r_debug);

template <typename T>
Result<T> read_as(const MemoryReader& read, std::uint64_t addr) {
  T value;
  std::uint8_t raw[sizeof(T)];
  if (auto ok = read(addr, std::span<std::uint8_t>(raw, sizeof raw)); !ok) {
    return std::unexpected(ok.error());
  }
  std::memcpy(&value, raw, sizeof value);
  return value;
}

Result<std::string> read_name(const MemoryReader& read, std::uint64_t addr) {
  std::string name;
  if (addr == 0) return name;
  std::uint8_t chunk[64];
  while (name.size() < kMaxName) {
    // Never across a page end: the string may end just before an unmapped page.
    const std::uint64_t room = 0x1000 - (addr & 0xfff);
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof chunk, room));
    if (auto ok = read(addr, std::span<std::uint8_t>(chunk, n)); !ok) {
      return std::unexpected(ok.error());
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (chunk[i] == 0) return name;
      name += static_cast<char>(chunk[i]);
    }
    addr += n;
  }
  return make_error(ErrorCode::kIo, "link_map: a library name has no end in " +
                                        std::to_string(kMaxName) + " bytes");
}

}  // namespace

Result<LinkMap> read_link_map(std::span<const std::uint8_t> auxv, const MemoryReader& read) {
  // 1. The program headers from auxv.
  std::uint64_t phdr = 0, phnum = 0;
  for (std::size_t at = 0; at + sizeof(Elf64_auxv_t) <= auxv.size(); at += sizeof(Elf64_auxv_t)) {
    Elf64_auxv_t entry;
    std::memcpy(&entry, auxv.data() + at, sizeof entry);
    if (entry.a_type == AT_PHDR) phdr = entry.a_un.a_val;
    if (entry.a_type == AT_PHNUM) phnum = entry.a_un.a_val;
    if (entry.a_type == AT_NULL) break;
  }
  LinkMap map;
  if (phdr == 0 || phnum == 0) return map;
  // 2. The load bias (PT_PHDR) and the dynamic section (PT_DYNAMIC).
  std::uint64_t bias = 0, dynamic = 0;
  bool have_phdr = false, have_dynamic = false;
  for (std::uint64_t i = 0; i < phnum && i < 256; ++i) {
    auto ph = read_as<Elf64_Phdr>(read, phdr + i * sizeof(Elf64_Phdr));
    if (!ph) return std::unexpected(ph.error());
    if (ph->p_type == PT_PHDR) {
      bias = phdr - ph->p_vaddr;
      have_phdr = true;
    }
    if (ph->p_type == PT_DYNAMIC) {
      dynamic = ph->p_vaddr;
      have_dynamic = true;
    }
  }
  if (!have_dynamic) return map;  // static
  if (!have_phdr) bias = 0;
  // 3. DT_DEBUG: &r_debug once the dynamic linker has run.
  std::uint64_t r_debug = 0;
  for (std::uint64_t at = bias + dynamic;; at += sizeof(Elf64_Dyn)) {
    auto dyn = read_as<Elf64_Dyn>(read, at);
    if (!dyn) return std::unexpected(dyn.error());
    if (dyn->d_tag == DT_NULL) break;
    if (dyn->d_tag == DT_DEBUG) {
      r_debug = dyn->d_un.d_ptr;
      break;
    }
    if (at - (bias + dynamic) > 4096 * sizeof(Elf64_Dyn)) {
      return make_error(ErrorCode::kIo, "link_map: the dynamic section has no end");
    }
  }
  // 4. Each namespace's r_debug: r_map, then the chain; r_next (r_debug_extended, from r_version
  // 2) leads to the next namespace's.
  std::size_t entries = 0;
  for (std::size_t ns = 0; r_debug != 0 && ns < kMaxNamespaces; ++ns) {
    auto version = read_as<std::int32_t>(read, r_debug + offsetof(struct r_debug, r_version));
    if (!version) return std::unexpected(version.error());
    auto first = read_as<std::uint64_t>(read, r_debug + offsetof(struct r_debug, r_map));
    if (!first) return std::unexpected(first.error());
    std::uint64_t lm = *first;
    for (std::size_t n = 0; lm != 0; ++n, ++entries) {
      if (entries == kMaxEntries) {
        return make_error(ErrorCode::kIo, "link_map: more than " + std::to_string(kMaxEntries) +
                                              " entries (a loop?)");
      }
      auto entry = read_as<struct link_map>(read, lm);
      if (!entry) return std::unexpected(entry.error());
      if (ns == 0 && n == 0) {
        map.main_lm = lm;
      } else {
        auto name = read_name(read, reinterpret_cast<std::uint64_t>(entry->l_name));
        if (!name) return std::unexpected(name.error());
        map.libraries.push_back(LoadedObject{.lm = lm,
                                             .name = std::move(*name),
                                             .l_addr = static_cast<std::uint64_t>(entry->l_addr),
                                             .l_ld = reinterpret_cast<std::uint64_t>(entry->l_ld),
                                             .lmid = r_debug});
      }
      lm = reinterpret_cast<std::uint64_t>(entry->l_next);
    }
    if (*version < 2) break;
    auto next = read_as<std::uint64_t>(read, r_debug + kRNextOffset);
    if (!next) return std::unexpected(next.error());
    r_debug = *next;
  }
  return map;
}

std::string svr4_library_xml(const LinkMap& map) {
  std::string xml = "<library-list-svr4 version=\"1.0\"";
  if (map.main_lm != 0) xml += " main-lm=\"" + hex(map.main_lm) + "\"";
  xml += ">";
  for (const LoadedObject& o : map.libraries) {
    xml += "<library name=\"" + xml_escape(o.name) + "\" lm=\"" + hex(o.lm) + "\" l_addr=\"" +
           hex(o.l_addr) + "\" l_ld=\"" + hex(o.l_ld) + "\" lmid=\"" + hex(o.lmid) + "\"/>";
  }
  xml += "</library-list-svr4>";
  return xml;
}

}  // namespace hwarb::native

#include "hwarb/gdb/gdb_regs.h"

#include <cpuid.h>

#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "hwarb/gdb/rsp.h"

namespace hwarb::gdb {
namespace {

using Gpr = std::uint64_t x86::Regs::*;

// Where a register's value lives.
enum class Src {
  kGpr,    // a Regs field, all 8 bytes
  kGpr32,  // a Regs field, the low 4 bytes (eflags, segment registers)
  kFx,     // `size` bytes of the FXSAVE area at `fx`, as stored
  kFx16,   // a 16-bit FXSAVE field at `fx`, zero-extended to 4 bytes (fctrl, fstat)
  kFop,    // the 11-bit opcode at FXSAVE 6
  kFtag,   // the full tag word, from the abridged tag at FXSAVE 4
  kExt,    // `size` bytes of ExtRegs::bytes at `fx`
};

struct RegInfo {
  const char* name;
  int size;
  const char* type;   // the target.xml type
  const char* group;  // the target.xml group, nullptr for none
  Src src;
  Gpr gpr;
  int fx;
  std::uint64_t need = 0;  // the XSAVE components (ExtRegs::features bits) it needs
};

constexpr RegInfo gpr(const char* name, Gpr field, const char* type = "int64") {
  return {name, 8, type, nullptr, Src::kGpr, field, 0};
}
constexpr RegInfo gpr32(const char* name, Gpr field, const char* type = "int32") {
  return {name, 4, type, nullptr, Src::kGpr32, field, 0};
}
constexpr RegInfo st(const char* name, int i) {
  return {name, 10, "i387_ext", nullptr, Src::kFx, nullptr, 32 + 16 * i};
}
constexpr RegInfo fpu(const char* name, Src src, int fx) {
  return {name, 4, "int", "float", src, nullptr, fx};
}
constexpr RegInfo xmm(const char* name, int i) {
  return {name, 16, "vec128", nullptr, Src::kFx, nullptr, 160 + 16 * i};
}

using R = x86::Regs;
constexpr std::array<RegInfo, kGdbCoreRegisterCount> kCoreRegs = {{
    gpr("rax", &R::rax),
    gpr("rbx", &R::rbx),
    gpr("rcx", &R::rcx),
    gpr("rdx", &R::rdx),
    gpr("rsi", &R::rsi),
    gpr("rdi", &R::rdi),
    gpr("rbp", &R::rbp, "data_ptr"),
    gpr("rsp", &R::rsp, "data_ptr"),
    gpr("r8", &R::r8),
    gpr("r9", &R::r9),
    gpr("r10", &R::r10),
    gpr("r11", &R::r11),
    gpr("r12", &R::r12),
    gpr("r13", &R::r13),
    gpr("r14", &R::r14),
    gpr("r15", &R::r15),
    gpr("rip", &R::rip, "code_ptr"),
    gpr32("eflags", &R::eflags, "i386_eflags"),
    gpr32("cs", &R::cs),
    gpr32("ss", &R::ss),
    gpr32("ds", &R::ds),
    gpr32("es", &R::es),
    gpr32("fs", &R::fs),
    gpr32("gs", &R::gs),
    st("st0", 0),
    st("st1", 1),
    st("st2", 2),
    st("st3", 3),
    st("st4", 4),
    st("st5", 5),
    st("st6", 6),
    st("st7", 7),
    fpu("fctrl", Src::kFx16, 0),
    fpu("fstat", Src::kFx16, 2),
    fpu("ftag", Src::kFtag, 4),
    fpu("fiseg", Src::kFx, 12),
    fpu("fioff", Src::kFx, 8),
    fpu("foseg", Src::kFx, 20),
    fpu("fooff", Src::kFx, 16),
    fpu("fop", Src::kFop, 6),
    xmm("xmm0", 0),
    xmm("xmm1", 1),
    xmm("xmm2", 2),
    xmm("xmm3", 3),
    xmm("xmm4", 4),
    xmm("xmm5", 5),
    xmm("xmm6", 6),
    xmm("xmm7", 7),
    xmm("xmm8", 8),
    xmm("xmm9", 9),
    xmm("xmm10", 10),
    xmm("xmm11", 11),
    xmm("xmm12", 12),
    xmm("xmm13", 13),
    xmm("xmm14", 14),
    xmm("xmm15", 15),
    {"mxcsr", 4, "i386_mxcsr", "vector", Src::kFx, nullptr, 24},
    gpr("orig_rax", &R::orig_rax, "int"),
    gpr("fs_base", &R::fs_base, "int"),
    gpr("gs_base", &R::gs_base, "int"),
}};

constexpr int core_size() {
  int n = 0;
  for (const RegInfo& info : kCoreRegs) n += info.size;
  return n;
}
static_assert(core_size() == kGdbRegistersSize);

// The feature each register belongs to, by its first regnum.
constexpr int kSseFirst = 40;
constexpr int kLinuxFirst = 57;
constexpr int kSegmentsFirst = 58;
constexpr int kAvxFirst = 60;
constexpr int kAvx512First = 76;
constexpr int kPkeysFirst = 148;

// Where each block of ExtRegs::bytes starts (gdb_regs.h draws it).
constexpr int kExtYmmh = 0;
constexpr int kExtOpmask = 256;
constexpr int kExtZmmHi256 = 320;
constexpr int kExtHi16Zmm = 832;
constexpr int kExtPkru = 1856;

// Every register: the core ones, then those of the XSAVE components, numbered as gdb_regs.h says.
struct Table {
  std::array<std::string, kGdbRegisterCount - kGdbCoreRegisterCount> names;
  std::array<RegInfo, kGdbRegisterCount> regs{};
  Table() {
    for (int n = 0; n < kGdbCoreRegisterCount; ++n) regs[n] = kCoreRegs[n];
    int n = kGdbCoreRegisterCount;
    auto add = [&](std::string name, int size, const char* type, int at, std::uint64_t need) {
      names[n - kGdbCoreRegisterCount] = std::move(name);
      regs[n] = {names[n - kGdbCoreRegisterCount].c_str(),
                 size,
                 type,
                 nullptr,
                 Src::kExt,
                 nullptr,
                 at,
                 need};
      ++n;
    };
    for (int i = 0; i < 16; ++i) {
      add("ymm" + std::to_string(i) + "h", 16, "uint128", kExtYmmh + 16 * i, ExtRegs::kAvx);
    }
    for (int i = 0; i < 16; ++i) {
      add("xmm" + std::to_string(16 + i), 16, "vec128", kExtHi16Zmm + 64 * i, ExtRegs::kAvx512);
    }
    for (int i = 0; i < 16; ++i) {
      add("ymm" + std::to_string(16 + i) + "h", 16, "uint128", kExtHi16Zmm + 64 * i + 16,
          ExtRegs::kAvx512);
    }
    for (int i = 0; i < 8; ++i) {
      add("k" + std::to_string(i), 8, "uint64", kExtOpmask + 8 * i, ExtRegs::kAvx512);
    }
    for (int i = 0; i < 16; ++i) {
      add("zmm" + std::to_string(i) + "h", 32, "v2ui128", kExtZmmHi256 + 32 * i, ExtRegs::kAvx512);
    }
    for (int i = 0; i < 16; ++i) {
      add("zmm" + std::to_string(16 + i) + "h", 32, "v2ui128", kExtHi16Zmm + 64 * i + 32,
          ExtRegs::kAvx512);
    }
    add("pkru", 4, "uint32", kExtPkru, ExtRegs::kPkru);
  }
};

const std::array<RegInfo, kGdbRegisterCount>& all_regs() {
  static const Table table;
  return table.regs;
}

// True when a thread with XSAVE components `features` has the register.
bool has(const RegInfo& info, std::uint64_t features) {
  return (info.need & features) == info.need;
}

std::uint16_t load16(const FpRegs& fp, int at) {
  return static_cast<std::uint16_t>(fp.fxsave[at] | fp.fxsave[at + 1] << 8);
}

void store16(FpRegs& fp, int at, std::uint16_t v) {
  fp.fxsave[at] = static_cast<std::uint8_t>(v);
  fp.fxsave[at + 1] = static_cast<std::uint8_t>(v >> 8);
}

std::uint64_t load_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// gdb's classification of an 80-bit register: 0 valid, 1 zero, 2 special.
int x87_tag(const std::uint8_t* raw) {
  const bool integer = (raw[7] & 0x80) != 0;
  const int exponent = (raw[9] & 0x7f) << 8 | raw[8];
  const std::uint64_t fraction = load_le(raw, 8) & ~(std::uint64_t{1} << 63);
  if (exponent == 0x7fff) return 2;
  if (exponent == 0) return fraction == 0 && !integer ? 1 : 2;
  return integer ? 0 : 2;
}

// The register's bytes (little-endian, info.size of them) into `out`.
void read_bytes(const RegInfo& info, const x86::Regs& r, const FpRegs& fp, std::uint8_t* out) {
  std::uint64_t v = 0;
  switch (info.src) {
    case Src::kGpr:
    case Src::kGpr32:
      v = r.*info.gpr;
      break;
    case Src::kFx:
      std::memcpy(out, fp.fxsave.data() + info.fx, static_cast<std::size_t>(info.size));
      return;
    case Src::kExt:
      std::memcpy(out, fp.ext.bytes.data() + info.fx, static_cast<std::size_t>(info.size));
      return;
    case Src::kFx16:
      v = load16(fp, info.fx);
      break;
    case Src::kFop:
      v = load16(fp, info.fx) & 0x7ffu;
      break;
    case Src::kFtag:
      v = fxsave_full_tag(fp);
      break;
  }
  for (int i = 0; i < info.size; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

void write_bytes(const RegInfo& info, const std::uint8_t* in, x86::Regs& r, FpRegs& fp) {
  if (info.src == Src::kFx) {
    std::memcpy(fp.fxsave.data() + info.fx, in, static_cast<std::size_t>(info.size));
    return;
  }
  if (info.src == Src::kExt) {
    std::memcpy(fp.ext.bytes.data() + info.fx, in, static_cast<std::size_t>(info.size));
    return;
  }
  const std::uint64_t v = load_le(in, info.size);
  switch (info.src) {
    case Src::kGpr:
    case Src::kGpr32:
      r.*info.gpr = v;  // a 4-byte register zero-extended
      break;
    case Src::kFx16:
      store16(fp, info.fx, static_cast<std::uint16_t>(v));
      break;
    case Src::kFop:
      store16(fp, info.fx,
              static_cast<std::uint16_t>((load16(fp, info.fx) & ~0x7ffu) | (v & 0x7ffu)));
      break;
    case Src::kFtag:
      fp.fxsave[info.fx] = fxsave_abridged_tag(static_cast<std::uint16_t>(v));
      fp.fxsave[info.fx + 1] = 0;
      break;
    case Src::kFx:
    case Src::kExt:
      break;
  }
}

Error bad(std::string_view field, const std::string& what) {
  return Error(ErrorCode::kInval, std::string(field) + ": " + what);
}

}  // namespace

std::string_view gdb_register_name(int regno) {
  return regno >= 0 && regno < kGdbRegisterCount ? all_regs()[regno].name : "";
}

int gdb_register_size(int regno) {
  return regno >= 0 && regno < kGdbRegisterCount ? all_regs()[regno].size : 0;
}

XsaveLayout host_xsave_layout() {
  XsaveLayout layout;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 0xd) return layout;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  if ((ecx & bit_XSAVE) == 0) return layout;
  for (unsigned i : {2u, 5u, 6u, 7u, 9u}) {
    __cpuid_count(0xd, i, eax, ebx, ecx, edx);
    layout.size[i] = eax;
    layout.offset[i] = ebx;
  }
  return layout;
}

namespace {

// Where a component's bytes are in ExtRegs::bytes, and how many.
struct Block {
  int component;
  int at;
  int bytes;
};
constexpr std::array<Block, 5> kBlocks = {{{2, kExtYmmh, 256},
                                           {5, kExtOpmask, 64},
                                           {6, kExtZmmHi256, 512},
                                           {7, kExtHi16Zmm, 1024},
                                           {9, kExtPkru, 4}}};
constexpr std::size_t kXcr0At = 464;      // sw_reserved: the XCR0 the kernel saved with
constexpr std::size_t kXstateBvAt = 512;  // the XSAVE header's XSTATE_BV
constexpr std::size_t kHeaderEnd = 576;

std::uint64_t load64(std::span<const std::uint8_t> area, std::size_t at) {
  return load_le(area.data() + at, 8);
}

// The component's place in `area`, checked against the area's size.
Result<std::size_t> component_at(const Block& b, std::size_t area_size, const XsaveLayout& layout) {
  const std::size_t at = layout.offset[b.component];
  if (layout.size[b.component] < static_cast<std::uint32_t>(b.bytes) ||
      at + static_cast<std::size_t>(b.bytes) > area_size) {
    return std::unexpected(bad("xstate", "component " + std::to_string(b.component) +
                                             " is not within the " + std::to_string(area_size) +
                                             "-byte area"));
  }
  return at;
}

// An area must hold the legacy area and the XSAVE header.
Result<void> check_header(std::size_t area_size) {
  if (area_size >= kHeaderEnd) return {};
  return std::unexpected(bad(
      "xstate", std::to_string(area_size) + " bytes, shorter than the XSAVE header's end (576)"));
}

}  // namespace

Result<ExtRegs> xsave_to_ext(std::span<const std::uint8_t> area, const XsaveLayout& layout) {
  if (auto ok = check_header(area.size()); !ok) return std::unexpected(ok.error());
  ExtRegs ext;
  ext.features = load64(area, kXcr0At) & (ExtRegs::kAvx | ExtRegs::kAvx512 | ExtRegs::kPkru);
  const std::uint64_t present = load64(area, kXstateBvAt);
  for (const Block& b : kBlocks) {
    const std::uint64_t bit = std::uint64_t{1} << b.component;
    if ((ext.features & bit) == 0 || (present & bit) == 0) continue;  // absent, or all zeros
    auto at = component_at(b, area.size(), layout);
    if (!at) return std::unexpected(at.error());
    std::memcpy(ext.bytes.data() + b.at, area.data() + *at, static_cast<std::size_t>(b.bytes));
  }
  return ext;
}

Result<void> ext_to_xsave(const ExtRegs& ext, std::span<std::uint8_t> area,
                          const XsaveLayout& layout) {
  if (auto ok = check_header(area.size()); !ok) return std::unexpected(ok.error());
  for (const Block& b : kBlocks) {  // all checked before anything is written
    if ((ext.features & std::uint64_t{1} << b.component) == 0) continue;
    if (auto at = component_at(b, area.size(), layout); !at) return std::unexpected(at.error());
  }
  std::uint64_t present = load64(area, kXstateBvAt);
  for (const Block& b : kBlocks) {
    const std::uint64_t bit = std::uint64_t{1} << b.component;
    if ((ext.features & bit) == 0) continue;
    const std::size_t at = layout.offset[b.component];
    std::memcpy(area.data() + at, ext.bytes.data() + b.at, static_cast<std::size_t>(b.bytes));
    present |= bit;
  }
  for (int i = 0; i < 8; ++i) area[kXstateBvAt + i] = static_cast<std::uint8_t>(present >> (8 * i));
  return {};
}

std::uint16_t fxsave_full_tag(const FpRegs& fp) {
  const std::uint8_t abridged = fp.fxsave[4];
  const int top = (load16(fp, 2) >> 11) & 7;
  std::uint16_t full = 0;
  for (int phys = 0; phys < 8; ++phys) {
    int tag = 3;
    if ((abridged & (1u << phys)) != 0) {
      const int st_index = (phys - top + 8) % 8;  // FXSAVE stores the registers in stack order
      tag = x87_tag(fp.fxsave.data() + 32 + 16 * st_index);
    }
    full = static_cast<std::uint16_t>(full | tag << (2 * phys));
  }
  return full;
}

std::uint8_t fxsave_abridged_tag(std::uint16_t full_tag) {
  std::uint8_t abridged = 0;
  for (int phys = 0; phys < 8; ++phys) {
    if (((full_tag >> (2 * phys)) & 3) != 3)
      abridged = static_cast<std::uint8_t>(abridged | 1u << phys);
  }
  return abridged;
}

std::string gdb_target_xml(std::uint64_t features) {
  const auto& all = all_regs();
  std::string x;
  x += "<?xml version=\"1.0\"?>\n";
  x += "<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n";
  x += "<target version=\"1.0\">\n";
  x += "  <architecture>i386:x86-64</architecture>\n";
  x += "  <osabi>GNU/Linux</osabi>\n";
  auto regs = [&x, &all](int first, int end) {
    for (int n = first; n < end; ++n) {
      const RegInfo& info = all[n];
      x += "    <reg name=\"";
      x += info.name;
      x += "\" bitsize=\"" + std::to_string(info.size * 8) + "\" type=\"";
      x += info.type;
      x += "\" regnum=\"" + std::to_string(n) + "\"";
      if (info.group != nullptr) {
        x += " group=\"";
        x += info.group;
        x += "\"";
      }
      x += "/>\n";
    }
  };

  // The vectors and the vec128 union of an xmm register (a feature's types are its own).
  auto vec128_types = [&x] {
    for (auto [id, type, count] :
         std::initializer_list<std::tuple<const char*, const char*, int>>{{"v4f", "ieee_single", 4},
                                                                          {"v2d", "ieee_double", 2},
                                                                          {"v16i8", "int8", 16},
                                                                          {"v8i16", "int16", 8},
                                                                          {"v4i32", "int32", 4},
                                                                          {"v2i64", "int64", 2}}) {
      x += "    <vector id=\"" + std::string(id) + "\" type=\"" + type + "\" count=\"" +
           std::to_string(count) + "\"/>\n";
    }
    x += "    <union id=\"vec128\">\n";
    for (auto [name, type] :
         std::initializer_list<std::pair<const char*, const char*>>{{"v4_float", "v4f"},
                                                                    {"v2_double", "v2d"},
                                                                    {"v16_int8", "v16i8"},
                                                                    {"v8_int16", "v8i16"},
                                                                    {"v4_int32", "v4i32"},
                                                                    {"v2_int64", "v2i64"},
                                                                    {"uint128", "uint128"}}) {
      x += "      <field name=\"" + std::string(name) + "\" type=\"" + type + "\"/>\n";
    }
    x += "    </union>\n";
  };

  x += "  <feature name=\"org.gnu.gdb.i386.core\">\n";
  x += "    <flags id=\"i386_eflags\" size=\"4\">\n";
  for (auto [bit, name] : std::initializer_list<std::pair<int, const char*>>{{0, "CF"},
                                                                             {1, ""},
                                                                             {2, "PF"},
                                                                             {4, "AF"},
                                                                             {6, "ZF"},
                                                                             {7, "SF"},
                                                                             {8, "TF"},
                                                                             {9, "IF"},
                                                                             {10, "DF"},
                                                                             {11, "OF"},
                                                                             {14, "NT"},
                                                                             {16, "RF"},
                                                                             {17, "VM"},
                                                                             {18, "AC"},
                                                                             {19, "VIF"},
                                                                             {20, "VIP"},
                                                                             {21, "ID"}}) {
    x += "      <field name=\"" + std::string(name) + "\" start=\"" + std::to_string(bit) +
         "\" end=\"" + std::to_string(bit) + "\"/>\n";
  }
  x += "    </flags>\n";
  regs(0, kSseFirst);
  x += "  </feature>\n";

  x += "  <feature name=\"org.gnu.gdb.i386.sse\">\n";
  vec128_types();
  x += "    <flags id=\"i386_mxcsr\" size=\"4\">\n";
  for (auto [bit, name] : std::initializer_list<std::pair<int, const char*>>{{0, "IE"},
                                                                             {1, "DE"},
                                                                             {2, "ZE"},
                                                                             {3, "OE"},
                                                                             {4, "UE"},
                                                                             {5, "PE"},
                                                                             {6, "DAZ"},
                                                                             {7, "IM"},
                                                                             {8, "DM"},
                                                                             {9, "ZM"},
                                                                             {10, "OM"},
                                                                             {11, "UM"},
                                                                             {12, "PM"},
                                                                             {15, "FZ"}}) {
    x += "      <field name=\"" + std::string(name) + "\" start=\"" + std::to_string(bit) +
         "\" end=\"" + std::to_string(bit) + "\"/>\n";
  }
  x += "    </flags>\n";
  regs(kSseFirst, kLinuxFirst);
  x += "  </feature>\n";

  // A feature holding registers first..end-1, after the types `types` adds.
  const auto feature = [&x, &regs](const char* name, int first, int end, auto types) {
    x += "  <feature name=\"" + std::string(name) + "\">\n";
    types();
    regs(first, end);
    x += "  </feature>\n";
  };
  const auto none = [] {};
  feature("org.gnu.gdb.i386.linux", kLinuxFirst, kSegmentsFirst, none);
  feature("org.gnu.gdb.i386.segments", kSegmentsFirst, kAvxFirst, none);
  if ((features & ExtRegs::kAvx) != 0)
    feature("org.gnu.gdb.i386.avx", kAvxFirst, kAvx512First, none);
  // gdb takes AVX-512 registers only beside AVX ones.
  if ((features & (ExtRegs::kAvx | ExtRegs::kAvx512)) == (ExtRegs::kAvx | ExtRegs::kAvx512)) {
    feature("org.gnu.gdb.i386.avx512", kAvx512First, kPkeysFirst, [&] {
      vec128_types();
      x += "    <vector id=\"v2ui128\" type=\"uint128\" count=\"2\"/>\n";
    });
  }
  if ((features & ExtRegs::kPkru) != 0) {
    feature("org.gnu.gdb.i386.pkeys", kPkeysFirst, kGdbRegisterCount, none);
  }
  x += "</target>\n";
  return x;
}

std::string gdb_encode_registers(const x86::Regs& r, const FpRegs& fp) {
  std::string out;
  out.reserve(kGdbRegistersSize * 2);
  std::array<std::uint8_t, 16> buf{};
  for (const RegInfo& info : kCoreRegs) {
    read_bytes(info, r, fp, buf.data());
    out += to_hex(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(info.size)));
  }
  return out;
}

Result<void> gdb_decode_registers(std::string_view hex, x86::Regs& r, FpRegs& fp) {
  if (hex.empty()) return std::unexpected(bad("registers", "no register in the packet"));
  if (hex.size() > kGdbRegistersSize * 2) {
    return std::unexpected(
        bad("registers", std::to_string(hex.size()) + " hex digits, more than the " +
                             std::to_string(kGdbRegistersSize * 2) + " of the 'g' registers"));
  }
  auto bytes = from_hex(hex);
  if (!bytes) return std::unexpected(bytes.error().with_context("registers"));
  x86::Regs new_r = r;
  FpRegs new_fp = fp;
  std::size_t at = 0;
  for (const RegInfo& info : kCoreRegs) {
    if (at == bytes->size()) break;
    const auto size = static_cast<std::size_t>(info.size);
    if (bytes->size() - at < size) {
      return std::unexpected(bad("registers", std::to_string(hex.size()) +
                                                  " hex digits end inside register " + info.name));
    }
    write_bytes(info, bytes->data() + at, new_r, new_fp);
    at += size;
  }
  r = new_r;
  fp = new_fp;
  return {};
}

namespace {

// The register regno names, if the thread with `fp` has it.
Result<const RegInfo*> find_register(int regno, const FpRegs& fp) {
  if (regno < 0 || regno >= kGdbRegisterCount) {
    return std::unexpected(bad("regno", std::to_string(regno) + " is not a register (0.." +
                                            std::to_string(kGdbRegisterCount - 1) + ")"));
  }
  const RegInfo& info = all_regs()[regno];
  if (!has(info, fp.ext.features)) {
    return std::unexpected(bad("regno", std::to_string(regno) + " (" + info.name +
                                            ") is not a register of this thread: its CPU "
                                            "state has no such component"));
  }
  return &info;
}

}  // namespace

Result<std::string> gdb_read_register(int regno, const x86::Regs& r, const FpRegs& fp) {
  auto found = find_register(regno, fp);
  if (!found) return std::unexpected(found.error());
  const RegInfo& info = **found;
  std::array<std::uint8_t, 32> buf{};
  read_bytes(info, r, fp, buf.data());
  return to_hex(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(info.size)));
}

Result<void> gdb_write_register(int regno, std::string_view hex, x86::Regs& r, FpRegs& fp) {
  auto found = find_register(regno, fp);
  if (!found) return std::unexpected(found.error());
  const RegInfo& info = **found;
  if (hex.size() != static_cast<std::size_t>(info.size) * 2) {
    return std::unexpected(bad("value", std::to_string(hex.size()) + " hex digits for " +
                                            info.name + ", which has " +
                                            std::to_string(info.size * 2)));
  }
  auto bytes = from_hex(hex);
  if (!bytes) return std::unexpected(bytes.error().with_context("value"));
  write_bytes(info, bytes->data(), r, fp);
  return {};
}

}  // namespace hwarb::gdb

#include "hwarb/linux/gdb_regs.h"

#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "hwarb/linux/rsp.h"

namespace hwarb::native {
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
};

struct RegInfo {
  const char* name;
  int size;
  const char* type;   // the target.xml type
  const char* group;  // the target.xml group, nullptr for none
  Src src;
  Gpr gpr;
  int fx;
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
constexpr std::array<RegInfo, kGdbRegisterCount> kRegs = {{
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

constexpr int total_size() {
  int n = 0;
  for (const RegInfo& info : kRegs) n += info.size;
  return n;
}
static_assert(total_size() == kGdbRegistersSize);

// The feature each register belongs to, by its first regnum.
constexpr int kSseFirst = 40;
constexpr int kLinuxFirst = 57;
constexpr int kSegmentsFirst = 58;

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
      break;
  }
}

Error bad(std::string_view field, const std::string& what) {
  return Error(ErrorCode::kInval, std::string(field) + ": " + what);
}

}  // namespace

std::string_view gdb_register_name(int regno) {
  return regno >= 0 && regno < kGdbRegisterCount ? kRegs[regno].name : "";
}

int gdb_register_size(int regno) {
  return regno >= 0 && regno < kGdbRegisterCount ? kRegs[regno].size : 0;
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

std::string gdb_target_xml() {
  std::string x;
  x += "<?xml version=\"1.0\"?>\n";
  x += "<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n";
  x += "<target version=\"1.0\">\n";
  x += "  <architecture>i386:x86-64</architecture>\n";
  x += "  <osabi>GNU/Linux</osabi>\n";
  auto regs = [&x](int first, int end) {
    for (int n = first; n < end; ++n) {
      const RegInfo& info = kRegs[n];
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

  x += "  <feature name=\"org.gnu.gdb.i386.linux\">\n";
  regs(kLinuxFirst, kSegmentsFirst);
  x += "  </feature>\n";

  x += "  <feature name=\"org.gnu.gdb.i386.segments\">\n";
  regs(kSegmentsFirst, kGdbRegisterCount);
  x += "  </feature>\n";
  x += "</target>\n";
  return x;
}

std::string gdb_encode_registers(const x86::Regs& r, const FpRegs& fp) {
  std::string out;
  out.reserve(kGdbRegistersSize * 2);
  std::array<std::uint8_t, 16> buf{};
  for (const RegInfo& info : kRegs) {
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
                             std::to_string(kGdbRegistersSize * 2) + " of all registers"));
  }
  auto bytes = from_hex(hex);
  if (!bytes) return std::unexpected(bytes.error().with_context("registers"));
  x86::Regs new_r = r;
  FpRegs new_fp = fp;
  std::size_t at = 0;
  for (const RegInfo& info : kRegs) {
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

Result<std::string> gdb_read_register(int regno, const x86::Regs& r, const FpRegs& fp) {
  if (regno < 0 || regno >= kGdbRegisterCount) {
    return std::unexpected(bad("regno", std::to_string(regno) + " is not a register (0.." +
                                            std::to_string(kGdbRegisterCount - 1) + ")"));
  }
  const RegInfo& info = kRegs[regno];
  std::array<std::uint8_t, 16> buf{};
  read_bytes(info, r, fp, buf.data());
  return to_hex(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(info.size)));
}

Result<void> gdb_write_register(int regno, std::string_view hex, x86::Regs& r, FpRegs& fp) {
  if (regno < 0 || regno >= kGdbRegisterCount) {
    return std::unexpected(bad("regno", std::to_string(regno) + " is not a register (0.." +
                                            std::to_string(kGdbRegisterCount - 1) + ")"));
  }
  const RegInfo& info = kRegs[regno];
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

}  // namespace hwarb::native

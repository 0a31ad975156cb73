#include "hwarb/gdb/gdb_regs.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "hwarb/gdb/rsp.h"

namespace hwarb::gdb {
namespace {

// Distinct values in every register.
x86::Regs sample_regs() {
  x86::Regs r{};
  std::uint64_t* words = &r.r15;
  for (int i = 0; i < 27; ++i)
    words[i] = 0x1111111111111111ull * static_cast<unsigned>(i % 15 + 1) + static_cast<unsigned>(i);
  r.rax = 0x0123456789abcdef;
  r.rip = 0x00007fffdeadbeef;
  r.eflags = 0x246;
  r.cs = 0x33;
  r.ss = 0x2b;
  r.ds = r.es = r.fs = r.gs = 0;
  r.fs_base = 0x7ffff7d8a740;
  r.gs_base = 0;
  r.orig_rax = ~std::uint64_t{0};
  return r;
}

FpRegs sample_fp() {
  FpRegs fp;
  for (std::size_t i = 0; i < fp.fxsave.size(); ++i)
    fp.fxsave[i] = static_cast<std::uint8_t>(i * 13 + 5);
  // A consistent x87 state: fctrl 0x037f, fstat with TOP = 6 (two values pushed), abridged tag
  // of physical registers 6 and 7, fop 0x1de.
  fp.fxsave[0] = 0x7f;
  fp.fxsave[1] = 0x03;
  fp.fxsave[2] = 0x00;
  fp.fxsave[3] = 0x30;  // TOP = (0x3000 >> 11) & 7 = 6
  fp.fxsave[4] = 0xc0;
  fp.fxsave[5] = 0x00;
  fp.fxsave[6] = 0xde;
  fp.fxsave[7] = 0x01;
  // mxcsr 0x1f80.
  fp.fxsave[24] = 0x80;
  fp.fxsave[25] = 0x1f;
  fp.fxsave[26] = 0;
  fp.fxsave[27] = 0;
  return fp;
}

// The byte offset of register `regno` in a 'g' reply (before hex).
std::size_t offset_of(int regno) {
  std::size_t at = 0;
  for (int n = 0; n < regno; ++n) at += static_cast<std::size_t>(gdb_register_size(n));
  return at;
}

std::string reg_hex(const std::string& g, int regno) {
  return g.substr(offset_of(regno) * 2, static_cast<std::size_t>(gdb_register_size(regno)) * 2);
}

// 1.0 as an 80-bit extended value, and its 16-byte FXSAVE slot.
void put_st(FpRegs& fp, int st_index, std::uint64_t mantissa, std::uint16_t sign_exp) {
  std::uint8_t* p = fp.fxsave.data() + 32 + 16 * st_index;
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(mantissa >> (8 * i));
  p[8] = static_cast<std::uint8_t>(sign_exp);
  p[9] = static_cast<std::uint8_t>(sign_exp >> 8);
}

TEST(GdbRegs, SizesAndNamesFollowGdbsAmd64LinuxNumbering) {
  const std::vector<std::pair<int, std::string_view>> names = {
      {0, "rax"},    {1, "rbx"},       {2, "rcx"},      {3, "rdx"},     {4, "rsi"},
      {5, "rdi"},    {6, "rbp"},       {7, "rsp"},      {8, "r8"},      {15, "r15"},
      {16, "rip"},   {17, "eflags"},   {18, "cs"},      {19, "ss"},     {20, "ds"},
      {21, "es"},    {22, "fs"},       {23, "gs"},      {24, "st0"},    {31, "st7"},
      {32, "fctrl"}, {33, "fstat"},    {34, "ftag"},    {35, "fiseg"},  {36, "fioff"},
      {37, "foseg"}, {38, "fooff"},    {39, "fop"},     {40, "xmm0"},   {55, "xmm15"},
      {56, "mxcsr"}, {57, "orig_rax"}, {58, "fs_base"}, {59, "gs_base"}};
  for (auto [n, name] : names) EXPECT_EQ(gdb_register_name(n), name) << n;
  for (int n = 0; n < kGdbCoreRegisterCount; ++n) {
    const int expected = n <= 16   ? 8
                         : n <= 23 ? 4
                         : n <= 31 ? 10
                         : n <= 39 ? 4
                         : n <= 55 ? 16
                         : n == 56 ? 4
                                   : 8;
    EXPECT_EQ(gdb_register_size(n), expected) << n;
  }
  EXPECT_EQ(gdb_register_name(-1), "");
  EXPECT_EQ(offset_of(kGdbCoreRegisterCount), kGdbRegistersSize);
  // The XSAVE components' registers, as gdbserver numbers them on an AVX-512 machine.
  const std::vector<std::tuple<int, std::string_view, int>> ext = {
      {60, "ymm0h", 16},  {75, "ymm15h", 16},  {76, "xmm16", 16},   {91, "xmm31", 16},
      {92, "ymm16h", 16}, {107, "ymm31h", 16}, {108, "k0", 8},      {115, "k7", 8},
      {116, "zmm0h", 32}, {131, "zmm15h", 32}, {132, "zmm16h", 32}, {147, "zmm31h", 32},
      {148, "pkru", 4}};
  for (auto [n, name, size] : ext) {
    EXPECT_EQ(gdb_register_name(n), name) << n;
    EXPECT_EQ(gdb_register_size(n), size) << n;
  }
  EXPECT_EQ(gdb_register_name(kGdbRegisterCount), "");
  EXPECT_EQ(gdb_register_size(kGdbRegisterCount), 0);
}

TEST(GdbRegs, EncodesKnownValuesAtKnownOffsets) {
  const x86::Regs r = sample_regs();
  const FpRegs fp = sample_fp();
  const std::string g = gdb_encode_registers(r, fp);
  ASSERT_EQ(g.size(), kGdbRegistersSize * 2);
  EXPECT_EQ(g.substr(0, 16), "efcdab8967452301");           // rax, register 0
  EXPECT_EQ(g.substr(16 * 8 * 2, 16), "efbeaddeff7f0000");  // rip
  EXPECT_EQ(offset_of(16), 16u * 8u);                       // rip at byte 128
  EXPECT_EQ(g.substr(136 * 2, 8), "46020000");              // eflags, 4 bytes
  EXPECT_EQ(reg_hex(g, 18), "33000000");                    // cs
  EXPECT_EQ(reg_hex(g, 19), "2b000000");                    // ss
  EXPECT_EQ(reg_hex(g, 32), "7f030000");                    // fctrl
  EXPECT_EQ(reg_hex(g, 33), "00300000");                    // fstat
  EXPECT_EQ(reg_hex(g, 39), "de010000");                    // fop
  EXPECT_EQ(reg_hex(g, 56), "801f0000");                    // mxcsr
  EXPECT_EQ(reg_hex(g, 57), "ffffffffffffffff");            // orig_rax
  EXPECT_EQ(reg_hex(g, 58), hex_le(0x7ffff7d8a740, 8));     // fs_base
  EXPECT_EQ(reg_hex(g, 59), "0000000000000000");            // gs_base
  EXPECT_EQ(reg_hex(g, 7), hex_le(r.rsp, 8));
  EXPECT_EQ(reg_hex(g, 8), hex_le(r.r8, 8));
  EXPECT_EQ(reg_hex(g, 15), hex_le(r.r15, 8));
  // fioff/fiseg and fooff/foseg: the halves of FXSAVE's 64-bit pointers at 8 and 16.
  EXPECT_EQ(reg_hex(g, 36), to_hex(std::span(fp.fxsave).subspan(8, 4)));
  EXPECT_EQ(reg_hex(g, 35), to_hex(std::span(fp.fxsave).subspan(12, 4)));
  EXPECT_EQ(reg_hex(g, 38), to_hex(std::span(fp.fxsave).subspan(16, 4)));
  EXPECT_EQ(reg_hex(g, 37), to_hex(std::span(fp.fxsave).subspan(20, 4)));
  // st0..st7: 10 of each 16-byte slot; xmm0..15 from 160.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(reg_hex(g, 24 + i),
              to_hex(std::span(fp.fxsave).subspan(32 + 16 * static_cast<std::size_t>(i), 10)));
  }
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(reg_hex(g, 40 + i),
              to_hex(std::span(fp.fxsave).subspan(160 + 16 * static_cast<std::size_t>(i), 16)));
  }
  // Every register read alone is its slice of 'g'.
  for (int n = 0; n < kGdbCoreRegisterCount; ++n) {
    auto one = gdb_read_register(n, r, fp);
    ASSERT_TRUE(one) << one.error().to_string();
    EXPECT_EQ(*one, reg_hex(g, n)) << gdb_register_name(n);
  }
}

TEST(GdbRegs, FullTagWordFromTheAbridgedOneAndBack) {
  FpRegs fp;
  // TOP = 6: st0 is physical register 6, st1 physical 7, st2 physical 0.
  fp.fxsave[3] = 6 << 3;
  put_st(fp, 0, 0x8000000000000000ull, 0x3fff);  // 1.0: valid (0)
  put_st(fp, 1, 0, 0);                           // +0.0: zero (1)
  put_st(fp, 2, 0xc000000000000000ull, 0x7fff);  // a NaN: special (2)
  put_st(fp, 3, 0x4000000000000000ull, 0x3fff);  // unnormal (integer bit clear): special
  put_st(fp, 4, 1, 0);                           // denormal: special
  fp.fxsave[4] = 0;
  EXPECT_EQ(fxsave_full_tag(fp), 0xffff);  // all empty
  // Physical 6 (st0), 7 (st1), 0 (st2), 1 (st3), 2 (st4) in use.
  fp.fxsave[4] = 0xc7;
  // phys0: st2 special (2), phys1: st3 special (2), phys2: st4 special (2), phys3-5: empty (3),
  // phys6: st0 valid (0), phys7: st1 zero (1).
  const std::uint16_t expected =
      2 | 2 << 2 | 2 << 4 | 3 << 6 | 3 << 8 | 3 << 10 | 0 << 12 | 1 << 14;
  EXPECT_EQ(fxsave_full_tag(fp), expected);
  EXPECT_EQ(fxsave_abridged_tag(expected), 0xc7);
  EXPECT_EQ(fxsave_abridged_tag(0xffff), 0);
  EXPECT_EQ(fxsave_abridged_tag(0), 0xff);

  const x86::Regs r{};
  auto ftag = gdb_read_register(34, r, fp);
  ASSERT_TRUE(ftag);
  EXPECT_EQ(*ftag, hex_le(expected, 4));

  // Writing ftag stores the abridged form: gdb's "empty all but st0" (phys 6 valid).
  x86::Regs w{};
  ASSERT_TRUE(gdb_write_register(34, hex_le(0xcfff, 4), w, fp));
  EXPECT_EQ(fp.fxsave[4], 0x40);
  EXPECT_EQ(fp.fxsave[5], 0);
  EXPECT_EQ(fxsave_full_tag(fp), 0xcfff);
}

TEST(GdbRegs, DecodeInvertsEncode) {
  const x86::Regs r = sample_regs();
  const FpRegs fp = sample_fp();
  const std::string g = gdb_encode_registers(r, fp);

  x86::Regs r2{};
  FpRegs fp2;
  // Consistent tags need the abridged byte: fill FXSAVE as the original, then decode over it.
  fp2 = fp;
  std::fill(fp2.fxsave.begin() + 32, fp2.fxsave.begin() + 42, 0);
  ASSERT_TRUE(gdb_decode_registers(g, r2, fp2));
  EXPECT_EQ(gdb_encode_registers(r2, fp2), g);
  // Every field gdb can see came back; eflags and segments zero-extended.
  EXPECT_EQ(r2.rax, r.rax);
  EXPECT_EQ(r2.rip, r.rip);
  EXPECT_EQ(r2.rsp, r.rsp);
  EXPECT_EQ(r2.r15, r.r15);
  EXPECT_EQ(r2.orig_rax, r.orig_rax);
  EXPECT_EQ(r2.fs_base, r.fs_base);
  EXPECT_EQ(r2.eflags, r.eflags & 0xffffffff);
  EXPECT_EQ(r2.cs, r.cs);
  EXPECT_EQ(std::memcmp(fp2.fxsave.data() + 32, fp.fxsave.data() + 32, 10), 0);
  EXPECT_EQ(std::memcmp(fp2.fxsave.data() + 160, fp.fxsave.data() + 160, 256), 0);

  // From zeroed registers too: the GPRs and SSE state come back exactly.
  x86::Regs r3{};
  FpRegs fp3;
  ASSERT_TRUE(gdb_decode_registers(g, r3, fp3));
  EXPECT_EQ(std::memcmp(&r3, &r2, sizeof r3), 0);
  EXPECT_EQ(std::memcmp(fp3.fxsave.data() + 160, fp.fxsave.data() + 160, 256), 0);
  EXPECT_EQ(fp3.fxsave[24], 0x80);
  EXPECT_EQ(fp3.fxsave[25], 0x1f);
}

TEST(GdbRegs, TruncatesAndZeroExtendsFourByteRegisters) {
  x86::Regs r{};
  r.eflags = 0xdead000000000202ull;
  r.fs = 0xffffffff00000063ull;
  FpRegs fp;
  EXPECT_EQ(gdb_read_register(17, r, fp).value_or(""), "02020000");
  EXPECT_EQ(gdb_read_register(22, r, fp).value_or(""), "63000000");
  ASSERT_TRUE(gdb_write_register(17, "46030000", r, fp));
  EXPECT_EQ(r.eflags, 0x346u);
  ASSERT_TRUE(gdb_write_register(22, "ffffffff", r, fp));
  EXPECT_EQ(r.fs, 0xffffffffu);
}

TEST(GdbRegs, WriteChangesOnlyThatRegister) {
  const x86::Regs r0 = sample_regs();
  const FpRegs fp0 = sample_fp();
  const std::string before = gdb_encode_registers(r0, fp0);
  for (int n = 0; n < kGdbCoreRegisterCount; ++n) {
    if (n == 34) continue;  // ftag: checked above
    x86::Regs r = r0;
    FpRegs fp = fp0;
    const std::string value(static_cast<std::size_t>(gdb_register_size(n)) * 2, '5');
    ASSERT_TRUE(gdb_write_register(n, value, r, fp)) << n;
    // What reads back: fctrl and fstat are 16-bit fields, fop 11 bits.
    std::string read_back = value;
    if (n == 32 || n == 33) read_back = "55550000";
    if (n == 39) read_back = hex_le(0x555, 4);
    EXPECT_EQ(gdb_read_register(n, r, fp).value_or(""), read_back) << gdb_register_name(n);
    // Every other register is unchanged, except ftag, which follows the st registers' contents
    // and fstat's TOP.
    const std::string after = gdb_encode_registers(r, fp);
    for (int m = 0; m < kGdbCoreRegisterCount; ++m) {
      if (m == n || m == 34) continue;
      EXPECT_EQ(reg_hex(after, m), reg_hex(before, m))
          << "writing " << gdb_register_name(n) << " changed " << gdb_register_name(m);
    }
    if (n != 33 && (n < 24 || n > 31)) {
      EXPECT_EQ(reg_hex(after, 34), reg_hex(before, 34)) << gdb_register_name(n);
    }
  }
  // rip lands in Regs::rip; xmm3 in xmm_space; st5's padding is kept.
  x86::Regs r = r0;
  FpRegs fp = fp0;
  ASSERT_TRUE(gdb_write_register(16, hex_le(0x401000, 8), r, fp));
  EXPECT_EQ(r.rip, 0x401000u);
  ASSERT_TRUE(gdb_write_register(43, std::string(32, 'a'), r, fp));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(fp.fxsave[160 + 3 * 16 + i], 0xaa);
  ASSERT_TRUE(gdb_write_register(29, std::string(20, '0'), r, fp));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fp.fxsave[32 + 5 * 16 + i], 0);
  for (int i = 10; i < 16; ++i) EXPECT_EQ(fp.fxsave[32 + 5 * 16 + i], fp0.fxsave[32 + 5 * 16 + i]);
}

// Every register of every XSAVE component lands in its own bytes of ExtRegs (drawn in
// gdb_regs.h) and nowhere else, and reads back.
TEST(GdbRegs, AvxAvx512AndPkuRegistersAreTheirOwnBytes) {
  const x86::Regs r0 = sample_regs();
  FpRegs fp0 = sample_fp();
  fp0.ext.features = ExtRegs::kAvx | ExtRegs::kAvx512 | ExtRegs::kPkru;
  for (std::size_t i = 0; i < fp0.ext.bytes.size(); ++i)
    fp0.ext.bytes[i] = static_cast<std::uint8_t>(i * 7 + 1);
  // Where each register starts in ExtRegs::bytes.
  const auto ext_at = [](int n) -> std::size_t {
    if (n < 76) return 16 * static_cast<std::size_t>(n - 60);               // ymm0h-15h
    if (n < 92) return 832 + 64 * static_cast<std::size_t>(n - 76);         // xmm16-31
    if (n < 108) return 832 + 64 * static_cast<std::size_t>(n - 92) + 16;   // ymm16h-31h
    if (n < 116) return 256 + 8 * static_cast<std::size_t>(n - 108);        // k0-7
    if (n < 132) return 320 + 32 * static_cast<std::size_t>(n - 116);       // zmm0h-15h
    if (n < 148) return 832 + 64 * static_cast<std::size_t>(n - 132) + 32;  // zmm16h-31h
    return 1856;                                                            // pkru
  };
  for (int n = kGdbCoreRegisterCount; n < kGdbRegisterCount; ++n) {
    const auto size = static_cast<std::size_t>(gdb_register_size(n));
    EXPECT_EQ(gdb_read_register(n, r0, fp0).value_or(""),
              to_hex(std::span(fp0.ext.bytes).subspan(ext_at(n), size)))
        << gdb_register_name(n);
    x86::Regs r = r0;
    FpRegs fp = fp0;
    ASSERT_TRUE(gdb_write_register(n, std::string(size * 2, 'c'), r, fp)) << n;
    for (std::size_t i = 0; i < fp.ext.bytes.size(); ++i) {
      const bool mine = i >= ext_at(n) && i < ext_at(n) + size;
      EXPECT_EQ(fp.ext.bytes[i], mine ? 0xcc : fp0.ext.bytes[i])
          << "writing " << gdb_register_name(n) << ", byte " << i;
    }
    EXPECT_EQ(fp.fxsave, fp0.fxsave);
    EXPECT_EQ(std::memcmp(&r, &r0, sizeof r), 0);
  }
  // A thread without a component has none of its registers.
  FpRegs avx_only = fp0;
  avx_only.ext.features = ExtRegs::kAvx;
  EXPECT_TRUE(gdb_read_register(60, r0, avx_only));
  for (int n : {76, 108, 116, 147, 148}) {
    auto missing = gdb_read_register(n, r0, avx_only);
    ASSERT_FALSE(missing) << n;
    EXPECT_EQ(missing.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(missing.error().message().starts_with("regno: ")) << missing.error().to_string();
  }
}

// The XSAVE standard format of an AVX-512 machine (CPUID leaf 0xD), for the conversions.
XsaveLayout standard_layout() {
  XsaveLayout l;
  l.offset[2] = 576, l.size[2] = 256;
  l.offset[5] = 1088, l.size[5] = 64;
  l.offset[6] = 1152, l.size[6] = 512;
  l.offset[7] = 1664, l.size[7] = 1024;
  l.offset[9] = 2688, l.size[9] = 8;
  return l;
}

void put64(std::vector<std::uint8_t>& area, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) area[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

TEST(GdbRegs, XsaveComponentsIntoExtRegsAndBack) {
  const XsaveLayout layout = standard_layout();
  std::vector<std::uint8_t> area(2696);
  for (std::size_t i = 0; i < area.size(); ++i) area[i] = static_cast<std::uint8_t>(i * 11 + 3);
  const std::uint64_t xcr0 = 0x2e7;  // x87 SSE AVX opmask ZMM_Hi256 Hi16_ZMM PKRU
  put64(area, 464, xcr0);
  put64(area, 512, 0x2a7);  // XSTATE_BV: Hi16_ZMM (bit 6 clear: ZMM_Hi256 in its initial state)
  for (std::size_t i = 520; i < 576; ++i) area[i] = 0;
  auto ext = xsave_to_ext(area, layout);
  ASSERT_TRUE(ext) << ext.error().to_string();
  EXPECT_EQ(ext->features, ExtRegs::kAvx | ExtRegs::kAvx512 | ExtRegs::kPkru);
  EXPECT_EQ(std::memcmp(ext->bytes.data(), area.data() + 576, 256), 0);          // ymmh
  EXPECT_EQ(std::memcmp(ext->bytes.data() + 256, area.data() + 1088, 64), 0);    // opmask
  for (int i = 0; i < 512; ++i) EXPECT_EQ(ext->bytes[320 + i], 0) << i;          // ZMM_Hi256
  EXPECT_EQ(std::memcmp(ext->bytes.data() + 832, area.data() + 1664, 1024), 0);  // Hi16_ZMM
  EXPECT_EQ(std::memcmp(ext->bytes.data() + 1856, area.data() + 2688, 4), 0);    // PKRU

  // Back: every component stored and marked present; FXSAVE and the header's rest kept.
  ExtRegs changed = *ext;
  changed.bytes[320] = 0x5a;  // zmm0h's first byte
  std::vector<std::uint8_t> out = area;
  ASSERT_TRUE(ext_to_xsave(changed, out, layout));
  EXPECT_EQ(out[1152], 0x5a);
  for (int i = 1; i < 512; ++i) EXPECT_EQ(out[1152 + i], 0) << i;
  EXPECT_EQ(out[512] | out[513] << 8, 0x2e7);
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 512, area.begin()));
  auto again = xsave_to_ext(out, layout);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, changed);

  // An area too short for its header, or for a component XCR0 names: EINVAL naming `xstate`,
  // nothing written.
  const std::vector<std::uint8_t> header_only(area.begin(), area.begin() + 575);
  auto short_header = xsave_to_ext(header_only, layout);
  ASSERT_FALSE(short_header);
  EXPECT_TRUE(short_header.error().message().starts_with("xstate: "));
  std::vector<std::uint8_t> no_pkru(area.begin(), area.begin() + 2688);
  auto short_component = xsave_to_ext(no_pkru, layout);
  ASSERT_FALSE(short_component);
  EXPECT_EQ(short_component.error().code(), ErrorCode::kInval);
  const std::vector<std::uint8_t> kept = no_pkru;
  ASSERT_FALSE(ext_to_xsave(changed, no_pkru, layout));
  EXPECT_EQ(no_pkru, kept);
}

// This CPU's layout: AVX's place is fixed by the architecture where the CPU has it.
TEST(GdbRegs, HostLayoutHasAvxAtItsArchitecturalOffset) {
  const XsaveLayout layout = host_xsave_layout();
  if (!__builtin_cpu_supports("avx")) GTEST_SKIP() << "this CPU has no AVX";
  EXPECT_EQ(layout.offset[2], 576u);
  EXPECT_EQ(layout.size[2], 256u);
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(layout.size[5], 64u);
    EXPECT_EQ(layout.size[6], 512u);
    EXPECT_EQ(layout.size[7], 1024u);
  }
}

TEST(GdbRegs, ShortGPacketsCoverTheFirstRegisters) {
  const std::string g = gdb_encode_registers(sample_regs(), sample_fp());
  x86::Regs r{};
  FpRegs fp;
  // Only rax..rip (17 registers).
  ASSERT_TRUE(gdb_decode_registers(g.substr(0, offset_of(17) * 2), r, fp));
  EXPECT_EQ(r.rax, sample_regs().rax);
  EXPECT_EQ(r.rip, sample_regs().rip);
  EXPECT_EQ(r.eflags, 0u);
  EXPECT_EQ(fp, FpRegs{});
  // Up to the end of the SSE registers.
  ASSERT_TRUE(gdb_decode_registers(g.substr(0, offset_of(57) * 2), r, fp));
  EXPECT_EQ(r.orig_rax, 0u);
  EXPECT_EQ(r.eflags, 0x246u);
}

TEST(GdbRegs, BadPacketsAreEinvalAndChangeNothing) {
  const std::string g = gdb_encode_registers(sample_regs(), sample_fp());
  const x86::Regs r0{};
  const FpRegs fp0;
  auto expect_bad = [&](std::string_view hex, std::string_view why) {
    x86::Regs r = r0;
    FpRegs fp = fp0;
    auto res = gdb_decode_registers(hex, r, fp);
    ASSERT_FALSE(res) << why;
    EXPECT_EQ(res.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(res.error().message().starts_with("registers: ")) << res.error().to_string();
    EXPECT_EQ(std::memcmp(&r, &r0, sizeof r), 0) << why;
    EXPECT_EQ(fp, fp0) << why;
  };
  expect_bad("", "empty");
  expect_bad(g + "00", "too long");
  expect_bad(g.substr(0, 20), "ends inside rbx");
  expect_bad(g.substr(0, 17), "odd");
  std::string bad_digit = g;
  bad_digit[300] = 'x';
  expect_bad(bad_digit, "not hex");

  x86::Regs r{};
  FpRegs fp;
  auto regno = gdb_write_register(kGdbRegisterCount, "00", r, fp);
  ASSERT_FALSE(regno);
  EXPECT_EQ(regno.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(regno.error().message().starts_with("regno: ")) << regno.error().to_string();
  auto neg = gdb_read_register(-1, r, fp);
  ASSERT_FALSE(neg);
  EXPECT_TRUE(neg.error().message().starts_with("regno: ")) << neg.error().to_string();
  auto size = gdb_write_register(0, "0011", r, fp);
  ASSERT_FALSE(size);
  EXPECT_EQ(size.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(size.error().message().starts_with("value: ")) << size.error().to_string();
  auto digit = gdb_write_register(17, "0000000g", r, fp);
  ASSERT_FALSE(digit);
  EXPECT_TRUE(digit.error().message().starts_with("value: ")) << digit.error().to_string();
  EXPECT_EQ(std::memcmp(&r, &r0, sizeof r), 0);
}

// A small well-formedness check: every tag closes in order, attributes are quoted.
bool balanced(std::string_view xml, std::string* why) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while ((i = xml.find('<', i)) != std::string_view::npos) {
    const std::size_t end = xml.find('>', i);
    if (end == std::string_view::npos) {
      *why = "unterminated tag";
      return false;
    }
    std::string_view tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.starts_with('?') || tag.starts_with('!')) continue;
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) {
      *why = "odd quotes in <" + std::string(tag) + ">";
      return false;
    }
    if (tag.starts_with('/')) {
      if (open.empty() || open.back() != tag.substr(1)) {
        *why = "mismatched </" + std::string(tag.substr(1)) + ">";
        return false;
      }
      open.pop_back();
    } else if (!tag.ends_with('/')) {
      open.emplace_back(tag.substr(0, tag.find(' ')));
    }
  }
  if (!open.empty()) *why = "unclosed <" + open.back() + ">";
  return open.empty();
}

TEST(GdbRegs, TargetXmlIsWellFormedWithConsecutiveRegnums) {
  for (const std::uint64_t features :
       {std::uint64_t{0}, ExtRegs::kAvx, ExtRegs::kAvx | ExtRegs::kAvx512 | ExtRegs::kPkru}) {
    SCOPED_TRACE(features);
    const std::string xml = gdb_target_xml(features);
    std::string why;
    EXPECT_TRUE(balanced(xml, &why)) << why;
    EXPECT_NE(xml.find("<architecture>i386:x86-64</architecture>"), std::string::npos);
    EXPECT_NE(xml.find("<osabi>GNU/Linux</osabi>"), std::string::npos);
    for (const char* feature : {"org.gnu.gdb.i386.core", "org.gnu.gdb.i386.sse",
                                "org.gnu.gdb.i386.linux", "org.gnu.gdb.i386.segments"}) {
      EXPECT_NE(xml.find("<feature name=\"" + std::string(feature) + "\">"), std::string::npos)
          << feature;
    }
    for (const char* type : {"id=\"i386_eflags\"", "id=\"vec128\"", "id=\"i386_mxcsr\""}) {
      EXPECT_NE(xml.find(type), std::string::npos) << type;
    }
    // Every <reg .../> in order: its name, bitsize and regnum attributes.
    const auto attribute = [](std::string_view tag, std::string_view name) {
      const std::string key = " " + std::string(name) + "=\"";
      const std::size_t at = tag.find(key);
      if (at == std::string_view::npos) return std::string();
      const std::size_t from = at + key.size();
      return std::string(tag.substr(from, tag.find('"', from) - from));
    };
    int expected = 0;
    for (std::size_t at = xml.find("<reg "); at != std::string::npos;
         at = xml.find("<reg ", at + 1), ++expected) {
      const std::string_view tag = std::string_view(xml).substr(at, xml.find('>', at) - at);
      EXPECT_EQ(attribute(tag, "regnum"), std::to_string(expected));
      EXPECT_EQ(attribute(tag, "name"), gdb_register_name(expected));
      EXPECT_EQ(attribute(tag, "bitsize"), std::to_string(gdb_register_size(expected) * 8))
          << attribute(tag, "name");
    }
    EXPECT_EQ(expected, features == 0               ? kGdbCoreRegisterCount
                        : features == ExtRegs::kAvx ? 76
                                                    : kGdbRegisterCount);
    EXPECT_EQ(xml.find("org.gnu.gdb.i386.avx\"") != std::string::npos, features != 0);
    EXPECT_EQ(xml.find("org.gnu.gdb.i386.avx512") != std::string::npos, expected > 76);
    EXPECT_EQ(xml.find("org.gnu.gdb.i386.pkeys") != std::string::npos, expected > 76);
  }
}

// The strongest check: gdb itself loads the description and numbers the registers as we do
// (skipped where gdb is not installed).
TEST(GdbRegs, GdbAcceptsTheTargetXml) {
  if (std::system("command -v gdb >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gdb here";
  char path[] = "/tmp/hwarb_target_xml_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << gdb_target_xml(ExtRegs::kAvx | ExtRegs::kAvx512 | ExtRegs::kPkru);
  }
  const std::string cmd = std::string("gdb -nx -batch -ex 'set tdesc filename ") + path +
                          "' -ex 'maint print remote-registers' 2>&1";
  std::string output;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
    ::pclose(p);
  }
  std::remove(path);
  // " Name  Nr  Rel Offset Size  Type  Rmt Nr  g/G Offset": every register of ours with our
  // remote number, size and 'g' offset.
  int seen = 0;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string name;
    int nr = 0, rel = 0, offset = 0, size = 0;
    std::string type;
    int rmt = 0, g_offset = 0;
    if (!(f >> name >> nr >> rel >> offset >> size >> type >> rmt >> g_offset)) continue;
    // gdb's own number (Nr) may differ (orig_rax, fs_base and gs_base come after its AVX
    // registers); the remote number and the 'g' offset are what the protocol uses.
    if (rmt < 0 || rmt >= kGdbRegisterCount) continue;
    EXPECT_EQ(name, gdb_register_name(rmt)) << line;
    EXPECT_EQ(size, gdb_register_size(rmt)) << line;
    EXPECT_EQ(static_cast<std::size_t>(g_offset), offset_of(rmt)) << line;
    ++seen;
  }
  EXPECT_EQ(seen, kGdbRegisterCount) << output;
}

}  // namespace
}  // namespace hwarb::gdb

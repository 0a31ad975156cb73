#include "hwarb/x86/insn.h"

#include <cpuid.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace hwarb::x86 {
namespace {

// Every instruction below is hand-assembled from the SDM encodings.
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t kIp = 0x401000;

// Distinct values in every register, so a wrong register mapping shows.
Regs sample_regs() {
  Regs r{};
  r.rax = 0x1122334455667788;
  r.rbx = 0x00007f0000001000;
  r.rcx = 4;
  r.rdx = 0x00000000deadbeef;
  r.rsi = 0x00007f0000002030;
  r.rdi = 0x00007f0000003000;
  r.rbp = 0x00007ffc00001000;
  r.rsp = 0x00007ffc00000f00;
  r.r8 = 0xa0a1a2a3a4a5a6a7;
  r.r9 = 0x0909090909090909;
  r.r10 = 0x1010101010101010;
  r.r11 = 0x0000555500004000;
  r.r12 = 0x1212121212121212;
  r.r13 = 0x1313131313131313;
  r.r14 = 0x1414141414141414;
  r.r15 = 0x1515151515151515;
  r.rip = kIp;
  r.eflags = 0x202;
  r.fs_base = 0x00007f1234567000;
  r.gs_base = 0x00007f00dead0000;
  return r;
}

Insn must_decode(const Bytes& bytes, std::uint64_t ip = kIp) {
  auto insn = decode(bytes, ip);
  if (!insn) {
    ADD_FAILURE() << insn.error().to_string();
    return Insn{};
  }
  return *insn;
}

std::vector<MemRef> must_resolve(const Insn& insn, const Regs& regs) {
  auto refs = effective_addresses(insn, regs);
  if (!refs) {
    ADD_FAILURE() << insn.text << ": " << refs.error().to_string();
    return {};
  }
  return *refs;
}

MemRef ref(std::uint64_t address, std::uint64_t size, Access access) {
  return MemRef{address, size, access};
}

// A fake tracee memory for the ReadWord callback; records what was read.
struct FakeMemory {
  std::map<std::uint64_t, std::uint64_t> words;
  std::vector<std::pair<std::uint64_t, int>> reads;
};

Result<std::uint64_t> read_fake(void* context, std::uint64_t address, int size) {
  auto* memory = static_cast<FakeMemory*>(context);
  memory->reads.emplace_back(address, size);
  auto it = memory->words.find(address);
  if (it == memory->words.end()) return make_error(ErrorCode::kFault, "address: unmapped");
  return it->second;
}

// ---- decoding: lengths, text, errors ---------------------------------------------------------

TEST(InsnDecodeTest, RipRelativeStoreLengthTextAndOperand) {
  const Bytes bytes = {0xc7, 0x05, 0xdb, 0x2e, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00};
  Insn insn = must_decode(bytes);
  EXPECT_EQ(insn.ip, kIp);
  EXPECT_EQ(insn.length, 10);
  EXPECT_EQ(insn.branch, BranchKind::kNone);
  EXPECT_FALSE(insn.target.has_value());
  EXPECT_EQ(insn.text, "mov dword ptr [rip+0x2edb], 0x5");
  EXPECT_EQ(insn.bytes, bytes);
  ASSERT_EQ(insn.mem.size(), 1u);
  EXPECT_EQ(insn.mem[0].access, Access::kWrite);
  EXPECT_EQ(insn.mem[0].size, 4u);
  EXPECT_FALSE(insn.mem[0].stack);
  EXPECT_FALSE(insn.mem[0].string_op);
  EXPECT_EQ(must_resolve(insn, sample_regs()),
            std::vector<MemRef>{ref(kIp + 10 + 0x2edb, 4, Access::kWrite)});
}

TEST(InsnDecodeTest, LengthsOfCommonForms) {
  const std::vector<std::pair<Bytes, int>> cases = {
      {{0x89, 0x07}, 2},
      {{0xc3}, 1},
      {{0x74, 0x05}, 2},
      {{0xe8, 0x00, 0x01, 0x00, 0x00}, 5},
      {{0xf3, 0x48, 0xa5}, 3},
      {{0x0f, 0x05}, 2},
      {{0xcc}, 1},
      {{0x48, 0x8d, 0x04, 0x25, 0x00, 0x10, 0x00, 0x00}, 8},
      {{0x0f, 0x1f, 0x44, 0x00, 0x00}, 5},
      {{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, 9},
      {{0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8}, 10},
  };
  for (const auto& [bytes, length] : cases) {
    Insn insn = must_decode(bytes);
    EXPECT_EQ(insn.length, length) << insn.text;
    EXPECT_EQ(insn.bytes.size(), static_cast<std::size_t>(length));
  }
}

// XSAVE writes the state components the processor has enabled, not only the 576 bytes of the
// legacy region and header that the encoding alone tells: the operand is the area CPUID leaf 0xD
// gives (ld.so's _dl_runtime_resolve_xsavec writes AVX state past byte 576 of its stack area).
TEST(InsnDecodeTest, XsaveWritesTheWholeEnabledStateArea) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  const unsigned area = __get_cpuid_count(0xd, 0, &a, &b, &c, &d) ? b : 0;
  for (const std::vector<std::uint8_t>& bytes :
       {std::vector<std::uint8_t>{0x0f, 0xae, 0x64, 0x24, 0x40},     // xsave 0x40(%rsp)
        std::vector<std::uint8_t>{0x0f, 0xc7, 0x64, 0x24, 0x40}}) {  // xsavec 0x40(%rsp)
    auto insn = decode(bytes, 0x1000);
    ASSERT_TRUE(insn) << insn.error().to_string();
    ASSERT_EQ(insn->mem.size(), 1u) << insn->text;
    EXPECT_NE(insn->mem[0].access, Access::kRead) << insn->text;
    EXPECT_GE(insn->mem[0].size, 576u) << insn->text;
    EXPECT_GE(insn->mem[0].size, area) << insn->text;
  }
}

TEST(InsnDecodeTest, TrailingBytesAreNotPartOfTheInstruction) {
  Bytes bytes = {0x89, 0x07};
  bytes.resize(32, 0xcc);
  Insn insn = must_decode(bytes);
  EXPECT_EQ(insn.length, 2);
  EXPECT_EQ(insn.bytes, (Bytes{0x89, 0x07}));
}

TEST(InsnDecodeTest, InvalidOrTruncatedBytesAreEinval) {
  const std::vector<Bytes> bad = {
      {},
      {0x06},           // push es: invalid in 64-bit mode
      {0x27},           // daa: invalid in 64-bit mode
      {0xe8, 0x00},     // call rel32, cut short
      {0x0f},           // an escape byte alone
      Bytes(16, 0x66),  // prefixes only, longer than 15 bytes
  };
  for (const Bytes& bytes : bad) {
    auto insn = decode(bytes, kIp);
    ASSERT_FALSE(insn.has_value()) << insn->text;
    EXPECT_EQ(insn.error().code(), ErrorCode::kInval);
    EXPECT_EQ(insn.error().message().rfind("bytes: ", 0), 0u) << insn.error().message();
  }
}

TEST(InsnDecodeTest, UndecodedInsnIsRejectedByHelpers) {
  Insn empty;
  Regs regs = sample_regs();
  auto refs = effective_addresses(empty, regs);
  ASSERT_FALSE(refs.has_value());
  EXPECT_EQ(refs.error().code(), ErrorCode::kInval);
  EXPECT_EQ(refs.error().message().rfind("insn: ", 0), 0u);
  EXPECT_FALSE(emulate_store(empty, regs).has_value());
  EXPECT_FALSE(emulate_load(empty, regs).has_value());
  EXPECT_FALSE(apply_load(empty, 0, regs).has_value());
  EXPECT_FALSE(branch_outcome(empty, regs, nullptr, nullptr).has_value());
  EXPECT_FALSE(apply_branch(empty, BranchOutcome{}, regs).has_value());

  Insn tampered = must_decode({0x89, 0x07});
  tampered.length = 3;
  EXPECT_FALSE(effective_addresses(tampered, regs).has_value());
}

// ---- explicit memory operands ----------------------------------------------------------------

TEST(InsnMemTest, BaseIndexScaleDisplacement) {
  Regs regs = sample_regs();
  // mov rax, [rbx+rcx*4-8]
  Insn insn = must_decode({0x48, 0x8b, 0x44, 0x8b, 0xf8});
  EXPECT_EQ(insn.length, 5);
  EXPECT_EQ(must_resolve(insn, regs),
            std::vector<MemRef>{ref(regs.rbx + regs.rcx * 4 - 8, 8, Access::kRead)});
  // mov [rdi], eax and mov eax, [rdi+8]
  EXPECT_EQ(must_resolve(must_decode({0x89, 0x07}), regs),
            std::vector<MemRef>{ref(regs.rdi, 4, Access::kWrite)});
  EXPECT_EQ(must_resolve(must_decode({0x8b, 0x47, 0x08}), regs),
            std::vector<MemRef>{ref(regs.rdi + 8, 4, Access::kRead)});
  // mov byte [r8+r11*2+0x100], 1
  EXPECT_EQ(must_resolve(must_decode({0x43, 0xc6, 0x84, 0x58, 0x00, 0x01, 0x00, 0x00, 0x01}), regs),
            std::vector<MemRef>{ref(regs.r8 + regs.r11 * 2 + 0x100, 1, Access::kWrite)});
}

TEST(InsnMemTest, AbsoluteMoffs) {
  // mov [0x1000], rax (moffs64)
  Insn insn = must_decode({0x48, 0xa3, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  EXPECT_EQ(insn.length, 10);
  EXPECT_EQ(must_resolve(insn, sample_regs()), std::vector<MemRef>{ref(0x1000, 8, Access::kWrite)});
}

TEST(InsnMemTest, AddressSizeOverrideWrapsTo32Bits) {
  Regs regs = sample_regs();
  regs.rdi = 0xffffffff00001234;
  // mov eax, [edi]
  EXPECT_EQ(must_resolve(must_decode({0x67, 0x8b, 0x07}), regs),
            std::vector<MemRef>{ref(0x1234, 4, Access::kRead)});
  // mov eax, [edi+0x10] with edi = 0xfffffff8: wraps around 4 GiB
  regs.rdi = 0x00000000fffffff8;
  EXPECT_EQ(must_resolve(must_decode({0x67, 0x8b, 0x47, 0x10}), regs),
            std::vector<MemRef>{ref(0x8, 4, Access::kRead)});
}

TEST(InsnMemTest, FsAndGsAddTheirBase) {
  Regs regs = sample_regs();
  // mov rax, fs:[0x28]
  Insn fs = must_decode({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00});
  EXPECT_EQ(must_resolve(fs, regs),
            std::vector<MemRef>{ref(regs.fs_base + 0x28, 8, Access::kRead)});
  // mov rax, gs:[0x10]
  Insn gs = must_decode({0x65, 0x48, 0x8b, 0x04, 0x25, 0x10, 0x00, 0x00, 0x00});
  EXPECT_EQ(must_resolve(gs, regs),
            std::vector<MemRef>{ref(regs.gs_base + 0x10, 8, Access::kRead)});
  // mov fs:[rdi], eax
  Insn fs_store = must_decode({0x64, 0x89, 0x07});
  EXPECT_EQ(must_resolve(fs_store, regs),
            std::vector<MemRef>{ref(regs.fs_base + regs.rdi, 4, Access::kWrite)});
  // ds/ss/es overrides have base 0 in 64-bit mode
  EXPECT_EQ(must_resolve(must_decode({0x3e, 0x89, 0x07}), regs),
            std::vector<MemRef>{ref(regs.rdi, 4, Access::kWrite)});
}

TEST(InsnMemTest, LeaNopAndPrefetchTouchNoMemory) {
  const std::vector<Bytes> none = {
      {0x48, 0x8d, 0x04, 0x25, 0x00, 0x10, 0x00, 0x00},        // lea rax, [0x1000]
      {0x48, 0x8d, 0x47, 0x08},                                // lea rax, [rdi+8]
      {0x0f, 0x1f, 0x44, 0x00, 0x00},                          // nop dword [rax+rax]
      {0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},  // nop word [rax+rax]
      {0x0f, 0x18, 0x08},                                      // prefetcht0 [rax]
      {0x0f, 0x0d, 0x08},                                      // prefetchw [rax]
      {0x90},                                                  // nop
      {0x48, 0x01, 0xd8},                                      // add rax, rbx
  };
  for (const Bytes& bytes : none) {
    Insn insn = must_decode(bytes);
    EXPECT_TRUE(insn.mem.empty()) << insn.text;
    EXPECT_TRUE(must_resolve(insn, sample_regs()).empty()) << insn.text;
  }
}

TEST(InsnMemTest, AccessKindsFromOperandActions) {
  const std::vector<std::pair<Bytes, Access>> cases = {
      {{0x89, 0x07}, Access::kWrite},            // mov [rdi], eax
      {{0x8b, 0x07}, Access::kRead},             // mov eax, [rdi]
      {{0x39, 0x07}, Access::kRead},             // cmp [rdi], eax
      {{0x01, 0x07}, Access::kReadWrite},        // add [rdi], eax
      {{0xf0, 0x01, 0x07}, Access::kReadWrite},  // lock add [rdi], eax
      {{0xff, 0x07}, Access::kReadWrite},        // inc dword [rdi]
      {{0x87, 0x07}, Access::kReadWrite},        // xchg [rdi], eax
      {{0x0f, 0xb1, 0x0f}, Access::kReadWrite},  // cmpxchg [rdi], ecx
      {{0x0f, 0xc1, 0x07}, Access::kReadWrite},  // xadd [rdi], eax
      {{0x0f, 0xc7, 0x0f}, Access::kReadWrite},  // cmpxchg8b [rdi]
      {{0x0f, 0x94, 0x07}, Access::kWrite},      // sete [rdi]
  };
  Regs regs = sample_regs();
  for (const auto& [bytes, access] : cases) {
    Insn insn = must_decode(bytes);
    ASSERT_EQ(insn.mem.size(), 1u) << insn.text;
    EXPECT_EQ(insn.mem[0].access, access) << insn.text;
    auto refs = must_resolve(insn, regs);
    ASSERT_EQ(refs.size(), 1u);
    EXPECT_EQ(refs[0].address, regs.rdi) << insn.text;
    EXPECT_EQ(refs[0].access, access) << insn.text;
  }
}

TEST(InsnMemTest, OperandSizes) {
  const std::vector<std::pair<Bytes, std::uint32_t>> cases = {
      {{0x88, 0x07}, 1},               // mov [rdi], al
      {{0x66, 0x89, 0x07}, 2},         // mov [rdi], ax
      {{0x89, 0x07}, 4},               // mov [rdi], eax
      {{0x48, 0x89, 0x07}, 8},         // mov [rdi], rax
      {{0x0f, 0x11, 0x07}, 16},        // movups [rdi], xmm0
      {{0x0f, 0xc7, 0x0f}, 8},         // cmpxchg8b [rdi]
      {{0x48, 0x0f, 0xc7, 0x0f}, 16},  // cmpxchg16b [rdi]
  };
  for (const auto& [bytes, size] : cases) {
    Insn insn = must_decode(bytes);
    ASSERT_EQ(insn.mem.size(), 1u) << insn.text;
    EXPECT_EQ(insn.mem[0].size, size) << insn.text;
    EXPECT_EQ(must_resolve(insn, sample_regs())[0].size, size) << insn.text;
  }
}

TEST(InsnMemTest, BitTestWithRegisterOffsetMovesTheAddress) {
  Regs regs = sample_regs();
  // bt [rdi], eax: eax = 100 -> dword 3; eax = -1 -> dword -1
  Insn bt = must_decode({0x0f, 0xa3, 0x07});
  regs.rax = 100;
  EXPECT_EQ(must_resolve(bt, regs), std::vector<MemRef>{ref(regs.rdi + 12, 4, Access::kRead)});
  regs.rax = 0xffffffff;
  EXPECT_EQ(must_resolve(bt, regs), std::vector<MemRef>{ref(regs.rdi - 4, 4, Access::kRead)});
  // bts [rdi], rax with rax = 64: qword 1, read-write
  Insn bts = must_decode({0x48, 0x0f, 0xab, 0x07});
  regs.rax = 64;
  EXPECT_EQ(must_resolve(bts, regs), std::vector<MemRef>{ref(regs.rdi + 8, 8, Access::kReadWrite)});
  // bt [rdi], 100 (immediate): the offset stays within the operand
  Insn bt_imm = must_decode({0x0f, 0xba, 0x27, 0x64});
  EXPECT_EQ(must_resolve(bt_imm, regs)[0].address, regs.rdi);
}

TEST(InsnMemTest, XlatReadsRbxPlusAl) {
  Regs regs = sample_regs();
  Insn insn = must_decode({0xd7});
  EXPECT_EQ(must_resolve(insn, regs), std::vector<MemRef>{ref(regs.rbx + 0x88, 1, Access::kRead)});
}

TEST(InsnMemTest, VectorIndexedOperandsAreNotResolved) {
  // vpgatherdd xmm0, [rax+xmm1*4], xmm2: the addresses depend on xmm1
  Insn insn = must_decode({0xc4, 0xe2, 0x69, 0x90, 0x04, 0x88});
  ASSERT_FALSE(insn.mem.empty()) << insn.text;
  EXPECT_EQ(insn.mem[0].access, Access::kRead);
  auto refs = effective_addresses(insn, sample_regs());
  ASSERT_FALSE(refs.has_value());
  EXPECT_EQ(refs.error().code(), ErrorCode::kOpNotSupp);
  EXPECT_EQ(refs.error().message().rfind("insn: ", 0), 0u);
}

TEST(InsnMemTest, LoadsIntoTheirOwnAddressRegisterAreFlagged) {
  // After these the address register holds the loaded value: the address is gone.
  EXPECT_TRUE(overwrites_address_register(must_decode({0x8b, 0x3f})));  // mov edi, [rdi]
  EXPECT_TRUE(overwrites_address_register(must_decode({0x0f, 0xb6, 0x04, 0x08})))
      << "movzx eax, byte ptr [rax+rcx]: the base";
  EXPECT_TRUE(overwrites_address_register(must_decode({0x48, 0x8b, 0x0c, 0xc8})))
      << "mov rcx, [rax+rcx*8]: the index";
  EXPECT_TRUE(overwrites_address_register(must_decode({0x02, 0x20}))) << "add ah, [rax]";
  // The address survives these.
  EXPECT_FALSE(overwrites_address_register(must_decode({0x8b, 0x07})));        // mov eax, [rdi]
  EXPECT_FALSE(overwrites_address_register(must_decode({0x89, 0x3f})));        // mov [rdi], edi
  EXPECT_FALSE(overwrites_address_register(must_decode({0x5b})));              // pop rbx
  EXPECT_FALSE(overwrites_address_register(must_decode({0xac})));              // lodsb
  EXPECT_FALSE(overwrites_address_register(must_decode({0x48, 0x8d, 0x3f})));  // lea rdi, [rdi]
  EXPECT_FALSE(overwrites_address_register(Insn{}));
}

// ---- the stack -------------------------------------------------------------------------------

TEST(InsnStackTest, PushWritesBelowRsp) {
  Regs regs = sample_regs();
  const std::vector<std::pair<Bytes, std::uint64_t>> cases = {
      {{0x50}, 8},        // push rax
      {{0x41, 0x57}, 8},  // push r15
      {{0x66, 0x50}, 2},  // push ax
      {{0x6a, 0x05}, 8},  // push 5
      {{0x9c}, 8},        // pushfq
  };
  for (const auto& [bytes, size] : cases) {
    Insn insn = must_decode(bytes);
    ASSERT_EQ(insn.mem.size(), 1u) << insn.text;
    EXPECT_TRUE(insn.mem[0].stack);
    EXPECT_EQ(insn.mem[0].access, Access::kWrite);
    EXPECT_EQ(must_resolve(insn, regs),
              std::vector<MemRef>{ref(regs.rsp - size, size, Access::kWrite)})
        << insn.text;
  }
}

TEST(InsnStackTest, PopReadsAtRsp) {
  Regs regs = sample_regs();
  for (const Bytes& bytes : {Bytes{0x58}, Bytes{0x41, 0x5f}, Bytes{0x9d}}) {
    Insn insn = must_decode(bytes);
    ASSERT_EQ(insn.mem.size(), 1u) << insn.text;
    EXPECT_TRUE(insn.mem[0].stack);
    EXPECT_EQ(must_resolve(insn, regs), std::vector<MemRef>{ref(regs.rsp, 8, Access::kRead)})
        << insn.text;
  }
}

TEST(InsnStackTest, PushAndPopWithMemoryOperands) {
  Regs regs = sample_regs();
  // push qword [rdi]: reads [rdi], writes [rsp-8]
  Insn push = must_decode({0xff, 0x37});
  ASSERT_EQ(push.mem.size(), 2u);
  EXPECT_FALSE(push.mem[0].stack);
  EXPECT_TRUE(push.mem[1].stack);
  EXPECT_EQ(must_resolve(push, regs), (std::vector<MemRef>{ref(regs.rdi, 8, Access::kRead),
                                                           ref(regs.rsp - 8, 8, Access::kWrite)}));
  // pop qword [rsp+8]: the address is computed after rsp is incremented
  Insn pop = must_decode({0x8f, 0x44, 0x24, 0x08});
  EXPECT_EQ(must_resolve(pop, regs), (std::vector<MemRef>{ref(regs.rsp + 16, 8, Access::kWrite),
                                                          ref(regs.rsp, 8, Access::kRead)}));
}

TEST(InsnStackTest, CallAndRetSlots) {
  Regs regs = sample_regs();
  for (const Bytes& call : {Bytes{0xe8, 0x10, 0x00, 0x00, 0x00}, Bytes{0xff, 0xd0}}) {
    Insn insn = must_decode(call);
    ASSERT_EQ(insn.mem.size(), 1u) << insn.text;
    EXPECT_TRUE(insn.mem[0].stack);
    EXPECT_EQ(must_resolve(insn, regs), std::vector<MemRef>{ref(regs.rsp - 8, 8, Access::kWrite)});
  }
  // call [rax]: reads the target, then pushes
  EXPECT_EQ(
      must_resolve(must_decode({0xff, 0x10}), regs),
      (std::vector<MemRef>{ref(regs.rax, 8, Access::kRead), ref(regs.rsp - 8, 8, Access::kWrite)}));
  for (const Bytes& ret : {Bytes{0xc3}, Bytes{0xc2, 0x10, 0x00}}) {
    Insn insn = must_decode(ret);
    ASSERT_EQ(insn.mem.size(), 1u);
    EXPECT_TRUE(insn.mem[0].stack);
    EXPECT_EQ(must_resolve(insn, regs), std::vector<MemRef>{ref(regs.rsp, 8, Access::kRead)});
  }
}

TEST(InsnStackTest, EnterAndLeave) {
  Regs regs = sample_regs();
  // leave: reads the saved rbp at [rbp]
  Insn leave = must_decode({0xc9});
  ASSERT_EQ(leave.mem.size(), 1u);
  EXPECT_TRUE(leave.mem[0].stack);
  EXPECT_EQ(must_resolve(leave, regs), std::vector<MemRef>{ref(regs.rbp, 8, Access::kRead)});
  // enter 0x20, 0: pushes rbp
  Insn enter = must_decode({0xc8, 0x20, 0x00, 0x00});
  EXPECT_EQ(enter.length, 4);
  EXPECT_EQ(must_resolve(enter, regs), std::vector<MemRef>{ref(regs.rsp - 8, 8, Access::kWrite)});
  // enter 0x10, 3: pushes rbp, two copied frame pointers and the new frame pointer
  Insn nested = must_decode({0xc8, 0x10, 0x00, 0x03});
  ASSERT_EQ(nested.mem.size(), 2u);
  EXPECT_EQ(must_resolve(nested, regs),
            (std::vector<MemRef>{ref(regs.rsp - 32, 32, Access::kWrite),
                                 ref(regs.rbp - 16, 16, Access::kRead)}));
}

// ---- string operations -----------------------------------------------------------------------

TEST(InsnStringTest, SingleElementOperands) {
  Regs regs = sample_regs();
  struct Case {
    Bytes bytes;
    std::vector<MemRef> refs;
  };
  const std::vector<Case> cases = {
      {{0x48, 0xa5},  // movsq
       {ref(regs.rdi, 8, Access::kWrite), ref(regs.rsi, 8, Access::kRead)}},
      {{0xaa}, {ref(regs.rdi, 1, Access::kWrite)}},  // stosb
      {{0xab}, {ref(regs.rdi, 4, Access::kWrite)}},  // stosd
      {{0xac}, {ref(regs.rsi, 1, Access::kRead)}},   // lodsb
      {{0xae}, {ref(regs.rdi, 1, Access::kRead)}},   // scasb
      {{0xa6},                                       // cmpsb
       {ref(regs.rsi, 1, Access::kRead), ref(regs.rdi, 1, Access::kRead)}},
  };
  for (const Case& c : cases) {
    Insn insn = must_decode(c.bytes);
    ASSERT_EQ(insn.mem.size(), c.refs.size()) << insn.text;
    for (const MemOperand& op : insn.mem) {
      EXPECT_TRUE(op.string_op) << insn.text;
      EXPECT_FALSE(op.rep) << insn.text;
      EXPECT_FALSE(op.stack) << insn.text;
    }
    EXPECT_EQ(must_resolve(insn, regs), c.refs) << insn.text;
    regs.eflags |= 1u << 10;  // one element: the direction does not matter
    EXPECT_EQ(must_resolve(insn, regs), c.refs) << insn.text;
    regs.eflags &= ~(1u << 10);
  }
}

TEST(InsnStringTest, RepMovsRangeUpwardAndDownward) {
  Regs regs = sample_regs();
  regs.rcx = 4;
  Insn insn = must_decode({0xf3, 0x48, 0xa5});  // rep movsq
  ASSERT_EQ(insn.mem.size(), 2u);
  EXPECT_TRUE(insn.mem[0].rep);
  EXPECT_TRUE(insn.mem[0].string_op);
  EXPECT_EQ(insn.mem[0].size, 8u);
  EXPECT_EQ(must_resolve(insn, regs), (std::vector<MemRef>{ref(regs.rdi, 32, Access::kWrite),
                                                           ref(regs.rsi, 32, Access::kRead)}));
  regs.eflags |= 1u << 10;  // DF: rsi/rdi are the highest elements
  EXPECT_EQ(must_resolve(insn, regs), (std::vector<MemRef>{ref(regs.rdi - 24, 32, Access::kWrite),
                                                           ref(regs.rsi - 24, 32, Access::kRead)}));
}

TEST(InsnStringTest, RepWithZeroCountIsAnEmptyRange) {
  Regs regs = sample_regs();
  regs.rcx = 0;
  Insn stos = must_decode({0xf3, 0xaa});  // rep stosb
  ASSERT_EQ(stos.mem.size(), 1u);
  EXPECT_EQ(must_resolve(stos, regs), std::vector<MemRef>{ref(regs.rdi, 0, Access::kWrite)});
  regs.eflags |= 1u << 10;
  EXPECT_EQ(must_resolve(stos, regs), std::vector<MemRef>{ref(regs.rdi, 0, Access::kWrite)});
}

TEST(InsnStringTest, RepeCmpsAndRepneScasCoverTheLargestRange) {
  Regs regs = sample_regs();
  regs.rcx = 10;
  Insn cmps = must_decode({0xf3, 0xa6});  // repe cmpsb
  EXPECT_TRUE(cmps.mem[0].rep);
  EXPECT_EQ(must_resolve(cmps, regs), (std::vector<MemRef>{ref(regs.rsi, 10, Access::kRead),
                                                           ref(regs.rdi, 10, Access::kRead)}));
  Insn scas = must_decode({0xf2, 0x66, 0xaf});  // repne scasw
  EXPECT_EQ(must_resolve(scas, regs), std::vector<MemRef>{ref(regs.rdi, 20, Access::kRead)});
}

TEST(InsnStringTest, AddressSizeOverrideUsesEcxEsiEdi) {
  Regs regs = sample_regs();
  regs.rcx = 0x0000000100000002;  // ECX = 2
  regs.rsi = 0x0000123400002000;
  regs.rdi = 0x0000567800003000;
  Insn insn = must_decode({0x67, 0xf3, 0x48, 0xa5});  // rep movsq with 32-bit addresses
  EXPECT_EQ(must_resolve(insn, regs),
            (std::vector<MemRef>{ref(0x3000, 16, Access::kWrite), ref(0x2000, 16, Access::kRead)}));
}

// ---- branch kinds and targets ----------------------------------------------------------------

TEST(InsnBranchTest, KindsOfBranches) {
  const std::vector<std::pair<Bytes, BranchKind>> cases = {
      {{0x90}, BranchKind::kNone},
      {{0x89, 0x07}, BranchKind::kNone},
      {{0xe9, 0x00, 0x00, 0x00, 0x00}, BranchKind::kJump},
      {{0xeb, 0x00}, BranchKind::kJump},
      {{0x74, 0x05}, BranchKind::kCondJump},
      {{0x0f, 0x84, 0x00, 0x01, 0x00, 0x00}, BranchKind::kCondJump},
      {{0xe3, 0x00}, BranchKind::kCondJump},  // jrcxz
      {{0xe2, 0x00}, BranchKind::kCondJump},  // loop
      {{0xe8, 0x00, 0x00, 0x00, 0x00}, BranchKind::kCall},
      {{0xff, 0xe0}, BranchKind::kIndirectJump},  // jmp rax
      {{0xff, 0x20}, BranchKind::kIndirectJump},  // jmp [rax]
      {{0xff, 0xd0}, BranchKind::kIndirectCall},  // call rax
      {{0xff, 0x10}, BranchKind::kIndirectCall},  // call [rax]
      {{0xc3}, BranchKind::kReturn},
      {{0xc2, 0x10, 0x00}, BranchKind::kReturn},
      {{0x0f, 0x05}, BranchKind::kSyscall},
      {{0x0f, 0x34}, BranchKind::kSyscall},  // sysenter
      {{0xcd, 0x80}, BranchKind::kSyscall},
      {{0xcc}, BranchKind::kInterrupt},
      {{0xcd, 0x03}, BranchKind::kInterrupt},
      {{0x0f, 0x0b}, BranchKind::kInterrupt},  // ud2
      {{0xf4}, BranchKind::kInterrupt},        // hlt
      {{0x0f, 0x07}, BranchKind::kInterrupt},  // sysret: faults in user mode
      {{0xff, 0x18}, BranchKind::kFar},        // call far [rax]
      {{0xff, 0x28}, BranchKind::kFar},        // jmp far [rax]
      {{0xcb}, BranchKind::kFar},              // retf
      {{0x48, 0xcf}, BranchKind::kFar},        // iretq
  };
  for (const auto& [bytes, kind] : cases) {
    Insn insn = must_decode(bytes);
    EXPECT_EQ(insn.branch, kind) << insn.text << " is " << branch_kind_name(insn.branch);
  }
}

TEST(InsnBranchTest, KindNamesAreShortAndDistinct) {
  const std::vector<std::pair<BranchKind, std::string>> names = {
      {BranchKind::kNone, "none"},
      {BranchKind::kJump, "jump"},
      {BranchKind::kCondJump, "cond"},
      {BranchKind::kCall, "call"},
      {BranchKind::kIndirectJump, "ind-jump"},
      {BranchKind::kIndirectCall, "ind-call"},
      {BranchKind::kReturn, "return"},
      {BranchKind::kSyscall, "syscall"},
      {BranchKind::kInterrupt, "interrupt"},
      {BranchKind::kFar, "far"},
  };
  std::set<std::string> seen;
  for (const auto& [kind, name] : names) {
    EXPECT_EQ(branch_kind_name(kind), name);
    seen.insert(branch_kind_name(kind));
  }
  EXPECT_EQ(seen.size(), names.size());
}

TEST(InsnBranchTest, DirectTargets) {
  EXPECT_EQ(must_decode({0x74, 0x05}).target, kIp + 2 + 5);
  EXPECT_EQ(must_decode({0xeb, 0xfe}).target, kIp);  // jmp $
  EXPECT_EQ(must_decode({0xe8, 0x00, 0xff, 0xff, 0xff}).target, kIp + 5 - 0x100);
  EXPECT_EQ(must_decode({0x0f, 0x8f, 0x00, 0x00, 0x01, 0x00}).target, kIp + 6 + 0x10000);
  EXPECT_EQ(must_decode({0xe9, 0x10, 0x00, 0x00, 0x00}, 0x1000).target, 0x1000 + 5 + 0x10);
  EXPECT_EQ(must_decode({0xe2, 0xfe}).target, kIp);  // loop $
  EXPECT_FALSE(must_decode({0xff, 0xd0}).target.has_value());
  EXPECT_FALSE(must_decode({0xc3}).target.has_value());
  EXPECT_FALSE(must_decode({0x90}).target.has_value());
  EXPECT_NE(must_decode({0xe8, 0x00, 0xff, 0xff, 0xff}).text.find("call 0x400f05"),
            std::string::npos);
}

// ---- branch outcomes -------------------------------------------------------------------------

constexpr std::uint64_t kCF = 1u << 0;
constexpr std::uint64_t kPF = 1u << 2;
constexpr std::uint64_t kZF = 1u << 6;
constexpr std::uint64_t kSF = 1u << 7;
constexpr std::uint64_t kOF = 1u << 11;

struct CondCase {
  std::uint8_t cc;
  const char* name;
  std::vector<std::uint64_t> taken;
  std::vector<std::uint64_t> not_taken;
};

const std::vector<CondCase>& cond_cases() {
  static const std::vector<CondCase> cases = {
      {0x0, "jo", {kOF, kOF | kZF}, {0, kSF | kZF | kCF | kPF}},
      {0x1, "jno", {0, kCF | kZF}, {kOF}},
      {0x2, "jb", {kCF, kCF | kZF}, {0, kZF | kOF}},
      {0x3, "jnb", {0, kZF}, {kCF}},
      {0x4, "jz", {kZF, kZF | kCF}, {0, kCF | kSF}},
      {0x5, "jnz", {0, kCF}, {kZF}},
      {0x6, "jbe", {kCF, kZF, kCF | kZF}, {0, kSF | kOF}},
      {0x7, "jnbe", {0, kSF}, {kCF, kZF, kCF | kZF}},
      {0x8, "js", {kSF, kSF | kOF}, {0, kOF | kZF}},
      {0x9, "jns", {0, kOF}, {kSF}},
      {0xa, "jp", {kPF}, {0, kZF}},
      {0xb, "jnp", {0, kZF}, {kPF}},
      {0xc, "jl", {kSF, kOF}, {0, kSF | kOF}},
      {0xd, "jnl", {0, kSF | kOF}, {kSF, kOF}},
      {0xe, "jle", {kZF, kSF, kOF, kZF | kSF | kOF}, {0, kSF | kOF}},
      {0xf, "jnle", {0, kSF | kOF}, {kZF, kSF, kOF, kZF | kSF | kOF}},
  };
  return cases;
}

void expect_outcome(const Insn& insn, std::uint64_t eflags, bool taken, const char* name) {
  Regs regs = sample_regs();
  regs.eflags = 0x202 | eflags;
  auto outcome = branch_outcome(insn, regs, nullptr, nullptr);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().to_string();
  EXPECT_EQ(outcome->taken, taken) << name << " eflags=" << std::hex << regs.eflags;
  EXPECT_EQ(outcome->next, taken ? *insn.target : insn.ip + insn.length) << name;
}

TEST(InsnCondTest, EveryJccShortFormAgainstEflags) {
  for (const CondCase& c : cond_cases()) {
    Insn insn = must_decode({static_cast<std::uint8_t>(0x70 + c.cc), 0x10});
    ASSERT_EQ(insn.branch, BranchKind::kCondJump);
    EXPECT_EQ(insn.text.substr(0, insn.text.find(' ')), c.name);
    for (std::uint64_t f : c.taken) expect_outcome(insn, f, true, c.name);
    for (std::uint64_t f : c.not_taken) expect_outcome(insn, f, false, c.name);
  }
}

TEST(InsnCondTest, EveryJccNearFormAgainstEflags) {
  for (const CondCase& c : cond_cases()) {
    Insn insn = must_decode({0x0f, static_cast<std::uint8_t>(0x80 + c.cc), 0x00, 0xf0, 0xff, 0xff});
    ASSERT_EQ(insn.length, 6);
    EXPECT_EQ(insn.target, kIp + 6 - 0x1000);
    for (std::uint64_t f : c.taken) expect_outcome(insn, f, true, c.name);
    for (std::uint64_t f : c.not_taken) expect_outcome(insn, f, false, c.name);
  }
}

TEST(InsnCondTest, JrcxzAndJecxz) {
  Insn jrcxz = must_decode({0xe3, 0x20});
  Insn jecxz = must_decode({0x67, 0xe3, 0x20});
  EXPECT_EQ(jecxz.length, 3);
  Regs regs = sample_regs();
  regs.rcx = 0;
  EXPECT_TRUE(branch_outcome(jrcxz, regs, nullptr, nullptr)->taken);
  EXPECT_TRUE(branch_outcome(jecxz, regs, nullptr, nullptr)->taken);
  regs.rcx = 0x100000000;  // ECX = 0, RCX != 0
  EXPECT_FALSE(branch_outcome(jrcxz, regs, nullptr, nullptr)->taken);
  EXPECT_TRUE(branch_outcome(jecxz, regs, nullptr, nullptr)->taken);
  regs.rcx = 1;
  EXPECT_FALSE(branch_outcome(jrcxz, regs, nullptr, nullptr)->taken);
  EXPECT_FALSE(branch_outcome(jecxz, regs, nullptr, nullptr)->taken);
  EXPECT_EQ(branch_outcome(jecxz, regs, nullptr, nullptr)->next, kIp + 3);
}

TEST(InsnCondTest, LoopEvaluatesWithDecrementedRcxAndApplyDecrements) {
  Insn loop = must_decode({0xe2, 0xf0});
  Regs regs = sample_regs();
  regs.rcx = 1;  // becomes 0: falls through
  auto outcome = branch_outcome(loop, regs, nullptr, nullptr);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->taken);
  EXPECT_EQ(outcome->next, kIp + 2);
  ASSERT_TRUE(apply_branch(loop, *outcome, regs).has_value());
  EXPECT_EQ(regs.rcx, 0u);
  EXPECT_EQ(regs.rip, kIp + 2);

  regs.rcx = 3;  // becomes 2: taken
  outcome = branch_outcome(loop, regs, nullptr, nullptr);
  EXPECT_TRUE(outcome->taken);
  EXPECT_EQ(outcome->next, kIp + 2 - 0x10);
  auto write = apply_branch(loop, *outcome, regs);
  ASSERT_TRUE(write.has_value());
  EXPECT_FALSE(write->has_value());
  EXPECT_EQ(regs.rcx, 2u);
  EXPECT_EQ(regs.rip, kIp + 2 - 0x10);

  regs.rcx = 0;  // wraps to all ones: taken
  EXPECT_TRUE(branch_outcome(loop, regs, nullptr, nullptr)->taken);
}

TEST(InsnCondTest, LoopeAndLoopneAlsoTestZf) {
  Insn loope = must_decode({0xe1, 0x10});
  Insn loopne = must_decode({0xe0, 0x10});
  Regs regs = sample_regs();
  regs.rcx = 5;
  regs.eflags = 0x202 | kZF;
  EXPECT_TRUE(branch_outcome(loope, regs, nullptr, nullptr)->taken);
  EXPECT_FALSE(branch_outcome(loopne, regs, nullptr, nullptr)->taken);
  regs.eflags = 0x202;
  EXPECT_FALSE(branch_outcome(loope, regs, nullptr, nullptr)->taken);
  EXPECT_TRUE(branch_outcome(loopne, regs, nullptr, nullptr)->taken);
  regs.rcx = 1;  // count exhausted: neither is taken
  EXPECT_FALSE(branch_outcome(loopne, regs, nullptr, nullptr)->taken);
  regs.eflags |= kZF;
  EXPECT_FALSE(branch_outcome(loope, regs, nullptr, nullptr)->taken);
  // ZF does not matter to the decrement
  auto outcome = branch_outcome(loope, regs, nullptr, nullptr);
  ASSERT_TRUE(apply_branch(loope, *outcome, regs).has_value());
  EXPECT_EQ(regs.rcx, 0u);
}

TEST(InsnCallTest, DirectCallPushesTheReturnAddress) {
  Insn call = must_decode({0xe8, 0x00, 0x01, 0x00, 0x00});
  Regs regs = sample_regs();
  const std::uint64_t rsp = regs.rsp;
  auto outcome = branch_outcome(call, regs, nullptr, nullptr);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->taken);
  EXPECT_EQ(outcome->next, kIp + 5 + 0x100);
  auto write = apply_branch(call, *outcome, regs);
  ASSERT_TRUE(write.has_value());
  ASSERT_TRUE(write->has_value());
  EXPECT_EQ((*write)->address, rsp - 8);
  EXPECT_EQ((*write)->value, kIp + 5);
  EXPECT_EQ(regs.rsp, rsp - 8);
  EXPECT_EQ(regs.rip, kIp + 5 + 0x100);
}

TEST(InsnCallTest, IndirectThroughRegisters) {
  Regs regs = sample_regs();
  auto call = branch_outcome(must_decode({0xff, 0xd0}), regs, nullptr, nullptr);  // call rax
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->next, regs.rax);
  EXPECT_TRUE(call->taken);
  auto jmp = branch_outcome(must_decode({0x41, 0xff, 0xe3}), regs, nullptr, nullptr);  // jmp r11
  ASSERT_TRUE(jmp.has_value());
  EXPECT_EQ(jmp->next, regs.r11);

  Insn call_rax = must_decode({0xff, 0xd0});
  const std::uint64_t rsp = regs.rsp;
  auto write = apply_branch(call_rax, *call, regs);
  ASSERT_TRUE(write.has_value() && write->has_value());
  EXPECT_EQ((*write)->address, rsp - 8);
  EXPECT_EQ((*write)->value, kIp + 2);
  EXPECT_EQ(regs.rip, sample_regs().rax);
}

TEST(InsnCallTest, IndirectThroughMemoryUsesTheReader) {
  Regs regs = sample_regs();
  FakeMemory memory;
  // call [rip+0x200]
  Insn call = must_decode({0xff, 0x15, 0x00, 0x02, 0x00, 0x00});
  memory.words[kIp + 6 + 0x200] = 0x7f0000abc000;
  auto outcome = branch_outcome(call, regs, read_fake, &memory);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().to_string();
  EXPECT_EQ(outcome->next, 0x7f0000abc000u);
  ASSERT_EQ(memory.reads.size(), 1u);
  EXPECT_EQ(memory.reads[0], (std::pair<std::uint64_t, int>{kIp + 6 + 0x200, 8}));
  // call [rax+8]
  memory.words[regs.rax + 8] = 0x1234;
  outcome = branch_outcome(must_decode({0xff, 0x50, 0x08}), regs, read_fake, &memory);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->next, 0x1234u);
  // jmp [rax*8+0x600000]: a jump table
  regs.rax = 3;
  memory.words[0x600000 + 3 * 8] = 0x401234;
  Insn table = must_decode({0xff, 0x24, 0xc5, 0x00, 0x00, 0x60, 0x00});
  EXPECT_EQ(table.branch, BranchKind::kIndirectJump);
  outcome = branch_outcome(table, regs, read_fake, &memory);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->next, 0x401234u);
  // jmp [rip+0x10]: a PLT-style jump
  memory.words[kIp + 6 + 0x10] = 0x7f00000fff00;
  outcome =
      branch_outcome(must_decode({0xff, 0x25, 0x10, 0x00, 0x00, 0x00}), regs, read_fake, &memory);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->next, 0x7f00000fff00u);
}

TEST(InsnCallTest, ReaderErrorsAndMissingReader) {
  Regs regs = sample_regs();
  FakeMemory memory;  // empty: every read faults
  Insn call = must_decode({0xff, 0x10});
  auto outcome = branch_outcome(call, regs, read_fake, &memory);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kFault);
  auto missing = branch_outcome(call, regs, nullptr, nullptr);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInval);
  EXPECT_EQ(missing.error().message().rfind("read: ", 0), 0u);
  auto ret = branch_outcome(must_decode({0xc3}), regs, read_fake, &memory);
  ASSERT_FALSE(ret.has_value());
  EXPECT_EQ(ret.error().code(), ErrorCode::kFault);
}

TEST(InsnCallTest, ReturnReadsRspAndPops) {
  Regs regs = sample_regs();
  FakeMemory memory;
  memory.words[regs.rsp] = 0x401777;
  for (const auto& [bytes, release] :
       std::vector<std::pair<Bytes, std::uint64_t>>{{{0xc3}, 8}, {{0xc2, 0x10, 0x00}, 24}}) {
    Regs r = regs;
    Insn ret = must_decode(bytes);
    auto outcome = branch_outcome(ret, r, read_fake, &memory);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->next, 0x401777u);
    EXPECT_TRUE(outcome->taken);
    auto write = apply_branch(ret, *outcome, r);
    ASSERT_TRUE(write.has_value());
    EXPECT_FALSE(write->has_value());
    EXPECT_EQ(r.rsp, regs.rsp + release) << ret.text;
    EXPECT_EQ(r.rip, 0x401777u);
  }
}

TEST(InsnCallTest, JumpsOnlyMoveRip) {
  Regs regs = sample_regs();
  Insn jmp = must_decode({0xeb, 0x10});
  auto outcome = branch_outcome(jmp, regs, nullptr, nullptr);
  ASSERT_TRUE(outcome.has_value());
  Regs after = regs;
  auto write = apply_branch(jmp, *outcome, after);
  ASSERT_TRUE(write.has_value());
  EXPECT_FALSE(write->has_value());
  Regs expected = regs;
  expected.rip = kIp + 2 + 0x10;
  EXPECT_EQ(std::memcmp(&after, &expected, sizeof(Regs)), 0);
  // a not-taken jcc continues after itself
  Insn je = must_decode({0x74, 0x10});
  outcome = branch_outcome(je, regs, nullptr, nullptr);
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(apply_branch(je, *outcome, after).has_value());
  EXPECT_EQ(after.rip, kIp + 2);
}

TEST(InsnCallTest, NonBranchesAreRejected) {
  Regs regs = sample_regs();
  for (const Bytes& bytes :
       {Bytes{0x89, 0x07}, Bytes{0x0f, 0x05}, Bytes{0xcc}, Bytes{0xff, 0x18}, Bytes{0x48, 0xcf}}) {
    Insn insn = must_decode(bytes);
    auto outcome = branch_outcome(insn, regs, nullptr, nullptr);
    ASSERT_FALSE(outcome.has_value()) << insn.text;
    EXPECT_EQ(outcome.error().code(), ErrorCode::kInval);
    EXPECT_EQ(outcome.error().message().rfind("insn: ", 0), 0u);
    Regs after = regs;
    auto applied = apply_branch(insn, BranchOutcome{0x1234, true}, after);
    ASSERT_FALSE(applied.has_value()) << insn.text;
    EXPECT_EQ(applied.error().code(), ErrorCode::kInval);
    EXPECT_EQ(std::memcmp(&after, &regs, sizeof(Regs)), 0) << insn.text;
  }
}

// ---- emulated stores -------------------------------------------------------------------------

TEST(InsnStoreTest, RegisterSourcesOfEveryWidth) {
  Regs regs = sample_regs();
  struct Case {
    Bytes bytes;
    std::uint32_t size;
    std::uint64_t value;
  };
  const std::vector<Case> cases = {
      {{0x88, 0x07}, 1, 0x88},                      // mov [rdi], al
      {{0x88, 0x27}, 1, 0x77},                      // mov [rdi], ah
      {{0x88, 0x37}, 1, 0xbe},                      // mov [rdi], dh
      {{0x40, 0x88, 0x37}, 1, 0x30},                // mov [rdi], sil
      {{0x66, 0x89, 0x07}, 2, 0x7788},              // mov [rdi], ax
      {{0x89, 0x07}, 4, 0x55667788},                // mov [rdi], eax
      {{0x48, 0x89, 0x07}, 8, 0x1122334455667788},  // mov [rdi], rax
      {{0x4c, 0x89, 0x07}, 8, 0xa0a1a2a3a4a5a6a7},  // mov [rdi], r8
      {{0x44, 0x89, 0x07}, 4, 0xa4a5a6a7},          // mov [rdi], r8d
      {{0x45, 0x88, 0x07}, 1, 0xa7},                // mov [r15], r8b
  };
  for (const Case& c : cases) {
    Insn insn = must_decode(c.bytes);
    auto store = emulate_store(insn, regs);
    ASSERT_TRUE(store.has_value()) << insn.text;
    EXPECT_EQ(store->size, c.size) << insn.text;
    EXPECT_EQ(store->value, c.value) << insn.text << " " << std::hex << store->value;
    const bool r15_base = c.bytes[0] == 0x45;
    EXPECT_EQ(store->address, r15_base ? regs.r15 : regs.rdi) << insn.text;
  }
}

TEST(InsnStoreTest, ImmediateSourcesAndSignExtension) {
  Regs regs = sample_regs();
  struct Case {
    Bytes bytes;
    std::uint32_t size;
    std::uint64_t value;
  };
  const std::vector<Case> cases = {
      {{0xc6, 0x07, 0x7f}, 1, 0x7f},
      {{0xc6, 0x07, 0x80}, 1, 0x80},
      {{0x66, 0xc7, 0x07, 0x34, 0x12}, 2, 0x1234},
      {{0x66, 0xc7, 0x07, 0xff, 0xff}, 2, 0xffff},
      {{0xc7, 0x07, 0x78, 0x56, 0x34, 0x12}, 4, 0x12345678},
      {{0xc7, 0x07, 0x00, 0x00, 0x00, 0x80}, 4, 0x80000000},
      {{0x48, 0xc7, 0x07, 0xf0, 0xff, 0xff, 0xff}, 8, 0xfffffffffffffff0},
      {{0x48, 0xc7, 0x07, 0x00, 0x00, 0x00, 0x80}, 8, 0xffffffff80000000},
      {{0x48, 0xc7, 0x07, 0xff, 0xff, 0xff, 0x7f}, 8, 0x7fffffff},
  };
  for (const Case& c : cases) {
    Insn insn = must_decode(c.bytes);
    auto store = emulate_store(insn, regs);
    ASSERT_TRUE(store.has_value()) << insn.text;
    EXPECT_EQ(store->address, regs.rdi);
    EXPECT_EQ(store->size, c.size) << insn.text;
    EXPECT_EQ(store->value, c.value) << insn.text << " " << std::hex << store->value;
  }
}

TEST(InsnStoreTest, AddressesRipRelativeAndFs) {
  Regs regs = sample_regs();
  auto store = emulate_store(
      must_decode({0xc7, 0x05, 0xdb, 0x2e, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00}), regs);
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ(store->address, kIp + 10 + 0x2edb);
  EXPECT_EQ(store->value, 5u);
  // mov fs:[0x10], rdx
  store = emulate_store(must_decode({0x64, 0x48, 0x89, 0x14, 0x25, 0x10, 0x00, 0x00, 0x00}), regs);
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ(store->address, regs.fs_base + 0x10);
  EXPECT_EQ(store->value, regs.rdx);
  EXPECT_EQ(store->size, 8u);
}

TEST(InsnStoreTest, OtherFormsAreNotEmulated) {
  Regs regs = sample_regs();
  const std::vector<Bytes> others = {
      {0x8b, 0x07},        // mov eax, [rdi] (a load)
      {0x01, 0x07},        // add [rdi], eax
      {0x87, 0x07},        // xchg [rdi], eax
      {0x8c, 0x07},        // mov [rdi], es
      {0x50},              // push rax
      {0xaa},              // stosb
      {0x0f, 0x11, 0x07},  // movups [rdi], xmm0
      {0x0f, 0xc3, 0x07},  // movnti [rdi], eax
      {0x48, 0x89, 0xc3},  // mov rbx, rax
      {0xe8, 0x00, 0x00, 0x00, 0x00},
  };
  for (const Bytes& bytes : others) {
    Insn insn = must_decode(bytes);
    EXPECT_FALSE(emulate_store(insn, regs).has_value()) << insn.text;
  }
}

// ---- emulated loads --------------------------------------------------------------------------

TEST(InsnLoadTest, LoadPlans) {
  Regs regs = sample_regs();
  const std::vector<std::pair<Bytes, std::uint32_t>> cases = {
      {{0x8a, 0x07}, 1},              // mov al, [rdi]
      {{0x66, 0x8b, 0x07}, 2},        // mov ax, [rdi]
      {{0x8b, 0x07}, 4},              // mov eax, [rdi]
      {{0x48, 0x8b, 0x07}, 8},        // mov rax, [rdi]
      {{0x0f, 0xb6, 0x07}, 1},        // movzx eax, byte [rdi]
      {{0x48, 0x0f, 0xb7, 0x07}, 2},  // movzx rax, word [rdi]
      {{0x0f, 0xbe, 0x07}, 1},        // movsx eax, byte [rdi]
      {{0x48, 0x63, 0x07}, 4},        // movsxd rax, dword [rdi]
  };
  for (const auto& [bytes, size] : cases) {
    Insn insn = must_decode(bytes);
    auto plan = emulate_load(insn, regs);
    ASSERT_TRUE(plan.has_value()) << insn.text;
    EXPECT_EQ(plan->address, regs.rdi) << insn.text;
    EXPECT_EQ(plan->size, size) << insn.text;
  }
  auto fs = emulate_load(must_decode({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}), regs);
  ASSERT_TRUE(fs.has_value());
  EXPECT_EQ(fs->address, regs.fs_base + 0x28);
}

TEST(InsnLoadTest, OtherFormsAreNotEmulated) {
  Regs regs = sample_regs();
  const std::vector<Bytes> others = {
      {0x89, 0x07},              // mov [rdi], eax (a store)
      {0x48, 0x8d, 0x07},        // lea rax, [rdi]
      {0x03, 0x07},              // add eax, [rdi]
      {0x8e, 0x07},              // mov es, [rdi]
      {0xf3, 0x0f, 0x10, 0x07},  // movss xmm0, [rdi]
      {0x58},                    // pop rax
      {0xac},                    // lodsb
      {0x48, 0x89, 0xc3},        // mov rbx, rax
  };
  for (const Bytes& bytes : others) {
    Insn insn = must_decode(bytes);
    EXPECT_FALSE(emulate_load(insn, regs).has_value()) << insn.text;
    Regs after = regs;
    auto applied = apply_load(insn, 0, after);
    ASSERT_FALSE(applied.has_value()) << insn.text;
    EXPECT_EQ(applied.error().code(), ErrorCode::kInval);
    EXPECT_EQ(std::memcmp(&after, &regs, sizeof(Regs)), 0) << insn.text;
  }
}

TEST(InsnLoadTest, ApplyLoadFollowsTheHardwareWriteRules) {
  struct Case {
    Bytes bytes;
    std::uint64_t loaded;
    std::uint64_t Regs::*reg;
    std::uint64_t before;
    std::uint64_t after;
  };
  const std::vector<Case> cases = {
      // mov eax: zero-extends into rax
      {{0x8b, 0x07}, 0x80000000, &Regs::rax, 0xdeadbeef00000000, 0x0000000080000000},
      // mov rax: all 64 bits
      {{0x48, 0x8b, 0x07}, 0x0123456789abcdef, &Regs::rax, 1, 0x0123456789abcdef},
      // mov ax / mov al / mov ah: merge
      {{0x66, 0x8b, 0x07}, 0xbeef, &Regs::rax, 0x1111111111111111, 0x111111111111beef},
      {{0x8a, 0x07}, 0xaa, &Regs::rax, 0x1111111111111111, 0x11111111111111aa},
      {{0x8a, 0x27}, 0xaa, &Regs::rax, 0x1111111111111111, 0x111111111111aa11},
      // bytes beyond the operand size in `loaded` are ignored
      {{0x8a, 0x07}, 0xffffffffffffff42, &Regs::rax, 0, 0x42},
      // mov r8d: zero-extends
      {{0x44, 0x8b, 0x07}, 0xffffffff, &Regs::r8, 0xffffffffffffffff, 0xffffffff},
      // mov sil (REX): low byte of rsi, not dh
      {{0x40, 0x8a, 0x37}, 0x5a, &Regs::rsi, 0x1111111111111111, 0x111111111111115a},
      // movzx
      {{0x0f, 0xb6, 0x07}, 0x80, &Regs::rax, 0xffffffffffffffff, 0x80},
      {{0x48, 0x0f, 0xb7, 0x07}, 0x8000, &Regs::rax, 0xffffffffffffffff, 0x8000},
      {{0x66, 0x0f, 0xb6, 0x07}, 0x80, &Regs::rax, 0x1111111111111111, 0x1111111111110080},
      // movsx
      {{0x0f, 0xbe, 0x07}, 0x80, &Regs::rax, 0x1111111111111111, 0x00000000ffffff80},
      {{0x0f, 0xbe, 0x07}, 0x7f, &Regs::rax, 0x1111111111111111, 0x000000000000007f},
      {{0x48, 0x0f, 0xbf, 0x07}, 0x8000, &Regs::rax, 0, 0xffffffffffff8000},
      {{0x66, 0x0f, 0xbe, 0x07}, 0x80, &Regs::rax, 0x1111111111111111, 0x111111111111ff80},
      // movsxd
      {{0x48, 0x63, 0x07}, 0x80000000, &Regs::rax, 0, 0xffffffff80000000},
      {{0x48, 0x63, 0x07}, 0x7fffffff, &Regs::rax, 0xffffffffffffffff, 0x7fffffff},
      {{0x4c, 0x63, 0x17}, 0xfffffffe, &Regs::r10, 0, 0xfffffffffffffffe},
  };
  for (const Case& c : cases) {
    Insn insn = must_decode(c.bytes);
    Regs regs = sample_regs();
    regs.*c.reg = c.before;
    Regs expected = regs;
    expected.*c.reg = c.after;
    expected.rip = kIp + insn.length;
    ASSERT_TRUE(emulate_load(insn, regs).has_value()) << insn.text;
    auto applied = apply_load(insn, c.loaded, regs);
    ASSERT_TRUE(applied.has_value()) << insn.text << ": " << applied.error().to_string();
    EXPECT_EQ(regs.*c.reg, c.after) << insn.text << " " << std::hex << regs.*c.reg;
    EXPECT_EQ(std::memcmp(&regs, &expected, sizeof(Regs)), 0) << insn.text;
  }
}

// ---- real code -------------------------------------------------------------------------------

// A function with calls, branches and memory accesses, compiled into this test binary.
[[gnu::noinline]] int sample_function(const int* values, int count) {
  int sum = 0;
  for (int i = 0; i < count; ++i) {
    if (values[i] > 10) {
      sum += values[i] * 3;
    } else {
      sum -= values[i];
    }
  }
  return sum;
}

TEST(InsnRealCodeTest, DecodesThisBinarysOwnCodeUntilItsReturn) {
  const int values[] = {1, 20, 3};
  ASSERT_EQ(sample_function(values, 3), 20 * 3 - 1 - 3);
  auto fn = reinterpret_cast<std::uintptr_t>(&sample_function);
  const auto* code = reinterpret_cast<const std::uint8_t*>(fn);
  std::size_t offset = 0;
  int decoded = 0;
  bool saw_return = false;
  // 4096 bytes: unoptimised and instrumented (the sanitizer builds), the function is several
  // hundred bytes long.
  while (offset < 4096 && !saw_return) {
    auto insn = decode(std::span<const std::uint8_t>(code + offset, 15), fn + offset);
    ASSERT_TRUE(insn.has_value()) << "at +" << offset << ": " << insn.error().to_string();
    ASSERT_GE(insn->length, 1);
    ASSERT_LE(insn->length, 15);
    EXPECT_EQ(insn->ip, fn + offset);
    EXPECT_FALSE(insn->text.empty());
    if (insn->target && insn->branch == BranchKind::kCondJump) {
      // a loop's branches stay near the function
      EXPECT_LT(*insn->target - fn + 4096, 8192u) << insn->text;
    }
    saw_return = insn->branch == BranchKind::kReturn;
    offset += insn->length;
    ++decoded;
  }
  EXPECT_TRUE(saw_return) << "no ret within 4096 bytes after " << decoded << " instructions";
  EXPECT_GE(decoded, 4);
}

}  // namespace
}  // namespace hwarb::x86

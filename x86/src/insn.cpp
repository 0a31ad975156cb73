#include "hwarb/x86/insn.h"

#include <Zydis/Zydis.h>
#include <cpuid.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>

#include "hwarb/base/format.h"

namespace hwarb::x86 {
namespace {

constexpr std::size_t kMaxLength = 15;

// EFLAGS bits read by conditional branches and string operations.
constexpr std::uint64_t kCf = 1u << 0;
constexpr std::uint64_t kPf = 1u << 2;
constexpr std::uint64_t kZf = 1u << 6;
constexpr std::uint64_t kSf = 1u << 7;
constexpr std::uint64_t kDf = 1u << 10;
constexpr std::uint64_t kOf = 1u << 11;

struct Decoded {
  ZydisDecodedInstruction insn;
  std::array<ZydisDecodedOperand, ZYDIS_MAX_OPERAND_COUNT> ops;
};

ZyanStatus decode_raw(std::span<const std::uint8_t> bytes, Decoded* out) {
  ZydisDecoder decoder;
  const ZyanStatus init =
      ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  if (!ZYAN_SUCCESS(init)) return init;
  return ZydisDecoderDecodeFull(&decoder, bytes.data(), std::min(bytes.size(), kMaxLength),
                                &out->insn, out->ops.data());
}

std::string byte_text(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < std::min(bytes.size(), kMaxLength); ++i) {
    if (i != 0) text += ' ';
    text += kDigits[bytes[i] >> 4];
    text += kDigits[bytes[i] & 0xf];
  }
  return text;
}

// Decodes the instruction an Insn was made from again (Insn keeps only its bytes).
Result<Decoded> redecode(const Insn& insn) {
  if (insn.bytes.empty()) return make_error(ErrorCode::kInval, "insn: not decoded (no bytes)");
  Decoded d;
  if (!ZYAN_SUCCESS(decode_raw(insn.bytes, &d)) || d.insn.length != insn.bytes.size() ||
      d.insn.length != insn.length) {
    return make_error(ErrorCode::kInval,
                      "insn: bytes " + byte_text(insn.bytes) + " do not decode to one instruction");
  }
  return d;
}

// ---- registers -------------------------------------------------------------------------------

// The Regs field holding a 64-bit general-purpose register; nullptr for other registers.
std::uint64_t Regs::*gpr_member(ZydisRegister full) {
  switch (full) {
    case ZYDIS_REGISTER_RAX:
      return &Regs::rax;
    case ZYDIS_REGISTER_RCX:
      return &Regs::rcx;
    case ZYDIS_REGISTER_RDX:
      return &Regs::rdx;
    case ZYDIS_REGISTER_RBX:
      return &Regs::rbx;
    case ZYDIS_REGISTER_RSP:
      return &Regs::rsp;
    case ZYDIS_REGISTER_RBP:
      return &Regs::rbp;
    case ZYDIS_REGISTER_RSI:
      return &Regs::rsi;
    case ZYDIS_REGISTER_RDI:
      return &Regs::rdi;
    case ZYDIS_REGISTER_R8:
      return &Regs::r8;
    case ZYDIS_REGISTER_R9:
      return &Regs::r9;
    case ZYDIS_REGISTER_R10:
      return &Regs::r10;
    case ZYDIS_REGISTER_R11:
      return &Regs::r11;
    case ZYDIS_REGISTER_R12:
      return &Regs::r12;
    case ZYDIS_REGISTER_R13:
      return &Regs::r13;
    case ZYDIS_REGISTER_R14:
      return &Regs::r14;
    case ZYDIS_REGISTER_R15:
      return &Regs::r15;
    default:
      return nullptr;
  }
}

bool is_high_byte(ZydisRegister reg) {
  return reg == ZYDIS_REGISTER_AH || reg == ZYDIS_REGISTER_CH || reg == ZYDIS_REGISTER_DH ||
         reg == ZYDIS_REGISTER_BH;
}

bool is_gpr(ZydisRegister reg) {
  switch (ZydisRegisterGetClass(reg)) {
    case ZYDIS_REGCLASS_GPR8:
    case ZYDIS_REGCLASS_GPR16:
    case ZYDIS_REGCLASS_GPR32:
    case ZYDIS_REGCLASS_GPR64:
      return true;
    default:
      return false;
  }
}

std::uint64_t width_mask(unsigned bits) {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

std::uint64_t sign_extend(std::uint64_t value, unsigned bits) {
  if (bits == 0 || bits >= 64) return value;
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  value &= width_mask(bits);
  return (value ^ sign) - sign;
}

// The value of a general-purpose register or of rip/eip (`next_ip`, the address after the
// instruction), at the register's own width; nullopt for any other register.
std::optional<std::uint64_t> reg_value(ZydisRegister reg, const Regs& regs, std::uint64_t next_ip) {
  if (reg == ZYDIS_REGISTER_RIP) return next_ip;
  if (reg == ZYDIS_REGISTER_EIP) return next_ip & 0xffffffff;
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  std::uint64_t value = 0;
  if (auto member = gpr_member(full)) {
    value = regs.*member;
  } else {
    return std::nullopt;
  }
  if (is_high_byte(reg)) return (value >> 8) & 0xff;
  return value & width_mask(ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, reg));
}

// Writes a general-purpose register with the hardware's rules: 64-bit writes replace, 32-bit
// writes zero the upper half, 16- and 8-bit writes keep the other bits.
bool write_gpr(ZydisRegister reg, std::uint64_t value, Regs& regs) {
  auto member = gpr_member(ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg));
  if (member == nullptr) return false;
  std::uint64_t& field = regs.*member;
  if (is_high_byte(reg)) {
    field = (field & ~std::uint64_t{0xff00}) | ((value & 0xff) << 8);
    return true;
  }
  switch (ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, reg)) {
    case 64:
      field = value;
      return true;
    case 32:
      field = value & 0xffffffff;
      return true;
    case 16:
      field = (field & ~std::uint64_t{0xffff}) | (value & 0xffff);
      return true;
    case 8:
      field = (field & ~std::uint64_t{0xff}) | (value & 0xff);
      return true;
    default:
      return false;
  }
}

std::uint64_t segment_base(ZydisRegister segment, const Regs& regs) {
  if (segment == ZYDIS_REGISTER_FS) return regs.fs_base;
  if (segment == ZYDIS_REGISTER_GS) return regs.gs_base;
  return 0;  // CS/DS/ES/SS have base 0 in 64-bit mode
}

// The count register of REP prefixes and LOOP: RCX, or ECX under a 32-bit address size.
std::uint64_t count_register(const Decoded& d, const Regs& regs) {
  return regs.rcx & width_mask(d.insn.address_width);
}

// ---- memory operands -------------------------------------------------------------------------

enum class SlotKind : std::uint8_t {
  kPlain,        // base + index * scale + disp (+ `extra`)
  kPush,         // the slot below rsp a push-like instruction writes
  kString,       // a string operand: one element, or the range a REP prefix covers
  kXlat,         // [rbx + al]
  kBitOffset,    // BT/BTS/BTR/BTC m, r: the register's bit offset moves the address
  kEnterLevels,  // ENTER with nesting >= 2: the frame pointers copied from below rbp
};

struct MemSlot {
  MemOperand op;
  int index = 0;  // Zydis operand index
  SlotKind kind = SlotKind::kPlain;
  std::int64_t extra = 0;
};

std::optional<Access> access_of(ZydisOperandActions actions) {
  const bool read = (actions & ZYDIS_OPERAND_ACTION_MASK_READ) != 0;
  const bool write = (actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) != 0;
  if (read && write) return Access::kReadWrite;
  if (read) return Access::kRead;
  if (write) return Access::kWrite;
  return std::nullopt;
}

bool is_stack_pointer(ZydisRegister reg) {
  return reg == ZYDIS_REGISTER_RSP || reg == ZYDIS_REGISTER_ESP || reg == ZYDIS_REGISTER_SP;
}

bool is_frame_pointer(ZydisRegister reg) {
  return reg == ZYDIS_REGISTER_RBP || reg == ZYDIS_REGISTER_EBP || reg == ZYDIS_REGISTER_BP;
}

bool is_bit_test(ZydisMnemonic m) {
  return m == ZYDIS_MNEMONIC_BT || m == ZYDIS_MNEMONIC_BTS || m == ZYDIS_MNEMONIC_BTR ||
         m == ZYDIS_MNEMONIC_BTC;
}

bool touches_no_memory(const Decoded& d) {
  switch (d.insn.meta.category) {
    case ZYDIS_CATEGORY_NOP:
    case ZYDIS_CATEGORY_WIDENOP:
    case ZYDIS_CATEGORY_PREFETCH:
    case ZYDIS_CATEGORY_PREFETCHWT1:
    case ZYDIS_CATEGORY_CLDEMOTE:
      return true;
    default:
      return d.insn.mnemonic == ZYDIS_MNEMONIC_NOP;
  }
}

// XSAVE and its variants write a state area whose size the decoder does not know (Zydis says
// 576: the legacy region and the header): on this processor, up to what CPUID leaf 0xD says the
// enabled state components take (sub-leaf 0 EBX; sub-leaf 1 EBX with the supervisor ones).
XsaveForm xsave_form(ZydisMnemonic m) {
  switch (m) {
    case ZYDIS_MNEMONIC_XSAVE:
    case ZYDIS_MNEMONIC_XSAVE64:
      return XsaveForm::kStandard;
    case ZYDIS_MNEMONIC_XSAVEOPT:
    case ZYDIS_MNEMONIC_XSAVEOPT64:
      return XsaveForm::kOptimized;
    case ZYDIS_MNEMONIC_XSAVEC:
    case ZYDIS_MNEMONIC_XSAVEC64:
    case ZYDIS_MNEMONIC_XSAVES:
    case ZYDIS_MNEMONIC_XSAVES64:
      return XsaveForm::kCompacted;
    default:
      return XsaveForm::kNone;
  }
}

bool is_xsave(ZydisMnemonic m) {
  return xsave_form(m) != XsaveForm::kNone;
}

std::uint32_t xsave_area_bytes() {
  static const std::uint32_t bytes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    std::uint32_t most = 0;
    if (__get_cpuid_count(0xd, 0, &a, &b, &c, &d)) most = b;
    if (__get_cpuid_count(0xd, 1, &a, &b, &c, &d))
      most = std::max(most, static_cast<std::uint32_t>(b));
    return most;
  }();
  return bytes;
}

// The memory operands of a decoded instruction, in Zydis operand order, with how to resolve each.
std::vector<MemSlot> mem_slots(const Decoded& d) {
  std::vector<MemSlot> slots;
  if (touches_no_memory(d)) return slots;
  const ZydisMnemonic mnemonic = d.insn.mnemonic;
  const auto category = d.insn.meta.category;
  for (int i = 0; i < d.insn.operand_count; ++i) {
    const ZydisDecodedOperand& op = d.ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
    if (op.mem.type == ZYDIS_MEMOP_TYPE_AGEN || op.mem.type == ZYDIS_MEMOP_TYPE_MIB) continue;
    const auto access = access_of(op.actions);
    if (!access) continue;
    MemSlot slot;
    slot.index = i;
    slot.op.access = *access;
    slot.op.size = op.size / 8;
    if (is_xsave(mnemonic)) slot.op.size = std::max(slot.op.size, xsave_area_bytes());
    const bool hidden_stack = op.visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
                              op.mem.segment == ZYDIS_REGISTER_SS &&
                              (is_stack_pointer(op.mem.base) || is_frame_pointer(op.mem.base));
    if (category == ZYDIS_CATEGORY_STRINGOP || category == ZYDIS_CATEGORY_IOSTRINGOP) {
      slot.kind = SlotKind::kString;
      slot.op.string_op = true;
      slot.op.rep = (d.insn.attributes &
                     (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) != 0;
    } else if (hidden_stack) {
      slot.op.stack = true;
      // Zydis reports the stack slot as [rsp]: pops read there, pushes write below it.
      if (*access != Access::kRead && is_stack_pointer(op.mem.base)) slot.kind = SlotKind::kPush;
    } else if (mnemonic == ZYDIS_MNEMONIC_XLAT) {
      slot.kind = SlotKind::kXlat;
    } else if (is_bit_test(mnemonic) && i == 0 && d.ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER) {
      slot.kind = SlotKind::kBitOffset;
    } else if (mnemonic == ZYDIS_MNEMONIC_POP && is_stack_pointer(op.mem.base)) {
      // POP m with an rsp base computes the address after incrementing rsp.
      slot.extra = d.insn.operand_width / 8;
    }
    if (mnemonic == ZYDIS_MNEMONIC_ENTER && slot.kind == SlotKind::kPush) {
      // ENTER size, level: push rbp, level-1 copied frame pointers, then the new frame pointer.
      const std::uint32_t word = slot.op.size;
      const std::uint32_t level = static_cast<std::uint32_t>(d.ops[1].imm.value.u) & 31;
      slot.op.size = word * (level == 0 ? 1 : level + 1);
      slots.push_back(slot);
      if (level >= 2) {
        MemSlot copied;
        copied.index = i;
        copied.kind = SlotKind::kEnterLevels;
        copied.op.access = Access::kRead;
        copied.op.size = word * (level - 1);
        copied.op.stack = true;
        slots.push_back(copied);
      }
      continue;
    }
    slots.push_back(slot);
  }
  return slots;
}

// base + index * scale + disp + extra, wrapped to the address size, plus the FS/GS base.
Result<std::uint64_t> operand_address(const Decoded& d, const ZydisDecodedOperand& op,
                                      const Regs& regs, std::uint64_t ip, std::int64_t extra) {
  const std::uint64_t next_ip = ip + d.insn.length;
  std::uint64_t address = static_cast<std::uint64_t>(op.mem.disp.value);
  if (op.mem.base != ZYDIS_REGISTER_NONE) {
    auto base = reg_value(op.mem.base, regs, next_ip);
    if (!base) {
      return make_error(ErrorCode::kOpNotSupp, std::string("insn: base register ") +
                                                   ZydisRegisterGetString(op.mem.base) +
                                                   " is not a general register");
    }
    address += *base;
  }
  if (op.mem.index != ZYDIS_REGISTER_NONE) {
    auto index = reg_value(op.mem.index, regs, next_ip);
    if (!index) {
      return make_error(ErrorCode::kOpNotSupp, std::string("insn: index register ") +
                                                   ZydisRegisterGetString(op.mem.index) +
                                                   " is not a general register");
    }
    address += *index * op.mem.scale;
  }
  address += static_cast<std::uint64_t>(extra);
  address &= width_mask(d.insn.address_width);
  return address + segment_base(op.mem.segment, regs);
}

// The byte displacement BT/BTS/BTR/BTC m, r add to the address: the signed bit offset in
// operand-sized units.
std::int64_t bit_offset_bytes(const Decoded& d, const Regs& regs, std::uint64_t ip) {
  const std::int64_t bits = d.insn.operand_width;
  auto value = reg_value(d.ops[1].reg.value, regs, ip + d.insn.length);
  if (!value || bits == 0) return 0;
  const auto offset = static_cast<std::int64_t>(sign_extend(*value, static_cast<unsigned>(bits)));
  const std::int64_t units = offset >= 0 ? offset / bits : -((-(offset + 1)) / bits) - 1;
  return units * (bits / 8);
}

Result<MemRef> resolve(const Decoded& d, const MemSlot& slot, const Regs& regs, std::uint64_t ip) {
  const ZydisDecodedOperand& op = d.ops[slot.index];
  MemRef ref;
  ref.access = slot.op.access;
  ref.size = slot.op.size;
  std::int64_t extra = slot.extra;
  switch (slot.kind) {
    case SlotKind::kPlain:
    case SlotKind::kString:
      break;
    case SlotKind::kPush:
      extra -= static_cast<std::int64_t>(slot.op.size);
      break;
    case SlotKind::kXlat:
      extra += static_cast<std::int64_t>(regs.rax & 0xff);
      break;
    case SlotKind::kBitOffset:
      extra += bit_offset_bytes(d, regs, ip);
      break;
    case SlotKind::kEnterLevels:
      ref.address = regs.rbp - slot.op.size;
      return ref;
  }
  auto address = operand_address(d, op, regs, ip, extra);
  if (!address) return std::unexpected(address.error());
  ref.address = *address;
  if (slot.kind == SlotKind::kString && slot.op.rep) {
    const std::uint64_t count = count_register(d, regs);
    const std::uint64_t element = slot.op.size;
    const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    ref.size = element != 0 && count > max / element ? max : count * element;
    if (count != 0 && (regs.eflags & kDf) != 0) ref.address -= (count - 1) * element;
  }
  return ref;
}

// ---- branches --------------------------------------------------------------------------------

BranchKind classify(const Decoded& d) {
  const ZydisMnemonic m = d.insn.mnemonic;
  const bool far = d.insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  const bool relative = d.ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && d.ops[0].imm.is_relative;
  switch (d.insn.meta.category) {
    case ZYDIS_CATEGORY_UNCOND_BR:
      if (far) return BranchKind::kFar;
      return relative ? BranchKind::kJump : BranchKind::kIndirectJump;
    case ZYDIS_CATEGORY_COND_BR:
      return BranchKind::kCondJump;
    case ZYDIS_CATEGORY_CALL:
      if (far) return BranchKind::kFar;
      return relative ? BranchKind::kCall : BranchKind::kIndirectCall;
    case ZYDIS_CATEGORY_RET:
      if (far || m == ZYDIS_MNEMONIC_IRET || m == ZYDIS_MNEMONIC_IRETD ||
          m == ZYDIS_MNEMONIC_IRETQ) {
        return BranchKind::kFar;
      }
      return BranchKind::kReturn;
    case ZYDIS_CATEGORY_SYSCALL:
      return BranchKind::kSyscall;
    case ZYDIS_CATEGORY_SYSRET:
      return BranchKind::kInterrupt;  // privileged: faults in user mode
    case ZYDIS_CATEGORY_INTERRUPT:
      if (m == ZYDIS_MNEMONIC_INT && d.ops[0].imm.value.u == 0x80) return BranchKind::kSyscall;
      return BranchKind::kInterrupt;
    default:
      break;
  }
  switch (m) {
    case ZYDIS_MNEMONIC_UD0:
    case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2:
    case ZYDIS_MNEMONIC_HLT:
      return BranchKind::kInterrupt;
    default:
      return BranchKind::kNone;
  }
}

bool is_loop(ZydisMnemonic m) {
  return m == ZYDIS_MNEMONIC_LOOP || m == ZYDIS_MNEMONIC_LOOPE || m == ZYDIS_MNEMONIC_LOOPNE;
}

// Whether a conditional branch is taken; nullopt for one whose outcome registers do not decide.
std::optional<bool> condition(const Decoded& d, const Regs& regs) {
  const std::uint64_t f = regs.eflags;
  const bool cf = (f & kCf) != 0;
  const bool pf = (f & kPf) != 0;
  const bool zf = (f & kZf) != 0;
  const bool sf = (f & kSf) != 0;
  const bool of = (f & kOf) != 0;
  const std::uint64_t count = count_register(d, regs);
  const std::uint64_t decremented = (count - 1) & width_mask(d.insn.address_width);
  switch (d.insn.mnemonic) {
    case ZYDIS_MNEMONIC_JO:
      return of;
    case ZYDIS_MNEMONIC_JNO:
      return !of;
    case ZYDIS_MNEMONIC_JB:
      return cf;
    case ZYDIS_MNEMONIC_JNB:
      return !cf;
    case ZYDIS_MNEMONIC_JZ:
      return zf;
    case ZYDIS_MNEMONIC_JNZ:
      return !zf;
    case ZYDIS_MNEMONIC_JBE:
      return cf || zf;
    case ZYDIS_MNEMONIC_JNBE:
      return !cf && !zf;
    case ZYDIS_MNEMONIC_JS:
      return sf;
    case ZYDIS_MNEMONIC_JNS:
      return !sf;
    case ZYDIS_MNEMONIC_JP:
      return pf;
    case ZYDIS_MNEMONIC_JNP:
      return !pf;
    case ZYDIS_MNEMONIC_JL:
      return sf != of;
    case ZYDIS_MNEMONIC_JNL:
      return sf == of;
    case ZYDIS_MNEMONIC_JLE:
      return zf || sf != of;
    case ZYDIS_MNEMONIC_JNLE:
      return !zf && sf == of;
    case ZYDIS_MNEMONIC_JRCXZ:
      return regs.rcx == 0;
    case ZYDIS_MNEMONIC_JECXZ:
      return (regs.rcx & 0xffffffff) == 0;
    case ZYDIS_MNEMONIC_JCXZ:
      return (regs.rcx & 0xffff) == 0;
    case ZYDIS_MNEMONIC_LOOP:
      return decremented != 0;
    case ZYDIS_MNEMONIC_LOOPE:
      return decremented != 0 && zf;
    case ZYDIS_MNEMONIC_LOOPNE:
      return decremented != 0 && !zf;
    default:
      return std::nullopt;  // xbegin: the transaction decides
  }
}

Result<std::uint64_t> direct_target(const Decoded& d, std::uint64_t ip) {
  ZyanU64 target = 0;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.insn, &d.ops[0], ip, &target))) {
    return make_error(ErrorCode::kInval, "insn: branch has no computable target");
  }
  return target;
}

Result<std::uint64_t> read_word(ReadWord read, void* context, std::uint64_t address, int size,
                                const char* what) {
  if (read == nullptr) {
    return make_error(ErrorCode::kInval,
                      std::string("read: needed to read ") + what + " at " + hex(address));
  }
  auto word = read(context, address, size);
  if (!word) {
    return std::unexpected(
        word.error().with_context(std::string("reading ") + what + " at " + hex(address)));
  }
  return *word & width_mask(static_cast<unsigned>(size) * 8);
}

std::string text_of(const Decoded& d, std::uint64_t ip) {
  ZydisFormatter formatter;
  if (!ZYAN_SUCCESS(ZydisFormatterInit(&formatter, ZYDIS_FORMATTER_STYLE_INTEL))) return {};
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_FORCE_SIZE, ZYAN_TRUE);
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_FORCE_RELATIVE_RIPREL, ZYAN_TRUE);
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE,
                            ZYDIS_PADDING_DISABLED);
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_DISP_PADDING, ZYDIS_PADDING_DISABLED);
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_IMM_PADDING, ZYDIS_PADDING_DISABLED);
  ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
  std::array<char, 256> buffer{};
  if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&formatter, &d.insn, d.ops.data(),
                                                    d.insn.operand_count_visible, buffer.data(),
                                                    buffer.size(), ip, nullptr))) {
    return {};
  }
  return std::string(buffer.data());
}

// MOV m, r / MOV m, imm with a general-purpose register source.
bool is_plain_store(const Decoded& d) {
  if (d.insn.mnemonic != ZYDIS_MNEMONIC_MOV || d.insn.operand_count_visible != 2) return false;
  if ((d.insn.attributes & ZYDIS_ATTRIB_HAS_LOCK) != 0) return false;
  const ZydisDecodedOperand& dst = d.ops[0];
  const ZydisDecodedOperand& src = d.ops[1];
  if (dst.type != ZYDIS_OPERAND_TYPE_MEMORY || dst.mem.type != ZYDIS_MEMOP_TYPE_MEM) return false;
  if (src.type == ZYDIS_OPERAND_TYPE_REGISTER) return is_gpr(src.reg.value);
  return src.type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
}

// MOV/MOVZX/MOVSX/MOVSXD r, m with a general-purpose destination.
bool is_plain_load(const Decoded& d) {
  switch (d.insn.mnemonic) {
    case ZYDIS_MNEMONIC_MOV:
    case ZYDIS_MNEMONIC_MOVZX:
    case ZYDIS_MNEMONIC_MOVSX:
    case ZYDIS_MNEMONIC_MOVSXD:
      break;
    default:
      return false;
  }
  if (d.insn.operand_count_visible != 2) return false;
  const ZydisDecodedOperand& dst = d.ops[0];
  const ZydisDecodedOperand& src = d.ops[1];
  return dst.type == ZYDIS_OPERAND_TYPE_REGISTER && is_gpr(dst.reg.value) &&
         src.type == ZYDIS_OPERAND_TYPE_MEMORY && src.mem.type == ZYDIS_MEMOP_TYPE_MEM;
}

}  // namespace

const char* branch_kind_name(BranchKind kind) {
  switch (kind) {
    case BranchKind::kNone:
      return "none";
    case BranchKind::kJump:
      return "jump";
    case BranchKind::kCondJump:
      return "cond";
    case BranchKind::kCall:
      return "call";
    case BranchKind::kIndirectJump:
      return "ind-jump";
    case BranchKind::kIndirectCall:
      return "ind-call";
    case BranchKind::kReturn:
      return "return";
    case BranchKind::kSyscall:
      return "syscall";
    case BranchKind::kInterrupt:
      return "interrupt";
    case BranchKind::kFar:
      return "far";
  }
  return "?";
}

Result<Insn> decode(std::span<const std::uint8_t> bytes, std::uint64_t ip) {
  if (bytes.empty()) return make_error(ErrorCode::kInval, "bytes: empty");
  Decoded d;
  const ZyanStatus status = decode_raw(bytes, &d);
  if (status == ZYDIS_STATUS_NO_MORE_DATA) {
    return make_error(ErrorCode::kInval, "bytes: " + byte_text(bytes) +
                                             " is the start of an instruction, not all of it");
  }
  if (!ZYAN_SUCCESS(status)) {
    return make_error(ErrorCode::kInval,
                      "bytes: " + byte_text(bytes) + " is not a valid x86-64 instruction");
  }
  Insn insn;
  insn.ip = ip;
  insn.length = d.insn.length;
  insn.branch = classify(d);
  if (insn.branch == BranchKind::kJump || insn.branch == BranchKind::kCondJump ||
      insn.branch == BranchKind::kCall) {
    auto target = direct_target(d, ip);
    if (!target) return std::unexpected(target.error());
    insn.target = *target;
  }
  for (const MemSlot& slot : mem_slots(d)) insn.mem.push_back(slot.op);
  insn.xsave = xsave_form(d.insn.mnemonic);
  insn.text = text_of(d, ip);
  insn.bytes.assign(bytes.begin(), bytes.begin() + d.insn.length);
  return insn;
}

bool is_rep_string(const Insn& insn) {
  return std::any_of(insn.mem.begin(), insn.mem.end(),
                     [](const MemOperand& m) { return m.string_op && m.rep; });
}

bool overwrites_address_register(const Insn& insn) {
  auto d = redecode(insn);
  if (!d) return false;
  const auto enclosing = [](ZydisRegister reg) {
    return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  };
  std::vector<ZydisRegister> address_regs;
  for (const MemSlot& slot : mem_slots(*d)) {
    if (slot.kind != SlotKind::kPlain || slot.op.stack) continue;
    const ZydisDecodedOperand& op = d->ops[slot.index];
    for (ZydisRegister reg : {op.mem.base, op.mem.index}) {
      if (reg != ZYDIS_REGISTER_NONE && is_gpr(reg)) address_regs.push_back(enclosing(reg));
    }
  }
  for (int i = 0; i < d->insn.operand_count; ++i) {
    const ZydisDecodedOperand& op = d->ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || !is_gpr(op.reg.value)) continue;
    if ((op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) == 0) continue;
    if (std::find(address_regs.begin(), address_regs.end(), enclosing(op.reg.value)) !=
        address_regs.end()) {
      return true;
    }
  }
  return false;
}

Result<std::vector<MemRef>> effective_addresses(const Insn& insn, const Regs& regs) {
  auto d = redecode(insn);
  if (!d) return std::unexpected(d.error());
  std::vector<MemRef> refs;
  for (const MemSlot& slot : mem_slots(*d)) {
    auto ref = resolve(*d, slot, regs, insn.ip);
    if (!ref) return std::unexpected(ref.error());
    refs.push_back(*ref);
  }
  return refs;
}

std::optional<EmulatedStore> emulate_store(const Insn& insn, const Regs& regs) {
  auto d = redecode(insn);
  if (!d || !is_plain_store(*d)) return std::nullopt;
  const ZydisDecodedOperand& dst = d->ops[0];
  const ZydisDecodedOperand& src = d->ops[1];
  auto address = operand_address(*d, dst, regs, insn.ip, 0);
  if (!address) return std::nullopt;
  EmulatedStore store;
  store.address = *address;
  store.size = dst.size / 8;
  if (src.type == ZYDIS_OPERAND_TYPE_REGISTER) {
    auto value = reg_value(src.reg.value, regs, insn.ip + insn.length);
    if (!value) return std::nullopt;
    store.value = *value;
  } else {
    // imm8/16/32 as encoded; MOV m64, imm32 sign-extends.
    store.value =
        src.imm.is_signed ? sign_extend(src.imm.value.u, d->insn.raw.imm[0].size) : src.imm.value.u;
  }
  store.value &= width_mask(store.size * 8);
  return store;
}

std::optional<LoadPlan> emulate_load(const Insn& insn, const Regs& regs) {
  auto d = redecode(insn);
  if (!d || !is_plain_load(*d)) return std::nullopt;
  auto address = operand_address(*d, d->ops[1], regs, insn.ip, 0);
  if (!address) return std::nullopt;
  return LoadPlan{*address, static_cast<std::uint32_t>(d->ops[1].size / 8)};
}

Result<void> apply_load(const Insn& insn, std::uint64_t loaded, Regs& regs) {
  auto d = redecode(insn);
  if (!d) return std::unexpected(d.error());
  if (!is_plain_load(*d)) {
    return make_error(ErrorCode::kInval, "insn: " + insn.text + " is not an emulated load");
  }
  const unsigned source_bits = d->ops[1].size;
  std::uint64_t value = loaded & width_mask(source_bits);
  if (d->insn.mnemonic == ZYDIS_MNEMONIC_MOVSX || d->insn.mnemonic == ZYDIS_MNEMONIC_MOVSXD) {
    value = sign_extend(value, source_bits);
  }
  if (!write_gpr(d->ops[0].reg.value, value, regs)) {
    return make_error(ErrorCode::kInval, "insn: " + insn.text + " has no general destination");
  }
  regs.rip = insn.ip + insn.length;
  return {};
}

Result<BranchOutcome> branch_outcome(const Insn& insn, const Regs& regs, ReadWord read,
                                     void* context) {
  auto d = redecode(insn);
  if (!d) return std::unexpected(d.error());
  const std::uint64_t next_ip = insn.ip + insn.length;
  const BranchKind kind = classify(*d);
  switch (kind) {
    case BranchKind::kJump:
    case BranchKind::kCall: {
      auto target = direct_target(*d, insn.ip);
      if (!target) return std::unexpected(target.error());
      return BranchOutcome{*target, true};
    }
    case BranchKind::kCondJump: {
      auto taken = condition(*d, regs);
      if (!taken) {
        return make_error(ErrorCode::kInval,
                          "insn: the outcome of " + insn.text + " is not decided by registers");
      }
      if (!*taken) return BranchOutcome{next_ip, false};
      auto target = direct_target(*d, insn.ip);
      if (!target) return std::unexpected(target.error());
      return BranchOutcome{*target, true};
    }
    case BranchKind::kIndirectJump:
    case BranchKind::kIndirectCall: {
      const ZydisDecodedOperand& op = d->ops[0];
      if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
        auto value = reg_value(op.reg.value, regs, next_ip);
        if (!value) {
          return make_error(ErrorCode::kInval, "insn: " + insn.text + " has no general register");
        }
        return BranchOutcome{*value, true};
      }
      auto address = operand_address(*d, op, regs, insn.ip, 0);
      if (!address) return std::unexpected(address.error());
      auto target = read_word(read, context, *address, op.size / 8, "the branch target");
      if (!target) return std::unexpected(target.error());
      return BranchOutcome{*target, true};
    }
    case BranchKind::kReturn: {
      auto target = read_word(read, context, regs.rsp, 8, "the return address");
      if (!target) return std::unexpected(target.error());
      return BranchOutcome{*target, true};
    }
    default:
      return make_error(ErrorCode::kInval, "insn: " + insn.text + " is a " +
                                               branch_kind_name(kind) +
                                               " instruction, not a branch the tracer follows");
  }
}

Result<std::optional<StackWrite>> apply_branch(const Insn& insn, const BranchOutcome& outcome,
                                               Regs& regs) {
  auto d = redecode(insn);
  if (!d) return std::unexpected(d.error());
  const std::uint64_t next_ip = insn.ip + insn.length;
  std::optional<StackWrite> push;
  switch (classify(*d)) {
    case BranchKind::kJump:
    case BranchKind::kIndirectJump:
      break;
    case BranchKind::kCondJump:
      if (is_loop(d->insn.mnemonic)) {
        // ECX under a 32-bit address size is written as a 32-bit register (upper half zeroed).
        regs.rcx = (count_register(*d, regs) - 1) & width_mask(d->insn.address_width);
      }
      break;
    case BranchKind::kCall:
    case BranchKind::kIndirectCall:
      regs.rsp -= 8;
      push = StackWrite{regs.rsp, next_ip};
      break;
    case BranchKind::kReturn: {
      std::uint64_t release = 8;
      if (d->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) release += d->ops[0].imm.value.u & 0xffff;
      regs.rsp += release;
      break;
    }
    default:
      return make_error(ErrorCode::kInval, "insn: " + insn.text + " is a " +
                                               branch_kind_name(classify(*d)) +
                                               " instruction, not a branch the tracer follows");
  }
  regs.rip = outcome.next;
  return push;
}

}  // namespace hwarb::x86

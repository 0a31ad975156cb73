// gdb's agent expressions: the bytecode interpreter for breakpoint conditions (agent_expr.h).
#include "hwarb/gdb/agent_expr.h"

#include <string>

#include "hwarb/gdb/rsp.h"

namespace hwarb::gdb {

namespace {

// Opcodes (gdb's ax.def numbering).
enum Op : std::uint8_t {
  kFloat = 0x01,
  kAdd = 0x02,
  kSub = 0x03,
  kMul = 0x04,
  kDivSigned = 0x05,
  kDivUnsigned = 0x06,
  kRemSigned = 0x07,
  kRemUnsigned = 0x08,
  kLsh = 0x09,
  kRshSigned = 0x0a,
  kRshUnsigned = 0x0b,
  kTrace = 0x0c,
  kTraceQuick = 0x0d,
  kLogNot = 0x0e,
  kBitAnd = 0x0f,
  kBitOr = 0x10,
  kBitXor = 0x11,
  kBitNot = 0x12,
  kEqual = 0x13,
  kLessSigned = 0x14,
  kLessUnsigned = 0x15,
  kExt = 0x16,
  kRef8 = 0x17,
  kRef16 = 0x18,
  kRef32 = 0x19,
  kRef64 = 0x1a,
  kRefFloat = 0x1b,
  kRefDouble = 0x1c,
  kRefLongDouble = 0x1d,
  kLToD = 0x1e,
  kDToL = 0x1f,
  kIfGoto = 0x20,
  kGoto = 0x21,
  kConst8 = 0x22,
  kConst16 = 0x23,
  kConst32 = 0x24,
  kConst64 = 0x25,
  kReg = 0x26,
  kEnd = 0x27,
  kDup = 0x28,
  kPop = 0x29,
  kZeroExt = 0x2a,
  kSwap = 0x2b,
  kGetv = 0x2c,
  kSetv = 0x2d,
  kTracev = 0x2e,
  kTracenz = 0x2f,
  kTrace16 = 0x30,
  kPick = 0x32,
  kRot = 0x33,
  kPrintf = 0x34,
};

std::unexpected<Error> bad(std::size_t pc, const std::string& what) {
  return make_error(ErrorCode::kInval,
                    "bytecode: " + what + " (at offset " + std::to_string(pc) + ")");
}

std::uint64_t sign_extend(std::uint64_t v, unsigned bits) {
  if (bits == 0 || bits >= 64) return v;
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  v &= mask;
  return (v ^ sign) - sign;
}

std::uint64_t zero_extend(std::uint64_t v, unsigned bits) {
  if (bits >= 64) return v;
  return v & ((std::uint64_t{1} << bits) - 1);
}

}  // namespace

Result<std::uint64_t> eval_agent_expr(std::span<const std::uint8_t> code,
                                      const AgentAccess& access) {
  std::vector<std::uint64_t> stack;
  std::size_t pc = 0;
  // The immediate of `n` bytes after the opcode at `pc`, big-endian.
  const auto immediate = [&](std::size_t n) -> Result<std::uint64_t> {
    if (pc + 1 + n > code.size()) return bad(pc, "an immediate runs past the end");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = (v << 8) | code[pc + 1 + i];
    return v;
  };
  const auto need = [&](std::size_t n) -> Result<void> {
    if (stack.size() < n) return bad(pc, "the stack underflows");
    return {};
  };
  const auto push = [&](std::uint64_t v) -> Result<void> {
    if (stack.size() >= kAgentStackMax) return bad(pc, "the stack overflows");
    stack.push_back(v);
    return {};
  };
  for (std::size_t steps = 0;; ++steps) {
    if (steps >= kAgentStepMax) return bad(pc, "more than a million instructions run");
    if (pc >= code.size()) return bad(pc, "the code ends without `end`");
    const std::uint8_t op = code[pc];
    std::size_t next = pc + 1;
    switch (op) {
      // Two operands, one result: a b => a op b.
      case kAdd:
      case kSub:
      case kMul:
      case kDivSigned:
      case kDivUnsigned:
      case kRemSigned:
      case kRemUnsigned:
      case kLsh:
      case kRshSigned:
      case kRshUnsigned:
      case kBitAnd:
      case kBitOr:
      case kBitXor:
      case kEqual:
      case kLessSigned:
      case kLessUnsigned: {
        if (auto r = need(2); !r) return std::unexpected(r.error());
        const std::uint64_t b = stack.back();
        stack.pop_back();
        const std::uint64_t a = stack.back();
        const auto sa = static_cast<std::int64_t>(a);
        const auto sb = static_cast<std::int64_t>(b);
        const bool divides =
            op == kDivSigned || op == kDivUnsigned || op == kRemSigned || op == kRemUnsigned;
        if (divides && b == 0) return bad(pc, "division by zero");
        std::uint64_t v = 0;
        switch (op) {
          case kAdd:
            v = a + b;
            break;
          case kSub:
            v = a - b;
            break;
          case kMul:
            v = a * b;
            break;
          // INT64_MIN / -1 overflows in C++: its two's-complement result is INT64_MIN itself.
          case kDivSigned:
            v = sb == -1 ? 0 - a : static_cast<std::uint64_t>(sa / sb);
            break;
          case kDivUnsigned:
            v = a / b;
            break;
          case kRemSigned:
            v = sb == -1 ? 0 : static_cast<std::uint64_t>(sa % sb);
            break;
          case kRemUnsigned:
            v = a % b;
            break;
          case kLsh:
            v = b >= 64 ? 0 : a << b;
            break;
          case kRshSigned:
            v = static_cast<std::uint64_t>(sa >> (b >= 64 ? 63 : b));
            break;
          case kRshUnsigned:
            v = b >= 64 ? 0 : a >> b;
            break;
          case kBitAnd:
            v = a & b;
            break;
          case kBitOr:
            v = a | b;
            break;
          case kBitXor:
            v = a ^ b;
            break;
          case kEqual:
            v = a == b;
            break;
          case kLessSigned:
            v = sa < sb;
            break;
          case kLessUnsigned:
            v = a < b;
            break;
          default:
            break;
        }
        stack.back() = v;
        break;
      }
      case kLogNot:
      case kBitNot:
        if (auto r = need(1); !r) return std::unexpected(r.error());
        stack.back() = op == kLogNot ? std::uint64_t{stack.back() == 0} : ~stack.back();
        break;
      case kExt:
      case kZeroExt: {
        auto bits = immediate(1);
        if (!bits) return std::unexpected(bits.error());
        if (auto r = need(1); !r) return std::unexpected(r.error());
        const auto n = static_cast<unsigned>(*bits);
        stack.back() = op == kExt ? sign_extend(stack.back(), n) : zero_extend(stack.back(), n);
        next = pc + 2;
        break;
      }
      case kRef8:
      case kRef16:
      case kRef32:
      case kRef64: {
        if (auto r = need(1); !r) return std::unexpected(r.error());
        const int size = 1 << (op - kRef8);
        auto v = access.memory(stack.back(), size);
        if (!v) return std::unexpected(v.error());
        stack.back() = *v;
        break;
      }
      case kIfGoto:
      case kGoto: {
        auto to = immediate(2);
        if (!to) return std::unexpected(to.error());
        bool jump = true;
        if (op == kIfGoto) {
          if (auto r = need(1); !r) return std::unexpected(r.error());
          jump = stack.back() != 0;
          stack.pop_back();
        }
        if (jump && *to >= code.size()) return bad(pc, "a jump leaves the code");
        next = jump ? static_cast<std::size_t>(*to) : pc + 3;
        break;
      }
      case kConst8:
      case kConst16:
      case kConst32:
      case kConst64: {
        const std::size_t n = std::size_t{1} << (op - kConst8);
        auto v = immediate(n);
        if (!v) return std::unexpected(v.error());
        if (auto r = push(*v); !r) return std::unexpected(r.error());
        next = pc + 1 + n;
        break;
      }
      case kReg: {
        auto regno = immediate(2);
        if (!regno) return std::unexpected(regno.error());
        auto v = access.reg(static_cast<int>(*regno));
        if (!v) return std::unexpected(v.error());
        if (auto r = push(*v); !r) return std::unexpected(r.error());
        next = pc + 3;
        break;
      }
      case kEnd:
        if (stack.empty()) return bad(pc, "`end` with an empty stack");
        return stack.back();
      case kDup:
        if (auto r = need(1); !r) return std::unexpected(r.error());
        if (auto r = push(stack.back()); !r) return std::unexpected(r.error());
        break;
      case kPop:
        if (auto r = need(1); !r) return std::unexpected(r.error());
        stack.pop_back();
        break;
      case kSwap:
        if (auto r = need(2); !r) return std::unexpected(r.error());
        std::swap(stack[stack.size() - 1], stack[stack.size() - 2]);
        break;
      case kRot: {
        // a b c => c a b
        if (auto r = need(3); !r) return std::unexpected(r.error());
        const std::size_t n = stack.size();
        const std::uint64_t c = stack[n - 1];
        stack[n - 1] = stack[n - 2];
        stack[n - 2] = stack[n - 3];
        stack[n - 3] = c;
        break;
      }
      case kPick: {
        auto depth = immediate(1);
        if (!depth) return std::unexpected(depth.error());
        if (auto r = need(static_cast<std::size_t>(*depth) + 1); !r) {
          return std::unexpected(r.error());
        }
        if (auto r = push(stack[stack.size() - 1 - *depth]); !r) return std::unexpected(r.error());
        next = pc + 2;
        break;
      }
      case kFloat:
      case kRefFloat:
      case kRefDouble:
      case kRefLongDouble:
      case kLToD:
      case kDToL:
        return make_error(ErrorCode::kNoSys, "bytecode: floating point is not evaluated here");
      case kTrace:
      case kTraceQuick:
      case kTracev:
      case kTracenz:
      case kTrace16:
      case kGetv:
      case kSetv:
        return make_error(ErrorCode::kNoSys,
                          "bytecode: trace collection and trace state variables are not served");
      case kPrintf:
        return make_error(ErrorCode::kNoSys, "bytecode: printf is not served");
      default:
        return bad(pc, "unknown opcode 0x" + hex_u64(op));
    }
    pc = next;
  }
}

Result<std::vector<AgentExpr>> parse_agent_conditions(std::string_view text) {
  std::vector<AgentExpr> out;
  // gdb writes one ';' and then its conditions back to back (";X3,..X5,.."), gdbserver also
  // takes a ';' before each: the first item needs its ';', the others may have one.
  bool first = true;
  while (!text.empty()) {
    if (text[0] == ';') {
      text.remove_prefix(1);
    } else if (first) {
      return make_error(ErrorCode::kInval,
                        "condition: expected ';' before '" + std::string(text.substr(0, 16)) + "'");
    }
    first = false;
    if (text.starts_with("cmds:")) break;  // commands run by the client
    if (text.empty() || text[0] != 'X') {
      return make_error(ErrorCode::kInval, "condition: expected 'X len,bytes'");
    }
    text.remove_prefix(1);
    const std::size_t comma = text.find(',');
    if (comma == std::string_view::npos) {
      return make_error(ErrorCode::kInval, "condition: no ',' after the length");
    }
    auto len = parse_hex_u64(text.substr(0, comma));
    if (!len) return make_error(ErrorCode::kInval, "condition: " + len.error().message());
    text.remove_prefix(comma + 1);
    if (*len > text.size() / 2) {
      return make_error(ErrorCode::kInval,
                        "condition: " + std::to_string(*len) + " bytes announced, fewer sent");
    }
    auto bytes = from_hex(text.substr(0, *len * 2));
    if (!bytes) return make_error(ErrorCode::kInval, "condition: " + bytes.error().message());
    out.push_back(std::move(*bytes));
    text.remove_prefix(*len * 2);
  }
  return out;
}

}  // namespace hwarb::gdb

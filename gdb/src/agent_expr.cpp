// gdb's agent expressions: the bytecode interpreter for breakpoint conditions (agent_expr.h).
#include "hwarb/gdb/agent_expr.h"

#include <cstdio>
#include <cstring>
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

// Runs `code` to its `end`: the top of the stack then, or 0 when `value` is false and the stack
// is empty (a command).
Result<std::uint64_t> run(std::span<const std::uint8_t> code, const AgentAccess& access,
                          bool value) {
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
        if (stack.empty() && !value) return 0;
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
      case kPrintf: {
        if (!access.print) return make_error(ErrorCode::kNoSys, "bytecode: printf is not served");
        // printf NARGS LEN FORMAT: the function and the channel on top, then the arguments.
        auto nargs = immediate(1);
        if (!nargs) return std::unexpected(nargs.error());
        if (pc + 4 > code.size()) return bad(pc, "an immediate runs past the end");
        const std::size_t len = (std::size_t{code[pc + 2]} << 8) | code[pc + 3];
        if (len == 0 || pc + 4 + len > code.size() || code[pc + 4 + len - 1] != 0) {
          return bad(pc, "a printf format that does not end in NUL in the code");
        }
        if (auto r = need(2 + *nargs); !r) return std::unexpected(r.error());
        stack.resize(stack.size() - 2);  // the function and the channel: the stub's output
        std::vector<std::uint64_t> args(stack.rbegin(), stack.rbegin() + *nargs);
        stack.resize(stack.size() - *nargs);
        const std::string_view format(reinterpret_cast<const char*>(&code[pc + 4]), len - 1);
        auto text = printf_agent_text(format, args, access);
        if (!text) return std::unexpected(text.error());
        access.print(*text);
        next = pc + 4 + len;
        break;
      }
      default:
        return bad(pc, "unknown opcode 0x" + hex_u64(op));
    }
    pc = next;
  }
}

}  // namespace

Result<std::uint64_t> eval_agent_expr(std::span<const std::uint8_t> code,
                                      const AgentAccess& access) {
  return run(code, access, true);
}

Result<void> run_agent_commands(std::span<const std::uint8_t> code, const AgentAccess& access) {
  auto r = run(code, access, false);
  if (!r) return std::unexpected(r.error());
  return {};
}

namespace {

std::unexpected<Error> bad_format(std::string_view why) {
  return make_error(ErrorCode::kInval, "format: " + std::string(why));
}

// One conversion of snprintf(3), its specification checked here (flags, width, precision,
// length, conversion): nothing else reaches the C library's format parser.
template <typename T>
std::string format_one(const std::string& spec, T value) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const int n = std::snprintf(nullptr, 0, spec.c_str(), value);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::snprintf(out.data(), out.size() + 1, spec.c_str(), value);
#pragma GCC diagnostic pop
  return out;
}

}  // namespace

Result<std::string> printf_agent_text(std::string_view format, std::span<const std::uint64_t> args,
                                      const AgentAccess& access) {
  std::string out;
  std::size_t next_arg = 0;
  std::size_t i = 0;
  while (i < format.size()) {
    const char c = format[i++];
    if (c == '\\') {
      if (i >= format.size()) return bad_format("a '\\' ends it");
      const char e = format[i++];
      // gdb's escapes: the letter after '\\', and the byte it stands for.
      static constexpr std::string_view kFrom = "\\\"abefnrtv", kTo = "\\\"\a\b\x1b\f\n\r\t\v";
      const std::size_t k = kFrom.find(e);
      if (k == std::string_view::npos) return bad_format(std::string("unknown escape \\") + e);
      out += kTo[k];
      continue;
    }
    if (c != '%') {
      out += c;
      continue;
    }
    if (i < format.size() && format[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    // %[flags][width][.precision][length]conversion
    std::string spec = "%";
    const auto take = [&](std::string_view set) {
      while (i < format.size() && set.find(format[i]) != std::string_view::npos)
        spec += format[i++];
    };
    take("-+ #0'");
    // A width and a precision of at most 4 digits: the text stays small.
    const std::size_t before_width = spec.size();
    take("0123456789");
    bool too_wide = spec.size() - before_width > 4;
    if (i < format.size() && format[i] == '.') {
      spec += format[i++];
      const std::size_t before_precision = spec.size();
      take("0123456789");
      too_wide = too_wide || spec.size() - before_precision > 4;
    }
    if (too_wide) return bad_format("a width or precision over 9999");
    std::string length;
    while (i < format.size() &&
           std::string_view("hlLqjzt").find(format[i]) != std::string_view::npos) {
      length += format[i++];
    }
    if (i >= format.size()) return bad_format("a conversion without its letter");
    const char conv = format[i++];
    if (next_arg >= args.size()) return bad_format("fewer arguments than conversions");
    const std::uint64_t arg = args[next_arg++];
    const bool known_length = length.empty() || length == "hh" || length == "h" || length == "l" ||
                              length == "ll" || length == "z" || length == "j" || length == "t";
    switch (conv) {
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X': {
        if (!known_length) return bad_format("length '" + length + "' is not served");
        const bool is_signed = conv == 'd' || conv == 'i';
        // Every integer as a 64-bit one, cut to the length's width first.
        std::uint64_t v = arg;
        if (length == "hh")
          v = is_signed ? static_cast<std::uint64_t>(static_cast<std::int8_t>(v))
                        : static_cast<std::uint8_t>(v);
        else if (length == "h")
          v = is_signed ? static_cast<std::uint64_t>(static_cast<std::int16_t>(v))
                        : static_cast<std::uint16_t>(v);
        else if (length.empty())
          v = is_signed ? static_cast<std::uint64_t>(static_cast<std::int32_t>(v))
                        : static_cast<std::uint32_t>(v);
        spec += "ll";
        spec += conv;
        out += is_signed ? format_one(spec, static_cast<long long>(v))
                         : format_one(spec, static_cast<unsigned long long>(v));
        break;
      }
      case 'c':
        if (!length.empty()) return bad_format("wide characters are not served");
        out += format_one(spec + 'c', static_cast<int>(static_cast<unsigned char>(arg)));
        break;
      case 's': {
        if (!length.empty()) return bad_format("wide strings are not served");
        if (!access.string) return bad_format("%s: strings cannot be read here");
        std::string text = "(null)";
        if (arg != 0) {
          auto s = access.string(arg);
          if (!s) return std::unexpected(s.error());
          text = std::move(*s);
        }
        out += format_one(spec + 's', text.c_str());
        break;
      }
      case 'p':
        if (!length.empty()) return bad_format("length '" + length + "' is not served");
        out +=
            format_one(spec + 'p', reinterpret_cast<const void*>(static_cast<std::uintptr_t>(arg)));
        break;
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
      case 'a':
      case 'A': {
        if (!length.empty() && length != "l") {
          return bad_format("length '" + length + "' is not served");
        }
        double d = 0;
        std::memcpy(&d, &arg, sizeof d);
        out += format_one(spec + conv, d);
        break;
      }
      default:
        return bad_format(std::string("conversion '%") + conv + "' is not served");
    }
  }
  return out;
}

namespace {

// One "X len,hex" item; `field` names the list in errors.
Result<AgentExpr> parse_one(std::string_view& text, const char* field) {
  if (text.empty() || text[0] != 'X') {
    return make_error(ErrorCode::kInval, std::string(field) + ": expected 'X len,bytes'");
  }
  text.remove_prefix(1);
  const std::size_t comma = text.find(',');
  if (comma == std::string_view::npos) {
    return make_error(ErrorCode::kInval, std::string(field) + ": no ',' after the length");
  }
  auto len = parse_hex_u64(text.substr(0, comma));
  if (!len) return make_error(ErrorCode::kInval, std::string(field) + ": " + len.error().message());
  text.remove_prefix(comma + 1);
  if (*len > text.size() / 2) {
    return make_error(ErrorCode::kInval, std::string(field) + ": " + std::to_string(*len) +
                                             " bytes announced, fewer sent");
  }
  auto bytes = from_hex(text.substr(0, *len * 2));
  if (!bytes)
    return make_error(ErrorCode::kInval, std::string(field) + ": " + bytes.error().message());
  text.remove_prefix(*len * 2);
  return std::move(*bytes);
}

}  // namespace

Result<PointAgent> parse_point_agent(std::string_view text) {
  PointAgent out;
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
    if (text.starts_with("cmds:")) {
      // cmds:PERSIST,X len,hexX len,hex...
      text.remove_prefix(5);
      const std::size_t comma = text.find(',');
      auto persist = parse_hex_u64(text.substr(0, comma));
      if (comma == std::string_view::npos || !persist) {
        return make_error(ErrorCode::kInval, "cmds: expected 'persist,' before the commands");
      }
      out.persist = *persist != 0;
      text.remove_prefix(comma + 1);
      while (!text.empty()) {
        auto cmd = parse_one(text, "cmds");
        if (!cmd) return std::unexpected(cmd.error());
        out.commands.push_back(std::move(*cmd));
      }
      return out;
    }
    auto cond = parse_one(text, "condition");
    if (!cond) return std::unexpected(cond.error());
    out.conditions.push_back(std::move(*cond));
  }
  return out;
}

}  // namespace hwarb::gdb

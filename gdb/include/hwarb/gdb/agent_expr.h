// hwarb/gdb/agent_expr.h — gdb's agent expressions: the bytecode in which gdb sends a
// breakpoint's condition to a stub that announced ConditionalBreakpoints+ (Z0/Z1 packets with
// ";X len,bytes" conditions), so that the stub reports the breakpoint only where its condition
// holds and a false condition costs no round trip to the client.
//
// The machine (gdb's "Agent Expressions" appendix; opcode numbers as in gdb's ax.def):
//
//   stack of 64-bit values, top on the right          code: bytes, jumps are offsets from 0
//   +-----+-----+-----+-----+                           +----+----+----+----+----+----+
//   |  a  |  b  | ... | top |  <- push / pop            | op | imm (big-endian) | op | ...
//   +-----+-----+-----+-----+                           +----+----+----+----+----+----+
//
//   Operands and immediates: const8/16/32/64 push their immediate zero-extended; reg N (16-bit
//   N, gdb's register number: gdb_regs.h) pushes the register; ref8/16/32/64 replace an address
//   with the bytes there, zero-extended; ext N / zero_ext N sign- or zero-extend the top from
//   its low N bits. Arithmetic a b => a op b (sub, div, rem, shifts and the comparisons take
//   `a` as the left operand): add sub mul div_signed div_unsigned rem_signed rem_unsigned lsh
//   rsh_signed rsh_unsigned bit_and bit_or bit_xor equal less_signed less_unsigned; log_not and
//   bit_not take one. Stack: dup pop swap (a b => b a) rot (a b c => c a b) pick N (copy the
//   item N below the top). Control: if_goto OFF (pop; jump when non-zero), goto OFF, end (the
//   top is the result). Output: printf NARGS LEN FORMAT (NARGS a byte, LEN 16 bits counting the
//   format's NUL) pops the function and the channel (0 both: the stub's own output), then NARGS
//   arguments, the first on top, and prints them as FORMAT says (printf_agent_text).
//
// Contract:
//  - eval_agent_expr runs `code` to its `end` and returns the top of the stack. Everything else
//    is an error, and nothing is changed by one (the expression only reads; a printf's text
//    may be out): EINVAL naming `bytecode` for an unknown or truncated instruction, a jump
//    outside the code, running off its end, a stack that underflows or grows past
//    kAgentStackMax, more than kAgentStepMax instructions (a loop), a division by zero, a
//    printf format that does not end in NUL or that printf_agent_text refuses; ENOSYS for what
//    a condition does not need and the stub does not serve (floating point, trace collection
//    and trace state variables, printf without an access.print); the access's own error for a
//    register or memory read.
//  - run_agent_commands runs a breakpoint's command (gdb's `dprintf-style agent`) the same way;
//    its stack may be empty at `end` (the command has no value).
//  - A stub that gets an error takes the condition as true (the breakpoint is reported and gdb
//    evaluates the condition itself), as gdbserver does.
//  - parse_point_agent takes the text after a Z packet's address and kind: zero or more
//    ";X len,hex" conditions (len in hex, the byte count of hex; gdb writes them back to back
//    after one ';'), then maybe ";cmds:P,X len,hexX len,hex..." (P 1: the commands persist
//    while the client is away). EINVAL naming `condition` or `cmds` for a malformed one; no
//    conditions is an unconditional breakpoint.
//  - printf_agent_text is gdbserver's printf of the agent: FORMAT with gdb's escapes (\n \t \"
//    \\ \a \b \e \f \r \v) and the C conversions d i u o x X c s p e f g a E G A and %%, with
//    flags, width, precision and length (hh h l ll z j t); %s reads the string at the argument's
//    address (access.string), a floating conversion takes the argument's 64 bits as a double.
//    EINVAL naming `format` for an escape, a conversion or a length it does not know (%n, %ls,
//    %Lf), a width or precision over 9999, or too few arguments.
// Thread-safety: pure functions; the access callbacks are called on the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::gdb {

inline constexpr std::size_t kAgentStackMax = 1024;
inline constexpr std::size_t kAgentStepMax = 1'000'000;

// How an expression reads the stopped thread it is evaluated for.
struct AgentAccess {
  std::function<Result<std::uint64_t>(int regno)> reg;
  // `size` bytes (1, 2, 4 or 8) at `addr`, little-endian, zero-extended.
  std::function<Result<std::uint64_t>(std::uint64_t addr, int size)> memory;
  // printf's %s: the NUL-terminated string at `addr` (without its NUL).
  std::function<Result<std::string>(std::uint64_t addr)> string;
  // Where printf's text goes; without one, printf is ENOSYS.
  std::function<void(std::string_view text)> print;
};

Result<std::uint64_t> eval_agent_expr(std::span<const std::uint8_t> code,
                                      const AgentAccess& access);

Result<void> run_agent_commands(std::span<const std::uint8_t> code, const AgentAccess& access);

Result<std::string> printf_agent_text(std::string_view format, std::span<const std::uint64_t> args,
                                      const AgentAccess& access);

using AgentExpr = std::vector<std::uint8_t>;

// What a Z0/Z1 packet carries besides its address: the conditions, and the commands to run
// where one holds (a breakpoint with commands is not reported: gdb's agent-style dprintf).
struct PointAgent {
  std::vector<AgentExpr> conditions;
  std::vector<AgentExpr> commands;
  bool persist = false;
};
Result<PointAgent> parse_point_agent(std::string_view text);

}  // namespace hwarb::gdb

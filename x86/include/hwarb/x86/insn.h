// hwarb/x86/insn.h — x86-64 instruction decoding (with Zydis) for the software paths of the
// real backend: the length and kind of an instruction, its memory operands and their effective
// addresses, the target of a branch, and the emulation of the plain loads, stores and branches
// that a tracer can perform itself instead of letting the tracee run them.
//
// Contract:
//  - Pure: no system calls, no global state; every function is thread-safe.
//  - decode() decodes one 64-bit-mode instruction from `bytes` (at most 15 are read) located at
//    `ip`. EINVAL naming `bytes` when they are not a valid instruction (or too few).
//  - Memory operands cover explicit ones and the implicit ones that touch memory: the stack
//    slot of push/pop/call/ret/enter/leave, the string operands of movs/stos/lods/scas/cmps
//    (the whole range a REP prefix covers, from RCX and the direction flag), and xchg/cmpxchg
//    (read-write). LEA and NOP-with-memory-operand forms do not access memory and have none.
//    Accesses through FS/GS add the segment base from Regs.
//  - The emulation helpers never guess: they return nullopt for any instruction outside the
//    listed forms, and the caller then single-steps it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/x86/xsave.h"

namespace hwarb::x86 {

// The general-purpose registers in the order of Linux's `struct user_regs_struct` (x86_64), so
// the real backend can copy PTRACE_GETREGS' buffer into it as is.
struct Regs {
  std::uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
  std::uint64_t rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ss;
  std::uint64_t fs_base, gs_base, ds, es, fs, gs;
  friend bool operator==(const Regs&, const Regs&) = default;
};
static_assert(sizeof(Regs) == 27 * 8);

enum class BranchKind : std::uint8_t {
  kNone,          // not a branch: execution continues at ip + length
  kJump,          // jmp rel
  kCondJump,      // jcc rel, jrcxz/jecxz, loop/loope/loopne
  kCall,          // call rel
  kIndirectJump,  // jmp r/m
  kIndirectCall,  // call r/m
  kReturn,        // ret, ret imm16
  kSyscall,       // syscall, sysenter, int 0x80
  kInterrupt,     // int3, int n (other than 0x80), into, ud2, hlt: the kernel decides
  kFar,           // far jmp/call/ret, iret: not followed
};
const char* branch_kind_name(BranchKind kind);  // "jump", "cond", "call", "ind-jump", ...

enum class Access : std::uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };

// One memory operand in register form (before the registers are known).
struct MemOperand {
  Access access = Access::kRead;
  std::uint32_t size = 0;  // bytes per element (for string operations: per iteration)
  bool string_op = false;  // movs/stos/lods/scas/cmps: the range depends on RCX (if REP) and DF
  bool rep = false;        // a REP/REPE/REPNE prefix
  bool stack = false;      // an implicit stack slot (push, pop, call, ret, ...)
};

// A memory operand with its effective address resolved against Regs.
struct MemRef {
  std::uint64_t address = 0;
  std::uint64_t size = 0;  // the whole range (a REP string operation: RCX elements)
  Access access = Access::kRead;
  friend bool operator==(const MemRef&, const MemRef&) = default;
};

struct Insn {
  std::uint64_t ip = 0;
  std::uint8_t length = 0;
  BranchKind branch = BranchKind::kNone;
  // The target of a direct branch (kJump, kCondJump, kCall); nullopt otherwise.
  std::optional<std::uint64_t> target;
  std::vector<MemOperand> mem;
  std::string text;  // Intel syntax, e.g. "mov dword ptr [rip+0x2edb], 0x5"
  // XSAVE, XSAVEOPT, XSAVEC (XSAVES as XSAVEC): its one memory operand is the whole enabled
  // state area; xsave_written() tells which bytes of it one execution wrote.
  XsaveForm xsave = XsaveForm::kNone;
  // Decoder state kept for effective_addresses() and the emulation helpers (opaque to callers).
  std::vector<std::uint8_t> bytes;
};

Result<Insn> decode(std::span<const std::uint8_t> bytes, std::uint64_t ip);

// The memory the instruction touches when executed with `regs` (rip = insn.ip), in operand order
// (one MemRef per entry of insn.mem). A push-like slot is the one below rsp (push: [rsp-size],
// call: [rsp-8]); a pop-like one is at rsp (leave: at rbp). A REP string operand covers RCX
// (ECX under a 67h prefix) elements upwards from rsi/rdi, or downwards ending at them when DF
// (eflags bit 10) is set; with RCX = 0 it is kept, with size 0, at rsi/rdi, so operands never
// shift position; REPE/REPNE give the largest range (the comparison may stop earlier).
// BT/BTS/BTR/BTC m, r include the register's bit offset; XLAT reads [rbx + al].
// EINVAL naming `insn` when it was not made by decode(); EOPNOTSUPP when an address depends on
// registers outside Regs (a vector index, VSIB).
Result<std::vector<MemRef>> effective_addresses(const Insn& insn, const Regs& regs);

// Whether executing `insn` overwrites a general-purpose register that the address of one of its
// plain memory operands is computed from (`mov edi, [rdi]`, `movzx eax, byte ptr [rax+rcx]`):
// effective_addresses() with the registers after the instruction then names another address.
// Implicit stack slots and string operands (whose registers move by rule) are not counted.
// false for an instruction not made by decode().
bool overwrites_address_register(const Insn& insn);

// Whether `insn` is a string instruction under a REP/REPE/REPNE prefix: it runs one iteration
// per element (RCX of them), and a single-step or an interrupt stops it between iterations.
bool is_rep_string(const Insn& insn);

// A store the tracer can do itself: MOV m, r / MOV m, imm (8/16/32/64 bits, no segment other
// than FS/GS bases, no lock). Performing it = write `size` bytes of `value` (little-endian) at
// `address` and set rip to ip + length; no flags change.
struct EmulatedStore {
  std::uint64_t address = 0;
  std::uint32_t size = 0;
  std::uint64_t value = 0;
};
std::optional<EmulatedStore> emulate_store(const Insn& insn, const Regs& regs);

// A load the tracer can do itself: MOV r, m; MOVZX/MOVSX/MOVSXD r, m (general-purpose
// destinations only). load_address() gives what to read; apply_load() writes the destination
// register with the hardware's rules (32-bit destinations zero the upper half, 8/16-bit ones
// keep the rest, zero/sign extension) and sets rip to ip + length.
struct LoadPlan {
  std::uint64_t address = 0;
  std::uint32_t size = 0;
};
std::optional<LoadPlan> emulate_load(const Insn& insn, const Regs& regs);
Result<void> apply_load(const Insn& insn, std::uint64_t loaded, Regs& regs);

// Reads `size` bytes (1..8) of tracee memory at `address`, little-endian.
using ReadWord = Result<std::uint64_t> (*)(void* context, std::uint64_t address, int size);

// Where a branch goes when executed with `regs`: the next rip and whether the branch is taken
// (a not-taken conditional branch goes to ip + length). Covers kJump, kCondJump (flags from
// regs.eflags, RCX for jrcxz/loop, evaluated with RCX - 1 for loop), kCall, kIndirectJump,
// kIndirectCall (register or memory operand, read with `read`), kReturn (the word at rsp).
// EINVAL naming `insn` for other kinds and for xbegin (a kCondJump the transaction decides);
// EINVAL naming `read` when a word must be read and `read` is null; `read`'s errors as they are,
// with context.
struct BranchOutcome {
  std::uint64_t next = 0;
  bool taken = false;
};
Result<BranchOutcome> branch_outcome(const Insn& insn, const Regs& regs, ReadWord read,
                                     void* context);

// Performs a branch on `regs` as the CPU would, given its outcome: rip = next; a call pushes
// the return address (the caller writes the 8 bytes `push_value` at `push_address` =
// the new rsp); ret pops (rsp += 8 + imm16); loop decrements RCX (ECX under a 67h prefix,
// written as a 32-bit register). Returns the stack write a call needs (nullopt for other kinds).
// EINVAL naming `insn` for the kinds branch_outcome() rejects; regs is then unchanged.
struct StackWrite {
  std::uint64_t address = 0;
  std::uint64_t value = 0;
};
Result<std::optional<StackWrite>> apply_branch(const Insn& insn, const BranchOutcome& outcome,
                                               Regs& regs);

}  // namespace hwarb::x86

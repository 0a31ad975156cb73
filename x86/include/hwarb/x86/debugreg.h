// hwarb/x86/debugreg.h — the x86 debug registers DR0–DR3, DR6 and DR7 as pure functions.
//
// Everything here is constexpr and side-effect free: it only encodes and decodes bit layouts
// (Intel SDM vol. 3, "Debug Registers"; the names follow Linux's asm/debugreg.h). The breakpoint
// PMU, the simulated machine and the ptrace emulation build on these; none of them touches a
// bit by hand.
//
// DR7 (debug control), low 32 bits; bits 32–63 are reserved (zero):
//
//   31  30  29  28  27  26  25  24  23  22  21  20  19  18  17  16
//  +-------+-------+-------+-------+-------+-------+-------+-------+
//  | LEN3  |  RW3  | LEN2  |  RW2  | LEN1  |  RW1  | LEN0  |  RW0  |
//  +-------+-------+-------+-------+-------+-------+-------+-------+
//
//   15  14  13  12  11  10  9   8   7   6   5   4   3   2   1   0
//  +---+---+---+---+---+---+---+---+---+---+---+---+---+---+---+---+
//  | 0 | 0 |GD | 0 |RTM| 1 |GE |LE |G3 |L3 |G2 |L2 |G1 |L1 |G0 |L0 |
//  +---+---+---+---+---+---+---+---+---+---+---+---+---+---+---+---+
//
//   Ln/Gn  local/global enable of slot n (bit 2n / 2n+1); a slot is armed if either is set
//   LE/GE  exact-breakpoint enables (legacy; Linux sets GE, DR_GLOBAL_SLOWDOWN = 0x200)
//   RWn    00 execute, 01 data write, 10 I/O (needs CR4.DE; Linux refuses it), 11 data read/write
//   LENn   00 1 byte, 01 2 bytes, 10 8 bytes (64-bit only), 11 4 bytes; execute needs 00
//   GD     general detect (fault on a debug-register access); RTM  TSX debugging; bit 10 reads 1
//   bits 10–15 are what Linux calls DR_CONTROL_RESERVED (0xfc00) and drops from ptrace writes
//
// DR6 (debug status), low 32 bits:
//
//   31 ... 17 16 15 14 13 12 11 10 ... 4  3  2  1  0
//  +---------+--+--+--+--+--+--+---------+--+--+--+--+
//  |  1 ... 1| 1|BT|BS|BD| 0| 1| 1 ... 1 |B3|B2|B1|B0|
//  +---------+--+--+--+--+--+--+---------+--+--+--+--+
//
//   Bn  slot n's condition was met; BD debug-register access detected; BS single step; BT task
//   switch. The bits shown as 1 read as 1 when nothing happened: 0xffff0ff0 (Linux DR6_RESERVED;
//   bit 11 BLD and bit 16 RTM are active-low). hwarb stores DR6 with "set means happened"
//   polarity and converts with to_hardware/from_hardware (XOR with that constant).
#pragma once

#include <cstdint>
#include <optional>

namespace hwarb::x86 {

inline constexpr int kSlots = 4;

// The RWn field.
enum class DrType : std::uint8_t { kExecute = 0b00, kWrite = 0b01, kIo = 0b10, kReadWrite = 0b11 };
// The LENn field.
enum class DrLen : std::uint8_t { k1 = 0b00, k2 = 0b01, k8 = 0b10, k4 = 0b11 };

// Bytes covered by a LEN encoding: 1, 2, 8 or 4.
constexpr int len_bytes(DrLen len) {
  switch (len) {
    case DrLen::k1:
      return 1;
    case DrLen::k2:
      return 2;
    case DrLen::k8:
      return 8;
    case DrLen::k4:
      return 4;
  }
  return 0;
}

// The LEN encoding of a byte count; none for anything but 1, 2, 4 and (when `has_len8`) 8.
constexpr std::optional<DrLen> len_from_bytes(int bytes, bool has_len8 = true) {
  switch (bytes) {
    case 1:
      return DrLen::k1;
    case 2:
      return DrLen::k2;
    case 4:
      return DrLen::k4;
    case 8:
      if (has_len8) return DrLen::k8;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

namespace dr7 {

inline constexpr std::uint64_t kLocalExact = 1u << 8;      // LE
inline constexpr std::uint64_t kGlobalExact = 1u << 9;     // GE (Linux: DR_GLOBAL_SLOWDOWN)
inline constexpr std::uint64_t kGeneralDetect = 1u << 13;  // GD
inline constexpr std::uint64_t kReserved = 0xfc00;         // Linux DR_CONTROL_RESERVED
inline constexpr int kControlShift = 16;                   // Linux DR_CONTROL_SHIFT
inline constexpr int kControlSize = 4;                     // Linux DR_CONTROL_SIZE

constexpr std::uint64_t local_bit(int slot) {
  return std::uint64_t{1} << (2 * slot);
}
constexpr std::uint64_t global_bit(int slot) {
  return std::uint64_t{1} << (2 * slot + 1);
}
constexpr std::uint64_t enable_bits(int slot) {
  return local_bit(slot) | global_bit(slot);
}
constexpr int control_shift(int slot) {
  return kControlShift + slot * kControlSize;
}
constexpr std::uint64_t control_mask(int slot) {
  return std::uint64_t{0xf} << control_shift(slot);
}

constexpr bool local_enabled(std::uint64_t dr7, int slot) {
  return (dr7 & local_bit(slot)) != 0;
}
constexpr bool global_enabled(std::uint64_t dr7, int slot) {
  return (dr7 & global_bit(slot)) != 0;
}
// Armed: either enable bit is set (what ptrace's DR7 decoding and the hardware both use).
constexpr bool enabled(std::uint64_t dr7, int slot) {
  return (dr7 & enable_bits(slot)) != 0;
}
constexpr DrType type(std::uint64_t dr7, int slot) {
  return static_cast<DrType>((dr7 >> control_shift(slot)) & 0b11);
}
constexpr DrLen len(std::uint64_t dr7, int slot) {
  return static_cast<DrLen>((dr7 >> (control_shift(slot) + 2)) & 0b11);
}
constexpr bool global_exact(std::uint64_t dr7) {
  return (dr7 & kGlobalExact) != 0;
}
constexpr bool general_detect(std::uint64_t dr7) {
  return (dr7 & kGeneralDetect) != 0;
}
constexpr bool any_enabled(std::uint64_t dr7) {
  return (dr7 & 0xff) != 0;
}

// Linux's __encode_dr7(slot, len, type): the slot's control nibble, its global enable bit, and
// GE. This is the exact set of bits the breakpoint driver ORs in on install.
constexpr std::uint64_t encode_slot(int slot, DrType type, DrLen len) {
  std::uint64_t nibble = static_cast<std::uint64_t>(type) | (static_cast<std::uint64_t>(len) << 2);
  return (nibble << control_shift(slot)) | global_bit(slot) | kGlobalExact;
}

// DR7 with `slot` armed (global enable) as type/len, replacing whatever the slot had.
constexpr std::uint64_t install(std::uint64_t dr7, int slot, DrType type, DrLen len) {
  return (dr7 & ~(control_mask(slot) | enable_bits(slot))) | encode_slot(slot, type, len);
}

// DR7 with `slot` disarmed and its control nibble cleared. GE stays while another slot is armed
// and is cleared with the last one, so DR7 is a function of the armed slots alone and an empty
// DR7 is exactly 0. (Linux's uninstall clears GE on every uninstall, because __encode_dr7
// includes it, and the next install sets it again; GE is ignored by every processor since the
// P6, so the difference is only visible in the register image.)
constexpr std::uint64_t uninstall(std::uint64_t dr7, int slot) {
  std::uint64_t v = dr7 & ~(control_mask(slot) | enable_bits(slot));
  if (!any_enabled(v)) v &= ~(kGlobalExact | kLocalExact);
  return v;
}

// A ptrace write of DR7 drops the reserved bits 10–15 (as Linux's ptrace_write_dr7).
constexpr std::uint64_t drop_reserved(std::uint64_t dr7) {
  return dr7 & ~kReserved;
}

}  // namespace dr7

namespace dr6 {

// The bits that read as 1 when nothing happened (Linux DR6_RESERVED).
inline constexpr std::uint64_t kHardwareInit = 0xffff0ff0;
inline constexpr std::uint64_t kTrapMask = 0xf;          // B0–B3
inline constexpr std::uint64_t kDebugAccess = 1u << 13;  // BD
inline constexpr std::uint64_t kSingleStep = 1u << 14;   // BS
inline constexpr std::uint64_t kTaskSwitch = 1u << 15;   // BT

constexpr std::uint64_t trap_bit(int slot) {
  return std::uint64_t{1} << slot;
}
// On a "set means happened" value.
constexpr bool trapped(std::uint64_t happened, int slot) {
  return (happened & trap_bit(slot)) != 0;
}
constexpr bool single_stepped(std::uint64_t happened) {
  return (happened & kSingleStep) != 0;
}

// Converts between "set means happened" and what the register (or ptrace) shows.
constexpr std::uint64_t to_hardware(std::uint64_t happened) {
  return happened ^ kHardwareInit;
}
constexpr std::uint64_t from_hardware(std::uint64_t raw) {
  return raw ^ kHardwareInit;
}

}  // namespace dr6

// Does a data access of `access_len` bytes at `access` touch the range a data breakpoint at
// `dr` with `len` bytes watches? The hardware ignores the low address bits below the length, so
// the watched range is [dr & ~(len-1), +len). Both ranges are half-open; no wrap-around.
constexpr bool data_match(std::uint64_t dr, DrLen len, std::uint64_t access, int access_len) {
  const std::uint64_t n = static_cast<std::uint64_t>(len_bytes(len));
  const std::uint64_t lo = dr & ~(n - 1);
  const std::uint64_t hi = lo + n;
  return access_len > 0 && access < hi && lo < access + static_cast<std::uint64_t>(access_len);
}

// An execute breakpoint fires on an instruction fetch at exactly DRn.
constexpr bool exec_match(std::uint64_t dr, std::uint64_t ip) {
  return dr == ip;
}

}  // namespace hwarb::x86

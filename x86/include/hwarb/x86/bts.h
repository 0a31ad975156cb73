// hwarb/x86/bts.h — the Branch Trace Store as pure functions: BTS records, the DS save area's
// buffer management fields and the BTS bits of IA32_DEBUGCTL.
//
// Contract: everything here is side-effect free and, except where an error message has to be
// built, constexpr. Records and the DS area are read and written as explicit little-endian bytes
// through std::span (no reinterpret_cast, no host-endianness assumption), so the byte images are
// exactly the ones the processor reads and writes (Intel SDM vol. 3, "BTS and DS Save Area";
// names follow Linux's struct debug_store and asm/msr-index.h). Fallible functions return
// hwarb::Result with ErrorCode::kInval and a message that starts with the offending field.
// The BTS PMU, the simulated machine and the ptrace emulation build on these; none of them
// touches a byte or bit of these structures by hand.
//
// Formats. The 64-bit format (IA-32e mode, and processors that report DTES64) has 8-byte DS
// fields and 24-byte records; the 32-bit format has 4-byte DS fields and 12-byte records. A
// processor uses one format for both, so BtsFormat selects both.
//
// BTS record, 64-bit format (24 bytes):          32-bit format (12 bytes):
//
//          63                          5  4 3  0          31                 5  4 3  0
//         +-----------------------------------+          +------------------------+
//   0x00  |  branch from (linear address)     |    0x00  |  branch from           |
//         +-----------------------------------+          +------------------------+
//   0x08  |  branch to   (linear address)     |    0x04  |  branch to             |
//         +-----------------------------+--+--+          +------------------+--+--+
//   0x10  |  reserved                   | P|rs|    0x08  |  reserved        | P|rs|
//         +-----------------------------+--+--+          +------------------+--+--+
//
//   P (bit 4 of the flags word) is "branch predicted"; bits 0–3 (rs) and 5 up are reserved.
//   encode writes the flags word as exactly P; decode reads P and ignores the reserved bits.
//   The 32-bit format holds 32-bit addresses. encode refuses (kInval, nothing written) a record
//   whose from or to does not fit instead of silently truncating it, so decode(encode(r)) == r
//   whenever encode succeeds; a caller that wants the EIP a 32-bit processor would have written
//   asks for it explicitly with bts::truncated.
//
// DS save area, buffer management part (pointed to by IA32_DS_AREA):
//
//   32-bit  64-bit
//   0x00    0x00    bts_buffer_base           first byte of the BTS buffer
//   0x04    0x08    bts_index                 where the next record will be written
//   0x08    0x10    bts_absolute_maximum      one byte past the last record of the buffer
//   0x0c    0x18    bts_interrupt_threshold   the record address at which the PMI is raised
//   0x10    0x20    pebs_buffer_base
//   0x14    0x28    pebs_index
//   0x18    0x30    pebs_absolute_maximum
//   0x1c    0x38    pebs_interrupt_threshold
//   0x20    0x40    pebs_counter_reset[0]     the 32-bit form holds this one reset value only
//           0x48    pebs_counter_reset[1] ... [7] at 0x40 + 8 n (Linux's pebs_event_reset[])
//   0x24    0x80    end of what encode/decode read and write
//
//   The SDM calls the counter reset a 40-bit value; the 32-bit form keeps 32 bits of it at
//   0x20–0x23 (the SDM figure's next field starts at 0x24; Linux's ptrace_bts_ds_32 has a u32).
//   Resets of fixed counters (adaptive PEBS, from 0x80) are not modelled.
//
// The BTS buffer rules (what the processor does, and what the helpers below compute):
//   - records held  = (bts_index - bts_buffer_base) / record_size, rounded down (a misaligned
//     index does not count its partial record; an index at or below the base holds none);
//   - full          = the next record would not fit: bts_index + record_size >
//     bts_absolute_maximum. On a valid area (validate_bts) this is exactly
//     bts_index >= bts_absolute_maximum, the test Linux uses. With BTINT clear the processor
//     then wraps (bts_index back to bts_buffer_base, oldest records overwritten); with BTINT
//     set it stores nothing more until software moves the index (what Linux's intel_bts
//     assumes: it counts an index at the maximum as lost records);
//   - threshold     = bts_index >= bts_interrupt_threshold; with BTINT set the PMI is raised when
//     a store makes this true. A threshold above the absolute maximum is never reached: the SDM
//     requires that (not only BTINT clear) to run a circular buffer without interrupts, and
//     Linux does it (ptrace: maximum + 1; intel_bts snapshot mode: maximum + one record).
//
// IA32_DEBUGCTL (Core and later; the NetBurst MSR_DEBUGCTLA has TR at bit 2, BTS 3, BTINT 4,
// BTS_OFF_OS 5, BTS_OFF_USR 6 and is not modelled):
//
//   63 ...  12 11 10  9  8  7  6  5 ... 2  1  0
//  +----------+--+--+--+--+--+--+--------+--+--+
//  |    -     |FL|OU|OO|BI|BS|TR|   -    |BF|LB|
//  +----------+--+--+--+--+--+--+--------+--+--+
//
//   LB  LBR: record the last branch in the LBR stack     BF  BTF: single-step on branches
//   TR  branch trace messages on                         BS  BTS: store the messages in the BTS
//   BI  BTINT: PMI at the threshold (clear: circular)         buffer (needs TR)
//   OO  BTS_OFF_OS: do not store branches at CPL 0       OU  BTS_OFF_USR: nor at CPL > 0
//   FL  FREEZE_LBRS_ON_PMI
//   Bits marked - are other features (or reserved); the functions here leave them untouched.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/base/format.h"

namespace hwarb::x86 {

// The record and DS field width the processor uses.
enum class BtsFormat : std::uint8_t { k32, k64 };

// One branch record, independent of the format.
struct BtsRecord {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  bool predicted = false;

  friend constexpr bool operator==(const BtsRecord&, const BtsRecord&) = default;
};

// The DS save area's buffer management fields, independent of the format.
struct DsArea {
  static constexpr int kCounterResets = 8;

  std::uint64_t bts_buffer_base = 0;
  std::uint64_t bts_index = 0;
  std::uint64_t bts_absolute_maximum = 0;
  std::uint64_t bts_interrupt_threshold = 0;
  std::uint64_t pebs_buffer_base = 0;
  std::uint64_t pebs_index = 0;
  std::uint64_t pebs_absolute_maximum = 0;
  std::uint64_t pebs_interrupt_threshold = 0;
  std::array<std::uint64_t, kCounterResets> pebs_counter_reset{};

  friend constexpr bool operator==(const DsArea&, const DsArea&) = default;
};

// The DS fields in their order in memory; kPebsCounterReset is pebs_counter_reset[0].
enum class DsField : std::uint8_t {
  kBtsBufferBase,
  kBtsIndex,
  kBtsAbsoluteMaximum,
  kBtsInterruptThreshold,
  kPebsBufferBase,
  kPebsIndex,
  kPebsAbsoluteMaximum,
  kPebsInterruptThreshold,
  kPebsCounterReset,
};

namespace detail {

// Bytes of one field (record word or DS field) in a format.
constexpr std::size_t word_size(BtsFormat format) {
  return format == BtsFormat::k32 ? 4 : 8;
}

constexpr bool fits(std::uint64_t value, std::size_t width) {
  return width >= 8 || (value >> (8 * width)) == 0;
}

constexpr void store_le(std::span<std::byte> out, std::size_t at, std::size_t width,
                        std::uint64_t value) {
  for (std::size_t i = 0; i < width; ++i) {
    out[at + i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  }
}

constexpr std::uint64_t load_le(std::span<const std::byte> in, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    value |= std::to_integer<std::uint64_t>(in[at + i]) << (8 * i);
  }
  return value;
}

inline std::string format_name(BtsFormat format) {
  return format == BtsFormat::k32 ? "32-bit" : "64-bit";
}

}  // namespace detail

namespace bts {

inline constexpr std::uint64_t kPredicted = 1u << 4;  // in the flags word

// Bytes of one record: 12 or 24 (Linux BTS_RECORD_SIZE is the 64-bit one).
constexpr std::size_t record_size(BtsFormat format) {
  return 3 * detail::word_size(format);
}
constexpr std::size_t from_offset(BtsFormat) {
  return 0;
}
constexpr std::size_t to_offset(BtsFormat format) {
  return detail::word_size(format);
}
constexpr std::size_t flags_offset(BtsFormat format) {
  return 2 * detail::word_size(format);
}

// The flags word of a record.
constexpr std::uint64_t flags(const BtsRecord& record) {
  return record.predicted ? kPredicted : 0;
}
constexpr bool predicted(std::uint64_t flags) {
  return (flags & kPredicted) != 0;
}

// Can `record` be written in `format` without losing address bits?
constexpr bool fits(BtsFormat format, const BtsRecord& record) {
  const std::size_t w = detail::word_size(format);
  return detail::fits(record.from, w) && detail::fits(record.to, w);
}

// The record as a processor of `format` would have written it: addresses cut to the format's
// width (a 32-bit processor records a 32-bit EIP).
constexpr BtsRecord truncated(BtsFormat format, const BtsRecord& record) {
  if (format == BtsFormat::k64) return record;
  return {record.from & 0xffffffffu, record.to & 0xffffffffu, record.predicted};
}

// Writes `record` into out[0, record_size). kInval when `out` is shorter or an address does not
// fit the format; nothing is written then.
HWARB_CONSTEXPR_RESULT Result<void> encode(BtsFormat format, const BtsRecord& record,
                                           std::span<std::byte> out) {
  const std::size_t w = detail::word_size(format);
  if (out.size() < record_size(format)) {
    return make_error(ErrorCode::kInval, "out: " + std::to_string(out.size()) +
                                             " bytes, a record needs " +
                                             std::to_string(record_size(format)));
  }
  if (!detail::fits(record.from, w)) {
    return make_error(ErrorCode::kInval, "from: " + hex(record.from) + " does not fit the " +
                                             detail::format_name(format) + " format");
  }
  if (!detail::fits(record.to, w)) {
    return make_error(ErrorCode::kInval, "to: " + hex(record.to) + " does not fit the " +
                                             detail::format_name(format) + " format");
  }
  detail::store_le(out, from_offset(format), w, record.from);
  detail::store_le(out, to_offset(format), w, record.to);
  detail::store_le(out, flags_offset(format), w, flags(record));
  return {};
}

// Reads the record at in[0, record_size). kInval when `in` is shorter.
HWARB_CONSTEXPR_RESULT Result<BtsRecord> decode(BtsFormat format, std::span<const std::byte> in) {
  const std::size_t w = detail::word_size(format);
  if (in.size() < record_size(format)) {
    return make_error(ErrorCode::kInval, "in: " + std::to_string(in.size()) +
                                             " bytes, a record needs " +
                                             std::to_string(record_size(format)));
  }
  return BtsRecord{detail::load_le(in, from_offset(format), w),
                   detail::load_le(in, to_offset(format), w),
                   predicted(detail::load_le(in, flags_offset(format), w))};
}

}  // namespace bts

namespace ds {

// Bytes of one DS field: 4 or 8.
constexpr std::size_t field_size(BtsFormat format) {
  return detail::word_size(format);
}
constexpr std::size_t offset(BtsFormat format, DsField field) {
  return static_cast<std::size_t>(field) * field_size(format);
}
// How many PEBS counter reset values the format holds: 1 or DsArea::kCounterResets.
constexpr int counter_resets(BtsFormat format) {
  return format == BtsFormat::k32 ? 1 : DsArea::kCounterResets;
}
constexpr std::size_t counter_reset_offset(BtsFormat format, int counter) {
  return offset(format, DsField::kPebsCounterReset) +
         static_cast<std::size_t>(counter) * field_size(format);
}
// Bytes encode writes and decode reads: 0x24 or 0x80.
constexpr std::size_t area_size(BtsFormat format) {
  return counter_reset_offset(format, counter_resets(format));
}

constexpr std::string_view field_name(DsField field) {
  switch (field) {
    case DsField::kBtsBufferBase:
      return "bts_buffer_base";
    case DsField::kBtsIndex:
      return "bts_index";
    case DsField::kBtsAbsoluteMaximum:
      return "bts_absolute_maximum";
    case DsField::kBtsInterruptThreshold:
      return "bts_interrupt_threshold";
    case DsField::kPebsBufferBase:
      return "pebs_buffer_base";
    case DsField::kPebsIndex:
      return "pebs_index";
    case DsField::kPebsAbsoluteMaximum:
      return "pebs_absolute_maximum";
    case DsField::kPebsInterruptThreshold:
      return "pebs_interrupt_threshold";
    case DsField::kPebsCounterReset:
      return "pebs_counter_reset[0]";
  }
  return "?";
}

// The scalar fields in memory order (DsField 0 to 7).
inline constexpr std::array<std::uint64_t DsArea::*, 8> kScalarFields = {
    &DsArea::bts_buffer_base,       &DsArea::bts_index,
    &DsArea::bts_absolute_maximum,  &DsArea::bts_interrupt_threshold,
    &DsArea::pebs_buffer_base,      &DsArea::pebs_index,
    &DsArea::pebs_absolute_maximum, &DsArea::pebs_interrupt_threshold,
};

constexpr std::uint64_t get(const DsArea& area, DsField field) {
  if (field == DsField::kPebsCounterReset) return area.pebs_counter_reset[0];
  return area.*kScalarFields[static_cast<std::size_t>(field)];
}

// Writes `area` into out[0, area_size). kInval when `out` is shorter, a field does not fit the
// format, or (32-bit form) a counter reset other than [0] is not zero; nothing is written then.
HWARB_CONSTEXPR_RESULT Result<void> encode(BtsFormat format, const DsArea& area,
                                           std::span<std::byte> out) {
  const std::size_t w = field_size(format);
  if (out.size() < area_size(format)) {
    return make_error(ErrorCode::kInval, "out: " + std::to_string(out.size()) +
                                             " bytes, the DS area needs " +
                                             std::to_string(area_size(format)));
  }
  for (std::size_t i = 0; i < kScalarFields.size(); ++i) {
    const std::uint64_t v = area.*kScalarFields[i];
    if (!detail::fits(v, w)) {
      return make_error(ErrorCode::kInval, std::string(field_name(static_cast<DsField>(i))) + ": " +
                                               hex(v) + " does not fit the " +
                                               detail::format_name(format) + " form");
    }
  }
  for (int n = 0; n < DsArea::kCounterResets; ++n) {
    const std::uint64_t v = area.pebs_counter_reset[static_cast<std::size_t>(n)];
    if (n >= counter_resets(format) && v != 0) {
      return make_error(ErrorCode::kInval, "pebs_counter_reset[" + std::to_string(n) + "]: the " +
                                               detail::format_name(format) +
                                               " form holds counter 0 only");
    }
    if (!detail::fits(v, w)) {
      return make_error(ErrorCode::kInval, "pebs_counter_reset[" + std::to_string(n) +
                                               "]: " + hex(v) + " does not fit the " +
                                               detail::format_name(format) + " form");
    }
  }
  for (std::size_t i = 0; i < kScalarFields.size(); ++i) {
    detail::store_le(out, i * w, w, area.*kScalarFields[i]);
  }
  for (int n = 0; n < counter_resets(format); ++n) {
    detail::store_le(out, counter_reset_offset(format, n), w,
                     area.pebs_counter_reset[static_cast<std::size_t>(n)]);
  }
  return {};
}

// Reads the area at in[0, area_size); counter resets the format does not hold are zero.
HWARB_CONSTEXPR_RESULT Result<DsArea> decode(BtsFormat format, std::span<const std::byte> in) {
  const std::size_t w = field_size(format);
  if (in.size() < area_size(format)) {
    return make_error(ErrorCode::kInval, "in: " + std::to_string(in.size()) +
                                             " bytes, the DS area needs " +
                                             std::to_string(area_size(format)));
  }
  DsArea area;
  for (std::size_t i = 0; i < kScalarFields.size(); ++i) {
    area.*kScalarFields[i] = detail::load_le(in, i * w, w);
  }
  for (int n = 0; n < counter_resets(format); ++n) {
    area.pebs_counter_reset[static_cast<std::size_t>(n)] =
        detail::load_le(in, counter_reset_offset(format, n), w);
  }
  return area;
}

// Records the buffer holds at most: (bts_absolute_maximum - bts_buffer_base) / record_size.
constexpr std::uint64_t bts_capacity(BtsFormat format, const DsArea& area) {
  if (area.bts_absolute_maximum <= area.bts_buffer_base) return 0;
  return (area.bts_absolute_maximum - area.bts_buffer_base) / bts::record_size(format);
}

// Whole records between the base and the index.
constexpr std::uint64_t bts_records(BtsFormat format, const DsArea& area) {
  if (area.bts_index <= area.bts_buffer_base) return 0;
  return (area.bts_index - area.bts_buffer_base) / bts::record_size(format);
}

// The next record would not fit below the absolute maximum.
constexpr bool bts_full(BtsFormat format, const DsArea& area) {
  return area.bts_index >= area.bts_absolute_maximum ||
         area.bts_absolute_maximum - area.bts_index < bts::record_size(format);
}

constexpr bool bts_threshold_reached(const DsArea& area) {
  return area.bts_index >= area.bts_interrupt_threshold;
}

// The area with the index back at the base: what the processor does to a full circular buffer
// and what software does to drain or clear it.
constexpr DsArea bts_wrap(DsArea area) {
  area.bts_index = area.bts_buffer_base;
  return area;
}

// A threshold the index never reaches (one record past the maximum, as Linux's intel_bts in
// snapshot mode): no PMI, whatever BTINT says.
constexpr std::uint64_t bts_no_interrupt_threshold(BtsFormat format,
                                                   std::uint64_t absolute_maximum) {
  return absolute_maximum + bts::record_size(format);
}

// Checks the BTS fields of `area` against the rules the processor relies on:
//   bts_buffer_base          doubleword aligned (SDM), fits the format;
//   bts_absolute_maximum     at least one record above the base, a whole number of records;
//   bts_index                within [base, maximum], on a record boundary;
//   bts_interrupt_threshold  not below the base; within [base, maximum] on a record boundary,
//                            or above the maximum (never reached: no interrupt).
// Every field must fit the format. The PEBS fields are not checked.
inline Result<void> validate_bts(BtsFormat format, const DsArea& area) {
  const std::size_t size = bts::record_size(format);
  for (DsField f : {DsField::kBtsBufferBase, DsField::kBtsIndex, DsField::kBtsAbsoluteMaximum,
                    DsField::kBtsInterruptThreshold}) {
    if (!detail::fits(get(area, f), field_size(format))) {
      return make_error(ErrorCode::kInval, std::string(field_name(f)) + ": " + hex(get(area, f)) +
                                               " does not fit the " + detail::format_name(format) +
                                               " form");
    }
  }
  const std::uint64_t base = area.bts_buffer_base;
  const std::uint64_t max = area.bts_absolute_maximum;
  if (base % 4 != 0) {
    return make_error(ErrorCode::kInval,
                      "bts_buffer_base: " + hex(base) + " is not doubleword aligned");
  }
  if (max <= base || max - base < size) {
    return make_error(ErrorCode::kInval, "bts_absolute_maximum: " + hex(max) +
                                             " leaves no room for one record above " + hex(base));
  }
  if ((max - base) % size != 0) {
    return make_error(ErrorCode::kInval, "bts_absolute_maximum: " + std::to_string(max - base) +
                                             " bytes above the base is not a whole number of " +
                                             std::to_string(size) + "-byte records");
  }
  const std::uint64_t index = area.bts_index;
  if (index < base || index > max) {
    return make_error(ErrorCode::kInval, "bts_index: " + hex(index) + " is outside [" + hex(base) +
                                             ", " + hex(max) + "]");
  }
  if ((index - base) % size != 0) {
    return make_error(ErrorCode::kInval,
                      "bts_index: " + hex(index) + " is not on a record boundary");
  }
  const std::uint64_t threshold = area.bts_interrupt_threshold;
  if (threshold < base) {
    return make_error(ErrorCode::kInval, "bts_interrupt_threshold: " + hex(threshold) +
                                             " is below the base " + hex(base));
  }
  if (threshold <= max && (threshold - base) % size != 0) {
    return make_error(ErrorCode::kInval, "bts_interrupt_threshold: " + hex(threshold) +
                                             " is not on a record boundary");
  }
  return {};
}

}  // namespace ds

namespace debugctl {

inline constexpr std::uint64_t kLbr = 1u << 0;               // Linux DEBUGCTLMSR_LBR
inline constexpr std::uint64_t kBtf = 1u << 1;               // DEBUGCTLMSR_BTF
inline constexpr std::uint64_t kTr = 1u << 6;                // DEBUGCTLMSR_TR
inline constexpr std::uint64_t kBts = 1u << 7;               // DEBUGCTLMSR_BTS
inline constexpr std::uint64_t kBtint = 1u << 8;             // DEBUGCTLMSR_BTINT
inline constexpr std::uint64_t kBtsOffOs = 1u << 9;          // DEBUGCTLMSR_BTS_OFF_OS
inline constexpr std::uint64_t kBtsOffUsr = 1u << 10;        // DEBUGCTLMSR_BTS_OFF_USR
inline constexpr std::uint64_t kFreezeLbrsOnPmi = 1u << 11;  // DEBUGCTLMSR_FREEZE_LBRS_ON_PMI
// The bits Linux's intel_pmu_disable_bts clears.
inline constexpr std::uint64_t kBtsMask = kTr | kBts | kBtint | kBtsOffOs | kBtsOffUsr;

constexpr bool lbr(std::uint64_t debugctl) {
  return (debugctl & kLbr) != 0;
}
constexpr bool btf(std::uint64_t debugctl) {
  return (debugctl & kBtf) != 0;
}
constexpr bool tr(std::uint64_t debugctl) {
  return (debugctl & kTr) != 0;
}
constexpr bool bts(std::uint64_t debugctl) {
  return (debugctl & kBts) != 0;
}
constexpr bool btint(std::uint64_t debugctl) {
  return (debugctl & kBtint) != 0;
}
constexpr bool bts_off_os(std::uint64_t debugctl) {
  return (debugctl & kBtsOffOs) != 0;
}
constexpr bool bts_off_usr(std::uint64_t debugctl) {
  return (debugctl & kBtsOffUsr) != 0;
}
constexpr bool freeze_lbrs_on_pmi(std::uint64_t debugctl) {
  return (debugctl & kFreezeLbrsOnPmi) != 0;
}

// The BTS facility is on: TR and BTS both set (BTS alone stores nothing).
constexpr bool bts_enabled(std::uint64_t debugctl) {
  return tr(debugctl) && bts(debugctl);
}
// BTS is on and asks for a PMI at the threshold (else the buffer is circular; see the threshold
// rule in the header comment).
constexpr bool bts_interrupt(std::uint64_t debugctl) {
  return bts_enabled(debugctl) && btint(debugctl);
}
// Branches taken at CPL 0 are stored.
constexpr bool traces_kernel(std::uint64_t debugctl) {
  return bts_enabled(debugctl) && !bts_off_os(debugctl);
}
// Branches taken at CPL > 0 are stored.
constexpr bool traces_user(std::uint64_t debugctl) {
  return bts_enabled(debugctl) && !bts_off_usr(debugctl);
}

// What to store: Linux's perf BTS config (exclude_kernel/exclude_user/interrupt) in positive form.
struct BtsConfig {
  bool kernel = true;
  bool user = true;
  bool interrupt = false;
};

// DEBUGCTL with BTS on as `config` asks, as Linux's intel_pmu_enable_bts sets it (TR, BTS, BTINT
// when interrupting, BTS_OFF_OS/BTS_OFF_USR for the excluded rings). The BTS bits are replaced,
// not ORed, so the result depends only on `config` there; every other bit is kept.
constexpr std::uint64_t enable_bts(std::uint64_t debugctl, BtsConfig config) {
  std::uint64_t v = (debugctl & ~kBtsMask) | kTr | kBts;
  if (config.interrupt) v |= kBtint;
  if (!config.kernel) v |= kBtsOffOs;
  if (!config.user) v |= kBtsOffUsr;
  return v;
}

// DEBUGCTL with every BTS bit cleared (Linux's intel_pmu_disable_bts).
constexpr std::uint64_t disable_bts(std::uint64_t debugctl) {
  return debugctl & ~kBtsMask;
}

}  // namespace debugctl

// What the processor does with one taken branch when BTS may be on: the one place that applies
// the rules above (the simulated CPU and the software BTS facility both call it).
//
//   1. BTS off (TR or BTS clear), or the branch's privilege filtered out (BTS_OFF_OS for a branch
//      taken at CPL 0, BTS_OFF_USR at CPL > 0): nothing is stored, nothing changes.
//   2. The buffer is full (ds::bts_full):
//        BTINT clear -> the index goes back to the base (circular), then case 4;
//        BTINT set   -> nothing is stored (dropped); the index stays at the maximum.
//   3. `buffer` is the memory at [bts_buffer_base, bts_absolute_maximum): buffer[i] is the byte at
//      linear address bts_buffer_base + i. A buffer too small for the record's place, or a record
//      that does not fit the format, is EINVAL and nothing changes (a real CPU would fault; the
//      callers validate the area with ds::validate_bts when they install it).
//   4. The record is written at the index, the index moves one record on, and with BTINT set the
//      PMI is raised when this store makes the index reach the threshold (edge: a store from below
//      the threshold to at or above it).
struct BtsStore {
  bool stored = false;
  bool wrapped = false;    // case 2, BTINT clear
  bool dropped = false;    // case 2, BTINT set
  bool interrupt = false;  // case 4: raise the PMI
};

HWARB_CONSTEXPR_RESULT Result<BtsStore> store_bts(BtsFormat format, std::uint64_t debugctl_value,
                                                  DsArea& area, std::span<std::byte> buffer,
                                                  const BtsRecord& record, bool kernel) {
  BtsStore out;
  if (kernel ? !debugctl::traces_kernel(debugctl_value) : !debugctl::traces_user(debugctl_value)) {
    return out;
  }
  const std::size_t size = bts::record_size(format);
  std::uint64_t index = area.bts_index;
  if (ds::bts_full(format, area)) {
    if (debugctl::btint(debugctl_value)) {
      out.dropped = true;
      return out;
    }
    index = area.bts_buffer_base;
    out.wrapped = true;
  }
  if (index < area.bts_buffer_base || index - area.bts_buffer_base > buffer.size() ||
      buffer.size() - (index - area.bts_buffer_base) < size) {
    return make_error(ErrorCode::kInval,
                      "bts_index: " + hex(index) + " is outside the BTS buffer's memory");
  }
  const std::size_t at = static_cast<std::size_t>(index - area.bts_buffer_base);
  if (auto r = bts::encode(format, record, buffer.subspan(at, size)); !r) {
    return std::unexpected(r.error());
  }
  const bool was_below = index < area.bts_interrupt_threshold;
  area.bts_index = index + size;
  out.stored = true;
  out.interrupt = debugctl::btint(debugctl_value) && was_below && ds::bts_threshold_reached(area);
  return out;
}

}  // namespace hwarb::x86

#include "hwarb/ptrace_compat/debugreg_emulation.h"

#include <gtest/gtest.h>

#include <memory>

#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::ptrace_compat {
namespace {

using breakpoints::Arch;
using pmu::BpType;

constexpr std::uint64_t kDr6Fresh = 0xffff0ff0;

struct Fixture {
  std::unique_ptr<sim::System> sys;
  TaskId task;

  explicit Fixture(Arch arch = Arch::kX86_64, int cpus = 2) {
    sim::SystemConfig c;
    c.arch = arch;
    c.cpus = cpus;
    sys = std::move(*sim::System::create(c));
    task = *sys->machine().create_task();
  }
  DebugRegEmulation& emu() { return sys->ptrace(); }
  std::uint64_t get(int n) { return *emu().get_debugreg(task, n); }
  Result<void> set(int n, std::uint64_t v) { return emu().set_debugreg(task, n, v); }
  const pmu::Event* bp(int slot) {
    const breakpoints::PtraceThread* t = sys->breakpoints().find_ptrace_thread(task);
    return t ? t->bps[slot].event() : nullptr;
  }
  // All eight registers as a debugger would read them.
  std::array<std::uint64_t, 8> image() {
    std::array<std::uint64_t, 8> out{};
    for (int n = 0; n < 8; ++n) out[n] = get(n);
    return out;
  }
};

void expect_code(const Result<void>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

// DR7 with slot `slot` enabled (L bit) as R/W `rw`, LEN `len`.
std::uint64_t dr7_slot(int slot, unsigned rw, unsigned len) {
  return x86::dr7::local_bit(slot) |
         (std::uint64_t{(len << 2) | rw} << x86::dr7::control_shift(slot));
}

TEST(DebugRegEmulation, FreshTaskReadsZeroAndDr6Init) {
  Fixture f;
  for (int n : {0, 1, 2, 3, 4, 5, 7}) EXPECT_EQ(f.get(n), 0u) << n;
  EXPECT_EQ(f.get(6), kDr6Fresh);
  EXPECT_EQ(f.sys->breakpoints().find_ptrace_thread(f.task), nullptr);
  EXPECT_FALSE(f.sys->breakpoints().is_used());
}

TEST(DebugRegEmulation, AddressWriteRegistersADisabledPlaceholderThenMovesIt) {
  Fixture f;
  ASSERT_TRUE(f.set(2, 0x1003));
  const pmu::Event* e = f.bp(2);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->attr().disabled);
  EXPECT_TRUE(e->attr().pinned);
  EXPECT_TRUE(e->attr().exclude_kernel);
  EXPECT_EQ(e->attr().bp_len, 1u);
  EXPECT_EQ(e->attr().bp_type, BpType::kW);
  EXPECT_EQ(f.get(2), 0x1003u);
  EXPECT_EQ(f.get(7), 0u);  // DR7 is untouched
  // It holds a slot although disabled.
  EXPECT_TRUE(f.sys->breakpoints().is_used());
  // A second write moves it: same event.
  const pmu::EventId id = e->id();
  ASSERT_TRUE(f.set(2, 0x2000));
  ASSERT_NE(f.bp(2), nullptr);
  EXPECT_EQ(f.bp(2)->id(), id);
  EXPECT_EQ(f.get(2), 0x2000u);
}

TEST(DebugRegEmulation, KernelAddressesAreEinvalAndChangeNothing) {
  Fixture f;
  const std::uint64_t tsm = breakpoints::task_size_max(Arch::kX86_64);
  expect_code(f.set(0, tsm), ErrorCode::kInval, "dr0: addr");
  EXPECT_EQ(f.bp(0), nullptr);
  EXPECT_FALSE(f.sys->breakpoints().is_used());
  ASSERT_TRUE(f.set(0, tsm - 1));  // the last user byte, len 1
  expect_code(f.set(0, ~std::uint64_t{0}), ErrorCode::kInval, "dr0: addr");
  EXPECT_EQ(f.get(0), tsm - 1);
}

TEST(DebugRegEmulation, Dr4Dr5ReadZeroAndWriteEio) {
  Fixture f;
  for (int n : {4, 5}) {
    expect_code(f.set(n, 1), ErrorCode::kIo, "dr" + std::to_string(n));
    EXPECT_EQ(f.get(n), 0u);
  }
  for (int n : {-1, 8}) {
    expect_code(f.set(n, 1), ErrorCode::kIo, "n");
    EXPECT_FALSE(f.emu().get_debugreg(f.task, n));
  }
}

TEST(DebugRegEmulation, Dr6PolarityRoundTrips) {
  Fixture f;
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{0xffff0ff0}, std::uint64_t{0xffff0ff1},
                          std::uint64_t{0x4000}, ~std::uint64_t{0}}) {
    ASSERT_TRUE(f.set(6, v));
    EXPECT_EQ(f.get(6), v);
    EXPECT_EQ(f.sys->breakpoints().ptrace_thread(f.task).virtual_dr6, v ^ kDr6Fresh);
  }
  // A debugger writes 0 to clear the "happened" bits: stored as the hardware's init value.
  ASSERT_TRUE(f.set(6, kDr6Fresh));
  EXPECT_EQ(f.sys->breakpoints().ptrace_thread(f.task).virtual_dr6, 0u);
}

TEST(DebugRegEmulation, Dr7ReadsBackExactlyAsWrittenButDecodesWithoutReservedBits) {
  Fixture f;
  // Reserved bits 10-15, GD (13) and bits 32-63 are kept for read-back; slot 0 is enabled by L0.
  const std::uint64_t v = 0xdead'beef'0000'fc01ULL & ~(std::uint64_t{0xffff} << 16);
  ASSERT_TRUE(f.set(7, v | 0xfc00));
  EXPECT_EQ(f.get(7), v | 0xfc00);
  ASSERT_NE(f.bp(0), nullptr);
  EXPECT_FALSE(f.bp(0)->attr().disabled);
  EXPECT_EQ(f.bp(0)->attr().bp_type, BpType::kX);  // R/W 00, LEN 00
  EXPECT_EQ(f.bp(0)->attr().bp_len, 8u);
  EXPECT_EQ(f.get(0), 0u);  // registered at address 0
}

TEST(DebugRegEmulation, EveryRwAndLenValueOfOneSlot) {
  for (Arch arch : {Arch::kX86_64, Arch::kI386}) {
    for (unsigned rw = 0; rw < 4; ++rw) {
      for (unsigned len = 0; len < 4; ++len) {
        SCOPED_TRACE(std::string(breakpoints::to_string(arch)) + " rw " + std::to_string(rw) +
                     " len " + std::to_string(len));
        Fixture f(arch);
        const std::uint64_t v = dr7_slot(1, rw, len);
        auto r = f.set(7, v);
        const bool exec = rw == 0;
        if (rw == 2) {
          expect_code(r, ErrorCode::kInval, "dr7: slot 1: RW1");
        } else if (exec && len != 0) {
          expect_code(r, ErrorCode::kInval, "dr7: slot 1: LEN1");
        } else if (!exec && len == 2 && arch == Arch::kI386) {
          expect_code(r, ErrorCode::kInval, "dr7: slot 1: LEN1");
        } else {
          ASSERT_TRUE(r) << r.error().to_string();
          EXPECT_EQ(f.get(7), v);
          const pmu::Event* e = f.bp(1);
          ASSERT_NE(e, nullptr);
          EXPECT_EQ(e->attr().bp_type, exec ? BpType::kX : rw == 1 ? BpType::kW : BpType::kRw);
          const std::uint64_t want_len =
              exec ? breakpoints::exec_len(arch)
                   : static_cast<std::uint64_t>(x86::len_bytes(static_cast<x86::DrLen>(len)));
          EXPECT_EQ(e->attr().bp_len, want_len);
          continue;
        }
        // Refused: nothing registered, DR7 unchanged.
        EXPECT_EQ(f.get(7), 0u);
        EXPECT_EQ(f.bp(1), nullptr);
        EXPECT_FALSE(f.sys->breakpoints().is_used());
      }
    }
  }
}

TEST(DebugRegEmulation, GlobalEnableBitAloneEnablesTheSlot) {
  Fixture f;
  ASSERT_TRUE(f.set(3, 0x4000));
  ASSERT_TRUE(f.set(7, x86::dr7::global_bit(3) | (std::uint64_t{0b1101} << 28)));  // w, len 4
  ASSERT_NE(f.bp(3), nullptr);
  EXPECT_FALSE(f.bp(3)->attr().disabled);
  EXPECT_EQ(f.bp(3)->attr().bp_len, 4u);
  EXPECT_EQ(f.bp(3)->attr().bp_type, BpType::kW);
  // Disabling keeps the breakpoint (and its address), disabled.
  ASSERT_TRUE(f.set(7, 0));
  ASSERT_NE(f.bp(3), nullptr);
  EXPECT_TRUE(f.bp(3)->attr().disabled);
  EXPECT_EQ(f.get(3), 0x4000u);
}

TEST(DebugRegEmulation, MisalignedAddressForTheNewLenIsEinvalAndRestored) {
  Fixture f;
  ASSERT_TRUE(f.set(0, 0x1002));
  ASSERT_TRUE(f.set(7, dr7_slot(0, 1, 1)));  // w, len 2 at 0x1002: aligned
  const auto before = f.image();
  expect_code(f.set(7, dr7_slot(0, 1, 3)), ErrorCode::kInval, "dr7: slot 0: addr");
  EXPECT_EQ(f.image(), before);
  EXPECT_EQ(f.bp(0)->attr().bp_len, 2u);
  EXPECT_FALSE(f.bp(0)->attr().disabled);
  // Moving the address under the enabled len-2 breakpoint checks alignment too.
  expect_code(f.set(0, 0x1003), ErrorCode::kInval, "dr0: addr");
  EXPECT_EQ(f.get(0), 0x1002u);
}

TEST(DebugRegEmulation, TwoPassRestoreWhenAnotherUserHoldsASlot) {
  Fixture f;
  // A perf user of the same task holds one of the four slots.
  auto perf = f.sys->breakpoints().register_user_hw_breakpoint(
      breakpoints::breakpoint_attr(0x9000, 4, BpType::kW), {}, f.task);
  ASSERT_TRUE(perf);
  ASSERT_TRUE(f.set(0, 0x1000));
  ASSERT_TRUE(f.set(7, dr7_slot(0, 1, 3)));
  const auto before = f.image();
  std::uint64_t all = 0;
  for (int i = 0; i < 4; ++i) all |= dr7_slot(i, 3, 3);
  auto r = f.set(7, all);
  expect_code(r, ErrorCode::kNoSpc, "dr7: slot 3");
  EXPECT_EQ(f.image(), before);
  EXPECT_EQ(f.emu().failed_restores(), 0);
  // Slot 0 is back to w/len 4 enabled; slots 1 and 2, registered by the first pass, stay
  // registered and disabled (as Linux), as execute breakpoints (their rebuilt fields are 00).
  EXPECT_EQ(f.bp(0)->attr().bp_type, BpType::kW);
  EXPECT_FALSE(f.bp(0)->attr().disabled);
  for (int i : {1, 2}) {
    ASSERT_NE(f.bp(i), nullptr) << i;
    EXPECT_TRUE(f.bp(i)->attr().disabled);
    EXPECT_EQ(f.bp(i)->attr().bp_type, BpType::kX);
  }
  EXPECT_EQ(f.bp(3), nullptr);
  // They hold their slots: a second perf user of the task no longer fits.
  auto perf2 = f.sys->breakpoints().register_user_hw_breakpoint(
      breakpoints::breakpoint_attr(0xa000, 4, BpType::kW), {}, f.task);
  ASSERT_FALSE(perf2);
  EXPECT_EQ(perf2.error().code(), ErrorCode::kNoSpc);
  // Once the perf user goes, enabling all four works.
  EXPECT_TRUE(perf->close());
  ASSERT_TRUE(f.set(7, all));
  EXPECT_EQ(f.get(7), all);
}

TEST(DebugRegEmulation, AnEarlierSlotIsRestoredWhenALaterOneFails) {
  Fixture f;
  ASSERT_TRUE(f.set(0, 0x1004));
  ASSERT_TRUE(f.set(1, 0x2000));
  ASSERT_TRUE(f.set(7, dr7_slot(0, 3, 3)));  // rw len 4
  const auto before = f.image();
  // Slot 0 becomes w/len 2 in the first pass, then slot 1 (I/O) fails.
  expect_code(f.set(7, dr7_slot(0, 1, 1) | dr7_slot(1, 2, 0)), ErrorCode::kInval, "dr7: slot 1");
  EXPECT_EQ(f.image(), before);
  EXPECT_EQ(f.bp(0)->attr().bp_type, BpType::kRw);
  EXPECT_EQ(f.bp(0)->attr().bp_len, 4u);
  EXPECT_FALSE(f.bp(0)->attr().disabled);
  // A DISABLED slot that has a breakpoint is still decoded and checked (Linux).
  expect_code(f.set(7, dr7_slot(0, 3, 3) | (std::uint64_t{0b10} << 20)), ErrorCode::kInval,
              "dr7: slot 1: RW1");
}

TEST(DebugRegEmulation, RebuiltImageSignExtendsSlotThree) {
  Fixture f;
  ASSERT_TRUE(f.set(3, 0x3000));
  ASSERT_TRUE(f.set(7, dr7_slot(3, 1, 3)));  // LEN3 = 11: bit 31 set
  const auto* t = f.sys->breakpoints().find_ptrace_thread(f.task);
  const std::uint64_t img = rebuild_dr7(*t);
  EXPECT_EQ(img >> 32, 0xffffffffULL);
  EXPECT_EQ(img & 0xffffffffULL, x86::dr7::encode_slot(3, x86::DrType::kWrite, x86::DrLen::k4));
  // A disabled slot contributes nothing.
  ASSERT_TRUE(f.set(7, 0));
  EXPECT_EQ(rebuild_dr7(*f.sys->breakpoints().find_ptrace_thread(f.task)), 0u);
}

TEST(DebugRegEmulation, PeekPokeUserDecodeOffsets) {
  Fixture f;
  const UserArea& a = user_area(UserLayout::kX86_64);
  ASSERT_TRUE(f.emu().poke_user(f.task, UserLayout::kX86_64, debugreg_offset(a, 0), 0x1234));
  EXPECT_EQ(*f.emu().peek_user(f.task, UserLayout::kX86_64, debugreg_offset(a, 0)), 0x1234u);
  // A field with no register: peek 0, poke EIO.
  EXPECT_EQ(*f.emu().peek_user(f.task, UserLayout::kX86_64, a.debugreg - 8), 0u);
  expect_code(f.emu().poke_user(f.task, UserLayout::kX86_64, a.debugreg - 8, 1), ErrorCode::kIo,
              "offset");
  expect_code(f.emu().poke_user(f.task, UserLayout::kX86_64, a.debugreg + 1, 1), ErrorCode::kIo,
              "offset");
  // General registers are not modelled.
  auto reg = f.emu().peek_user(f.task, UserLayout::kX86_64, 0);
  ASSERT_FALSE(reg);
  EXPECT_EQ(reg.error().code(), ErrorCode::kOpNotSupp);
  EXPECT_TRUE(reg.error().message().starts_with("offset"));
}

TEST(DebugRegEmulation, CompatLayoutHasFourByteWords) {
  Fixture f;
  const UserArea& a = user_area(UserLayout::kI386);
  // DR6 reads truncated to 32 bits.
  EXPECT_EQ(*f.emu().peek_user(f.task, UserLayout::kI386, debugreg_offset(a, 6)), kDr6Fresh);
  ASSERT_TRUE(f.set(6, 0x1'0000'0000ULL));
  EXPECT_EQ(*f.emu().peek_user(f.task, UserLayout::kI386, debugreg_offset(a, 6)), 0u);
  // A value wider than the word: EINVAL naming value, nothing written.
  expect_code(f.emu().poke_user(f.task, UserLayout::kI386, debugreg_offset(a, 0), 0x1'0000'0000ULL),
              ErrorCode::kInval, "value");
  EXPECT_EQ(f.bp(0), nullptr);
  // Misaligned inside the range: DR1 through offset 257.
  ASSERT_TRUE(f.emu().poke_user(f.task, UserLayout::kI386, 257, 0x8000));
  EXPECT_EQ(f.get(1), 0x8000u);
  // Dummy fields: poke accepted and ignored, peek 0 (284 = sizeof(struct user32) included).
  for (std::uint64_t off : {std::uint64_t{68}, std::uint64_t{248}, std::uint64_t{284}}) {
    ASSERT_TRUE(f.emu().poke_user(f.task, UserLayout::kI386, off, 7)) << off;
    EXPECT_EQ(*f.emu().peek_user(f.task, UserLayout::kI386, off), 0u) << off;
  }
  expect_code(f.emu().poke_user(f.task, UserLayout::kI386, 288, 0), ErrorCode::kIo, "offset");
}

TEST(DebugRegEmulation, UnknownTaskAndArm64) {
  Fixture f;
  auto r = f.emu().set_debugreg(TaskId(99), 0, 0x1000);
  expect_code(r, ErrorCode::kSrch, "task");
  EXPECT_FALSE(f.emu().peek_user(TaskId(99), UserLayout::kX86_64, 848));
  Fixture arm(Arch::kArm64);
  expect_code(arm.set(0, 0x1000), ErrorCode::kOpNotSupp, "arch");
}

TEST(DebugRegEmulation, PtraceCompetesWithWideKernelBreakpoints) {
  Fixture f;
  std::vector<breakpoints::WideBreakpointHandle> wide;
  for (int i = 0; i < 3; ++i) {
    auto w = f.sys->breakpoints().register_wide_hw_breakpoint(
        breakpoints::breakpoint_attr(0x100000 + 8 * i, 8, BpType::kRw), {});
    ASSERT_TRUE(w);
    wide.push_back(std::move(*w));
  }
  ASSERT_TRUE(f.set(0, 0x1000));
  auto r = f.set(1, 0x2000);
  expect_code(r, ErrorCode::kNoSpc, "dr1");
  // The arbiter's reason names the holders: three CPU-bound requests and this task's one.
  EXPECT_NE(r.error().message().find("3 held by CPU-bound requests"), std::string::npos)
      << r.error().message();
  EXPECT_NE(r.error().message().find("by task " + std::to_string(f.task.value())),
            std::string::npos)
      << r.error().message();
  EXPECT_EQ(f.bp(1), nullptr);
  wide.pop_back();
  ASSERT_TRUE(f.set(1, 0x2000));
}

TEST(DebugRegEmulation, FlushDropsEverything) {
  Fixture f;
  ASSERT_TRUE(f.set(0, 0x1000));
  ASSERT_TRUE(f.set(7, dr7_slot(0, 1, 0) | dr7_slot(2, 3, 3)));
  ASSERT_TRUE(f.set(6, 0));
  f.sys->breakpoints().flush_ptrace_hw_breakpoint(f.task);
  EXPECT_FALSE(f.sys->breakpoints().is_used());
  for (int n : {0, 1, 2, 3, 7}) EXPECT_EQ(f.get(n), 0u);
  EXPECT_EQ(f.get(6), kDr6Fresh);
}

}  // namespace
}  // namespace hwarb::ptrace_compat

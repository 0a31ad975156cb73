#include "hwarb/ptrace_compat/bts_ptrace.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/base/format.h"
#include "hwarb/bts/byte_buffer.h"
#include "hwarb/bts/software_bts.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::ptrace_compat {
namespace {

constexpr std::size_t kRec = bts::kTraceRecordSize;
constexpr TaskId kTask{7};
constexpr TaskId kOther{8};
constexpr CpuId kCpu{0};
constexpr std::uint64_t kUserBase = 0x401000;
constexpr std::uint64_t kKernelFrom = 0xffffffff81000000;

// The i-th test branch: from kUserBase + 0x10 i to kUserBase + 0x10 i + 8, predicted when odd.
bts::TraceRecord nth(int i) {
  const std::uint64_t from = kUserBase + 0x10 * static_cast<std::uint64_t>(i);
  return bts::TraceRecord::branch(from, from + 8, i % 2 == 1);
}

std::vector<bts::TraceRecord> nths(int first, int last) {
  std::vector<bts::TraceRecord> out;
  for (int i = first; i < last; ++i) out.push_back(nth(i));
  return out;
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, const std::string& prefix) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(prefix)) << r.error().message();
}

// A one-CPU machine: SoftwareBts as the hardware (its PMI wired to the tracer), the tracer, an
// arbiter, and kTask running on CPU 0.
class PtraceBtsTest : public ::testing::Test {
 protected:
  void SetUp() override { build({}); }

  void build(PtraceBtsOptions options) {
    ptrace_.reset();
    tracer_.reset();
    arbiter_.reset();
    hw_ = std::make_unique<bts::SoftwareBts>(1, x86::BtsFormat::k64);
    arbiter::ArbiterConfig ac;
    ac.cpus = 1;
    auto a = arbiter::Arbiter::create(ac);
    ASSERT_TRUE(a) << a.error().to_string();
    arbiter_ = std::move(*a);
    bts::TracerConfig tc;
    tc.cpus = 1;
    tc.ds_records = 4;
    auto t = bts::Tracer::create(tc, *hw_, arbiter_.get());
    ASSERT_TRUE(t) << t.error().to_string();
    tracer_ = std::move(*t);
    hw_->set_interrupt_handler([this](CpuId cpu) { ASSERT_TRUE(tracer_->on_interrupt(cpu)); });
    tracer_->set_full_handler([this](bts::ContextId id, std::optional<TaskId> task) {
      full_.push_back(id);
      full_tasks_.push_back(task);
    });
    ptrace_ = std::make_unique<PtraceBts>(*tracer_, options);
    ASSERT_TRUE(tracer_->on_switch(kCpu, std::nullopt, kTask, 100));
  }

  void TearDown() override {
    ptrace_.reset();
    tracer_.reset();
    arbiter_.reset();
  }

  // Takes the user branches nth(first) .. nth(last - 1) on CPU 0.
  void take(int first, int last) {
    for (int i = first; i < last; ++i) {
      const bts::TraceRecord r = nth(i);
      ASSERT_TRUE(hw_->branch(kCpu, r.from, r.to, r.predicted, false));
    }
  }

  void config(std::uint64_t size, std::uint64_t flags) {
    auto r = ptrace_->config(kTask, {size, flags});
    ASSERT_TRUE(r) << r.error().to_string();
  }

  std::vector<bts::TraceRecord> drain() {
    auto r = ptrace_->drain(kTask);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? *r : std::vector<bts::TraceRecord>{};
  }

  std::size_t held() {
    auto r = ptrace_->size(kTask);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? *r : 0;
  }

  PtraceBtsConfig status() {
    auto r = ptrace_->status(kTask);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? *r : PtraceBtsConfig{};
  }

  // Every record held, newest first, through GET.
  std::vector<bts::TraceRecord> get_all() {
    std::vector<bts::TraceRecord> out;
    const std::size_t n = held();
    for (std::size_t i = 0; i < n; ++i) {
      auto r = ptrace_->get(kTask, static_cast<std::int64_t>(i));
      EXPECT_TRUE(r) << r.error().to_string();
      if (r) out.push_back(*r);
    }
    return out;
  }

  // In a death-test child: limits the address space to what is mapped now plus 256 MiB, asks
  // for the largest buffer, and checks that the ENOMEM left the old buffer and its records. Exit
  // code 0 when it did; 2 when the limit cannot be set, 3 for another outcome, 4 when changed.
  int resize_to_the_maximum_without_memory() {
    if (!native::limit_address_space(std::uint64_t{256} << 20)) return 2;
    auto r = ptrace_->config(kTask, {bts::kMaxBufferBytes, kBtsTrace});
    if (r || r.error().code() != ErrorCode::kNoMem) return 3;
    const bool kept =
        status() == PtraceBtsConfig{4 * kRec, kBtsTrace | kBtsSched} && drain() == nths(0, 3);
    return kept ? 0 : 4;
  }

  std::unique_ptr<bts::SoftwareBts> hw_;
  std::unique_ptr<arbiter::Arbiter> arbiter_;
  std::unique_ptr<bts::Tracer> tracer_;
  std::unique_ptr<PtraceBts> ptrace_;
  std::vector<bts::ContextId> full_;
  std::vector<std::optional<TaskId>> full_tasks_;
};

// ---- one test per seed defect (bts_ptrace.h, fixes 1–10) ----

TEST_F(PtraceBtsTest, Fix1SameRoundedSizeKeepsTheBufferAndItsRecords) {
  config(100, kBtsTrace);  // 4 records (96 bytes)
  const auto id = ptrace_->context(kTask);
  ASSERT_TRUE(id);
  take(0, 3);
  config(100, kBtsTrace);  // the 2008 ptrace BTS API compared 100 with 96 and reallocated
  config(110, kBtsTrace);  // rounds to 96 too
  config(96, kBtsTrace);
  EXPECT_EQ(ptrace_->context(kTask), id);
  EXPECT_EQ(status(), (PtraceBtsConfig{96, kBtsTrace}));
  EXPECT_EQ(drain(), nths(0, 3));
}

TEST_F(PtraceBtsTest, Fix2ResizeKeepsTheTrace) {
  // Growing and shrinking go through Tracer::resize (allocate, copy, then free): the records
  // survive, the newest that fit when shrinking.
  config(4 * kRec, kBtsTrace);
  take(0, 4);
  config(8 * kRec, kBtsTrace);
  EXPECT_EQ(status().size, 8 * kRec);
  EXPECT_EQ(held(), 4u);
  take(4, 6);
  config(3 * kRec, kBtsTrace);
  EXPECT_EQ(status().size, 3 * kRec);
  EXPECT_EQ(drain(), nths(3, 6));
}

// Run by the ctest entry ptrace_compat_test.enomem, in the uninstrumented build only.
TEST_F(PtraceBtsTest, Fix2FailedAllocationKeepsTheOldBuffer) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "address-space limits do not work under sanitizers";
#else
  // A real ENOMEM: in a child process whose address space is limited, a resize to the largest
  // size fails, and the old buffer with every record is still there.
  build(PtraceBtsOptions{bts::kMaxBufferBytes});
  config(4 * kRec, kBtsTrace | kBtsSched);
  take(0, 3);
  EXPECT_EXIT(std::_Exit(resize_to_the_maximum_without_memory()), ::testing::ExitedWithCode(0), "");
#endif
}

TEST_F(PtraceBtsTest, Fix3AFailingConfigChangesNothing) {
  config(4 * kRec, kBtsTrace);
  const auto id = ptrace_->context(kTask);
  take(0, 3);
  // A new size, a new mode and a bad flag: nothing is applied.
  expect_error(ptrace_->config(kTask, {8 * kRec, kBtsTrace | kBtsSignal | 0x100}),
               ErrorCode::kInval, "flags: 0x100");
  // A too large size with new flags: neither.
  expect_error(ptrace_->config(kTask, {std::uint64_t{1} << 40, kBtsSched}), ErrorCode::kInval,
               "size: ");
  // Size 0 with TRACE would leave no buffer to trace into: the buffer stays.
  expect_error(ptrace_->config(kTask, {0, kBtsTrace}), ErrorCode::kNxio, "size: 0");
  EXPECT_EQ(ptrace_->context(kTask), id);
  EXPECT_EQ(status(), (PtraceBtsConfig{4 * kRec, kBtsTrace}));
  EXPECT_EQ(drain(), nths(0, 3));
}

TEST_F(PtraceBtsTest, Fix4UnknownFlagsAreEinval) {
  for (std::uint64_t bad : {std::uint64_t{0x10}, std::uint64_t{1} << 63, ~kBtsKnownFlags}) {
    SCOPED_TRACE(bad);
    expect_error(ptrace_->config(kTask, {4 * kRec, kBtsTrace | bad}), ErrorCode::kInval,
                 "flags: " + hex(bad) + " unknown");
    EXPECT_FALSE(ptrace_->context(kTask));
  }
  EXPECT_TRUE(tracer_->contexts().empty());
}

TEST_F(PtraceBtsTest, Fix5CutSizeCutsToTheMaximumWithoutItEinval) {
  build(PtraceBtsOptions{1000});  // 41 records: 984 bytes
  EXPECT_EQ(ptrace_->max_bytes(), 984u);
  expect_error(ptrace_->config(kTask, {5000, kBtsTrace}), ErrorCode::kInval, "size: 5000");
  EXPECT_FALSE(ptrace_->context(kTask));
  // The maximum itself, unrounded, is accepted.
  config(1000, kBtsTrace);
  EXPECT_EQ(status(), (PtraceBtsConfig{984, kBtsTrace}));
  ptrace_->release(kTask);
  config(5000, kBtsTrace | kBtsCutSize);
  EXPECT_EQ(status(), (PtraceBtsConfig{984, kBtsTrace}));  // CUT_SIZE is never reported
  // An existing buffer is cut the same way, and too large without CUT_SIZE is refused.
  config(2 * kRec, kBtsTrace);
  expect_error(ptrace_->config(kTask, {1 << 20, kBtsTrace}), ErrorCode::kInval, "size: ");
  EXPECT_EQ(status().size, 2 * kRec);
  config(1 << 20, kBtsTrace | kBtsCutSize);
  EXPECT_EQ(status().size, 984u);
}

TEST_F(PtraceBtsTest, Fix6TracingWithoutABufferIsEnxio) {
  for (std::uint64_t flags : {kBtsTrace, kBtsSched, kBtsSignal, kBtsTrace | kBtsCutSize}) {
    SCOPED_TRACE(flags);
    expect_error(ptrace_->config(kTask, {0, flags}), ErrorCode::kNxio,
                 "size: 0 leaves no buffer to trace into");
    expect_error(ptrace_->config(kTask, {kRec - 1, flags}), ErrorCode::kNxio, "size: 0");
  }
  // Nothing to do: no buffer asked for, none given.
  EXPECT_TRUE(ptrace_->config(kTask, {0, 0}));
  EXPECT_TRUE(ptrace_->config(kTask, {kRec - 1, kBtsCutSize}));
  EXPECT_FALSE(ptrace_->context(kTask));
  EXPECT_TRUE(tracer_->contexts().empty());
}

TEST_F(PtraceBtsTest, Fix7AfterAWrapSizeGetAndDrainCoverTheWholeRing) {
  config(8 * kRec, kBtsTrace);
  take(0, 24);  // three times the capacity
  EXPECT_EQ(held(), 8u);
  const std::vector<bts::TraceRecord> newest_first = get_all();
  ASSERT_EQ(newest_first.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(newest_first[static_cast<std::size_t>(i)], nth(23 - i));
  EXPECT_EQ(drain(), nths(16, 24));
  EXPECT_EQ(held(), 0u);
}

TEST_F(PtraceBtsTest, Fix8GetIsBoundedByTheRecordsHeldNotTheCapacity) {
  config(8 * kRec, kBtsTrace);
  take(0, 3);
  EXPECT_TRUE(ptrace_->get(kTask, 2));
  expect_error(ptrace_->get(kTask, 3), ErrorCode::kInval, "index: 3");
  expect_error(ptrace_->get(kTask, 7), ErrorCode::kInval, "index: 7");
  expect_error(ptrace_->get(kTask, -1), ErrorCode::kInval, "index: -1");
  EXPECT_EQ(held(), 3u);
}

TEST_F(PtraceBtsTest, Fix9SignalModeStopsAtFullDropsTheRestAndRestartsAfterDrain) {
  config(4 * kRec, kBtsTrace | kBtsSignal);
  const auto id = ptrace_->context(kTask);
  ASSERT_TRUE(id);
  EXPECT_TRUE(ptrace_->is_full_context(*id));
  take(0, 7);
  ASSERT_TRUE(ptrace_->size(kTask));  // reads flush: every branch so far has been sorted
  ASSERT_EQ(full_.size(), 1u);
  EXPECT_EQ(full_[0], *id);
  EXPECT_EQ(full_tasks_[0], kTask);
  EXPECT_TRUE(ptrace_->is_full_context(full_[0]));
  // Nothing overwritten: the first four are there, the three after them were dropped.
  EXPECT_EQ(held(), 4u);
  auto status = tracer_->status(*id);
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->full);
  EXPECT_EQ(status->lost, 3u);
  EXPECT_EQ(drain(), nths(0, 4));
  // The tracer drained: recording restarts, and the next fill signals again.
  take(10, 12);
  EXPECT_EQ(get_all(), (std::vector<bts::TraceRecord>{nth(11), nth(10)}));
  EXPECT_EQ(full_.size(), 1u);
  take(12, 15);
  EXPECT_EQ(held(), 4u);
  EXPECT_EQ(full_.size(), 2u);
  EXPECT_EQ(drain(), nths(10, 14));
}

TEST_F(PtraceBtsTest, Fix10KernelBranchesAreNeverRecorded) {
  config(8 * kRec, kBtsTrace);
  ASSERT_TRUE(hw_->branch(kCpu, kKernelFrom, kKernelFrom + 0x40, false, true));
  take(0, 1);
  // e.g. the return to user space
  ASSERT_TRUE(hw_->branch(kCpu, kKernelFrom + 0x80, kUserBase, false, true));
  take(1, 2);
  EXPECT_EQ(drain(), nths(0, 2));
  auto status = tracer_->status(*ptrace_->context(kTask));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->config.flags, bts::kUser);
}

// ---- the requests ----

TEST_F(PtraceBtsTest, WithoutABufferReadsAreEnxioAndStatusIsZero) {
  const std::string msg = "bts: no buffer (PTRACE_BTS_CONFIG first)";
  expect_error(ptrace_->size(kTask), ErrorCode::kNxio, msg);
  expect_error(ptrace_->get(kTask, 0), ErrorCode::kNxio, msg);
  expect_error(ptrace_->clear(kTask), ErrorCode::kNxio, msg);
  expect_error(ptrace_->drain(kTask), ErrorCode::kNxio, msg);
  EXPECT_EQ(status(), (PtraceBtsConfig{0, 0}));
  // Another task's buffer is not this task's.
  ASSERT_TRUE(ptrace_->config(kOther, {4 * kRec, kBtsTrace}));
  expect_error(ptrace_->size(kTask), ErrorCode::kNxio, msg);
  EXPECT_FALSE(ptrace_->context(kTask));
}

TEST_F(PtraceBtsTest, GetZeroIsTheNewest) {
  config(8 * kRec, kBtsTrace);
  take(0, 5);
  EXPECT_EQ(get_all(), (std::vector<bts::TraceRecord>{nth(4), nth(3), nth(2), nth(1), nth(0)}));
  auto newest = ptrace_->get(kTask, 0);
  ASSERT_TRUE(newest);
  EXPECT_EQ(*newest, nth(4));
  EXPECT_EQ(held(), 5u);  // GET does not consume
}

TEST_F(PtraceBtsTest, DrainIsOldestFirstThenSizeIsZero) {
  config(8 * kRec, kBtsTrace);
  take(0, 5);
  EXPECT_EQ(drain(), nths(0, 5));
  EXPECT_EQ(held(), 0u);
  EXPECT_TRUE(drain().empty());
  take(5, 6);
  EXPECT_EQ(drain(), nths(5, 6));
}

TEST_F(PtraceBtsTest, ClearForgetsTheRecordsAndKeepsTheBuffer) {
  config(8 * kRec, kBtsTrace);
  take(0, 5);
  ASSERT_TRUE(ptrace_->clear(kTask));
  EXPECT_EQ(held(), 0u);
  EXPECT_EQ(status(), (PtraceBtsConfig{8 * kRec, kBtsTrace}));
  take(5, 7);
  EXPECT_EQ(drain(), nths(5, 7));
}

TEST_F(PtraceBtsTest, StatusRoundTrip) {
  config(100, kBtsTrace | kBtsSched | kBtsSignal | kBtsCutSize);
  EXPECT_EQ(status(), (PtraceBtsConfig{96, kBtsTrace | kBtsSched | kBtsSignal}));
  const PtraceBtsConfig got = status();
  config(got.size, got.flags);  // feeding STATUS back to CONFIG changes nothing
  EXPECT_EQ(status(), got);
  config(96, kBtsSched);
  EXPECT_EQ(status(), (PtraceBtsConfig{96, kBtsSched}));
  config(96, kBtsSignal);
  EXPECT_EQ(status(), (PtraceBtsConfig{96, kBtsSignal}));
  config(96, 0);
  EXPECT_EQ(status(), (PtraceBtsConfig{96, 0}));
  config(200, kBtsTrace);
  EXPECT_EQ(status(), (PtraceBtsConfig{192, kBtsTrace}));
}

TEST_F(PtraceBtsTest, TraceOffStopsRecordingButKeepsTheBuffer) {
  config(8 * kRec, kBtsTrace);
  take(0, 2);
  config(8 * kRec, 0);
  take(2, 4);
  EXPECT_EQ(held(), 2u);
  config(8 * kRec, kBtsTrace);
  take(4, 5);
  EXPECT_EQ(drain(), (std::vector<bts::TraceRecord>{nth(0), nth(1), nth(4)}));
  // A buffer configured without TRACE records nothing until TRACE is set.
  ptrace_->release(kTask);
  config(8 * kRec, 0);
  take(0, 3);
  EXPECT_EQ(held(), 0u);
}

TEST_F(PtraceBtsTest, SchedGivesArrivesAndDepartsRecords) {
  config(8 * kRec, kBtsTrace | kBtsSched);
  take(0, 1);
  ASSERT_TRUE(tracer_->on_switch(kCpu, kTask, kOther, 200));
  take(1, 2);  // kOther's: not ours
  ASSERT_TRUE(tracer_->on_switch(kCpu, kOther, kTask, 300));
  take(2, 3);
  EXPECT_EQ(drain(), (std::vector<bts::TraceRecord>{
                         nth(0),
                         bts::TraceRecord::sched(bts::RecordKind::kDeparts, kTask, 200),
                         bts::TraceRecord::sched(bts::RecordKind::kArrives, kTask, 300),
                         nth(2),
                     }));
  // Without SCHED: branches only.
  config(8 * kRec, kBtsTrace);
  ASSERT_TRUE(tracer_->on_switch(kCpu, kTask, kOther, 400));
  ASSERT_TRUE(tracer_->on_switch(kCpu, kOther, kTask, 500));
  take(3, 4);
  EXPECT_EQ(drain(), nths(3, 4));
}

TEST_F(PtraceBtsTest, EbusyWhilePtIsHeldAndNothingChanges) {
  arbiter::Request pt;
  pt.kind = arbiter::ResourceKind::kPt;
  pt.task = kOther;
  auto held_pt = arbiter_->reserve(pt);
  ASSERT_TRUE(held_pt) << held_pt.error().to_string();
  auto r = ptrace_->config(kTask, {4 * kRec, kBtsTrace});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kBusy) << r.error().to_string();
  EXPECT_FALSE(ptrace_->context(kTask));
  EXPECT_EQ(status(), (PtraceBtsConfig{0, 0}));
  EXPECT_TRUE(tracer_->contexts().empty());
  held_pt->release();
  config(4 * kRec, kBtsTrace);
  EXPECT_TRUE(ptrace_->context(kTask));
}

TEST_F(PtraceBtsTest, ReleaseAndSizeZeroFreeTheBuffer) {
  config(4 * kRec, kBtsTrace);
  const auto id = ptrace_->context(kTask);
  ASSERT_TRUE(id);
  ptrace_->release(kTask);
  EXPECT_FALSE(ptrace_->context(kTask));
  EXPECT_FALSE(ptrace_->is_full_context(*id));
  EXPECT_TRUE(tracer_->contexts().empty());
  expect_error(ptrace_->size(kTask), ErrorCode::kNxio, "bts: no buffer");
  ptrace_->release(kTask);  // no-op without a buffer
  // The kBts reservation went with it: PT may be reserved now.
  arbiter::Request pt;
  pt.kind = arbiter::ResourceKind::kPt;
  pt.task = kOther;
  EXPECT_TRUE(arbiter_->reserve(pt));

  config(4 * kRec, kBtsTrace);
  take(0, 2);
  config(kRec - 1, 0);  // rounds to 0: frees the buffer
  EXPECT_FALSE(ptrace_->context(kTask));
  EXPECT_TRUE(tracer_->contexts().empty());
  EXPECT_EQ(status(), (PtraceBtsConfig{0, 0}));
}

TEST_F(PtraceBtsTest, IsFullContextOnlyForOwnSignalBuffers) {
  config(4 * kRec, kBtsTrace);
  const auto id = ptrace_->context(kTask);
  ASSERT_TRUE(id);
  EXPECT_FALSE(ptrace_->is_full_context(*id));  // wrap-around never fills
  config(4 * kRec, kBtsTrace | kBtsSignal);
  EXPECT_TRUE(ptrace_->is_full_context(*id));
  bts::ContextConfig other;
  other.task = kOther;
  other.flags = bts::kUser;
  other.mode = bts::BufferMode::kSignal;
  other.size = 4 * kRec;
  auto foreign = tracer_->open(other);
  ASSERT_TRUE(foreign) << foreign.error().to_string();
  EXPECT_FALSE(ptrace_->is_full_context(*foreign));
  EXPECT_FALSE(ptrace_->is_full_context(bts::ContextId{999}));
}

TEST(PtraceBtsConstants, SeedRequestNumbersAndSignal) {
  EXPECT_EQ(kPtraceBtsConfig, 40);
  EXPECT_EQ(kPtraceBtsStatus, 41);
  EXPECT_EQ(kPtraceBtsSize, 42);
  EXPECT_EQ(kPtraceBtsGet, 43);
  EXPECT_EQ(kPtraceBtsClear, 44);
  EXPECT_EQ(kPtraceBtsDrain, 45);
  EXPECT_EQ(kBtsFullSignal, SIGIO);
  EXPECT_EQ(kBtsKnownFlags, 0xfu);
}

}  // namespace
}  // namespace hwarb::ptrace_compat

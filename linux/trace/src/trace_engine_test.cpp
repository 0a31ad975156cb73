// Tests of the trace engines: BranchStore keeps every branch in order and drains itself before its
// context fills; SoftTraceEngine (BranchTracer) and BtsTraceEngine (intel_bts, where the machine
// has it) under run_target find exactly the calls the program makes, with the program's output
// and status unchanged; BranchClassifier tells a branch's kind from its instruction.
#include "hwarb/linux/trace_engine.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwarb/linux/symbols.h"
#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

// Every batch the store hands over.
struct Batches {
  std::vector<std::vector<StoredBranch>> batches;
  BranchStore::Sink sink() {
    return [this](std::span<const StoredBranch> batch) {
      batches.emplace_back(batch.begin(), batch.end());
    };
  }
  std::vector<StoredBranch> all() const {
    std::vector<StoredBranch> out;
    for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
    return out;
  }
};

TEST(BranchStore, GivesBackEveryBranchInOrderWithItsThreadAndKind) {
  Batches got;
  auto store = BranchStore::open(1234, got.sink());
  ASSERT_TRUE(store) << store.error().to_string();
  (*store)->add({0x401000, 0x402000, x86::BranchKind::kCall, 1234});
  (*store)->add({0x402010, 0x401005, x86::BranchKind::kReturn, 1235});
  (*store)->add({0x401020, 0x401000, x86::BranchKind::kCondJump, 1234});
  EXPECT_TRUE(got.batches.empty());  // nothing handed over before a drain
  (*store)->drain();
  ASSERT_EQ(got.batches.size(), 1u);
  const std::vector<StoredBranch>& b = got.batches[0];
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].from, 0x401000u);
  EXPECT_EQ(b[0].to, 0x402000u);
  EXPECT_EQ(b[0].tid, 1234);
  EXPECT_EQ(b[0].kind, x86::BranchKind::kCall);
  EXPECT_EQ(b[1].tid, 1235);
  EXPECT_EQ(b[1].kind, x86::BranchKind::kReturn);
  EXPECT_EQ(b[2].from, 0x401020u);
  EXPECT_EQ(b[2].kind, x86::BranchKind::kCondJump);
  EXPECT_LE(b[0].time, b[2].time);
  // A drain with nothing new: an empty batch.
  (*store)->drain();
  ASSERT_EQ(got.batches.size(), 2u);
  EXPECT_TRUE(got.batches[1].empty());
  EXPECT_EQ((*store)->lost(), 0u);
  EXPECT_FALSE((*store)->error());
}

TEST(BranchStore, DrainsItselfBeforeTheContextFillsAndLosesNothing) {
  Batches got;
  auto store = BranchStore::open(1, got.sink());
  ASSERT_TRUE(store) << store.error().to_string();
  constexpr std::size_t kN = BranchStore::kCapacity + 100;
  for (std::size_t i = 0; i < kN; ++i) {
    (*store)->add({0x400000 + i, 0x500000 + i, x86::BranchKind::kJump, 1});
  }
  ASSERT_FALSE(got.batches.empty());
  EXPECT_EQ(got.batches[0].size(), BranchStore::kCapacity - BranchStore::kDsRecords);
  (*store)->drain();
  const std::vector<StoredBranch> all = got.all();
  ASSERT_EQ(all.size(), kN);
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(all[i].from, 0x400000 + i) << i;
    ASSERT_EQ(all[i].to, 0x500000 + i) << i;
  }
  EXPECT_EQ((*store)->lost(), 0u);
  EXPECT_FALSE((*store)->error());
}

Symbol symbol(pid_t pid, const char* name) {
  auto table = SymbolTable::load(pid);
  EXPECT_TRUE(table) << table.error().to_string();
  if (!table) return {};
  auto sym = table->find(name);
  EXPECT_TRUE(sym) << sym.error().to_string();
  return sym ? *sym : Symbol{};
}

std::size_t calls_to(const std::vector<StoredBranch>& branches, std::uint64_t fn, pid_t tid) {
  std::size_t n = 0;
  for (const StoredBranch& b : branches) {
    if (b.to == fn && b.kind == x86::BranchKind::kCall && b.tid == tid) ++n;
  }
  return n;
}

TEST(SoftTraceEngine, FindsEveryCallAndHandsTheRecordsOverBeforeTheExit) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("calls"), "7"}), out);
  const pid_t pid = inf->pid();
  const Symbol main_fn = symbol(pid, "main");
  const Symbol work = symbol(pid, "work");
  Batches got;
  auto store = BranchStore::open(pid, got.sink());
  ASSERT_TRUE(store) << store.error().to_string();
  BranchTracerOptions options;
  options.start_at = main_fn.address;
  auto tracer =
      BranchTracer::start(*inf, options, [&store](const BranchRecord& r) { (*store)->add(r); });
  ASSERT_TRUE(tracer) << tracer.error().to_string();
  SoftTraceEngine engine(*tracer, **store);
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  // Drained at exit_group, while the process was still there.
  const std::vector<StoredBranch> before_end = got.all();
  EXPECT_EQ(calls_to(before_end, work.address, pid), 7u);
  (*store)->drain();
  EXPECT_EQ(got.all().size(), before_end.size());
  EXPECT_EQ(got.all().size(), tracer->stats().taken);
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->status, 0);
  EXPECT_EQ(out.text(), "total=70\n");
  EXPECT_EQ((*store)->lost(), 0u);
}

TEST(BranchClassifier, TellsTheKindFromTheInstructionAtFrom) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("calls"), "3"}), out);
  const pid_t pid = inf->pid();
  const Symbol main_fn = symbol(pid, "main");
  const Symbol work = symbol(pid, "work");
  // main's instructions, in order, until its call to work and its conditional jump back.
  std::optional<std::uint64_t> call, cond;
  for (std::uint64_t ip = main_fn.address;
       ip < main_fn.address + main_fn.size && !(call && cond);) {
    auto insn = inf->decode_at(ip);
    ASSERT_TRUE(insn) << insn.error().to_string();
    if (insn->branch == x86::BranchKind::kCall && insn->target == work.address) call = ip;
    if (call && insn->branch == x86::BranchKind::kCondJump) cond = ip;
    ip += insn->length;
  }
  ASSERT_TRUE(call && cond);
  BranchClassifier kinds(*inf);
  EXPECT_EQ(kinds.kind(*call), x86::BranchKind::kCall);
  EXPECT_EQ(kinds.kind(*cond), x86::BranchKind::kCondJump);
  EXPECT_EQ(kinds.kind(main_fn.address), x86::BranchKind::kNone);  // push %rbp
  EXPECT_EQ(kinds.kind(0), x86::BranchKind::kNone);                // unreadable
  // Cached: what the first look found, even after the text changes.
  const std::uint8_t int3 = 0xCC;
  ASSERT_TRUE(inf->write_memory(*call, std::span(&int3, 1)));
  EXPECT_EQ(kinds.kind(*call), x86::BranchKind::kCall);
}

TEST(BtsTraceEngine, FindsEveryCallWhereTheMachineHasIntelBts) {
  auto bts = IntelBtsTrace::open();
  if (!bts) {
    HWARB_SKIP_UNLESS_REQUIRED("bts", bts.error().to_string());
  }
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("calls"), "7"}), out);
  const pid_t pid = inf->pid();
  const Symbol work = symbol(pid, "work");
  Batches got;
  auto store = BranchStore::open(pid, got.sink());
  ASSERT_TRUE(store) << store.error().to_string();
  BtsTraceEngine engine(*inf, *bts, **store, {});
  auto added = engine.add_threads(inf->threads());
  if (!added && testing::refused(added.error())) {
    GTEST_SKIP() << testing::skip_reason("an intel_bts event", added.error());
  }
  ASSERT_TRUE(added) << added.error().to_string();
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  ASSERT_TRUE(engine.drain());
  (*store)->drain();
  EXPECT_EQ(calls_to(got.all(), work.address, pid), 7u);
  EXPECT_GE(engine.taken(), 7u);
  EXPECT_GE(engine.syscalls(), 1u);
  EXPECT_EQ(end->status, 0);
  EXPECT_EQ(out.text(), "total=70\n");
}

}  // namespace
}  // namespace hwarb::native

// A simulated producer CPU and a consumer thread on one tracing context's AUX ring: the producer
// thread takes taken branches on a SoftwareBts CPU owned by a Tracer (store, PMI at the DS
// threshold, flush, sort into the context's AuxRing); the consumer thread drains the ring through
// Tracer::aux_ring (the one part of the Tracer another thread may use) concurrently, in place.
// The producer stalls while the ring has no room for a whole DS buffer (as a CPU whose driver
// throttles), so nothing may be lost: every record arrives exactly once, in order, intact.
// Labelled race: the ThreadSanitizer stage runs it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>

#include "hwarb/bts/software_bts.h"
#include "hwarb/bts/tracer.h"

namespace hwarb::bts {
namespace {

constexpr std::uint64_t kBase = 0x400000;
constexpr std::size_t kDsRecords = 64;

std::uint64_t from_of(std::uint64_t i) {
  return kBase + i * 4;
}

TEST(TracerAuxRace, EveryRecordArrivesOnceInOrderWhileTheProducerRuns) {
  const std::uint64_t records = std::getenv("HWARB_RACE_RECORDS") != nullptr
                                    ? std::strtoull(std::getenv("HWARB_RACE_RECORDS"), nullptr, 10)
                                    : 2'000'000;
  SoftwareBts hw(1, x86::BtsFormat::k64);
  TracerConfig tc;
  tc.cpus = 1;
  tc.ds_records = kDsRecords;
  auto tracer = std::move(*Tracer::create(tc, hw, nullptr));
  hw.set_interrupt_handler([&](CpuId c) { ASSERT_TRUE(tracer->on_interrupt(c).has_value()); });
  ContextConfig cc;
  cc.task = TaskId(1);
  cc.flags = kUser;
  cc.size = 1024 * kTraceRecordSize;
  const ContextId id = *tracer->open(cc);
  AuxRing* ring = tracer->aux_ring(id);
  ASSERT_NE(ring, nullptr);
  ASSERT_TRUE(tracer->on_switch(CpuId(0), std::nullopt, TaskId(1), 0).has_value());

  std::atomic<bool> done{false};
  std::uint64_t received = 0;
  std::uint64_t errors = 0;
  std::uint64_t lost_seen = 0;
  std::thread consumer([&] {
    for (;;) {
      const bool finished = done.load(std::memory_order_acquire);
      AuxView v = ring->view();
      AuxChunk c;
      while (v.next(c)) {
        lost_seen += c.lost_before;
        for (std::size_t at = 0; at < c.data.size(); at += kTraceRecordSize) {
          auto r = decode(c.data.subspan(at, kTraceRecordSize));
          if (!r || r->kind != RecordKind::kBranch || r->from != from_of(received) ||
              r->to != r->from + 2) {
            ++errors;
          }
          ++received;
        }
      }
      ring->release(v);
      if (finished && ring->head() == ring->tail()) return;
      if (v.empty()) std::this_thread::yield();
    }
  });

  const std::size_t room = (kDsRecords + 1) * kTraceRecordSize;
  for (std::uint64_t i = 0; i < records; ++i) {
    while (ring->free_space() < room) std::this_thread::yield();
    ASSERT_TRUE(hw.branch(CpuId(0), from_of(i), from_of(i) + 2, false, false).has_value());
  }
  while (ring->free_space() < room) std::this_thread::yield();
  ASSERT_TRUE(tracer->flush(CpuId(0)).has_value());
  done.store(true, std::memory_order_release);
  consumer.join();

  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(received, records);
  EXPECT_EQ(lost_seen, 0u);
  EXPECT_EQ(ring->lost(), 0u);
}

}  // namespace
}  // namespace hwarb::bts

// bench/bts_sort_bench.cpp — the cost of sorting BTS records into 1, 8 and 64 tracing contexts
// (hwarb::bts::Tracer), against a bare loop doing the copies any sorting must do, in the same run
// (bench/README.md).
//
//   bts_sort_bench [--quick] [--reps N] [--records N]
//
// hwarb: one CPU of a SoftwareBts facility owned by a Tracer (64-record DS buffer, BTINT at the
// maximum), a task switched in, N global contexts (user + kernel, wrap-around buffers of 65 536
// records). Each branch is stored by x86::store_bts; every 64 records the PMI flushes the DS
// buffer: each record is decoded once, classified user/kernel and appended to every context, and
// each context's batch goes into its buffer. Baseline: the same records encoded into a 64-record
// array, and every 64 records that array memcpy'd into N plain circular arrays of the same size —
// the bytes every sorting design has to move, with no decoding, filtering or bookkeeping.
// Reported: records/s of each, the ratio, and the cost per record and context.
//
// Checked on every run: each context holds exactly the newest records, identical to the
// baseline's newest; a failed check makes the exit status 1. --quick (the ctest smoke test) runs
// 200 000 records once.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "hwarb/bts/software_bts.h"
#include "hwarb/bts/tracer.h"

namespace {

namespace bts = hwarb::bts;
using hwarb::CpuId;
using hwarb::TaskId;
using hwarb::bench::Clock;
using hwarb::bench::median;
using hwarb::bench::rate_range;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;

constexpr std::size_t kDsRecords = 64;
constexpr std::size_t kContextRecords = 65536;
constexpr std::size_t kR = bts::kTraceRecordSize;

struct Options {
  bool quick = false;
  int reps = 5;
  std::uint64_t records = 5'000'000;
};

std::uint64_t from_of(std::uint64_t i) {
  return 0x400000 + (i * 0x9e3779b97f4a7c15ULL >> 40) * 16;
}
std::uint64_t to_of(std::uint64_t i) {
  return from_of(i) + 0x40;
}

struct HwarbRun {
  double seconds = 0;
  bool ok = true;
};

HwarbRun run_hwarb(int contexts, std::uint64_t records) {
  HwarbRun out;
  bts::SoftwareBts hw(1, hwarb::x86::BtsFormat::k64);
  bts::TracerConfig tc;
  tc.cpus = 1;
  tc.ds_records = kDsRecords;
  auto tracer = std::move(*bts::Tracer::create(tc, hw, nullptr));
  hw.set_interrupt_handler([&](CpuId c) { (void)tracer->on_interrupt(c); });
  std::vector<bts::ContextId> ids;
  for (int i = 0; i < contexts; ++i) {
    bts::ContextConfig c;
    c.mode = bts::BufferMode::kWrap;
    c.size = kContextRecords * kR;
    ids.push_back(*tracer->open(c));
  }
  (void)tracer->on_switch(CpuId(0), std::nullopt, TaskId(1), 0);
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < records; ++i) {
    if (!hw.branch(CpuId(0), from_of(i), to_of(i), (i & 1) != 0, false)) {
      out.ok = false;
      break;
    }
  }
  tracer->flush_all();
  out.seconds = seconds_since(t0);
  // Every context holds the newest min(records, capacity) records, in order.
  const std::uint64_t held = std::min<std::uint64_t>(records, kContextRecords);
  for (bts::ContextId id : ids) {
    auto n = tracer->size(id);
    if (!n || *n != held) {
      out.ok = false;
      continue;
    }
    for (std::uint64_t k : {std::uint64_t{0}, held / 2, held - 1}) {
      auto r = tracer->get(id, k);
      const std::uint64_t i = records - 1 - k;
      if (!r || r->from != from_of(i) || r->to != to_of(i) || r->predicted != ((i & 1) != 0)) {
        out.ok = false;
      }
    }
  }
  return out;
}

double run_baseline(int contexts, std::uint64_t records, std::vector<std::uint64_t>* newest) {
  std::vector<std::byte> ds(kDsRecords * kR);
  std::vector<std::vector<std::byte>> rings(static_cast<std::size_t>(contexts),
                                            std::vector<std::byte>(kContextRecords * kR));
  std::size_t fill = 0;
  std::size_t head = 0;  // records written into each ring, modulo its size
  auto flush = [&] {
    std::size_t done = 0;
    while (done < fill) {
      const std::size_t take = std::min(fill - done, kContextRecords - head);
      for (auto& ring : rings) {
        std::memcpy(ring.data() + head * kR, ds.data() + done * kR, take * kR);
      }
      head = (head + take) % kContextRecords;
      done += take;
    }
    fill = 0;
  };
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < records; ++i) {
    const std::uint64_t words[3] = {from_of(i), to_of(i), (i & 1) ? bts::kPredictedFlag : 0};
    std::memcpy(ds.data() + fill * kR, words, kR);
    if (++fill == kDsRecords) flush();
  }
  flush();
  const double s = seconds_since(t0);
  std::uint64_t last = 0;
  std::memcpy(&last, rings[0].data() + ((head + kContextRecords - 1) % kContextRecords) * kR, 8);
  newest->push_back(last);
  return s;
}

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  std::optional<std::uint64_t> records;
  const bool parsed = hwarb::bench::Args("bts_sort_bench")
                          .number("reps", "N", &opt.reps, 1)
                          .number("records", "N", &records, std::uint64_t{1})
                          .parse(argc, argv, &opt.quick);
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.records = 200'000;
  }
  if (records) opt.records = *records;
  return opt;
}

int run(const Options& opt) {
  bool ok = true;
  const auto t0 = Clock::now();
  std::printf(
      "\n### sorting BTS records into tracing contexts (%llu branches per rep, 64-record DS "
      "buffer, wrap buffers of %zu records; median of %d, [min-max])\n\n"
      "| contexts | hwarb records/s | baseline records/s | hwarb/baseline | hwarb ns per record "
      "and context |\n|---:|---:|---:|---:|---:|\n",
      static_cast<unsigned long long>(opt.records), kContextRecords, opt.reps);
  for (int contexts : {1, 8, 64}) {
    std::vector<double> h, b;
    std::vector<std::uint64_t> newest;
    for (int rep = 0; rep < opt.reps; ++rep) {
      const HwarbRun r = run_hwarb(contexts, opt.records);
      ok = ok && r.ok;
      h.push_back(static_cast<double>(opt.records) / r.seconds);
      b.push_back(static_cast<double>(opt.records) / run_baseline(contexts, opt.records, &newest));
    }
    if (newest.empty() || newest.back() != from_of(opt.records - 1)) ok = false;
    const double hm = median(h);
    const double bm = median(b);
    std::printf("| %d | %s | %s | %s | %.2f |\n", contexts, rate_range(h).c_str(),
                rate_range(b).c_str(), ratio(hm, bm).c_str(), 1e9 / hm / contexts);
  }
  if (!ok) std::fprintf(stderr, "ERROR: a context does not hold exactly the newest records\n");
  std::printf("\nchecked: every context holds exactly the newest records; total time %.1f s\n",
              seconds_since(t0));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return hwarb::bench::driver_main(argc, argv, parse, run);
}

// bench/bts_bench.cpp — BTS records per second through the AUX ring (hwarb::bts::AuxRing), one
// producer thread and one consumer thread, against a plain memcpy of the same bytes in the same
// run (bench/README.md).
//
//   bts_bench [--quick] [--reps N] [--records N] [--ring-records N] [--min-view N]
//
// For each batch size (1, 8 and 64 records of 24 bytes per write()): the producer copies records
// from a source array into the ring, waiting for space when the ring is full (AuxRing::fits, so
// nothing is lost); the consumer polls (no sleeping) until a view holds at least --min-view
// records (default a quarter of the ring, the ring's wakeup watermark), reads it in place,
// checks each record's sequence number and the words derived from it, and releases the view.
// The producer and the consumer are pinned to the first two allowed CPUs. Baseline: the
// producer's thread memcpy-ing the same batches from the same source array into a destination
// buffer of the ring's size, cycling. Repetitions of the ring and the baseline are interleaved;
// medians of N are reported with [min-max].
//
// Every run checks what it measures: every record arrives exactly once, in order and intact, and
// nothing is lost; a 61-record ring fed in bursts by a producer that never waits must report
// every sequence gap exactly (truncation markers and lost()). A failed check makes the exit
// status 1. --quick (the ctest smoke test) runs the checks with 200 000 records per batch size and
// one repetition.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "hwarb/bts/aux_ring.h"
#include "hwarb/linux/syscalls.h"

namespace {

namespace bts = hwarb::bts;
using hwarb::bench::Clock;
using hwarb::bench::median;
using hwarb::bench::parse_args;
using hwarb::bench::rate_range;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;

constexpr std::size_t kR = bts::kDefaultRecordSize;
constexpr std::size_t kSourceRecords = 1 << 16;  // 1.5 MiB of records, reused cyclically
constexpr std::uint64_t kMix = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kBurst = 256;  // records per burst of the lossy check

struct Options {
  bool quick = false;
  int reps = 5;
  std::uint64_t records = 20'000'000;  // per repetition and batch size
  std::size_t ring_records = 65536;    // 1.5 MiB
  std::size_t min_view = 0;            // records the consumer waits for; 0: ring_records / 4
  int consumer_cpu = -1;               // the consumer thread's CPU (-1: not pinned)
};

void cpu_relax() {
  asm volatile("pause" ::: "memory");
}

// Waiting for the other thread: spin a little, then yield (on a machine with more runnable
// threads than cores, spinning on would burn the slice the other thread needs).
class Backoff {
 public:
  void pause() {
    if (++spins_ < 128) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() { spins_ = 0; }

 private:
  int spins_ = 0;
};

// Record i of the source: i, ~i, i * kMix. The consumer expects record k of a run to be source
// record k % kSourceRecords.
std::vector<std::byte> make_source() {
  std::vector<std::byte> src(kSourceRecords * kR);
  for (std::uint64_t i = 0; i < kSourceRecords; ++i) {
    const std::uint64_t words[3] = {i, ~i, i * kMix};
    std::memcpy(src.data() + i * kR, words, kR);
  }
  return src;
}

struct RunResult {
  double seconds = 0;
  std::uint64_t received = 0;
  std::uint64_t lost = 0;
  std::uint64_t lost_seen = 0;  // sum of the chunks' lost_before
  std::uint64_t errors = 0;
};

// One producer and one consumer thread move `records` records through a fresh ring.
// wait_for_space: the producer waits when the ring is full (nothing lost); otherwise it drops.
RunResult run_ring(const std::vector<std::byte>& src, std::size_t batch, std::uint64_t records,
                   std::size_t ring_records, bool wait_for_space, std::size_t min_view_records,
                   int consumer_cpu) {
  const std::uint64_t min_view_bytes = min_view_records * kR;
  RunResult r;
  auto created =
      bts::AuxRing::create({.size = ring_records * kR, .watermark = ring_records / 4 * kR});
  if (!created) {
    std::fprintf(stderr, "AuxRing::create: %s\n", created.error().to_string().c_str());
    r.errors = 1;
    return r;
  }
  bts::AuxRing& ring = **created;
  std::atomic<bool> go{false};
  std::thread consumer([&] {
    if (consumer_cpu >= 0) (void)hwarb::linux::pin_to_cpu(0, consumer_cpu);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    std::uint64_t next = 0;
    Backoff backoff;
    for (;;) {
      const bool closed = ring.closed();
      bts::AuxView v = ring.view();
      if (!closed && v.end() - v.begin() < min_view_bytes) {
        // Let the producer get ahead: polling data_head after every record would bounce its
        // cache line (and the line being written) between the two cores.
        for (int i = 0; i < 32; ++i) cpu_relax();
        continue;
      }
      bts::AuxChunk c;
      while (v.next(c)) {
        next += c.lost_before;
        r.lost_seen += c.lost_before;
        const std::byte* p = c.data.data();
        const std::byte* end = p + c.data.size();
        for (; p < end; p += kR) {
          std::uint64_t words[3];
          std::memcpy(words, p, kR);
          const std::uint64_t want = next % kSourceRecords;
          if (words[0] != want || words[1] != ~want || words[2] != want * kMix) ++r.errors;
          ++next;
          ++r.received;
        }
      }
      ring.release(v);
      if (v.empty()) {
        if (closed) break;
        backoff.pause();
      } else {
        backoff.reset();
      }
    }
    if (next != records) ++r.errors;
  });
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  std::uint64_t seq = 0;
  Backoff backoff;
  while (seq < records) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, records - seq));
    const std::size_t at = static_cast<std::size_t>(seq % kSourceRecords);
    const std::size_t take = std::min(n, kSourceRecords - at);  // batches do not wrap the source
    backoff.reset();
    if (wait_for_space || seq + take == records) {
      while (!ring.fits(take * kR)) backoff.pause();
    } else if (seq / kBurst != (seq + take) / kBurst) {
      // Lossy mode: bursts of kBurst records, each once half the ring is free, so that every
      // burst both delivers and loses records whatever the scheduling.
      while (ring.free_space() < ring.capacity() / 2) backoff.pause();
    }
    auto w = ring.write(std::span<const std::byte>(src.data() + at * kR, take * kR));
    if (!w) {
      std::fprintf(stderr, "write: %s\n", w.error().to_string().c_str());
      ++r.errors;
      break;
    }
    seq += take;
  }
  ring.close();
  consumer.join();
  r.seconds = seconds_since(t0);
  r.lost = ring.lost();
  return r;
}

// The baseline: the same batches memcpy-ed from the same source into a buffer of the ring's size.
double run_memcpy(const std::vector<std::byte>& src, std::size_t batch, std::uint64_t records,
                  std::size_t ring_records) {
  std::vector<std::byte> dst(ring_records * kR);
  std::size_t off = 0;
  const auto t0 = Clock::now();
  std::uint64_t seq = 0;
  while (seq < records) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, records - seq));
    const std::size_t at = static_cast<std::size_t>(seq % kSourceRecords);
    const std::size_t take = std::min(n, kSourceRecords - at);
    if (off + take * kR > dst.size()) off = 0;
    std::memcpy(dst.data() + off, src.data() + at * kR, take * kR);
    asm volatile("" : : "g"(dst.data()) : "memory");
    off += take * kR;
    seq += take;
  }
  return seconds_since(t0);
}

bool failed(const char* what) {
  std::fprintf(stderr, "ERROR: %s\n", what);
  return false;
}

bool check_lossless(const RunResult& r, std::uint64_t records) {
  bool ok = true;
  if (r.errors != 0) ok = failed("a record arrived out of order, twice or damaged");
  if (r.received != records) ok = failed("not every record arrived");
  if (r.lost != 0) ok = failed("records were lost although the producer waited for space");
  return ok;
}

// A ring of 61 records and a producer that never waits for space (bursts of kBurst): losses must be
// reported exactly where the sequence numbers skip, and everything written must arrive.
bool check_lossy(const std::vector<std::byte>& src, int consumer_cpu) {
  const std::uint64_t records = 200'000;
  const RunResult r = run_ring(src, 5, records, 61, /*wait_for_space=*/false, 0, consumer_cpu);
  bool ok = true;
  if (r.errors != 0) ok = failed("lossy: order, damage or count");
  if (r.received + r.lost != records) ok = failed("lossy: received + lost != written");
  if (r.lost_seen != r.lost) ok = failed("lossy: truncation markers disagree with lost()");
  // Each burst starts with at least half the ring free, so some records of every burst
  // arrive; whether any are lost depends on the scheduling (the race test forces losses).
  if (r.received < records / kBurst) ok = failed("lossy: fewer records arrived than bursts");
  std::printf(
      "lossy check (61-record ring, bursts of %llu records without waiting): %llu received, "
      "%llu lost, every gap reported\n",
      static_cast<unsigned long long>(kBurst), static_cast<unsigned long long>(r.received),
      static_cast<unsigned long long>(r.lost));
  return ok;
}

void usage() {
  std::puts(
      "usage: bts_bench [--quick] [--reps N] [--records N] [--ring-records N] [--min-view N]");
}

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  std::optional<std::uint64_t> records;
  const bool parsed =
      parse_args(argc, argv, &opt.quick, [&](std::string_view a, const std::string& v) {
        if (a == "--reps") {
          opt.reps = std::max(1, std::atoi(v.c_str()));
        } else if (a == "--records") {
          records = std::strtoull(v.c_str(), nullptr, 10);
          return *records != 0;
        } else if (a == "--min-view") {
          opt.min_view = static_cast<std::size_t>(std::strtoull(v.c_str(), nullptr, 10));
        } else if (a == "--ring-records") {
          opt.ring_records = static_cast<std::size_t>(std::strtoull(v.c_str(), nullptr, 10));
          return opt.ring_records >= 128;
        } else {
          return false;
        }
        return true;
      });
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.records = 200'000;
  }
  if (records) opt.records = *records;
  if (opt.min_view == 0) opt.min_view = opt.ring_records / 4;
  if (opt.min_view > opt.ring_records / 2) return std::nullopt;
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse(argc, argv);
  if (!parsed) {
    usage();
    return 2;
  }
  Options opt = *parsed;
  // The producer (this thread) and the consumer on two different CPUs: left to the scheduler,
  // both sometimes share one CPU and the figures drop 10x.
  if (auto cpus = hwarb::linux::cpu_affinity(0);
      cpus && cpus->size() >= 2 && hwarb::linux::pin_to_cpu(0, (*cpus)[0])) {
    opt.consumer_cpu = (*cpus)[1];
    std::printf("producer and memcpy on CPU %d, consumer on CPU %d\n", (*cpus)[0],
                opt.consumer_cpu);
  } else {
    std::printf("not pinned (fewer than 2 CPUs allowed)\n");
  }
  const std::vector<std::byte> src = make_source();
  bool ok = check_lossy(src, opt.consumer_cpu);
  const auto t0 = Clock::now();

  struct Row {
    std::size_t batch;
    std::vector<double> ring, copy;
  };
  std::vector<Row> rows;
  for (std::size_t batch : {std::size_t{1}, std::size_t{8}, std::size_t{64}}) {
    Row row{batch, {}, {}};
    for (int rep = 0; rep < opt.reps; ++rep) {
      const RunResult r =
          run_ring(src, batch, opt.records, opt.ring_records, true, opt.min_view, opt.consumer_cpu);
      ok = check_lossless(r, opt.records) && ok;
      row.ring.push_back(static_cast<double>(opt.records) / r.seconds);
      row.copy.push_back(static_cast<double>(opt.records) /
                         run_memcpy(src, batch, opt.records, opt.ring_records));
    }
    rows.push_back(std::move(row));
  }

  std::printf(
      "\n### records/s through the AUX ring (1 producer + 1 consumer thread, %zu-record ring = "
      "%zu KiB, %llu records of %zu bytes per rep; median of %d, [min-max])\n\n"
      "| records per write | AUX ring records/s | memcpy records/s | ring/memcpy | ring GB/s |\n"
      "|---:|---:|---:|---:|---:|\n",
      opt.ring_records, opt.ring_records * kR / 1024, static_cast<unsigned long long>(opt.records),
      kR, opt.reps);
  for (const Row& row : rows) {
    const double ring = median(row.ring);
    const double copy = median(row.copy);
    std::printf("| %zu | %s | %s | %s | %.2f |\n", row.batch, rate_range(row.ring).c_str(),
                rate_range(row.copy).c_str(), ratio(ring, copy).c_str(),
                ring * static_cast<double>(kR) / 1e9);
  }
  std::printf("\nchecked: every record once, in order, intact, none lost; total time %.1f s\n",
              seconds_since(t0));
  return ok ? 0 : 1;
}

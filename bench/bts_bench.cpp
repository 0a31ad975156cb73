// bench/bts_bench.cpp — BTS records per second through the AUX ring (hwarb::bts::AuxRing), one
// producer thread and one consumer thread, against a plain memcpy of the same bytes in the same
// run (bench/README.md).
//
//   bts_bench [--quick] [--reps N] [--records N] [--ring-records N] [--min-view N]
//
// For each batch size (1, 8 and 64 records of 24 bytes per write()): the producer copies records
// from a source array into the ring, waiting for space when the ring is full (AuxRing::fits, a
// short spin, then AuxRing::wait_for_space: nothing is lost); the consumer waits until a view
// holds at least --min-view records (default a quarter of the ring, which is also the ring's
// wakeup watermark) — looking again after short pauses, then sleeping in
// AuxRing::wait_for_data —, reads it in place, checks every record's
// three words against its sequence number, and releases the view. The producer and the consumer
// are pinned to the first two allowed CPUs. Baseline: the producer's thread memcpy-ing the same
// batches from the same source array into a destination buffer of the ring's size, cycling.
// Information only, not the baseline: the cross-core floor, the same bytes handed from the
// producer thread to the consumer thread through a plain buffer with the least synchronisation.
// Repetitions of the ring, the baseline and the floor are interleaved; medians of N are reported
// with [min-max].
//
// Every run checks what it measures: every record arrives exactly once, in order and intact, and
// nothing is lost (through the ring and through the floor's buffer); a 61-record ring fed in
// bursts by a producer that never waits must report every sequence gap exactly (truncation
// markers and lost()); the record check itself must count a damaged record. A failed check makes
// the exit status 1. --quick (the ctest smoke test) runs the checks with 200 000 records per
// batch size and one repetition.
#include <emmintrin.h>

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
using hwarb::bench::rate_range;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;

constexpr std::size_t kR = bts::kDefaultRecordSize;
constexpr std::size_t kSourceRecords = 1 << 16;  // 1.5 MiB of records, reused cyclically
constexpr std::uint64_t kMix = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kBurst = 256;  // records per burst of the lossy check
constexpr int kSpins = 1000;           // pauses (producer) or looks (consumer) before sleeping

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

// The damaged records among `count` records at p, record k (from `first` on) being source record
// k % kSourceRecords: its words must be s, ~s and s * kMix for s = k % kSourceRecords.
std::uint64_t count_damaged(const std::byte* p, std::uint64_t count, std::uint64_t first) {
  std::uint64_t bad = 0;
  for (std::uint64_t k = first; k != first + count; ++k, p += kR) {
    std::uint64_t words[3];
    std::memcpy(words, p, kR);
    const std::uint64_t want = k % kSourceRecords;
    bad += static_cast<std::uint64_t>((words[0] != want) | (words[1] != ~want) |
                                      (words[2] != want * kMix));
  }
  return bad;
}

// The consumer's check of every record's three words, as count_damaged() but ~4x faster (it was
// the consumer's bottleneck): the expected words are kept incrementally (s + 1 and s * kMix +
// kMix per record) and XOR-ed with the records' words, the differences OR-ed together without a
// branch per record, two records (three 16-byte vectors) at a time with SSE2. Only a range that
// differs somewhere is counted record by record.
std::uint64_t check_records(const std::byte* p, std::uint64_t count, std::uint64_t first) {
  const std::byte* const start = p;
  std::uint64_t diff = 0;
  __m128i acc = _mm_setzero_si128();
  for (std::uint64_t k = first, left = count; left != 0;) {
    const std::uint64_t s = k % kSourceRecords;
    const std::uint64_t n = std::min(left, kSourceRecords - s);  // up to the source's end
    // Records s and s + 1 are the words s, ~s, s * kMix, s + 1, ~(s + 1), (s + 1) * kMix.
    __m128i want0 = _mm_set_epi64x(static_cast<long long>(~s), static_cast<long long>(s));
    __m128i want1 = _mm_set_epi64x(static_cast<long long>(s + 1), static_cast<long long>(s * kMix));
    __m128i want2 =
        _mm_set_epi64x(static_cast<long long>((s + 1) * kMix), static_cast<long long>(~(s + 1)));
    const __m128i step0 = _mm_set_epi64x(-2, 2);
    const __m128i step1 = _mm_set_epi64x(2, static_cast<long long>(2 * kMix));
    const __m128i step2 = _mm_set_epi64x(static_cast<long long>(2 * kMix), -2);
    std::uint64_t i = 0;
    for (; i + 2 <= n; i += 2, p += 2 * kR) {
      const auto* v = reinterpret_cast<const __m128i*>(p);
      acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(v), want0));
      acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(v + 1), want1));
      acc = _mm_or_si128(acc, _mm_xor_si128(_mm_loadu_si128(v + 2), want2));
      want0 = _mm_add_epi64(want0, step0);
      want1 = _mm_add_epi64(want1, step1);
      want2 = _mm_add_epi64(want2, step2);
    }
    if (i != n) {  // the odd last record
      const std::uint64_t want = s + i;
      std::uint64_t words[3];
      std::memcpy(words, p, kR);
      diff |= (words[0] ^ want) | ~(words[1] ^ want) | (words[2] ^ want * kMix);
      p += kR;
    }
    k += n;
    left -= n;
  }
  std::uint64_t lanes[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), acc);
  diff |= lanes[0] | lanes[1];
  return diff == 0 ? 0 : count_damaged(start, count, first);
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
  const std::size_t watermark = min_view_records != 0 ? min_view_records : ring_records / 4;
  auto created = bts::AuxRing::create({.size = ring_records * kR, .watermark = watermark * kR});
  if (!created) {
    std::fprintf(stderr, "AuxRing::create: %s\n", created.error().to_string().c_str());
    r.errors = 1;
    return r;
  }
  bts::AuxRing& ring = **created;
  std::atomic<bool> go{false};
  std::thread consumer([&] {
    if (consumer_cpu >= 0) (void)hwarb::native::pin_to_cpu(0, consumer_cpu);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    std::uint64_t next = 0;
    int idle = 0;
    for (;;) {
      const bool closed = ring.closed();
      bts::AuxView v = ring.view();
      if (!closed && v.end() - v.begin() < min_view_bytes) {
        // Look again after a pause (not at once: polling data_head takes its cache line from
        // the producer on every look), and after kSpins looks sleep until the producer passes
        // the next wakeup watermark (a perf consumer's poll()), so that an idle consumer leaves
        // its CPU to whoever needs it. Sleeping at once cost ~15% at 64-record writes: a futex
        // wakeup in this VM takes tens of microseconds, while the ring fills in ~100.
        if (++idle < kSpins) {
          for (int i = 0; i < 64; ++i) cpu_relax();
        } else {
          ring.wait_for_data(std::chrono::milliseconds(100));
        }
        continue;
      }
      idle = 0;
      bts::AuxChunk c;
      while (v.next(c)) {
        next += c.lost_before;
        r.lost_seen += c.lost_before;
        const std::uint64_t count = c.data.size() / kR;
        r.errors += check_records(c.data.data(), count, next);
        next += count;
        r.received += count;
      }
      ring.release(v);
      if (v.empty() && closed) break;
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
      // Spin briefly, then sleep until the consumer's release wakes this thread.
      for (int spins = 0; !ring.fits(take * kR);) {
        if (++spins < kSpins) {
          cpu_relax();
        } else {
          ring.wait_for_space(take * kR, std::chrono::milliseconds(100));
        }
      }
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

// The cross-core floor (information, not the target's baseline): the same batches memcpy-ed by
// the producer's thread into a plain buffer of the ring's size, and read and checked by the
// consumer thread exactly as through the ring, with the least synchronisation that keeps the
// bytes safe: the producer publishes its position once per `block` records (and before it waits
// for space), the consumer publishes its own once per block read. No AuxRing, no markers, no
// padding (a batch that straddles the end of the buffer is copied in two pieces).
RunResult run_floor(const std::vector<std::byte>& src, std::size_t batch, std::uint64_t records,
                    std::size_t ring_records, std::size_t block, int consumer_cpu) {
  struct alignas(64) Position {
    std::atomic<std::uint64_t> v{0};
  };
  RunResult r;
  std::vector<std::byte> buf(ring_records * kR);
  Position head;
  Position tail;
  std::atomic<bool> go{false};
  std::thread consumer([&] {
    if (consumer_cpu >= 0) (void)hwarb::native::pin_to_cpu(0, consumer_cpu);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    std::uint64_t next = 0;
    Backoff backoff;
    while (next < records) {
      const std::uint64_t h = head.v.load(std::memory_order_acquire);
      if (h - next < block && h != records) {
        backoff.pause();
        continue;
      }
      backoff.reset();
      const std::uint64_t stop = std::min(h, next + block);
      while (next < stop) {
        const std::uint64_t off = next % ring_records;
        const std::uint64_t count = std::min(stop - next, ring_records - off);
        r.errors += check_records(buf.data() + off * kR, count, next);
        next += count;
        r.received += count;
      }
      tail.v.store(next, std::memory_order_release);
    }
  });
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  std::uint64_t seq = 0;
  std::uint64_t published = 0;
  std::uint64_t tail_cache = 0;
  Backoff backoff;
  while (seq < records) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, records - seq));
    const std::size_t at = static_cast<std::size_t>(seq % kSourceRecords);
    const std::size_t take = std::min(n, kSourceRecords - at);
    if (seq + take - tail_cache > ring_records) {
      head.v.store(seq, std::memory_order_release);
      published = seq;
      backoff.reset();
      while (seq + take - (tail_cache = tail.v.load(std::memory_order_acquire)) > ring_records) {
        backoff.pause();
      }
    }
    const std::size_t off = static_cast<std::size_t>(seq % ring_records);
    const std::size_t first = std::min(take, ring_records - off);
    std::memcpy(buf.data() + off * kR, src.data() + at * kR, first * kR);
    if (first != take) std::memcpy(buf.data(), src.data() + (at + first) * kR, (take - first) * kR);
    seq += take;
    if (seq - published >= block || seq == records) {
      head.v.store(seq, std::memory_order_release);
      published = seq;
    }
  }
  consumer.join();
  r.seconds = seconds_since(t0);
  if (r.received != records) ++r.errors;
  return r;
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

// The record check must see damage in any word of any record, also across the source's end
// and in the odd last record of a range, and count damaged records exactly.
bool check_the_check(const std::vector<std::byte>& src) {
  constexpr std::uint64_t kCount = 7;
  constexpr std::uint64_t kFirst = kSourceRecords - 3;  // records 3 before and 4 after the wrap
  std::vector<std::byte> buf(kCount * kR);
  std::memcpy(buf.data(), src.data() + kFirst * kR, 3 * kR);
  std::memcpy(buf.data() + 3 * kR, src.data(), 4 * kR);
  bool ok = check_records(buf.data(), kCount, kFirst) == 0;
  for (std::size_t byte = 0; byte < buf.size(); ++byte) {
    std::vector<std::byte> bad = buf;
    bad[byte] ^= std::byte{0x10};
    ok = ok && check_records(bad.data(), kCount, kFirst) == 1;
  }
  std::vector<std::byte> two = buf;
  two[0] ^= std::byte{1};
  two[two.size() - 1] ^= std::byte{1};
  ok = ok && check_records(two.data(), kCount, kFirst) == 2;
  return ok || failed("the record check missed or miscounted damaged records");
}

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  std::optional<std::uint64_t> records;
  const bool parsed = hwarb::bench::Args("bts_bench")
                          .number("reps", "N", &opt.reps, 1)
                          .number("records", "N", &records, std::uint64_t{1})
                          .number("ring-records", "N", &opt.ring_records, std::size_t{128})
                          .number("min-view", "N", &opt.min_view, std::size_t{0})
                          .parse(argc, argv, &opt.quick);
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.records = 200'000;
  }
  if (records) opt.records = *records;
  if (opt.min_view == 0) opt.min_view = opt.ring_records / 4;
  if (opt.min_view > opt.ring_records / 2) {
    std::fprintf(stderr, "bts_bench: --min-view: %zu is more than half of --ring-records %zu\n",
                 opt.min_view, opt.ring_records);
    return std::nullopt;
  }
  return opt;
}

int run(const Options& opt_in) {
  Options opt = opt_in;
  // The producer (this thread) and the consumer on two different CPUs: left to the scheduler,
  // both sometimes share one CPU and the figures drop 10x.
  if (auto cpus = hwarb::native::cpu_affinity(0);
      cpus && cpus->size() >= 2 && hwarb::native::pin_to_cpu(0, (*cpus)[0])) {
    opt.consumer_cpu = (*cpus)[1];
    std::printf("producer and memcpy on CPU %d, consumer on CPU %d\n", (*cpus)[0],
                opt.consumer_cpu);
  } else {
    std::printf("not pinned (fewer than 2 CPUs allowed)\n");
  }
  const std::vector<std::byte> src = make_source();
  bool ok = check_the_check(src);
  ok = check_lossy(src, opt.consumer_cpu) && ok;
  const auto t0 = Clock::now();

  struct Row {
    std::size_t batch;
    std::vector<double> ring, copy, floor;
  };
  std::vector<Row> rows;
  for (std::size_t batch : {std::size_t{1}, std::size_t{8}, std::size_t{64}}) {
    Row row{batch, {}, {}, {}};
    for (int rep = 0; rep < opt.reps; ++rep) {
      const RunResult r =
          run_ring(src, batch, opt.records, opt.ring_records, true, opt.min_view, opt.consumer_cpu);
      ok = check_lossless(r, opt.records) && ok;
      row.ring.push_back(static_cast<double>(opt.records) / r.seconds);
      row.copy.push_back(static_cast<double>(opt.records) /
                         run_memcpy(src, batch, opt.records, opt.ring_records));
      const RunResult f =
          run_floor(src, batch, opt.records, opt.ring_records, opt.min_view, opt.consumer_cpu);
      ok = check_lossless(f, opt.records) && ok;
      row.floor.push_back(static_cast<double>(opt.records) / f.seconds);
    }
    rows.push_back(std::move(row));
  }

  std::printf(
      "\n### records/s through the AUX ring (1 producer + 1 consumer thread, %zu-record ring = "
      "%zu KiB, %llu records of %zu bytes per rep; median of %d, [min-max])\n\n"
      "| records per write | AUX ring records/s | memcpy records/s | ring/memcpy | ring GB/s | "
      "cross-core floor records/s | floor/memcpy |\n"
      "|---:|---:|---:|---:|---:|---:|---:|\n",
      opt.ring_records, opt.ring_records * kR / 1024, static_cast<unsigned long long>(opt.records),
      kR, opt.reps);
  for (const Row& row : rows) {
    const double ring = median(row.ring);
    const double copy = median(row.copy);
    std::printf("| %zu | %s | %s | %s | %.2f | %s | %s |\n", row.batch,
                rate_range(row.ring).c_str(), rate_range(row.copy).c_str(),
                ratio(ring, copy).c_str(), ring * static_cast<double>(kR) / 1e9,
                rate_range(row.floor).c_str(), ratio(median(row.floor), copy).c_str());
  }
  std::printf("\nchecked: every record once, in order, intact, none lost; total time %.1f s\n",
              seconds_since(t0));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return hwarb::bench::driver_main(argc, argv, parse, run);
}

#include "hwarb/linux/perf_ring.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "hwarb/linux/fd.h"
#include "hwarb/linux/syscalls.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using ::testing::HasSubstr;

// Writes records into a synthetic data area at ring positions (taken modulo its size), as the
// kernel does.
class RingBuilder {
 public:
  RingBuilder(std::size_t size, std::uint64_t start) : data_(size, 0xee), head_(start) {}

  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    for (std::size_t i = 0; i < n; ++i) data_[(head_ + i) & (data_.size() - 1)] = b[i];
    head_ += n;
  }
  void record(std::uint32_t type, std::uint16_t misc, const std::vector<std::uint64_t>& words) {
    const perf_event_header h{type, misc, static_cast<std::uint16_t>(8 + 8 * words.size())};
    bytes(&h, sizeof h);
    for (const std::uint64_t w : words) bytes(&w, sizeof w);
  }
  // A sample laid out for kWatchSampleType (IDENTIFIER first).
  void sample(const PerfSample& s) {
    record(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER,
           {s.id, s.ip, (std::uint64_t{s.tid} << 32) | s.pid, s.time, s.addr});
  }

  std::span<const std::uint8_t> data() const { return data_; }
  std::uint64_t head() const { return head_; }

 private:
  std::vector<std::uint8_t> data_;
  std::uint64_t head_;
};

PerfSample sample_n(std::uint64_t n) {
  return PerfSample{.ip = 0x400000 + n,
                    .pid = 100,
                    .tid = static_cast<std::uint32_t>(100 + n),
                    .time = 1000 * n,
                    .addr = 0x7000 + 8 * n,
                    .id = 40 + n};
}

TEST(PerfRingParse, SplitsRecordsInOrderWithTheirHeaders) {
  RingBuilder ring(256, 0);
  ring.record(PERF_RECORD_MMAP, 2, {1, 2, 3});
  ring.record(PERF_RECORD_LOST, 0, {7, 9});
  ring.sample(sample_n(1));
  auto records = split_ring(ring.data(), 0, ring.head());
  ASSERT_TRUE(records.has_value()) << records.error().to_string();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].type, std::uint32_t{PERF_RECORD_MMAP});
  EXPECT_EQ((*records)[0].misc, 2);
  EXPECT_EQ((*records)[0].size, 32);
  ASSERT_EQ((*records)[0].body.size(), 24u);
  std::uint64_t third = 0;
  std::memcpy(&third, (*records)[0].body.data() + 16, 8);
  EXPECT_EQ(third, 3u);
  EXPECT_EQ((*records)[1].type, std::uint32_t{PERF_RECORD_LOST});
  EXPECT_EQ((*records)[2].type, std::uint32_t{PERF_RECORD_SAMPLE});
  auto s = decode_sample((*records)[2], kWatchSampleType);
  ASSERT_TRUE(s.has_value()) << s.error().to_string();
  EXPECT_EQ(*s, sample_n(1));
  auto lost = decode_lost((*records)[1]);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(*lost, 9u);
}

TEST(PerfRingParse, EmptyRangeHasNoRecords) {
  RingBuilder ring(64, 0);
  auto records = split_ring(ring.data(), 4096, 4096);
  ASSERT_TRUE(records.has_value());
  EXPECT_TRUE(records->empty());
}

TEST(PerfRingParse, RecordsStraddlingTheEndAreReadAcrossTheWrap) {
  // 128-byte area, counters far past the size. Start at offset 88: the first sample (48 bytes)
  // straddles the end in its body, the second starts at offset 8 whole; then restart at offset
  // 124 so that a header itself straddles.
  for (const std::uint64_t start : {std::uint64_t{128 * 1000 + 88}, std::uint64_t{128 * 7 + 124}}) {
    RingBuilder ring(128, start);
    ring.sample(sample_n(1));
    ring.sample(sample_n(2));
    auto batch = parse_ring(ring.data(), start, ring.head(), kWatchSampleType);
    ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
    ASSERT_EQ(batch->samples.size(), 2u) << "start " << start;
    EXPECT_EQ(batch->samples[0], sample_n(1));
    EXPECT_EQ(batch->samples[1], sample_n(2));
    auto records = split_ring(ring.data(), start, ring.head());
    ASSERT_TRUE(records.has_value());
    ASSERT_EQ(records->size(), 2u);
    EXPECT_EQ(decode_sample((*records)[0], kWatchSampleType).value(), sample_n(1));
  }
}

TEST(PerfRingParse, FullRingOfExactlyTheAreaSizeParses) {
  RingBuilder ring(64, 32);
  ring.record(PERF_RECORD_LOST_SAMPLES, 0, {5, 0, 0, 0, 0, 0, 0});  // 64 bytes
  auto batch = parse_ring(ring.data(), 32, ring.head(), kWatchSampleType);
  ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
  EXPECT_EQ(batch->lost, 5u);
}

TEST(PerfRingParse, LostRecordsAreSummedAndOthersCounted) {
  RingBuilder ring(512, 0);
  ring.sample(sample_n(1));
  ring.record(PERF_RECORD_LOST, 0, {41, 3});
  ring.record(PERF_RECORD_COMM, 0, {0, 0, 0});
  ring.record(PERF_RECORD_LOST_SAMPLES, 0, {4});
  ring.record(PERF_RECORD_LOST, 0, {41, 10, 0xdead});  // with a sample_id trailer
  ring.sample(sample_n(2));
  auto batch = parse_ring(ring.data(), 0, ring.head(), kWatchSampleType);
  ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
  EXPECT_EQ(batch->lost, 17u);
  EXPECT_EQ(batch->other, 1u);
  ASSERT_EQ(batch->samples.size(), 2u);
  EXPECT_EQ(batch->samples[1], sample_n(2));
}

TEST(PerfRingParse, SampleTypeWithIdAtTheEndDecodesTheSameFields) {
  const std::uint64_t type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                             PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_CPU |
                             PERF_SAMPLE_PERIOD;
  const PerfSample want = sample_n(3);
  RingBuilder ring(256, 0);
  ring.record(
      PERF_RECORD_SAMPLE, 0,
      {want.ip, (std::uint64_t{want.tid} << 32) | want.pid, want.time, want.addr, want.id, 1, 1});
  auto batch = parse_ring(ring.data(), 0, ring.head(), type);
  ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
  ASSERT_EQ(batch->samples.size(), 1u);
  EXPECT_EQ(batch->samples[0], want);
}

void expect_ring_error(const Result<RingBatch>& r, const char* what) {
  ASSERT_FALSE(r.has_value()) << what;
  EXPECT_EQ(r.error().code(), ErrorCode::kIo) << what << ": " << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with("ring: ")) << what << ": " << r.error().message();
}

TEST(PerfRingParse, GarbageIsEioNamingRing) {
  RingBuilder ring(128, 0);
  ring.sample(sample_n(1));
  const auto data = ring.data();
  expect_ring_error(parse_ring(data, 48, 0, kWatchSampleType), "head behind tail");
  expect_ring_error(parse_ring(data, 0, 129, kWatchSampleType), "more than the area");
  expect_ring_error(parse_ring(data, 0, 52, kWatchSampleType), "truncated header");
  expect_ring_error(parse_ring(data, 0, 40, kWatchSampleType), "record past head");

  RingBuilder zero(64, 0);
  zero.record(PERF_RECORD_SAMPLE, 0, {});
  auto z = parse_ring(zero.data(), 0, 16, kWatchSampleType);  // an 8-byte sample, then zeros
  expect_ring_error(z, "short sample");
  EXPECT_THAT(z.error().message(), HasSubstr("too short"));

  std::vector<std::uint8_t> zeros(64, 0);
  auto zsize = parse_ring(zeros, 0, 8, kWatchSampleType);
  expect_ring_error(zsize, "size 0");
  EXPECT_THAT(zsize.error().message(), HasSubstr("size 0"));

  RingBuilder lost(64, 0);
  lost.record(PERF_RECORD_LOST, 0, {1});
  expect_ring_error(parse_ring(lost.data(), 0, lost.head(), kWatchSampleType), "short lost");
}

TEST(PerfRingParse, BadAreaSizeAndUnknownSampleBitsAreEinval) {
  std::vector<std::uint8_t> odd(96, 0);
  auto r = parse_ring(odd, 0, 0, kWatchSampleType);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("data: ")) << r.error().message();

  RingBuilder ring(64, 0);
  auto bits = parse_ring(ring.data(), 0, 0, kWatchSampleType | PERF_SAMPLE_CALLCHAIN);
  ASSERT_FALSE(bits.has_value());
  EXPECT_EQ(bits.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bits.error().message().starts_with("sample_type: ")) << bits.error().message();

  RingRecord comm{PERF_RECORD_COMM, 0, 8, {}};
  auto s = decode_sample(comm, kWatchSampleType);
  ASSERT_FALSE(s.has_value());
  EXPECT_TRUE(s.error().message().starts_with("record: ")) << s.error().message();
  auto l = decode_lost(comm);
  ASSERT_FALSE(l.has_value());
  EXPECT_TRUE(l.error().message().starts_with("record: ")) << l.error().message();
}

TEST(PerfRingMap, RefusesBadPageCountsAndDescriptorsWithoutARing) {
  auto bad = PerfRing::map(0, 3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("data_pages: ")) << bad.error().message();

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd r(fds[0]), w(fds[1]);
  auto pipe_ring = PerfRing::map(r.get(), 1);
  ASSERT_FALSE(pipe_ring.has_value());
  EXPECT_TRUE(pipe_ring.error().message().starts_with("fd: ")) << pipe_ring.error().message();
}

// A forked child that touches `rounds` x `per_round` pages of a mapping made before the fork
// (each touch is one page fault at a known address), one round per byte on `go`, answering each
// round with a byte on `done`; one more byte on `go` makes it exit. It says it is ready with a
// first byte on `done`, once what runs after a fork (the sanitizers' handlers, the first touches
// of its code and stack) has faulted in its pages: those faults are not the test's. Raw system
// calls only.
[[noreturn]] void toucher(pid_t parent, int go, int done, volatile char* pages, std::size_t page,
                          int rounds, int per_round) {
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
  if (::syscall(SYS_getppid) != parent) ::syscall(SYS_exit_group, 1);
  char ready = 0;
  if (::syscall(SYS_write, done, &ready, 1L) != 1) ::syscall(SYS_exit_group, 3);
  for (int r = 0; r < rounds; ++r) {
    char b = 0;
    if (::syscall(SYS_read, go, &b, 1L) != 1) ::syscall(SYS_exit_group, 2);
    for (int i = 0; i < per_round; ++i) pages[(r * per_round + i) * page + 8] = 1;
    if (::syscall(SYS_write, done, &b, 1L) != 1) ::syscall(SYS_exit_group, 3);
  }
  char b = 0;
  if (::syscall(SYS_read, go, &b, 1L) != 1) ::syscall(SYS_exit_group, 2);  // the last byte: exit
  ::syscall(SYS_exit_group, 0);
  __builtin_unreachable();
}

std::uint64_t monotonic_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// The parser against the kernel: page-fault samples of a child (a software event, delivered
// even without debug hardware) through a one-page ring that wraps several times.
TEST(PerfRingKernel, PageFaultSamplesOfAChildComeThroughAWrappingRing) {
  constexpr int kRounds = 4;
  constexpr int kPerRound = 60;  // 60 samples of 48 bytes fit one 4 KiB page with room to spare
  const std::size_t page = page_size();
  const std::size_t span = page * kRounds * kPerRound;
  void* region = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  struct Unmapper {
    void* p;
    std::size_t n;
    ~Unmapper() { ::munmap(p, n); }
  } unmapper{region, span};
  ASSERT_EQ(::madvise(region, span, MADV_NOHUGEPAGE), 0);  // one fault per page
  int go[2], done[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(done, O_CLOEXEC), 0);
  Fd go_r(go[0]), go_w(go[1]), done_r(done[0]), done_w(done[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    toucher(parent, go[0], done[1], static_cast<volatile char*>(region), page, kRounds, kPerRound);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid <= 0) return;
      (void)send_signal(pid, SIGKILL);
      (void)wait_for(pid, false);
    }
  } reaper{pid};
  char ready = 0;
  ASSERT_EQ(::read(done_r.get(), &ready, 1), 1);

  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.sample_period = 1;
  attr.sample_type = kWatchSampleType;
  attr.wakeup_events = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  const std::uint64_t t0 = monotonic_ns();  // the child may fault as soon as the event exists
  auto fd = perf_event_open_attr(attr, pid, -1, -1, 0);
  if (!fd && testing::refused(fd.error())) {
    GTEST_SKIP() << testing::skip_reason("a software perf event", fd.error());
  }
  ASSERT_TRUE(fd.has_value()) << fd.error().to_string();
  auto id = perf_event_id(fd->get());
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  auto ring = PerfRing::map(fd->get(), 1);
  ASSERT_TRUE(ring.has_value()) << ring.error().to_string();
  EXPECT_EQ(ring->data_size(), page);

  std::vector<PerfSample> samples;
  std::uint64_t lost = 0;
  for (int r = 0; r < kRounds; ++r) {
    const char b = 'r';
    ASSERT_EQ(::write(go_w.get(), &b, 1), 1);
    char got = 0;
    ASSERT_EQ(::read(done_r.get(), &got, 1), 1);
    auto ready = poll_in({fd->get()}, 1000);
    ASSERT_TRUE(ready.has_value()) << ready.error().to_string();
    EXPECT_EQ((*ready)[0], POLLIN) << "round " << r;
    EXPECT_GT(ring->pending(), 0u);
    auto batch = ring->drain(kWatchSampleType);
    ASSERT_TRUE(batch.has_value()) << batch.error().to_string();
    EXPECT_EQ(ring->pending(), 0u);
    lost += batch->lost;
    samples.insert(samples.end(), batch->samples.begin(), batch->samples.end());
  }
  const std::uint64_t t1 = monotonic_ns();
  // Once the child exited (and was reaped), its event hangs up.
  const char last = 'x';
  ASSERT_EQ(::write(go_w.get(), &last, 1), 1);
  auto exit = wait_for(pid, false);
  ASSERT_TRUE(exit.has_value()) << exit.error().to_string();
  EXPECT_EQ(exit->kind, WaitKind::kExited);
  reaper.pid = -1;
  auto hup = poll_in({fd->get()}, 1000);
  ASSERT_TRUE(hup.has_value()) << hup.error().to_string();
  EXPECT_NE((*hup)[0] & POLLHUP, 0);
  EXPECT_EQ(lost, 0u);
  ASSERT_GE(samples.size(), std::size_t{kRounds * kPerRound});
  std::set<std::uint64_t> addrs;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const PerfSample& s = samples[i];
    EXPECT_EQ(s.pid, static_cast<std::uint32_t>(pid));
    EXPECT_EQ(s.tid, static_cast<std::uint32_t>(pid));
    EXPECT_EQ(s.id, *id);
    EXPECT_GE(s.time, t0);
    EXPECT_LE(s.time, t1);
    if (i > 0) {
      EXPECT_GE(s.time, samples[i - 1].time);
    }
    addrs.insert(s.addr);
  }
  const auto base = reinterpret_cast<std::uint64_t>(region);
  for (int p = 0; p < kRounds * kPerRound; ++p) {
    EXPECT_TRUE(addrs.contains(base + p * page + 8)) << "page " << p;
  }
  auto count = perf_read_count(fd->get());
  ASSERT_TRUE(count.has_value()) << count.error().to_string();
  EXPECT_GE(*count, samples.size());  // the child may fault again before it exits
}

}  // namespace
}  // namespace hwarb::native

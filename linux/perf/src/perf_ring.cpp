#include "hwarb/linux/perf_ring.h"

#include <atomic>
#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

constexpr std::uint64_t kHeaderSize = sizeof(perf_event_header);
static_assert(kHeaderSize == 8);

// The sample_type bits whose fields decode_sample lays out, each one u64 wide.
constexpr std::uint64_t kKnownSampleBits = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
                                           PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
                                           PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                                           PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;

// Copies `n` bytes at ring position `pos` (taken modulo the size) into `out`, across the wrap.
void copy_out(std::span<const std::uint8_t> data, std::uint64_t pos, std::size_t n,
              std::uint8_t* out) {
  const std::size_t start = static_cast<std::size_t>(pos & (data.size() - 1));
  const std::size_t first = std::min(n, data.size() - start);
  std::memcpy(out, data.data() + start, first);
  if (first < n) std::memcpy(out + first, data.data(), n - first);
}

std::string position(std::uint64_t pos, std::size_t size) {
  return "position " + std::to_string(pos) + " (offset " + std::to_string(pos & (size - 1)) + ")";
}

// Calls fn(header, body) for each record in [tail, head); body is a view into `data` or, for a
// record that wraps, into `scratch`. Stops at fn's first error.
template <typename Fn>
Result<void> walk(std::span<const std::uint8_t> data, std::uint64_t tail, std::uint64_t head,
                  std::vector<std::uint8_t>& scratch, Fn&& fn) {
  const std::size_t size = data.size();
  if (size == 0 || !std::has_single_bit(size)) {
    return make_error(ErrorCode::kInval, "data: the data area has " + std::to_string(size) +
                                             " bytes, not a power of two");
  }
  if (head < tail) {
    return make_error(ErrorCode::kIo, "ring: data_head " + std::to_string(head) +
                                          " is behind data_tail " + std::to_string(tail));
  }
  if (head - tail > size) {
    return make_error(ErrorCode::kIo, "ring: " + std::to_string(head - tail) +
                                          " bytes pending exceed the data area's " +
                                          std::to_string(size));
  }
  for (std::uint64_t pos = tail; pos < head;) {
    const std::uint64_t left = head - pos;
    if (left < kHeaderSize) {
      return make_error(ErrorCode::kIo, "ring: the record header at " + position(pos, size) +
                                            " is truncated (" + std::to_string(left) +
                                            " bytes before data_head)");
    }
    perf_event_header header;
    copy_out(data, pos, sizeof header, reinterpret_cast<std::uint8_t*>(&header));
    if (header.size < kHeaderSize) {
      return make_error(ErrorCode::kIo, "ring: the record at " + position(pos, size) +
                                            " has size " + std::to_string(header.size) +
                                            ", less than its 8-byte header");
    }
    if (header.size > left) {
      return make_error(ErrorCode::kIo, "ring: the record at " + position(pos, size) +
                                            " has size " + std::to_string(header.size) +
                                            " but only " + std::to_string(left) +
                                            " bytes are before data_head");
    }
    const std::size_t body_len = header.size - kHeaderSize;
    const std::uint64_t body_pos = pos + kHeaderSize;
    const std::size_t body_start = static_cast<std::size_t>(body_pos & (size - 1));
    std::span<const std::uint8_t> body;
    if (body_start + body_len <= size) {
      body = data.subspan(body_start, body_len);
    } else {
      scratch.resize(body_len);
      copy_out(data, body_pos, body_len, scratch.data());
      body = scratch;
    }
    if (auto r = fn(header, body); !r) return r;
    pos += header.size;
  }
  return {};
}

std::uint64_t load_u64(std::span<const std::uint8_t> body, std::size_t off) {
  std::uint64_t v = 0;
  std::memcpy(&v, body.data() + off, sizeof v);
  return v;
}

std::string record_text(std::uint32_t type, std::size_t body_len) {
  return "record type " + std::to_string(type) + " of " + std::to_string(body_len + kHeaderSize) +
         " bytes";
}

Result<PerfSample> decode_sample_body(std::span<const std::uint8_t> body,
                                      std::uint64_t sample_type) {
  if ((sample_type & ~kKnownSampleBits) != 0) {
    return make_error(ErrorCode::kInval,
                      "sample_type: bits " + hex(sample_type & ~kKnownSampleBits) +
                          " are not decoded (known: " + hex(kKnownSampleBits) + ")");
  }
  const std::size_t need = 8 * static_cast<std::size_t>(std::popcount(sample_type));
  if (body.size() < need) {
    return make_error(ErrorCode::kIo,
                      "ring: a PERF_RECORD_SAMPLE of " + std::to_string(body.size() + kHeaderSize) +
                          " bytes is too short for sample_type " + hex(sample_type) + " (needs " +
                          std::to_string(need + kHeaderSize) + ")");
  }
  PerfSample s;
  std::size_t off = 0;
  auto next = [&] {
    const std::uint64_t v = load_u64(body, off);
    off += 8;
    return v;
  };
  if (sample_type & PERF_SAMPLE_IDENTIFIER) s.id = next();
  if (sample_type & PERF_SAMPLE_IP) s.ip = next();
  if (sample_type & PERF_SAMPLE_TID) {
    const std::uint64_t v = next();  // u32 pid, u32 tid
    s.pid = static_cast<std::uint32_t>(v);
    s.tid = static_cast<std::uint32_t>(v >> 32);
  }
  if (sample_type & PERF_SAMPLE_TIME) s.time = next();
  if (sample_type & PERF_SAMPLE_ADDR) s.addr = next();
  if (sample_type & PERF_SAMPLE_ID) s.id = next();
  // STREAM_ID, CPU (u32 cpu, u32 reserved) and PERIOD follow; hwarb has no use for them.
  return s;
}

Result<std::uint64_t> decode_lost_body(std::uint32_t type, std::span<const std::uint8_t> body) {
  const std::size_t need = type == PERF_RECORD_LOST ? 16 : 8;
  if (body.size() < need) {
    return make_error(ErrorCode::kIo, "ring: a " + record_text(type, body.size()) +
                                          " is too short for its lost count (needs " +
                                          std::to_string(need + kHeaderSize) + ")");
  }
  return load_u64(body, need - 8);
}

}  // namespace

Result<std::vector<RingRecord>> split_ring(std::span<const std::uint8_t> data, std::uint64_t tail,
                                           std::uint64_t head) {
  std::vector<RingRecord> records;
  std::vector<std::uint8_t> scratch;
  auto r =
      walk(data, tail, head, scratch,
           [&](const perf_event_header& h, std::span<const std::uint8_t> body) -> Result<void> {
             records.push_back(RingRecord{h.type, h.misc, h.size, {body.begin(), body.end()}});
             return {};
           });
  if (!r) return std::unexpected(r.error());
  return records;
}

Result<PerfSample> decode_sample(const RingRecord& record, std::uint64_t sample_type) {
  if (record.type != PERF_RECORD_SAMPLE) {
    return make_error(ErrorCode::kInval,
                      "record: type " + std::to_string(record.type) + " is not PERF_RECORD_SAMPLE");
  }
  return decode_sample_body(record.body, sample_type);
}

Result<std::uint64_t> decode_lost(const RingRecord& record) {
  if (record.type != PERF_RECORD_LOST && record.type != PERF_RECORD_LOST_SAMPLES) {
    return make_error(ErrorCode::kInval, "record: type " + std::to_string(record.type) +
                                             " is neither PERF_RECORD_LOST nor "
                                             "PERF_RECORD_LOST_SAMPLES");
  }
  return decode_lost_body(record.type, record.body);
}

Result<RingBatch> parse_ring(std::span<const std::uint8_t> data, std::uint64_t tail,
                             std::uint64_t head, std::uint64_t sample_type) {
  if ((sample_type & ~kKnownSampleBits) != 0) {
    return std::unexpected(decode_sample_body({}, sample_type).error());
  }
  RingBatch batch;
  std::vector<std::uint8_t> scratch;
  auto r =
      walk(data, tail, head, scratch,
           [&](const perf_event_header& h, std::span<const std::uint8_t> body) -> Result<void> {
             if (h.type == PERF_RECORD_SAMPLE) {
               auto s = decode_sample_body(body, sample_type);
               if (!s) return std::unexpected(s.error());
               batch.samples.push_back(*s);
             } else if (h.type == PERF_RECORD_LOST || h.type == PERF_RECORD_LOST_SAMPLES) {
               auto n = decode_lost_body(h.type, body);
               if (!n) return std::unexpected(n.error());
               batch.lost += *n;
             } else {
               ++batch.other;
             }
             return {};
           });
  if (!r) return std::unexpected(r.error());
  return batch;
}

Result<AuxEvent> decode_aux_event(const RingRecord& record) {
  if (record.type != PERF_RECORD_AUX) {
    return make_error(ErrorCode::kInval,
                      "record: type " + std::to_string(record.type) + " is not PERF_RECORD_AUX");
  }
  if (record.body.size() < 3 * sizeof(std::uint64_t)) {
    return make_error(ErrorCode::kIo, "record: a PERF_RECORD_AUX body of " +
                                          std::to_string(record.body.size()) +
                                          " bytes is shorter than {aux_offset, aux_size, flags}");
  }
  return AuxEvent{load_u64(record.body, 0), load_u64(record.body, 8), load_u64(record.body, 16)};
}

Result<void> check_ring_pages(const char* field, std::size_t pages) {
  if (pages == 0 || !std::has_single_bit(pages)) {
    return make_error(ErrorCode::kInval, std::string(field) + ": " + std::to_string(pages) +
                                             " is not a power of two >= 1");
  }
  return {};
}

Result<PerfRing> PerfRing::map(int fd, std::size_t data_pages) {
  if (auto r = check_ring_pages("data_pages", data_pages); !r) return std::unexpected(r.error());
  const std::size_t page = page_size();
  const std::size_t bytes = (1 + data_pages) * page;
  auto base = map_shared(fd, bytes);
  if (!base) return std::unexpected(base.error());
  const auto* meta = static_cast<const perf_event_mmap_page*>(*base);
  // Kernels since 4.1 say where the data area is; older ones put it right after the first page.
  std::size_t offset = page;
  std::size_t size = data_pages * page;
  if (meta->data_size != 0) {
    offset = static_cast<std::size_t>(meta->data_offset);
    size = static_cast<std::size_t>(meta->data_size);
  }
  return PerfRing(*base, bytes, offset, size, true);
}

Result<PerfRing> PerfRing::over(std::span<std::uint8_t> memory) {
  if (memory.size() < sizeof(perf_event_mmap_page)) {
    return make_error(ErrorCode::kInval, "meta: " + std::to_string(memory.size()) +
                                             " bytes cannot hold a perf_event_mmap_page");
  }
  const auto* meta = reinterpret_cast<const perf_event_mmap_page*>(memory.data());
  const std::uint64_t off = meta->data_offset;
  const std::uint64_t size = meta->data_size;
  if (size == 0 || !std::has_single_bit(size) || off < sizeof(perf_event_mmap_page) ||
      off > memory.size() || size > memory.size() - off) {
    return make_error(ErrorCode::kInval, "meta: data_offset " + std::to_string(off) +
                                             " and data_size " + std::to_string(size) +
                                             " do not describe a power-of-two area inside the " +
                                             std::to_string(memory.size()) + " bytes");
  }
  return PerfRing(memory.data(), memory.size(), static_cast<std::size_t>(off),
                  static_cast<std::size_t>(size), false);
}

PerfRing::PerfRing(PerfRing&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      data_offset_(std::exchange(other.data_offset_, 0)),
      data_size_(std::exchange(other.data_size_, 0)),
      owned_(std::exchange(other.owned_, false)) {}

PerfRing& PerfRing::operator=(PerfRing&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    data_offset_ = std::exchange(other.data_offset_, 0);
    data_size_ = std::exchange(other.data_size_, 0);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

PerfRing::~PerfRing() {
  reset();
}

void PerfRing::reset() {
  if (owned_) unmap(base_, map_bytes_);
  base_ = nullptr;
  map_bytes_ = data_offset_ = data_size_ = 0;
  owned_ = false;
}

std::span<const std::uint8_t> PerfRing::data() const {
  return {static_cast<const std::uint8_t*>(base_) + data_offset_, data_size_};
}

std::uint64_t PerfRing::pending() const {
  if (base_ == nullptr) return 0;
  auto* m = meta();
  const std::uint64_t head = std::atomic_ref(m->data_head).load(std::memory_order_acquire);
  const std::uint64_t tail = std::atomic_ref(m->data_tail).load(std::memory_order_relaxed);
  return head - tail;
}

Result<std::vector<RingRecord>> PerfRing::records(std::uint64_t& head) const {
  if (base_ == nullptr) return make_error(ErrorCode::kInval, "ring: not mapped (moved from)");
  auto* m = meta();
  head = std::atomic_ref(m->data_head).load(std::memory_order_acquire);
  const std::uint64_t tail = std::atomic_ref(m->data_tail).load(std::memory_order_relaxed);
  return split_ring(data(), tail, head);
}

void PerfRing::consume(std::uint64_t head) {
  if (base_ == nullptr) return;
  // The reads of the records happen before the kernel may overwrite their space (release).
  std::atomic_ref(meta()->data_tail).store(head, std::memory_order_release);
}

Result<RingBatch> PerfRing::drain(std::uint64_t sample_type) {
  if (base_ == nullptr) return make_error(ErrorCode::kInval, "ring: not mapped (moved from)");
  auto* m = meta();
  const std::uint64_t head = std::atomic_ref(m->data_head).load(std::memory_order_acquire);
  const std::uint64_t tail = std::atomic_ref(m->data_tail).load(std::memory_order_relaxed);
  auto batch = parse_ring(data(), tail, head, sample_type);
  consume(head);
  return batch;
}

}  // namespace hwarb::native

#include "hwarb/bts/snapshot_buffer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace hwarb::bts {
namespace {

// memcpy that accepts null pointers for an empty copy.
void copy(std::byte* to, const std::byte* from, std::size_t n) {
  if (n != 0) std::memcpy(to, from, n);
}

}  // namespace

Result<SnapshotBuffer> SnapshotBuffer::create(std::size_t size, std::size_t record_size,
                                              const Allocator& alloc) {
  if (auto r = check_buffer_size("size", size, record_size); !r) {
    return std::unexpected(r.error());
  }
  auto buf = alloc(size);
  if (!buf) return std::unexpected(buf.error());
  if (buf->size() != size) {
    return make_error(ErrorCode::kNoMem, "buffer: the allocator returned the wrong size");
  }
  return SnapshotBuffer(std::move(*buf), record_size);
}

Result<void> SnapshotBuffer::write(std::span<const std::byte> records) {
  if (records.empty() || records.size() % record_size_ != 0) {
    return make_error(ErrorCode::kInval, "records: must be a non-empty whole number of " +
                                             std::to_string(record_size_) + "-byte records");
  }
  const std::size_t cap = buf_.size();
  written_ += records.size();
  if (records.size() > cap) records = records.last(cap);  // the rest would be overwritten at once
  const std::size_t first = std::min(records.size(), cap - offset_);
  copy(buf_.data() + offset_, records.data(), first);
  copy(buf_.data(), records.data() + first, records.size() - first);
  offset_ = (offset_ + records.size()) % cap;
  held_ = std::min<std::uint64_t>(cap, held_ + records.size());
  return {};
}

std::size_t SnapshotBuffer::snapshot_into(std::span<std::byte> out) const {
  const std::size_t cap = buf_.size();
  const std::size_t n = std::min<std::size_t>(held_, out.size() / record_size_ * record_size_);
  // The newest n bytes end at offset_.
  const std::size_t start = (offset_ + cap - n) % cap;
  const std::size_t first = std::min(n, cap - start);
  copy(out.data(), buf_.data() + start, first);
  copy(out.data() + first, buf_.data(), n - first);
  return n;
}

std::vector<std::byte> SnapshotBuffer::snapshot() const {
  std::vector<std::byte> out(held_);
  snapshot_into(out);
  return out;
}

void SnapshotBuffer::clear() {
  offset_ = 0;
  held_ = 0;
  written_ = 0;
}

}  // namespace hwarb::bts

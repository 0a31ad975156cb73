#include "hwarb/bts/legacy_buffer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace hwarb::bts {
namespace {

Result<std::size_t> checked_size(std::size_t bytes, std::size_t record_size) {
  if (auto r = check_record_size(record_size); !r) return std::unexpected(r.error());
  const std::size_t rounded = LegacyBuffer::round_size(bytes, record_size);
  if (rounded > kMaxBufferBytes) {
    return make_error(ErrorCode::kInval, "size: " + std::to_string(bytes) +
                                             " bytes exceeds the maximum of " +
                                             std::to_string(kMaxBufferBytes));
  }
  return rounded;
}

Result<ByteBuffer> allocate(const Allocator& alloc, std::size_t bytes) {
  auto buf = alloc(bytes);
  if (!buf) return buf;
  if (buf->size() != bytes) {
    return make_error(ErrorCode::kNoMem, "buffer: the allocator returned the wrong size");
  }
  return buf;
}

}  // namespace

Result<LegacyBuffer> LegacyBuffer::create(std::size_t bytes, OverflowMode mode,
                                          std::size_t record_size, Allocator alloc) {
  auto size = checked_size(bytes, record_size);
  if (!size) return std::unexpected(size.error());
  auto buf = allocate(alloc, *size);
  if (!buf) return std::unexpected(buf.error());
  return LegacyBuffer(std::move(*buf), mode, record_size, std::move(alloc));
}

std::size_t LegacyBuffer::slot_of_oldest(std::size_t i) const {
  return (next_ + slots_ - count_ + i) % slots_;
}

Result<LegacyWrite> LegacyBuffer::write(std::span<const std::byte> record) {
  if (record.size() != record_size_) {
    return make_error(ErrorCode::kInval,
                      "record: must be exactly " + std::to_string(record_size_) + " bytes");
  }
  if (slots_ == 0) return make_error(ErrorCode::kNxio, "buffer: none allocated");
  LegacyWrite result = LegacyWrite::kWritten;
  if (count_ == slots_) {
    if (mode_ == OverflowMode::kSignal) {
      ++dropped_;
      return LegacyWrite::kFull;
    }
    ++overwritten_;
    --count_;
    result = LegacyWrite::kOverwrote;
  }
  std::memcpy(buf_.data() + next_ * record_size_, record.data(), record_size_);
  next_ = (next_ + 1) % slots_;
  ++count_;
  return result;
}

void LegacyBuffer::copy_in(const std::byte* src, std::size_t n) {
  const std::size_t first = std::min(n, slots_ - next_);
  std::memcpy(buf_.data() + next_ * record_size_, src, first * record_size_);
  if (n > first) std::memcpy(buf_.data(), src + first * record_size_, (n - first) * record_size_);
  next_ += n;
  if (next_ >= slots_) next_ -= slots_;
}

Result<BatchWrite> LegacyBuffer::write_batch(std::span<const std::byte> records) {
  if (records.empty() || records.size() % record_size_ != 0) {
    return make_error(ErrorCode::kInval, "records: must be a positive whole number of " +
                                             std::to_string(record_size_) + "-byte records, not " +
                                             std::to_string(records.size()) + " bytes");
  }
  if (slots_ == 0) return make_error(ErrorCode::kNxio, "buffer: none allocated");
  const std::size_t n = records.size() / record_size_;
  const std::size_t room = slots_ - count_;
  BatchWrite out;
  if (mode_ == OverflowMode::kSignal) {
    out.stored = std::min(n, room);
    out.dropped = n - out.stored;
    if (out.stored != 0) copy_in(records.data(), out.stored);
    count_ += out.stored;
    dropped_ += out.dropped;
  } else {
    out.stored = n;
    out.overwritten = n > room ? n - room : 0;
    if (n >= slots_) {
      // Only the newest slots_ records survive: lay them out from slot 0, oldest first.
      std::memcpy(buf_.data(), records.data() + (n - slots_) * record_size_, slots_ * record_size_);
      next_ = 0;
      count_ = slots_;
    } else {
      copy_in(records.data(), n);
      count_ = std::min(count_ + n, slots_);
    }
    overwritten_ += out.overwritten;
  }
  out.full = count_ == slots_;
  return out;
}

Result<std::span<const std::byte>> LegacyBuffer::get(std::size_t index) const {
  if (index >= count_) {
    return make_error(ErrorCode::kInval, "index: " + std::to_string(index) + " is not below " +
                                             std::to_string(count_) + " records");
  }
  return std::span<const std::byte>(record_at(slot_of_oldest(count_ - 1 - index)), record_size_);
}

std::vector<std::byte> LegacyBuffer::drain() {
  std::vector<std::byte> out(count_ * record_size_);
  for (std::size_t i = 0; i < count_; ++i) {
    std::memcpy(out.data() + i * record_size_, record_at(slot_of_oldest(i)), record_size_);
  }
  clear();
  return out;
}

void LegacyBuffer::clear() {
  if (!buf_.empty()) std::memset(buf_.data(), 0, buf_.size());
  next_ = 0;
  count_ = 0;
}

Result<void> LegacyBuffer::resize(std::size_t bytes) {
  auto size = checked_size(bytes, record_size_);
  if (!size) return std::unexpected(size.error());
  if (*size == buf_.size()) return {};
  auto fresh = allocate(alloc_, *size);
  if (!fresh) return std::unexpected(fresh.error());
  // Nothing below can fail: carry the newest records over, then drop the old buffer.
  const std::size_t slots = *size / record_size_;
  const std::size_t keep = std::min(count_, slots);
  for (std::size_t i = 0; i < keep; ++i) {
    std::memcpy(fresh->data() + i * record_size_, record_at(slot_of_oldest(count_ - keep + i)),
                record_size_);
  }
  overwritten_ += count_ - keep;
  buf_ = std::move(*fresh);
  slots_ = slots;
  count_ = keep;
  next_ = slots == 0 ? 0 : keep % slots;
  return {};
}

}  // namespace hwarb::bts

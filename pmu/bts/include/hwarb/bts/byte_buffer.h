// hwarb/bts/byte_buffer.h — the memory every BTS buffer owns, and the rules its sizes follow.
//
// Contract:
//  - ByteBuffer owns one zero-initialised heap array of bytes. It is move-only (RAII): the memory
//    is freed exactly once, by the destructor of the last owner; a moved-from ByteBuffer is empty
//    (size 0, data null). Not thread-safe in itself; the buffers built on it say who may touch
//    which bytes.
//  - Allocation never throws: ByteBuffer::allocate returns ENOMEM when the system has no memory.
//    The buffers take an Allocator (a function with allocate's signature) so that tests can make
//    an allocation fail on demand.
//  - Records are opaque and fixed-size: record_size bytes (kDefaultRecordSize = 24, the 64-bit
//    BTS layout from/to/flags). A buffer size is a whole number of records and at most
//    kMaxBufferBytes; check_buffer_size states the errors (EINVAL, messages start with the field).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "hwarb/base/error.h"

namespace hwarb::bts {

inline constexpr std::size_t kDefaultRecordSize = 24;
// The largest buffer any of the BTS buffers accepts (1 GiB), so that position arithmetic and
// allocation requests stay far from overflow.
inline constexpr std::size_t kMaxBufferBytes = std::size_t{1} << 30;

class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(ByteBuffer&&) noexcept = default;
  ByteBuffer& operator=(ByteBuffer&&) noexcept = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ~ByteBuffer() = default;

  // `bytes` zeroed bytes (bytes 0 gives an empty buffer without allocating). ENOMEM on failure.
  static Result<ByteBuffer> allocate(std::size_t bytes);

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  std::span<const std::byte> span() const { return {data_.get(), size_}; }

 private:
  ByteBuffer(std::unique_ptr<std::byte[]> data, std::size_t size)
      : data_(std::move(data)), size_(size) {}

  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0;
};

using Allocator = std::function<Result<ByteBuffer>(std::size_t bytes)>;

// The allocator the buffers use unless told otherwise: ByteBuffer::allocate.
Allocator default_allocator();

// EINVAL unless record_size > 0 ("record_size: must be positive").
Result<void> check_record_size(std::size_t record_size);

// EINVAL unless `bytes` is a positive whole number of records and at most kMaxBufferBytes.
// `field` starts the message: "size: must be a whole number of 24-byte records".
Result<void> check_buffer_size(std::string_view field, std::size_t bytes, std::size_t record_size);

}  // namespace hwarb::bts

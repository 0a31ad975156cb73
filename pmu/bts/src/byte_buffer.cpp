#include "hwarb/bts/byte_buffer.h"

#include <new>
#include <string>

namespace hwarb::bts {

Result<ByteBuffer> ByteBuffer::allocate(std::size_t bytes) {
  if (bytes == 0) return ByteBuffer();
  std::unique_ptr<std::byte[]> p(new (std::nothrow) std::byte[bytes]());
  if (!p) {
    return make_error(ErrorCode::kNoMem,
                      "buffer: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return ByteBuffer(std::move(p), bytes);
}

Allocator default_allocator() {
  return &ByteBuffer::allocate;
}

Result<void> check_record_size(std::size_t record_size) {
  if (record_size == 0) return make_error(ErrorCode::kInval, "record_size: must be positive");
  return {};
}

Result<void> check_buffer_size(std::string_view field, std::size_t bytes, std::size_t record_size) {
  if (auto r = check_record_size(record_size); !r) return r;
  if (bytes == 0) {
    return make_error(ErrorCode::kInval, std::string(field) + ": must be at least one " +
                                             std::to_string(record_size) + "-byte record");
  }
  if (bytes % record_size != 0) {
    return make_error(ErrorCode::kInval, std::string(field) + ": must be a whole number of " +
                                             std::to_string(record_size) + "-byte records");
  }
  if (bytes > kMaxBufferBytes) {
    return make_error(ErrorCode::kInval, std::string(field) + ": " + std::to_string(bytes) +
                                             " bytes exceeds the maximum of " +
                                             std::to_string(kMaxBufferBytes));
  }
  return {};
}

}  // namespace hwarb::bts

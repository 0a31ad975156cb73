#include "hwarb/linux/process_memory.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace hwarb::native {

Result<void> ProcessMemory::open(pid_t pid) {
  auto fd = open_process_memory(pid, true);
  if (!fd) return std::unexpected(fd.error());
  pid_ = pid;
  mem_ = std::move(*fd);
  return {};
}

Result<void> ProcessMemory::follow(pid_t process) {
  auto fd = open_process_memory(process, true);
  if (!fd) return std::unexpected(fd.error());
  followed_[process] = std::move(*fd);
  return {};
}

std::vector<pid_t> ProcessMemory::followed() const {
  std::vector<pid_t> out;
  for (const auto& [process, unused] : followed_) out.push_back(process);
  return out;
}

bool ProcessMemory::adopt(pid_t process) {
  auto it = followed_.find(process);
  if (it == followed_.end()) return false;
  pid_ = process;
  mem_ = std::move(it->second);
  followed_.erase(it);
  return true;
}

Result<int> ProcessMemory::descriptor(pid_t process, bool writable, Fd& opened) {
  if (auto it = followed_.find(process); it != followed_.end()) return it->second.get();
  if (process != 0 && process != pid_) {
    auto other = open_process_memory(process, writable);
    if (!other) return std::unexpected(other.error());
    opened = std::move(*other);
    return opened.get();
  }
  return mem_.get();
}

Result<void> ProcessMemory::read_memory(std::uint64_t addr, std::span<std::uint8_t> out,
                                        pid_t process) {
  Fd opened;
  auto fd = descriptor(process, false, opened);
  if (!fd) return std::unexpected(fd.error());
  return pread_memory(*fd, addr, out);
}

Result<void> ProcessMemory::read_memory(std::span<const RemoteRead> parts, pid_t process) {
  return read_process_memory(process != 0 ? process : pid_, parts);
}

Result<void> ProcessMemory::write_memory(std::uint64_t addr, std::span<const std::uint8_t> data,
                                         pid_t process) {
  Fd opened;
  auto fd = descriptor(process, true, opened);
  if (!fd) return std::unexpected(fd.error());
  return pwrite_memory(*fd, addr, data);
}

Result<x86::Insn> ProcessMemory::decode_at(std::uint64_t addr, pid_t process) {
  std::uint8_t code[15] = {};
  std::size_t have = sizeof(code);
  while (have > 0 && !read_memory(addr, std::span(code, have), process)) --have;
  return x86::decode(std::span<const std::uint8_t>(code, have), addr);
}

Result<std::uint64_t> ProcessMemory::read_word(std::uint64_t addr, int size, pid_t process) {
  if (size < 1 || size > 8) return make_error(ErrorCode::kInval, "size: must be 1..8");
  std::uint8_t bytes[8] = {};
  if (auto r = read_memory(addr, std::span(bytes, static_cast<std::size_t>(size)), process); !r) {
    return std::unexpected(r.error());
  }
  std::uint64_t value = 0;
  std::memcpy(&value, bytes, static_cast<std::size_t>(size));
  return value;
}

Result<std::uint64_t> ProcessMemory::find_code(pid_t process, std::span<const std::uint8_t> code) {
  if (code.empty()) return make_error(ErrorCode::kInval, "code: empty");
  auto maps = read_maps(process);
  if (!maps) return std::unexpected(maps.error());
  constexpr std::uint64_t kChunk = 65536;
  std::vector<std::uint8_t> chunk;
  for (const Mapping& m : *maps) {
    if (!m.exec || m.path == "[vsyscall]") continue;
    // Chunks overlap by the pattern's length less one, so a match across a boundary is found.
    for (std::uint64_t at = m.start; at < m.end; at += kChunk) {
      const std::uint64_t n = std::min<std::uint64_t>(kChunk + code.size() - 1, m.end - at);
      chunk.resize(n);
      if (!read_memory(at, chunk, process)) break;
      auto hit = std::search(chunk.begin(), chunk.end(), code.begin(), code.end());
      if (hit != chunk.end()) return at + static_cast<std::uint64_t>(hit - chunk.begin());
    }
  }
  return make_error(ErrorCode::kNoEnt,
                    "text: no such instruction sequence in the executable "
                    "mappings of process " +
                        std::to_string(process));
}

}  // namespace hwarb::native

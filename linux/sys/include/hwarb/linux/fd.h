// hwarb/linux/fd.h — Fd, the move-only owner of one file descriptor.
//
// Contract:
//  - An Fd owns at most one descriptor (-1: none) and closes it when destroyed or reset. Moving
//    transfers ownership; the moved-from Fd owns nothing.
//  - close() reports the kernel's error (as Result, errno converted once); the destructor and
//    reset() ignore it, as there is nothing left to do about a failed close(2).
//  - release() gives the descriptor up without closing it.
// Thread-safety: none; one owner, like the descriptor itself.
#pragma once

#include <utility>

#include "hwarb/base/error.h"

namespace hwarb::native {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor (if any), ignoring errors, and takes `fd` (default: none).
  void reset(int fd = -1);
  // Closes the descriptor; EBADF etc. naming `fd`. The Fd owns nothing afterwards either way.
  Result<void> close();

 private:
  int fd_ = -1;
};

}  // namespace hwarb::native

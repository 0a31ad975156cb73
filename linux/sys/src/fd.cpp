#include "hwarb/linux/fd.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys_error.h"

namespace hwarb::native {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) (void)::close(fd_);
  fd_ = fd;
}

Result<void> Fd::close() {
  const int fd = release();
  if (fd < 0) return {};
  // Linux releases the descriptor even when close(2) fails, so it is never retried.
  if (::close(fd) != 0) {
    return detail::sys_fail(errno, "fd", "close(" + std::to_string(fd) + ")");
  }
  return {};
}

}  // namespace hwarb::native

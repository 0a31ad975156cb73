#include "hwarb/linux/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys_error.h"

namespace hwarb::native {
namespace {

using detail::sys_fail;

std::string fd_text(int fd) {
  return "fd " + std::to_string(fd);
}

}  // namespace

Result<Fd> listen_tcp(std::string_view host, std::uint16_t port) {
  const std::string address =
      host.empty() || host == "localhost" ? std::string("127.0.0.1") : std::string(host);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return make_error(ErrorCode::kInval,
                      "host: '" + std::string(host) + "' is not \"localhost\" or an IPv4 address");
  }
  const std::string where = address + ":" + std::to_string(port);

  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_fail<Fd>(errno, "port", "socket for " + where);
  const int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    return sys_fail<Fd>(errno, "port", "SO_REUSEADDR on the socket for " + where);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    return sys_fail<Fd>(err, err == EADDRNOTAVAIL ? "host" : "port", "bind to " + where);
  }
  if (::listen(fd.get(), 1) != 0) return sys_fail<Fd>(errno, "port", "listen on " + where);
  return fd;
}

Result<std::uint16_t> local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return sys_fail<std::uint16_t>(errno, "fd", "getsockname of " + fd_text(fd));
  }
  if (ss.ss_family != AF_INET) {
    return make_error(ErrorCode::kInval, "fd: " + fd_text(fd) + " is not an IPv4 socket");
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

Result<Fd> accept_one(int listen_fd) {
  Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return sys_fail<Fd>(errno, "fd", "accept on " + fd_text(listen_fd));
  const int one = 1;
  if (::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    const int err = errno;
    // Not a TCP socket (a Unix-domain listener): nothing to turn off.
    if (err != EOPNOTSUPP && err != ENOPROTOOPT) {
      return sys_fail<Fd>(err, "fd",
                          "TCP_NODELAY on the connection accepted on " + fd_text(listen_fd));
    }
  }
  return fd;
}

Result<std::size_t> read_some(int fd, std::span<char> out) {
  if (out.empty()) return std::size_t{0};
  const ssize_t n = ::read(fd, out.data(), out.size());
  if (n < 0) return sys_fail<std::size_t>(errno, "fd", "read from " + fd_text(fd));
  return static_cast<std::size_t>(n);
}

Result<void> write_all(int fd, std::string_view data) {
  bool socket = true;  // until send(2) says otherwise
  std::size_t done = 0;
  while (done < data.size()) {
    const char* p = data.data() + done;
    const std::size_t left = data.size() - done;
    ssize_t n = socket ? ::send(fd, p, left, MSG_NOSIGNAL) : ::write(fd, p, left);
    if (n < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_fail(errno, "fd", "write of " + std::to_string(left) + " bytes to " + fd_text(fd));
    }
    if (n == 0) {
      return make_error(ErrorCode::kIo, "fd: write to " + fd_text(fd) + " wrote nothing");
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace hwarb::native

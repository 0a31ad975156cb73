#include "hwarb/linux/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "sys_error.h"

namespace hwarb::native {
namespace {

using detail::sys_fail;

std::string fd_text(int fd) {
  return "fd " + std::to_string(fd);
}

}  // namespace

Result<Fd> listen_tcp(std::string_view host, std::uint16_t port, IpFamily family) {
  // "" is the loopback address of the family (IPv4 unless only IPv6 was asked for).
  std::string name(host);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name.empty()) name = family == IpFamily::kV6 ? "::1" : "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = family == IpFamily::kV4   ? AF_INET
                    : family == IpFamily::kV6 ? AF_INET6
                                              : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(name.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return make_error(ErrorCode::kInval, "host: '" + std::string(host) +
                                             "': cannot resolve name: " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  // IPv4 first where a name has both (localhost): the address gdb tries first.
  std::vector<const addrinfo*> order;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) order.push_back(a);
  }
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET6) order.push_back(a);
  }
  Result<Fd> last = make_error(ErrorCode::kInval,
                               "host: '" + std::string(host) + "' has no IPv4 or IPv6 address");
  for (const addrinfo* a : order) {
    std::array<char, INET6_ADDRSTRLEN> text{};
    const void* raw =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
            : &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    ::inet_ntop(a->ai_family, raw, text.data(), text.size());
    const std::string where = a->ai_family == AF_INET
                                  ? std::string(text.data()) + ":" + service
                                  : "[" + std::string(text.data()) + "]:" + service;
    Fd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = sys_fail<Fd>(errno, "port", "socket for " + where);
      continue;
    }
    const int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      return sys_fail<Fd>(errno, "port", "SO_REUSEADDR on the socket for " + where);
    }
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      const int err = errno;
      last = sys_fail<Fd>(err, err == EADDRNOTAVAIL ? "host" : "port", "bind to " + where);
      continue;
    }
    if (::listen(fd.get(), 1) != 0) return sys_fail<Fd>(errno, "port", "listen on " + where);
    return fd;
  }
  return last;
}

Result<std::uint16_t> local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return sys_fail<std::uint16_t>(errno, "fd", "getsockname of " + fd_text(fd));
  }
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  if (ss.ss_family != AF_INET) {
    return make_error(ErrorCode::kInval, "fd: " + fd_text(fd) + " is not an IP socket");
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

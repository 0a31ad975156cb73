#include "hwarb/linux/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "hwarb/linux/fd.h"

namespace hwarb::native {
namespace {

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

// A client socket connected to 127.0.0.1:port with raw calls.
Fd connect_to(std::uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa), 0)
      << std::strerror(errno);
  return fd;
}

// Reads from `fd` until `want` bytes or EOF.
std::string read_exactly(int fd, std::size_t want) {
  std::string got;
  std::array<char, 256> buf{};
  while (got.size() < want) {
    auto n = read_some(fd, buf);
    if (!n) {
      ADD_FAILURE() << n.error().to_string();
      break;
    }
    if (*n == 0) break;
    got.append(buf.data(), *n);
  }
  return got;
}

struct Connection {
  Fd listener;
  Fd server;
  Fd client;
};

Connection connect_pair() {
  Connection c;
  auto l = listen_tcp("", 0);
  EXPECT_TRUE(l) << l.error().to_string();
  if (!l) return c;
  c.listener = std::move(*l);
  auto port = local_port(c.listener.get());
  EXPECT_TRUE(port) << port.error().to_string();
  if (!port) return c;
  EXPECT_NE(*port, 0);
  c.client = connect_to(*port);
  auto s = accept_one(c.listener.get());
  EXPECT_TRUE(s) << s.error().to_string();
  if (s) c.server = std::move(*s);
  return c;
}

TEST(Socket, ListensOnAnyPortAcceptsAndExchangesBothWays) {
  Connection c = connect_pair();
  ASSERT_TRUE(c.server.valid() && c.client.valid());

  // Close-on-exec on both ends we made, TCP_NODELAY on the accepted one.
  EXPECT_TRUE(::fcntl(c.listener.get(), F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(::fcntl(c.server.get(), F_GETFD) & FD_CLOEXEC);
  int nodelay = 0;
  socklen_t len = sizeof nodelay;
  ASSERT_EQ(::getsockopt(c.server.get(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  int reuse = 0;
  len = sizeof reuse;
  ASSERT_EQ(::getsockopt(c.listener.get(), SOL_SOCKET, SO_REUSEADDR, &reuse, &len), 0);
  EXPECT_NE(reuse, 0);

  // Client -> server.
  const std::string hello = "$qSupported:multiprocess+#c6";
  ASSERT_EQ(::send(c.client.get(), hello.data(), hello.size(), 0),
            static_cast<ssize_t>(hello.size()));
  EXPECT_EQ(read_exactly(c.server.get(), hello.size()), hello);

  // Server -> client, large enough to need several writes on the way.
  std::string big(4 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  std::string received;
  std::thread reader([&] { received = read_exactly(c.client.get(), big.size()); });
  auto w = write_all(c.server.get(), big);
  reader.join();
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(received.size(), big.size());
  EXPECT_TRUE(received == big);

  // An empty write and an empty read do nothing.
  EXPECT_TRUE(write_all(c.server.get(), ""));
  std::span<char> none;
  auto zero = read_some(c.server.get(), none);
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, 0u);

  // The client closes: the server reads end of file.
  c.client.reset();
  std::array<char, 16> buf{};
  auto eof = read_some(c.server.get(), buf);
  ASSERT_TRUE(eof) << eof.error().to_string();
  EXPECT_EQ(*eof, 0u);
}

TEST(Socket, ReadOfNothingOnANonBlockingSocketIsAgain) {
  Connection c = connect_pair();
  ASSERT_TRUE(c.server.valid());
  ASSERT_EQ(::fcntl(c.server.get(), F_SETFL, ::fcntl(c.server.get(), F_GETFL) | O_NONBLOCK), 0);
  std::array<char, 16> buf{};
  expect_error(read_some(c.server.get(), buf), ErrorCode::kAgain, "fd");
}

TEST(Socket, WriteToAClosedPeerIsEpipeNotSigpipe) {
  Connection c = connect_pair();
  ASSERT_TRUE(c.server.valid());
  c.client.reset();
  // The first writes may still be accepted; once the peer's reset arrives, the next one fails
  // (EPIPE, or ECONNRESET when the reset is noticed first) and no SIGPIPE ends this process.
  Result<void> w;
  for (int i = 0; i < 200 && w; ++i) {
    w = write_all(c.server.get(), std::string(4096, 'x'));
    if (w) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), ErrorCode::kIo) << w.error().to_string();
  EXPECT_TRUE(w.error().message().starts_with("fd: ")) << w.error().to_string();
  const std::string& m = w.error().message();
  EXPECT_TRUE(m.find("EPIPE") != std::string::npos || m.find("ECONNRESET") != std::string::npos)
      << m;
}

TEST(Socket, WriteAllAndReadSomeWorkOnAPipeToo) {
  std::array<int, 2> p{};
  ASSERT_EQ(::pipe2(p.data(), O_CLOEXEC), 0);
  Fd r(p[0]);
  Fd w(p[1]);
  ASSERT_TRUE(write_all(w.get(), "+$OK#9a"));
  w.reset();
  EXPECT_EQ(read_exactly(r.get(), 100), "+$OK#9a");
}

TEST(Socket, HostIsANameOrAnAddressOfEitherFamily) {
  // .invalid never resolves (RFC 6761); gdbserver's words for it, which gdb's testsuite awaits.
  for (const char* bad : {"no-such-host.invalid", "garbage:1234", "tcp8:123"}) {
    auto r = listen_tcp(bad, 0);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(r.error().message().starts_with("host: '")) << r.error().to_string();
    EXPECT_NE(r.error().message().find("': cannot resolve name: "), std::string::npos)
        << r.error().to_string();
  }
  expect_error(listen_tcp("127.0.0.1", 0, IpFamily::kV6), ErrorCode::kInval, "host");
  auto any = listen_tcp("localhost", 0);
  ASSERT_TRUE(any) << any.error().to_string();
  auto literal = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(literal) << literal.error().to_string();
  // IPv6 where the machine has it (a loopback ::1): both spellings, and the port read back.
  for (const char* v6 : {"::1", "[::1]"}) {
    auto six = listen_tcp(v6, 0, IpFamily::kV6);
    if (!six && six.error().message().find("EADDRNOTAVAIL") != std::string::npos) {
      GTEST_SKIP() << "no IPv6 loopback here: " << six.error().to_string();
    }
    ASSERT_TRUE(six) << v6 << ": " << six.error().to_string();
    auto port = local_port(six->get());
    ASSERT_TRUE(port) << port.error().to_string();
    EXPECT_NE(*port, 0);
  }
  // An address of no local interface: the kernel's EADDRNOTAVAIL (folded into EIO), naming host
  // (unless net.ipv4.ip_nonlocal_bind lets anything be bound).
  auto foreign = listen_tcp("192.0.2.1", 0);
  if (foreign) return;
  EXPECT_EQ(foreign.error().code(), ErrorCode::kIo);
  EXPECT_TRUE(foreign.error().message().starts_with("host: ")) << foreign.error().to_string();
  EXPECT_NE(foreign.error().message().find("EADDRNOTAVAIL"), std::string::npos)
      << foreign.error().to_string();
}

TEST(Socket, PortInUseKeepsTheKernelsErrnoName) {
  auto first = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(first) << first.error().to_string();
  auto port = local_port(first->get());
  ASSERT_TRUE(port);
  auto second = listen_tcp("127.0.0.1", *port);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), ErrorCode::kIo);  // EADDRINUSE is outside ErrorCode
  EXPECT_TRUE(second.error().message().starts_with("port: ")) << second.error().to_string();
  EXPECT_NE(second.error().message().find("EADDRINUSE"), std::string::npos)
      << second.error().to_string();
  EXPECT_NE(second.error().message().find(std::to_string(*port)), std::string::npos)
      << second.error().to_string();
}

TEST(Socket, BadDescriptorsNameFd) {
  expect_error(local_port(-1), ErrorCode::kIo, "fd");  // EBADF is outside ErrorCode
  expect_error(accept_one(-1), ErrorCode::kIo, "fd");
  std::array<char, 4> buf{};
  expect_error(read_some(-1, buf), ErrorCode::kIo, "fd");
  expect_error(write_all(-1, "x"), ErrorCode::kIo, "fd");
}

void on_alarm(int) {}

TEST(Socket, AcceptEndsWithIntrWhenASignalArrives) {
  auto l = listen_tcp("", 0);
  ASSERT_TRUE(l) << l.error().to_string();
  struct sigaction sa {};
  sa.sa_handler = on_alarm;  // no SA_RESTART: accept(2) returns EINTR
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
  itimerval timer{};
  timer.it_value.tv_usec = 50'000;
  ASSERT_EQ(::setitimer(ITIMER_REAL, &timer, nullptr), 0);
  auto r = accept_one(l->get());
  ::sigaction(SIGALRM, &old, nullptr);
  expect_error(r, ErrorCode::kIntr, "fd");
}

}  // namespace
}  // namespace hwarb::native

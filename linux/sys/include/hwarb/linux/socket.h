// hwarb/linux/socket.h — the TCP socket calls of `hwarb gdbserver`: one listening socket (IPv4
// or IPv6), one accepted connection, and reads and writes on it. The only place hwarb makes
// socket system calls.
//
// Contract:
//  - listen_tcp(host, port, family) makes a close-on-exec stream socket with SO_REUSEADDR, binds
//    it to host:port and listens with a backlog of 1. `host` is a name or an address literal as
//    gdbserver takes them (IPv6 ones with or without brackets: "::1", "[::1]"); "" is the
//    loopback address (127.0.0.1; ::1 for kV6); "0.0.0.0" or "::" every interface. A name is
//    resolved (getaddrinfo) within `family`; its IPv4 addresses are tried before its IPv6 ones
//    (localhost: 127.0.0.1 first, where gdb connects first), the first that binds is taken. A
//    name that does not resolve is EINVAL naming `host`, "host: 'NAME': cannot resolve name:
//    REASON" (gdbserver's words, which gdb's testsuite waits for). `port` 0 lets the kernel
//    choose (local_port tells which).
//  - Errors are converted once, as every linux/sys wrapper's: the code is from_errno(errno) (an
//    errno outside ErrorCode, such as EADDRINUSE or EPIPE, becomes EIO) and the message starts
//    with the field the kernel refused and ends with the kernel's errno name and text, e.g.
//    "port: bind to 127.0.0.1:1234: EADDRINUSE (Address already in use)". listen_tcp names
//    `host` for EADDRNOTAVAIL (an address of no local interface), `port` otherwise; the other
//    calls name `fd`.
//  - accept_one(listen_fd) makes one accept(2) (close-on-exec) and does not retry EINTR: a
//    signal ends the wait with kIntr. The accepted socket gets TCP_NODELAY (a descriptor that is
//    not TCP keeps going without it).
//  - read_some(fd, out) makes one read(2): the bytes read, 0 at end of file (and for an empty
//    `out`), kIntr on EINTR, kAgain on EAGAIN (a non-blocking descriptor with nothing to read).
//  - write_all(fd, data) writes every byte, looping over partial writes and retrying EINTR. On a
//    socket it uses send(2) with MSG_NOSIGNAL, so a closed peer is the error EPIPE (as EIO, the
//    message naming EPIPE) and never a SIGPIPE; on any other descriptor it uses write(2), and the
//    caller must ignore SIGPIPE itself if the descriptor can be a pipe. It is meant for blocking
//    descriptors: EAGAIN is returned as kAgain, and on any error the bytes already written are
//    not reported.
// Thread-safety: as the system calls themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

enum class IpFamily : std::uint8_t { kAny, kV4, kV6 };
Result<Fd> listen_tcp(std::string_view host, std::uint16_t port, IpFamily family = IpFamily::kAny);
// The local port of a bound socket (getsockname(2)); EBADF/ENOTSOCK naming `fd`, EINVAL naming
// `fd` for a socket that is neither IPv4 nor IPv6.
Result<std::uint16_t> local_port(int fd);
Result<Fd> accept_one(int listen_fd);
Result<std::size_t> read_some(int fd, std::span<char> out);
Result<void> write_all(int fd, std::string_view data);

}  // namespace hwarb::native

#include "hwarb/linux/os_tables.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace hwarb::native {
namespace {

using Row = std::vector<std::string>;

bool has_row(const OsTable& t, const auto& matches) {
  return std::any_of(t.rows.begin(), t.rows.end(), matches);
}

void expect_rectangular(const OsTable& t) {
  for (const Row& row : t.rows) EXPECT_EQ(row.size(), t.columns.size()) << t.type;
}

TEST(OsTables, TheListNamesEveryTableThatCanBeRead) {
  auto list = read_os_table("");
  ASSERT_TRUE(list) << list.error().to_string();
  EXPECT_EQ(list->columns, (Row{"Type", "Description", "Title"}));
  ASSERT_EQ(list->rows.size(), 10u);
  for (const Row& row : list->rows) {
    auto t = read_os_table(row[0]);
    ASSERT_TRUE(t) << row[0] << ": " << t.error().to_string();
    expect_rectangular(*t);
  }
}

TEST(OsTables, AnUnknownNameIsNoEntNamingTheAnnex) {
  auto t = read_os_table("bogus");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code(), ErrorCode::kNoEnt);
  EXPECT_NE(t.error().to_string().find("annex"), std::string::npos) << t.error().to_string();
}

TEST(OsTables, ThisProcessItsThreadAndItsOpenFile) {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string pid = std::to_string(::getpid());
  const std::string tid = std::to_string(::gettid());

  auto procs = read_os_table("processes");
  ASSERT_TRUE(procs);
  EXPECT_EQ(procs->columns, (Row{"pid", "user", "command", "cores"}));
  EXPECT_TRUE(has_row(*procs, [&](const Row& r) {
    return r[0] == pid && r[2].find("linux_sys_test") != std::string::npos && !r[3].empty();
  }));

  auto threads = read_os_table("threads");
  ASSERT_TRUE(threads);
  EXPECT_TRUE(has_row(*threads, [&](const Row& r) { return r[0] == pid && r[2] == tid; }));

  auto files = read_os_table("files");
  ASSERT_TRUE(files);
  EXPECT_TRUE(has_row(*files, [&](const Row& r) {
    return r[0] == pid && r[2] == std::to_string(fd) && r[3] == "/dev/null";
  }));
  ::close(fd);

  auto groups = read_os_table("procgroups");
  ASSERT_TRUE(groups);
  const std::string pgid = std::to_string(::getpgrp());
  EXPECT_TRUE(has_row(*groups, [&](const Row& r) { return r[0] == pgid && r[2] == pid; }));
}

TEST(OsTables, AListeningSocketAndASharedMemorySegment) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));

  auto socks = read_os_table("sockets");
  ASSERT_TRUE(socks);
  EXPECT_TRUE(has_row(*socks, [&](const Row& r) {
    return r == Row{"127.0.0.1", port, "0.0.0.0", "0", "LISTEN", r[5], "INET", "STREAM"};
  }));
  ::close(s);

  const int id = ::shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0640);
  if (id < 0) GTEST_SKIP() << "shmget: System V shared memory is not available here";
  auto shm = read_os_table("shm");
  ::shmctl(id, IPC_RMID, nullptr);
  ASSERT_TRUE(shm);
  EXPECT_TRUE(has_row(*shm, [&](const Row& r) {
    return r[1] == std::to_string(id) && r[2] == "640" && r[3] == "4096" &&
           r[4] == "linux_sys_test";
  })) << "the segment, its octal permissions, size and creator";
}

TEST(ParseInetSockets, AddressesPortsAndStatesAsTheyAreShown) {
  const std::string_view tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
      "   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 1\n"
      "   1: 0100007F:A7B6 0100007F:092A 01 00000000:00000000 03:000000D4 00000000     0 0 0\n"
      "   2: garbage\n";
  auto rows = parse_inet_sockets(tcp, false, true);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0],
            (Row{"0.0.0.0", "2024", "0.0.0.0", "0", "LISTEN", rows[0][5], "INET", "STREAM"}));
  EXPECT_EQ(rows[1][0], "127.0.0.1");
  EXPECT_EQ(rows[1][1], "42934");
  EXPECT_EQ(rows[1][3], "2346");
  EXPECT_EQ(rows[1][4], "ESTABLISHED");

  const std::string_view udp6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 "
      "00000000:00000000 00:00000000 00000000     0\n";
  auto rows6 = parse_inet_sockets(udp6, true, false);
  ASSERT_EQ(rows6.size(), 1u);
  EXPECT_EQ(rows6[0][0], "::1");
  EXPECT_EQ(rows6[0][1], "53");
  EXPECT_EQ(rows6[0][2], "::");
  EXPECT_EQ(rows6[0][4], "CLOSE");
  EXPECT_EQ(rows6[0][6], "INET6");
  EXPECT_EQ(rows6[0][7], "DGRAM");
}

TEST(ParseCpuinfo, OneRowPerProcessorUnderTheFirstProcessorsKeys) {
  auto t = parse_cpuinfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme\n\n"
      "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n\n");
  EXPECT_EQ(t.columns, (Row{"processor", "vendor_id", "flags"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0], (Row{"0", "GenuineIntel", "fpu vme"}));
  EXPECT_EQ(t.rows[1], (Row{"1", "GenuineIntel", "fpu"}));
}

}  // namespace
}  // namespace hwarb::native

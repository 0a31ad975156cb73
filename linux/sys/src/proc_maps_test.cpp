#include "hwarb/linux/proc_maps.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace hwarb::native {
namespace {

constexpr std::string_view kMaps =
    "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1311234                    /usr/bin/my prog\n"
    "55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1311234                    /usr/bin/my prog\n"
    "7f1200000000-7f1200021000 rw-p 00000000 00:00 0 \n"
    "7f1200100000-7f1200200000 rw-s 00000000 00:05 42                         /dev/zero (deleted)\n"
    "7ffd5e4d1000-7ffd5e4f2000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffd5e5a4000-7ffd5e5a6000 r-xp 00000000 00:00 0                          [vdso]\n";

TEST(ParseMaps, ReadsEveryKindOfLine) {
  auto maps = parse_maps(kMaps);
  ASSERT_TRUE(maps) << maps.error().to_string();
  ASSERT_EQ(maps->size(), 6u);

  const Mapping& text = (*maps)[1];
  EXPECT_EQ(text.start, 0x55d0c0a01000u);
  EXPECT_EQ(text.end, 0x55d0c0a02000u);
  EXPECT_TRUE(text.read);
  EXPECT_FALSE(text.write);
  EXPECT_TRUE(text.exec);
  EXPECT_FALSE(text.shared);
  EXPECT_EQ(text.offset, 0x1000u);
  EXPECT_EQ(text.inode, 1311234u);
  EXPECT_EQ(text.path, "/usr/bin/my prog");
  EXPECT_EQ(text.prot(), PROT_READ | PROT_EXEC);

  const Mapping& anon = (*maps)[2];
  EXPECT_EQ(anon.path, "");
  EXPECT_EQ(anon.inode, 0u);
  EXPECT_EQ(anon.prot(), PROT_READ | PROT_WRITE);

  const Mapping& shared = (*maps)[3];
  EXPECT_TRUE(shared.shared);
  EXPECT_EQ(shared.path, "/dev/zero (deleted)");

  EXPECT_EQ((*maps)[4].path, "[stack]");
  EXPECT_EQ((*maps)[5].path, "[vdso]");
  EXPECT_EQ((*maps)[5].prot(), PROT_READ | PROT_EXEC);
}

TEST(ParseMaps, EmptyTextHasNoMappings) {
  auto maps = parse_maps("");
  ASSERT_TRUE(maps);
  EXPECT_TRUE(maps->empty());
}

TEST(ParseMaps, MalformedLineIsEinvalWithItsLineNumber) {
  struct Case {
    std::string_view line;
    std::string_view reason;
  };
  const Case cases[] = {
      {"zz-1000 r--p 00000000 08:01 1 /x", "bad address range 'zz-1000'"},
      {"1000 r--p 00000000 08:01 1 /x", "bad address range '1000'"},
      {"2000-1000 r--p 00000000 08:01 1 /x", "range '2000-1000' ends before it starts"},
      {"1000-2000 rwzp 00000000 08:01 1 /x", "bad permissions 'rwzp'"},
      {"1000-2000 r--q 00000000 08:01 1 /x", "bad permissions 'r--q'"},
      {"1000-2000 r--p 0000g000 08:01 1 /x", "bad offset '0000g000'"},
      {"1000-2000 r--p 00000000 0801 1 /x", "bad device '0801'"},
      {"1000-2000 r--p 00000000 08:01 x1 /x", "bad inode 'x1'"},
      {"1000-2000 r--p 00000000 08:01", "bad inode ''"},
      {"", "bad address range ''"},
  };
  for (const Case& c : cases) {
    const std::string text = "1000-2000 r--p 00000000 08:01 1 /ok\n" + std::string(c.line) +
                             "\n3000-4000 r--p 0 0:0 0\n";
    auto maps = parse_maps(text);
    ASSERT_FALSE(maps) << c.line;
    EXPECT_EQ(maps.error().code(), ErrorCode::kInval);
    EXPECT_EQ(maps.error().message(),
              "maps: line 2: " + std::string(c.reason) + " in '" + std::string(c.line) + "'");
  }
}

TEST(FindMapping, FindsTheMappingHoldingAnAddress) {
  auto maps = parse_maps(kMaps);
  ASSERT_TRUE(maps);
  auto m = find_mapping(*maps, 0x55d0c0a01fffu);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start, 0x55d0c0a01000u);
  EXPECT_FALSE(find_mapping(*maps, 0x55d0c0a02000u));
  EXPECT_FALSE(find_mapping(*maps, 0));
}

TEST(ReadMaps, OwnCodeIsExecutableAndThereIsAStack) {
  auto maps = read_maps(::getpid());
  ASSERT_TRUE(maps) << maps.error().to_string();
  const auto code = reinterpret_cast<std::uintptr_t>(&read_maps);
  auto m = find_mapping(*maps, code);
  ASSERT_TRUE(m) << "no mapping holds read_maps at " << code;
  EXPECT_TRUE(m->exec);
  EXPECT_TRUE(m->read);
  auto exe = executable_path(::getpid());
  ASSERT_TRUE(exe) << exe.error().to_string();
  EXPECT_EQ(m->path, *exe);

  int local = 0;
  auto stack = find_mapping(*maps, reinterpret_cast<std::uintptr_t>(&local));
  ASSERT_TRUE(stack);
  EXPECT_TRUE(stack->write);
  EXPECT_TRUE(std::any_of(maps->begin(), maps->end(),
                          [](const Mapping& x) { return x.path == "[stack]"; }));
}

TEST(ReadMaps, NonexistentProcessNamesThePid) {
  // Above the kernel's PID_MAX_LIMIT (4194304), so no process can have it.
  constexpr pid_t kNoSuchPid = 4194304 + 17;
  auto maps = read_maps(kNoSuchPid);
  ASSERT_FALSE(maps);
  EXPECT_EQ(maps.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(maps.error().message().starts_with("pid: "));
  EXPECT_NE(maps.error().message().find(std::to_string(kNoSuchPid)), std::string::npos);

  auto threads = list_threads(kNoSuchPid);
  ASSERT_FALSE(threads);
  EXPECT_EQ(threads.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(threads.error().message().starts_with("pid: "));

  auto exe = executable_path(kNoSuchPid);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(exe.error().message().starts_with("pid: "));
}

TEST(ListThreads, GrowsWhileAThreadRuns) {
  auto before = list_threads(::getpid());
  ASSERT_TRUE(before) << before.error().to_string();
  ASSERT_FALSE(before->empty());
  EXPECT_TRUE(std::is_sorted(before->begin(), before->end()));
  EXPECT_NE(std::find(before->begin(), before->end(), ::getpid()), before->end());

  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::thread t([&] {
    tid = ::gettid();
    while (!stop) std::this_thread::yield();
  });
  while (tid == 0) std::this_thread::yield();
  auto during = list_threads(::getpid());
  stop = true;
  t.join();
  ASSERT_TRUE(during) << during.error().to_string();
  EXPECT_EQ(during->size(), before->size() + 1);
  EXPECT_TRUE(std::is_sorted(during->begin(), during->end()));
  EXPECT_NE(std::find(during->begin(), during->end(), tid.load()), during->end());
}

TEST(ExecutablePath, IsTheRunningTestProgram) {
  auto exe = executable_path(::getpid());
  ASSERT_TRUE(exe) << exe.error().to_string();
  ASSERT_FALSE(exe->empty());
  EXPECT_EQ(exe->front(), '/');
  EXPECT_TRUE(exe->ends_with("/linux_sys_test")) << *exe;
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

std::uint64_t address_of(const void* p) {
  return reinterpret_cast<std::uint64_t>(p);
}

TEST(ProcessMemory, ReadsAndWritesThisProcess) {
  auto fd = open_process_memory(::getpid(), true);
  ASSERT_TRUE(fd) << fd.error().to_string();
  EXPECT_EQ(::fcntl(fd->get(), F_GETFD), FD_CLOEXEC);
  const std::vector<std::uint8_t> source{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<std::uint8_t> copy(source.size());
  ASSERT_TRUE(pread_memory(fd->get(), address_of(source.data()), copy));
  EXPECT_EQ(copy, source);
  const std::vector<std::uint8_t> patch{0xaa, 0xbb};
  ASSERT_TRUE(pwrite_memory(fd->get(), address_of(copy.data() + 3), patch));
  EXPECT_EQ(copy, (std::vector<std::uint8_t>{1, 2, 3, 0xaa, 0xbb, 6, 7, 8}));
}

TEST(ProcessMemory, TransfersAreAllOrNothing) {
  auto fd = open_process_memory(::getpid(), true);
  ASSERT_TRUE(fd) << fd.error().to_string();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(::munmap(static_cast<char*>(map) + page, page), 0);
  // Eight bytes before the hole and eight in it: a short transfer.
  const std::uint64_t edge = address_of(map) + page - 8;
  std::vector<std::uint8_t> buf(16);
  expect_error(pread_memory(fd->get(), edge, buf), ErrorCode::kFault, "addr");
  expect_error(pwrite_memory(fd->get(), edge, buf), ErrorCode::kFault, "addr");
  // Nothing mapped at all: the kernel's EIO.
  expect_error(pread_memory(fd->get(), address_of(map) + page, buf), ErrorCode::kIo, "addr");
  ::munmap(map, page);
}

TEST(ProcessMemory, RefusalsNameThePidOrTheDescriptor) {
  constexpr pid_t kNoSuchPid = 4194304 + 17;
  expect_error(open_process_memory(kNoSuchPid, false), ErrorCode::kNoEnt, "pid");
  auto read_only = open_process_memory(::getpid(), false);
  ASSERT_TRUE(read_only) << read_only.error().to_string();
  std::uint8_t byte = 0;
  auto write = pwrite_memory(read_only->get(), address_of(&byte), std::span(&byte, 1));
  expect_error(write, ErrorCode::kIo, "fd");  // EBADF, folded into EIO with its name kept
  EXPECT_NE(write.error().message().find("EBADF"), std::string::npos) << write.error().message();
  expect_error(pread_memory(-1, address_of(&byte), std::span(&byte, 1)), ErrorCode::kIo, "fd");
}

}  // namespace
}  // namespace hwarb::native

// Tests of ProcessMemory on forked children stopped under ptrace (StoppedChild): a child's pages
// are the parent's as they were at the fork, so the test lays them out before it forks.
#include "hwarb/linux/process_memory.h"

#include <sys/mman.h>

#include <array>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "hwarb/linux/page.h"
#include "hwarb/linux/stopped_child.h"

namespace hwarb::native {
namespace {

// `pages` fresh pages of this process, each byte `fill`.
std::uint8_t* map_pages(std::size_t pages, std::uint8_t fill) {
  void* at =
      ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(at, MAP_FAILED);
  std::memset(at, fill, pages * kPage);
  return static_cast<std::uint8_t*>(at);
}

std::uint64_t address(const void* p) {
  return reinterpret_cast<std::uint64_t>(p);
}

TEST(ProcessMemory, ReadsAndWritesAProtNonePage) {
  std::uint8_t* page = map_pages(1, 0x5a);
  ASSERT_EQ(::mprotect(page, kPage, PROT_NONE), 0);
  auto child = StoppedChild::spawn();
  ::munmap(page, kPage);
  ASSERT_TRUE(child) << child.error().to_string();
  ProcessMemory memory;
  ASSERT_TRUE(memory.open(child->pid()));
  EXPECT_EQ(memory.pid(), child->pid());
  const std::uint64_t at = address(page) + 16;

  std::array<std::uint8_t, 4> got{};
  ASSERT_TRUE(memory.read_memory(at, got));
  EXPECT_EQ(got, (std::array<std::uint8_t, 4>{0x5a, 0x5a, 0x5a, 0x5a}));
  const std::array<std::uint8_t, 4> data{1, 2, 3, 4};
  ASSERT_TRUE(memory.write_memory(at, data));
  auto word = memory.read_word(at, 4);
  ASSERT_TRUE(word) << word.error().to_string();
  EXPECT_EQ(*word, 0x04030201u);
  EXPECT_FALSE(memory.read_word(at, 9));

  // The gathered read goes as the process's own access would: refused on PROT_NONE.
  std::array<std::uint8_t, 4> part{};
  const RemoteRead parts[] = {{.addr = at, .out = part}};
  EXPECT_FALSE(memory.read_memory(parts));
}

TEST(ProcessMemory, AShortReadIsEfaultNamingTheAddress) {
  std::uint8_t* pages = map_pages(2, 0x11);
  ::munmap(pages + kPage, kPage);
  auto child = StoppedChild::spawn();
  ::munmap(pages, kPage);
  ASSERT_TRUE(child) << child.error().to_string();
  ProcessMemory memory;
  ASSERT_TRUE(memory.open(child->pid()));

  const std::uint64_t at = address(pages) + kPage - 4;
  std::array<std::uint8_t, 8> across{};
  auto read = memory.read_memory(at, across);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code(), ErrorCode::kFault);
  EXPECT_EQ(read.error().message().rfind("addr", 0), 0u) << read.error().message();
  auto wrote = memory.write_memory(at, across);
  ASSERT_FALSE(wrote);
  EXPECT_EQ(wrote.error().code(), ErrorCode::kFault);
  // What is mapped reads whole.
  std::array<std::uint8_t, 4> inside{};
  ASSERT_TRUE(memory.read_memory(at, inside));
  EXPECT_EQ(inside[3], 0x11);
  // decode_at reads what it can of an instruction before the unmapped page.
  EXPECT_TRUE(memory.decode_at(at));
}

TEST(ProcessMemory, FollowedProcessesHaveTheirOwnMemory) {
  std::uint8_t* page = map_pages(1, 0x01);
  auto first = StoppedChild::spawn();
  page[0] = 0x02;
  auto second = StoppedChild::spawn();
  ::munmap(page, kPage);
  ASSERT_TRUE(first) << first.error().to_string();
  ASSERT_TRUE(second) << second.error().to_string();
  ProcessMemory memory;
  ASSERT_TRUE(memory.open(first->pid()));
  ASSERT_TRUE(memory.follow(second->pid()));
  EXPECT_TRUE(memory.follows(second->pid()));
  EXPECT_EQ(memory.followed(), std::vector<pid_t>{second->pid()});
  EXPECT_EQ(memory.read_word(address(page), 1), 0x01u);
  EXPECT_EQ(memory.read_word(address(page), 1, first->pid()), 0x01u);
  EXPECT_EQ(memory.read_word(address(page), 1, second->pid()), 0x02u);

  ASSERT_TRUE(memory.adopt(second->pid()));
  EXPECT_EQ(memory.pid(), second->pid());
  EXPECT_FALSE(memory.follows(second->pid()));
  EXPECT_EQ(memory.read_word(address(page), 1), 0x02u);
  // A process neither own nor followed is opened for the call.
  EXPECT_EQ(memory.read_word(address(page), 1, first->pid()), 0x01u);
  EXPECT_FALSE(memory.adopt(first->pid()));
  memory.forget(first->pid());
  EXPECT_TRUE(memory.followed().empty());
}

TEST(ProcessMemory, FindsCodeInTheExecutableMappings) {
  auto child = StoppedChild::spawn();
  ASSERT_TRUE(child) << child.error().to_string();
  ProcessMemory memory;
  ASSERT_TRUE(memory.open(child->pid()));
  constexpr std::uint8_t kSyscall[] = {0x0f, 0x05};
  auto at = memory.find_code(child->pid(), kSyscall);
  ASSERT_TRUE(at) << at.error().to_string();
  EXPECT_EQ(memory.read_word(*at, 2), 0x050fu);
  auto insn = memory.decode_at(*at);
  ASSERT_TRUE(insn) << insn.error().to_string();
  EXPECT_EQ(insn->length, 2);

  EXPECT_EQ(memory.find_code(child->pid(), {}).error().code(), ErrorCode::kInval);
  // Bytes no text holds (an illegal instruction, fifteen times over).
  std::array<std::uint8_t, 30> none{};
  for (std::size_t i = 0; i < none.size(); i += 2) {
    none[i] = 0x0f;
    none[i + 1] = 0x0b;
  }
  auto missing = memory.find_code(child->pid(), none);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kNoEnt);
}

}  // namespace
}  // namespace hwarb::native

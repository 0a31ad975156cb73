// ThreadLocals on a real program: each thread's copy of a thread-local variable where the thread
// itself sees it, from its first stop on; the errors before libc is loaded and for a thread that
// is not stopped.
#include "hwarb/linux/thread_locals.h"

#include <sys/auxv.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hwarb/linux/link_map.h"
#include "hwarb/linux/symbols.h"
#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using ::testing::HasSubstr;
using testing::program;

// "tls TID ADDR" lines: each thread's own view of its copy.
std::map<pid_t, std::uint64_t> printed_addresses(const std::string& text) {
  std::map<pid_t, std::uint64_t> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (word != "tls") continue;
    pid_t tid = 0;
    std::string addr;
    in >> tid >> addr;
    out[tid] = std::stoull(addr, nullptr, 16);
  }
  return out;
}

// The link_map entry of the executable (main_lm), read from the stopped process.
std::uint64_t main_lm(Inferior& inf) {
  std::ifstream f("/proc/" + std::to_string(inf.pid()) + "/auxv", std::ios::binary);
  const std::vector<std::uint8_t> auxv{std::istreambuf_iterator<char>(f), {}};
  auto map = read_link_map(auxv, [&](std::uint64_t addr, std::span<std::uint8_t> out) {
    return inf.read_memory(addr, out);
  });
  return map ? map->main_lm : 0;
}

TEST(ThreadLocals, EveryThreadsCopyIsWhereTheThreadSeesIt) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("tls_counter"), "3", "1", "hold"}), out);
  auto symbols = SymbolTable::load_file(program("tls_counter"));
  ASSERT_TRUE(symbols) << symbols.error().to_string();
  auto var = symbols->find_thread_local("tls_counter");
  ASSERT_TRUE(var) << var.error().to_string();
  EXPECT_TRUE(var->executable);
  EXPECT_EQ(var->size, 4u);

  // Before the dynamic linker has run there is no libc: no thread library to ask.
  auto early = ThreadLocals::open(*inf, inf->pid());
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().code(), ErrorCode::kOpNotSupp);
  EXPECT_THAT(early.error().to_string(), HasSubstr("no thread library"));

  // At each new thread's first stop its block is already there (pthread_create set it up).
  std::map<pid_t, std::uint64_t> at_start;
  ASSERT_TRUE(inf->resume_all(Resume::kCont));
  while (out.text().find("ready") == std::string::npos) {
    auto ev = inf->wait_or_poll({}, 20);
    ASSERT_TRUE(ev) << ev.error().to_string();
    if (!*ev) continue;
    if ((*ev)->kind == EventKind::kNewThread) {
      auto locals = ThreadLocals::open(*inf, inf->pid());
      ASSERT_TRUE(locals) << locals.error().to_string();
      auto addr = locals->address((*ev)->tid, main_lm(*inf), var->offset);
      ASSERT_TRUE(addr) << addr.error().to_string();
      at_start[(*ev)->tid] = *addr;
    }
    ASSERT_NE((*ev)->kind, EventKind::kExited);
    ASSERT_TRUE(inf->resume((*ev)->tid, Resume::kCont,
                            (*ev)->kind == EventKind::kSignal ? (*ev)->signal : 0));
  }
  ASSERT_TRUE(inf->stop_all());

  const std::map<pid_t, std::uint64_t> seen = printed_addresses(out.text());
  ASSERT_EQ(seen.size(), 3u) << out.text();
  EXPECT_EQ(at_start, seen);
  auto locals = ThreadLocals::open(*inf, inf->pid());
  ASSERT_TRUE(locals) << locals.error().to_string();
  const std::uint64_t lm = main_lm(*inf);
  ASSERT_NE(lm, 0u);
  for (const auto& [tid, addr] : seen) {
    auto by_lm = locals->address(tid, lm, var->offset);
    ASSERT_TRUE(by_lm) << by_lm.error().to_string();
    EXPECT_EQ(*by_lm, addr) << "thread " << tid;
    // lm 0: the executable's block (module 1), as gdbserver takes it.
    auto by_module = locals->address(tid, 0, var->offset);
    ASSERT_TRUE(by_module) << by_module.error().to_string();
    EXPECT_EQ(*by_module, addr) << "thread " << tid;
  }
  // The main thread has its own copy, apart from every other.
  auto own = locals->address(inf->pid(), lm, var->offset);
  ASSERT_TRUE(own) << own.error().to_string();
  for (const auto& [tid, addr] : seen) EXPECT_NE(*own, addr);

  auto stranger = locals->address(1, lm, var->offset);
  ASSERT_FALSE(stranger);
  EXPECT_EQ(stranger.error().code(), ErrorCode::kSrch);
  EXPECT_TRUE(inf->kill());
}

}  // namespace
}  // namespace hwarb::native

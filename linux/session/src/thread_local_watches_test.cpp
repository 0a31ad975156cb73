// ThreadLocalWatches on a real program: 4 threads created after the watch began each write their
// own copy of a thread-local 50 times; every write is a hit of that thread's copy, and of no
// other; each copy goes when its thread ends.
#include "hwarb/linux/thread_local_watches.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

class Collector final : public WatchObserver {
 public:
  void hit(const WatchHit& h) override { hits.push_back(h); }
  std::vector<WatchHit> hits;
};

TEST(ThreadLocalWatches, EachThreadsWritesAreHitsOfItsOwnCopy) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("tls_counter"), "4", "50"}), out);
  auto table = SymbolTable::load(inf->pid());
  ASSERT_TRUE(table) << table.error().to_string();
  bool ran_to_entry = false;
  auto var = find_thread_local(*inf, *table, ran_to_entry, "tls_counter");
  ASSERT_TRUE(var) << var.error().to_string();
  EXPECT_TRUE(ran_to_entry);

  WatchSession session(*inf, {.hardware = false, .no_hardware = "this test", .slots = 4});
  auto watches = ThreadLocalWatches::open(
      *inf, session, {{.symbol = *var, .offset = 0, .len = 4, .access = kWatchWrite}});
  ASSERT_TRUE(watches) << watches.error().to_string();
  auto armed = watches->arm();
  ASSERT_TRUE(armed) << armed.error().to_string();
  ASSERT_EQ(armed->size(), 1u);  // the main thread's copy
  EXPECT_EQ((*armed)[0].tid, inf->pid());

  std::map<WatchId, pid_t> owner;
  owner[(*armed)[0].id] = inf->pid();
  std::set<std::uint64_t> addresses{(*armed)[0].addr};
  Collector collector;
  OwnCopyHits own(*watches, collector);
  WatchSessionEngine inner(session, own);
  ThreadLocalEngine engine(inner, *watches, [&](const ThreadLocalCopy& c) {
    owner[c.id] = c.tid;
    addresses.insert(c.addr);
  });
  auto end = run_target(*inf, engine);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->status, 0);
  EXPECT_EQ(end->signal, 0);
  EXPECT_EQ(out.text(), "done\n");

  EXPECT_EQ(owner.size(), 5u);  // main and the 4 workers
  // Each its own copy (a thread that ended may leave its memory, copy and all, to a later one).
  EXPECT_GE(addresses.size(), 2u);
  std::map<pid_t, int> writes;
  for (const WatchHit& h : collector.hits) {
    const auto it = owner.find(static_cast<WatchId>(h.id));
    ASSERT_NE(it, owner.end()) << "hit of watch " << h.id;
    EXPECT_EQ(it->second, h.tid) << "a hit of another thread's copy: " << table->describe(h.ip);
    ++writes[h.tid];
  }
  ASSERT_EQ(writes.size(), 4u);
  for (const auto& [tid, n] : writes) EXPECT_EQ(n, 50) << "thread " << tid;
  // Every worker's copy went with its thread.
  EXPECT_LE(watches->copies().size(), 1u);
}

}  // namespace
}  // namespace hwarb::native

// The slot-constraint arbiter. The rules are in arbiter.h; this file explains how they are
// accounted and locked.
//
// ACCOUNTING (per pool p; N = slots of p; every counter below is kept incrementally)
//
//   CP[c]           CpuPool::cpu_pinned       CPU-bound pinned weight on c
//   all(T)          TaskState::all[p]         T's pinned weight on all CPUs
//   spec(T,c)       TaskState::spec[p]        T's pinned weight on exactly c (sparse: only c != 0)
//   TP(T,c)         = all(T) + spec(T,c)
//   hist_all        GlobalPool::hist_all      tasks by all(T)
//   tsk_hist[c]     CpuPool::tsk_hist         tasks with spec(T,c) > 0, by TP(T,c)
//   Rl[c], Ra       local / all-CPU flexible reserve: the largest flexible weight on exactly c,
//                   and on all CPUs; R[c] = max(Rl[c], Ra)
//   cpu_hist_cp     GlobalPool                CPUs by CP[c], in kCpuShards histograms (CPU c
//                                             in shard c % kCpuShards, each on its own cache
//                                             line): CPU-bound operations on CPUs of different
//                                             shards write different lines
//   cpu_hist_flex   GlobalPool                CPUs with Rl[c] > 0, by CP[c] + Rl[c]
//
// Every histogram is cumulative: h[k] = how many members have a value >= k, for k = 1..N+1
// (N+1 collects every value past N, which exists only for a moment on the fast path). Raising
// a member by w is w increments, lowering it w decrements, and "the largest value is at most a"
// is one load: h[a+1] == 0.
//
// From these, every admission check is cheap:
//   max_T TP(T,c)            = max(top(hist_all), top(tsk_hist[c]))          O(1)
//       A task with spec(T,c) = 0 has TP(T,c) = all(T), counted in hist_all. A task with
//       spec(T,c) > 0 is also in hist_all, but there with all(T) <= TP(T,c), so it never raises
//       the maximum above its true value. Unlike Linux, a task never has to be moved between
//       the global and every per-CPU histogram when it goes from all-CPU-only to mixed: the
//       transition costs O(1), and adding an all-CPU request costs O(CPUs the task has
//       per-CPU requests on), never O(CPUs).
//   max_c (CP[c] + R[c])     = max(top(cpu_hist_flex), top(cpu_hist_cp) + Ra) O(1)
//       (a CPU without local flexible requests has CP[c] + R[c] = CP[c] + Ra). A CPU-bound
//       request on a CPU without local flexible requests updates one global histogram only.
//       so a task-on-all-CPUs request of a task with no per-CPU requests costs O(1): nothing
//       depends on the number of CPUs or tasks.
//   A check "top(h) <= a" reads the one bucket h[a+1] (hist_at_most); publishing weight w is
//   O(w) read-modify-writes.
//   Only a flexible request on all CPUs loops over the CPUs.
//
// The checks are written "after publication": the request's weight is first added to the
// counters, then the invariant it could break is checked, and the weight is taken away again on
// refusal. This is what lets the fast path below run without exclusion.
//
// LOCKING RULES
//
//   1. state_lock (a BigReaderLock). Its read side is held by pinned breakpoint reserve/release,
//      the fast path; its write side by everything else: flexible requests, exclusive kinds,
//      reserve_all, modify, hotplug, explain, snapshot, dump, and the slow path of a refused
//      fast-path reservation. Under the write side nothing else runs, so every value is exact.
//      The read side nests; the write side does not, and is never taken with the read side held
//      (big_reader_lock.h, NESTING). Functions that need the write side say so with
//      HWARB_REQUIRES (checked by Clang's -Wthread-safety) and check it with assert_held().
//   2. Shard::mutex (one of kShards task-table shards, by task id) is taken inside rule 1 and
//      protects the shard's TaskStates (all, spec, node list) and the table itself. Operations
//      on tasks in different shards never share a lock; there is no global task mutex.
//   3. The CPU lock — bit kCpuLocked of pool 0's CP[c] word, not a separate mutex (see
//      State::lock_cpu) — protects a CPU's list of CPU-bound reservations, and orders the fast
//      paths' changes of that CPU's CP[c] with their moves in the CPU histograms (see below).
//      Every change of a CP[c] is made by its holder. It is taken inside rule 1 (and never
//      together with a shard mutex). Taking it publishes a pool-0 change of CP[c] in the same
//      compare-and-swap, so a CPU-bound reserve or release costs one read-modify-write for
//      rule 1, one for rule 3 and CP[c] together, and one per histogram bucket moved.
//   4. The counters CP, hist_all, tsk_hist, cpu_hist_* are atomics updated under the read side
//      by concurrent fast paths; flexible reserves (Rl, Ra), online flags and exclusive-kind
//      counts only change under the write side, so fast paths read them as constants.
//
// WHY THE FAST PATH NEVER OVERSUBSCRIBES, AND NEVER WRONGLY REFUSES
//
//   A fast-path reservation publishes its weight (seq_cst read-modify-writes), then re-reads the
//   counters of the invariant it affects. Histogram moves add to the new bucket before they
//   take from the old, so a half-seen move can only make a reader overestimate. Moves of one
//   member never overlap: a task's are made under its shard mutex (rule 2), a CPU's under its
//   CPU lock (rule 3). Otherwise a release could take CPU c from 2 to 1 in the histogram
//   (bucket 2 decremented) before the reservation that took c from 1 to 2 has incremented
//   bucket 2, and a reader could meanwhile see bucket 2 one short — an underestimate, hiding
//   another CPU at 2.
//   Take the fast-path reservations that end up live and whose weight meets on one CPU and
//   pool; the one whose first check-read is last in the seq_cst order was preceded by every
//   other one's publication (each publishes before it reads), so its check saw all of them:
//   since it passed, the sum is within N. A fast-path check that fails may have been misled by
//   weight that a concurrent operation published only for a moment, so a fast-path refusal is
//   never final: the request is retried on the slow path (rule 1 write side), where the state
//   is exact and the answer is the model's answer. Releases need no check.
//
// ALL-OR-NOTHING
//
//   Every fallible step (allocating a node, inserting a task, growing a task's per-CPU table)
//   happens before any counter changes, and the publish/check/retract sequence cannot fail.
//   A failure undoes the steps already taken (erasing a task entry it created), so the state —
//   compared by dump() in the fault-injection test — is exactly as before.

#include "hwarb/arbiter/arbiter.h"

#include <tbb/spin_mutex.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/intrusive/list.hpp>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "big_reader_lock.h"
#include "hwarb/base/check.h"

namespace hwarb::arbiter {

namespace bi = boost::intrusive;

std::string_view to_string(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kBreakpoint:
      return "breakpoint";
    case ResourceKind::kBts:
      return "bts";
    case ResourceKind::kPt:
      return "pt";
    case ResourceKind::kLbr:
      return "lbr";
  }
  return "?";
}

std::string to_string(const Request& r) {
  std::ostringstream out;
  out << "#" << r.id.value() << " " << to_string(r.kind);
  if (r.task) out << " task " << r.task->value();
  out << " cpu " << (r.cpu ? std::to_string(r.cpu->value()) : std::string("all"));
  if (r.kind == ResourceKind::kBreakpoint) {
    out << " " << to_string(r.type) << " w" << r.weight << (r.pinned ? " pinned" : " flexible");
  }
  return out.str();
}

namespace {
struct TaskState;
}  // namespace

struct ReservationNode {
  Request req;
  // The task's state while the node is on its task's list (release finds it without a lookup;
  // the state lives at least as long as its nodes); null otherwise.
  TaskState* task = nullptr;
  // In exactly one list: its task's nodes, its CPU's holders, or the exclusive-kind list.
  bi::list_member_hook<> hook;
};

namespace {

// A per-thread cache of free ReservationNode memory, so that a reserve/release pair does not go
// through malloc and free (nodes are alike in every Arbiter, and a node may be released by
// another thread than the one that reserved it: it then goes to the releasing thread's cache).
// The cache is a plain thread-local (no initialisation guard on the fast path); the first push
// registers a reaper that frees the cached memory when the thread exits.
struct NodeCache {
  static constexpr int kMax = 32;
  std::array<void*, kMax> free;
  int count;
  bool registered;  // the reaper exists
  bool reaped;      // the thread is exiting: free directly
};
// initial-exec: the arbiter is linked into executables (or libraries loaded at start-up), so the
// cache is one %fs-relative access, not a __tls_get_addr call.
[[gnu::tls_model("initial-exec")]] thread_local constinit NodeCache tls_nodes{};

struct NodeCacheReaper {
  ~NodeCacheReaper() {
    for (int i = 0; i < tls_nodes.count; ++i) ::operator delete(tls_nodes.free[i]);
    tls_nodes.count = 0;
    tls_nodes.reaped = true;
  }
};

[[gnu::noinline]] void register_node_reaper() {
  thread_local NodeCacheReaper reaper;
  (void)reaper;
  tls_nodes.registered = true;
}

void* node_memory() {
  NodeCache& c = tls_nodes;
  if (c.count > 0) return c.free[--c.count];
  return ::operator new(sizeof(ReservationNode));
}

void free_node(ReservationNode* node) {
  node->~ReservationNode();
  NodeCache& c = tls_nodes;
  if (c.count < NodeCache::kMax && !c.reaped) [[likely]] {
    if (!c.registered) [[unlikely]]
      register_node_reaper();
    c.free[c.count++] = node;
    return;
  }
  ::operator delete(node);
}

struct NodeDeleter {
  void operator()(ReservationNode* node) const { free_node(node); }
};
using NodePtr = std::unique_ptr<ReservationNode, NodeDeleter>;

using NodeList =
    bi::list<ReservationNode,
             bi::member_hook<ReservationNode, bi::list_member_hook<>, &ReservationNode::hook>>;

// Cumulative histograms (see ACCOUNTING): h[k] counts members with value >= k, k = 1..cap where
// cap = N+1 of the pool; values past N all count as N+1.
constexpr int kHistSize = kMaxSlots + 2;

using AtomicHist = std::array<std::atomic<int>, kHistSize>;

// Moves one member from value `from` to value `to` (0 = not a member). Raises go bottom-up and
// lowers top-down, so every intermediate state is itself a cumulative histogram (non-increasing
// in k), and a reader that sees only part of a lower still counts the member at a value between
// the old and the new one.
[[gnu::always_inline]] inline void hist_move(AtomicHist& h, int from, int to, int cap) {
  int f = std::min(from, cap), t = std::min(to, cap);
  for (int k = f + 1; k <= t; ++k) h[k].fetch_add(1);
  for (int k = f; k > t; --k) h[k].fetch_sub(1);
}

// Whether no member has a value above a (values past N count as cap), in one load: a cumulative
// histogram has no member above a exactly when its bucket a+1 is empty (every state, including
// the intermediate ones of hist_move, is non-increasing in k).
[[gnu::always_inline]] inline bool hist_at_most(const AtomicHist& h, int a, int cap) {
  if (a < 0) return false;
  return a >= cap || h[a + 1].load() == 0;
}

// A plain histogram of flexible weights, changed only under the write side.
struct FlexHist {
  std::array<int, kMaxSlots + 1> count{};
  int max = 0;
  int total = 0;
  void add(int w) {
    ++count[w];
    ++total;
    max = std::max(max, w);
  }
  void remove(int w) {
    --count[w];
    --total;
    while (max > 0 && count[max] == 0) --max;
  }
};

struct SpecEntry {
  int cpu;
  int weight;
};

struct TaskState {
  explicit TaskState(TaskId id) : id(id) {}
  TaskId id;
  std::array<int, 2> all{};                      // all(T) per pool
  std::array<std::vector<SpecEntry>, 2> spec{};  // spec(T,c) per pool, only weights > 0
  NodeList nodes;                                // breakpoint reservations of this task

  int spec_of(int pool, int cpu) const {
    for (const auto& e : spec[pool]) {
      if (e.cpu == cpu) return e.weight;
    }
    return 0;
  }
  // Adds `delta` to spec(T,cpu); capacity must have been reserved when the entry is new.
  void spec_add(int pool, int cpu, int delta) {
    auto& v = spec[pool];
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i].cpu == cpu) {
        v[i].weight += delta;
        if (v[i].weight == 0) {
          v[i] = v.back();
          v.pop_back();
        }
        return;
      }
    }
    HWARB_CHECK(delta > 0 && v.size() < v.capacity(), "spec entry without reserved capacity");
    v.push_back({cpu, delta});
  }
  bool empty() const { return nodes.empty(); }
};

// The CPU lock of rule 3 is this bit of pool 0's `cpu_pinned` word (CP[c] itself is the rest of
// the word: it never comes near 2^30). Taking the lock and publishing a pool-0 CP change is then
// one compare-and-swap, and releasing it a plain store; see State::lock_cpu.
constexpr int kCpuLocked = 1 << 30;

// The hot part of a CPU's pool: a CPU-bound or task-on-this-CPU reservation on x86 reads and
// writes only the first cache line of its CpuState (lock, holders, CP, Rl, low buckets).
struct CpuPool {
  // CP[c]; in pool 0 also the CPU's lock bit (kCpuLocked, rule 3). Rule 4: atomic, changed
  // under the read side, only by the holder of the CPU's lock.
  std::atomic<int> cpu_pinned{0};
  int flex_max = 0;       // Rl[c] = CpuState::flex[pool].max; write side only (rule 4)
  AtomicHist tsk_hist{};  // rule 4: atomic, updated under the read side

  // CP[c] without the lock bit.
  int pinned() const { return cpu_pinned.load() & ~kCpuLocked; }
};

struct alignas(64) CpuState {
  bool online = true;  // changed under the write side only (rule 4)
  NodeList holders;    // CPU-bound breakpoint reservations on this CPU; rule 3 (the CPU lock)
  std::array<CpuPool, 2> pool;
  std::array<FlexHist, 2> flex;  // flexible weights on exactly this CPU; write side only
};

constexpr int kCpuShards = 8;
struct alignas(64) CpuHistShard {
  AtomicHist h{};
};

struct GlobalPool {
  alignas(64) AtomicHist hist_all{};
  std::array<CpuHistShard, kCpuShards> cpu_hist_cp;
  alignas(64) AtomicHist cpu_hist_flex{};
  FlexHist flex_all;  // Ra = flex_all.max; write side only
  int flex_cpus = 0;  // CPUs with Rl[c] > 0; write side only
};

constexpr std::size_t kShards = 256;

struct alignas(64) Shard {
  using Table = std::unordered_map<TaskId, TaskState>;
  tbb::spin_mutex mutex;  // rule 2: guards `tasks`, `spare` and every TaskState; inside rule 1
  Table tasks;
  // Table nodes of tasks that lost their last reservation, kept for the next new task so that
  // a task coming and going does not allocate (perf bench breakpoint thread does exactly that).
  std::vector<Table::node_type> spare;
  static constexpr std::size_t kMaxSpare = 4;
  // The state task_state() found or made last (a task's reservations tend to come together),
  // forgotten when that state leaves the table.
  TaskState* last = nullptr;
};

bool is_exclusive_kind(ResourceKind k) {
  return k != ResourceKind::kBreakpoint;
}

std::string join_ids(const std::vector<RequestId>& ids) {
  std::string s;
  for (auto id : ids) {
    if (!s.empty()) s += ' ';
    s += "#" + std::to_string(id.value());
  }
  return s;
}

}  // namespace

constexpr int kAllCpus = -1;

// The accounted contribution of one breakpoint reservation.
struct Effect {
  int pool;
  TaskState* task;  // null: CPU-bound
  int cpu;          // kAllCpus: all CPUs
  int weight;
  bool pinned;  // after the flexible policy
};

struct Arbiter::State {
  explicit State(const ArbiterConfig& config)
      : config(config), cpus(static_cast<std::size_t>(config.cpus)) {}

  const ArbiterConfig& config;
  // Rule 1: read side for pinned fast paths, write side for everything else.
  detail::BigReaderLock state_lock;
  std::vector<CpuState> cpus;
  std::array<GlobalPool, 2> global;
  std::array<Shard, kShards> shards;
  NodeList exclusive_nodes HWARB_GUARDED_BY(state_lock);
  std::array<int, 4> exclusive_count HWARB_GUARDED_BY(state_lock){};  // per ResourceKind
  std::atomic<int> fault_countdown{0};

  // ---- fault injection -------------------------------------------------------------------

  // True when this fallible step must fail (test hook).
  bool fault(std::string_view) {
    if (fault_countdown.load(std::memory_order_relaxed) == 0) return false;
    return fault_countdown.fetch_sub(1) == 1;
  }
  std::unexpected<Error> injected(std::string_view step) {
    return make_error(ErrorCode::kNoMem, "injected fault: " + std::string(step));
  }

  // ---- lookups -----------------------------------------------------------------------------

  int slots(int pool) const { return config.profile.pool_slots(pool); }
  Shard& shard_of(TaskId t) { return shards[std::hash<std::int64_t>{}(t.value()) % kShards]; }
  CpuPool& cp(int cpu, int pool) { return cpus[cpu].pool[pool]; }
  int reserve_flex(int cpu, int pool) const {
    return std::max(cpus[cpu].pool[pool].flex_max, global[pool].flex_all.max);
  }
  [[gnu::always_inline]] Effect effect_of(const Request& r, TaskState* ts) const {
    bool pinned = r.pinned || config.flexible == FlexiblePolicy::kAsPinned;
    int cpu = r.cpu ? r.cpu->value() : kAllCpus;
    return Effect{config.profile.pool_of(r.type), ts, cpu, r.weight, pinned};
  }

  // ---- publish / retract: cannot fail ------------------------------------------------------

  void publish(const Effect& e) { apply(e, +1); }
  void retract(const Effect& e) { apply(e, -1); }

  // ---- the CPU lock (rule 3) ----------------------------------------------------------------
  //
  // The lock is kCpuLocked in pool 0's CP word, so that on the fast path
  //   1. a pool-0 change (every x86 breakpoint) takes the lock and publishes CP[c] + d in one
  //      seq_cst compare-and-swap (the publication the fast-path argument needs), and
  //   2. releasing it is a release store of the final CP[c] (which also retracts a refused
  //      request: lowering CP[c] late only makes concurrent readers overestimate);
  //   3. a change of another pool takes the lock with a CAS that adds nothing, then publishes
  //      that pool's CP[c] with a seq_cst read-modify-write of its own.
  // One read-modify-write per operation fewer than a separate spin lock. Under the write side no
  // fast path runs, so there the lock is always free (taking it costs the same CAS).

  // Takes CPU c's lock and adds d to CP[c] of `pool`; returns CP[c] of `pool` before.
  [[gnu::always_inline]] int lock_cpu(int cpu, int pool, int d) {
    std::atomic<int>& word = cpus[cpu].pool[0].cpu_pinned;
    const int d0 = pool == 0 ? d : 0;
    int v = word.load(std::memory_order_relaxed);
    for (;;) {
      if (v & kCpuLocked) [[unlikely]] {
        v = wait_cpu_unlocked(word);
        continue;
      }
      if (word.compare_exchange_weak(v, (v + d0) | kCpuLocked)) [[likely]]
        break;
    }
    if (pool == 0) return v;
    return cpus[cpu].pool[pool].cpu_pinned.fetch_add(d);
  }
  // Adds d to CP[c] of `pool` (d != 0: a refused request is retracted) and releases the lock.
  [[gnu::always_inline]] void unlock_cpu(int cpu, int pool, int d) {
    std::atomic<int>& word = cpus[cpu].pool[0].cpu_pinned;
    int v = word.load(std::memory_order_relaxed) & ~kCpuLocked;  // only the holder changes it
    if (pool == 0) {
      v += d;
    } else if (d != 0) {
      cpus[cpu].pool[pool].cpu_pinned.fetch_add(d);
    }
    word.store(v, std::memory_order_release);
  }
  [[gnu::noinline]] static int wait_cpu_unlocked(const std::atomic<int>& word) {
    int v;
    for (int i = 0; (v = word.load(std::memory_order_relaxed)) & kCpuLocked; ++i) {
      if (i >= 64) std::this_thread::yield();  // the holder may have been preempted
    }
    return v;
  }

  // Moves CPU c from CP[c] = from to CP[c] = to (pool e.pool) in the CPU histograms. Under c's
  // lock (rule 3), so that the moves of one CPU never overlap.
  [[gnu::always_inline]] void move_cpu(const Effect& e, int from, int to) {
    const int cap = slots(e.pool) + 1;
    hist_move(global[e.pool].cpu_hist_cp[e.cpu % kCpuShards].h, from, to, cap);
    if (const int rl = cp(e.cpu, e.pool).flex_max; rl > 0) {
      hist_move(global[e.pool].cpu_hist_flex, from + rl, to + rl, cap);
    }
  }

  // apply() of a pinned CPU-bound effect (the slow path; the fast paths inline the steps).
  void apply_cpu_pinned(const Effect& e, int sign) {
    const int d = sign * e.weight;
    const int old = lock_cpu(e.cpu, e.pool, d);
    move_cpu(e, old, old + d);
    unlock_cpu(e.cpu, e.pool, 0);
  }

  void apply(const Effect& e, int sign) {
    const int cap = slots(e.pool) + 1;
    int d = sign * e.weight;
    if (!e.pinned) {
      state_lock.assert_held();  // rule 4: flexible weight moves only under the write side
      apply_flexible(e, sign);
    } else if (!e.task) {
      apply_cpu_pinned(e, sign);
    } else if (e.cpu != kAllCpus) {
      TaskState& t = *e.task;
      int a = t.all[e.pool];
      int s = t.spec_of(e.pool, e.cpu);
      hist_move(cp(e.cpu, e.pool).tsk_hist, s ? a + s : 0, s + d ? a + s + d : 0, cap);
      t.spec_add(e.pool, e.cpu, d);
    } else {
      TaskState& t = *e.task;
      int a = t.all[e.pool];
      hist_move(global[e.pool].hist_all, a, a + d, cap);
      for (const auto& s : t.spec[e.pool]) {
        hist_move(cp(s.cpu, e.pool).tsk_hist, a + s.weight, a + d + s.weight, cap);
      }
      t.all[e.pool] = a + d;
    }
  }

  // Write side only (rule 4: flexible reserves change only under it).
  void apply_flexible(const Effect& e, int sign) HWARB_REQUIRES(state_lock) {
    const int cap = slots(e.pool) + 1;
    if (e.cpu != kAllCpus) {
      CpuPool& p = cp(e.cpu, e.pool);
      FlexHist& flex = cpus[e.cpu].flex[e.pool];
      int old_rl = flex.max;
      if (sign > 0)
        flex.add(e.weight);
      else
        flex.remove(e.weight);
      int c = p.pinned();
      int new_rl = flex.max;
      p.flex_max = new_rl;
      GlobalPool& g = global[e.pool];
      g.flex_cpus += (new_rl > 0) - (old_rl > 0);
      hist_move(g.cpu_hist_flex, old_rl ? c + old_rl : 0, new_rl ? c + new_rl : 0, cap);
    } else if (sign > 0) {
      global[e.pool].flex_all.add(e.weight);
    } else {
      global[e.pool].flex_all.remove(e.weight);
    }
  }

  // ---- checks, after publication -----------------------------------------------------------

  // Case 1: CP[c] + max_T TP(T,c) + R[c] <= N (the flexible form, case 4, is the same check),
  // as max_T TP(T,c) <= N - CP[c] - R[c]: one bucket of each task histogram.
  [[gnu::always_inline]] bool cpu_fits(int cpu, int pool) const {
    const CpuPool& p = cpus[cpu].pool[pool];
    const int cap = slots(pool) + 1;
    const int room = slots(pool) - p.pinned() - reserve_flex(cpu, pool);
    return hist_at_most(global[pool].hist_all, room, cap) && hist_at_most(p.tsk_hist, room, cap);
  }
  // Case 2 for task T on c.
  bool task_cpu_fits(const TaskState& t, int cpu, int pool) const {
    return cpus[cpu].pool[pool].pinned() + t.all[pool] + t.spec_of(pool, cpu) +
               reserve_flex(cpu, pool) <=
           slots(pool);
  }
  // Case 3: case 2 on every CPU, in O(N + CPUs where T has per-CPU requests).
  bool task_all_fits(const TaskState& t, int pool) const {
    // max_c (CP[c] + R[c]) <= N - all(T), one bucket of each CPU histogram.
    const GlobalPool& g = global[pool];
    const int cap = slots(pool) + 1;
    const int room = slots(pool) - t.all[pool];
    for (const CpuHistShard& shard : g.cpu_hist_cp) {
      if (!hist_at_most(shard.h, room - g.flex_all.max, cap)) return false;
    }
    if (g.flex_cpus > 0 && !hist_at_most(g.cpu_hist_flex, room, cap)) return false;
    for (const auto& s : t.spec[pool]) {
      if (!task_cpu_fits(t, s.cpu, pool)) return false;
    }
    return true;
  }
  bool fits(const Effect& e) const {
    if (!e.pinned) {
      if (e.cpu != kAllCpus) return cpu_fits(e.cpu, e.pool);
      for (int c = 0; c < config.cpus; ++c) {
        if (!cpu_fits(c, e.pool)) return false;
      }
      return true;
    }
    if (!e.task) return cpu_fits(e.cpu, e.pool);
    if (e.cpu != kAllCpus) return task_cpu_fits(*e.task, e.cpu, e.pool);
    return task_all_fits(*e.task, e.pool);
  }

  // ---- task table (under the shard mutex, or the write side) -------------------------------

  // Finds or creates T's state; *created tells which. ENOMEM on an injected fault.
  Result<TaskState*> task_state(Shard& shard, TaskId t, bool* created) {
    if (shard.last != nullptr && shard.last->id == t) {
      *created = false;
      return shard.last;
    }
    auto it = shard.tasks.find(t);
    if (it != shard.tasks.end()) {
      *created = false;
      shard.last = &it->second;
      return shard.last;
    }
    if (fault("insert into the task table")) return injected("insert into the task table");
    *created = true;
    if (shard.spare.empty()) {
      shard.last = &shard.tasks.try_emplace(t, t).first->second;
      return shard.last;
    }
    Shard::Table::node_type node = std::move(shard.spare.back());
    shard.spare.pop_back();
    node.key() = t;
    node.mapped().id = t;
    shard.last = &shard.tasks.insert(std::move(node)).position->second;
    return shard.last;
  }
  TaskState* find_task(TaskId t) {
    Shard& s = shard_of(t);
    auto it = s.tasks.find(t);
    return it == s.tasks.end() ? nullptr : &it->second;
  }
  // Room for `extra` new per-CPU entries, so that publish never allocates.
  Result<void> reserve_spec(TaskState& t, int pool, std::size_t extra) {
    auto& v = t.spec[pool];
    if (v.size() + extra <= v.capacity()) return {};
    if (fault("grow the task's per-CPU table")) return injected("grow the task's per-CPU table");
    v.reserve(std::max(v.size() + extra, 2 * v.capacity()));
    return {};
  }
  // Removes T's entry once it holds nothing. Its node is kept for reuse (all, spec and nodes
  // are already zero/empty; spec keeps its capacity).
  void drop_if_empty(Shard& shard, TaskState* t) {
    if (!t->empty()) return;
    if (shard.last == t) shard.last = nullptr;
    auto node = shard.tasks.extract(t->id);
    if (shard.spare.size() < Shard::kMaxSpare) shard.spare.push_back(std::move(node));
  }

  Result<ReservationNode*> new_node(const Request& r) {
    if (fault("allocate the reservation")) return injected("allocate the reservation");
    return new (node_memory()) ReservationNode{r, nullptr, {}};
  }

  // ---- validation --------------------------------------------------------------------------

  [[gnu::always_inline]] Result<void> validate(const Request& r) const {
    if (r.cpu && (r.cpu->value() < 0 || r.cpu->value() >= config.cpus)) {
      return make_error(ErrorCode::kInval, "cpu: " + std::to_string(r.cpu->value()) +
                                               " is not a possible CPU (0.." +
                                               std::to_string(config.cpus - 1) + ")");
    }
    if (!r.task && !r.cpu) {
      return make_error(ErrorCode::kInval,
                        "cpu: a request without a task must name one CPU (all CPUs needs a task)");
    }
    if (r.weight < 1) {
      return make_error(ErrorCode::kInval,
                        "weight: must be at least 1, got " + std::to_string(r.weight));
    }
    return {};
  }
  [[gnu::always_inline]] Result<void> check_online(const Request& r) const {
    if (!r.task && r.cpu && !cpus[r.cpu->value()].online) {
      return make_error(ErrorCode::kNoDev,
                        "cpu: cpu " + std::to_string(r.cpu->value()) + " is offline");
    }
    return {};
  }
  std::optional<ResourceKind> busy_with(ResourceKind k) const HWARB_REQUIRES(state_lock) {
    for (int other = 1; other < 4; ++other) {
      if (other != static_cast<int>(k) && exclusive_count[other] > 0) {
        return static_cast<ResourceKind>(other);
      }
    }
    return std::nullopt;
  }

  // ---- explanations (write side) -------------------------------------------------------------

  // For a request that is NOT published: the first CPU where it does not fit, with the holders.
  Explanation explain_slots(const Request& r) {
    Explanation x;
    x.admitted = true;
    x.weight = r.weight;
    x.pool_type = r.type;
    int pool = config.profile.pool_of(r.type);
    int n = slots(pool);
    x.pool_slots = n;
    std::string pool_name(config.profile.pool_name(pool));
    if (r.weight > n) {
      x.admitted = false;
      x.code = ErrorCode::kNoSpc;
      x.reason = "weight " + std::to_string(r.weight) + " exceeds the " + std::to_string(n) +
                 " slots of the " + pool_name + " pool";
      return x;
    }
    TaskState* ts = r.task ? find_task(*r.task) : nullptr;
    bool pinned = r.pinned || config.flexible == FlexiblePolicy::kAsPinned;
    auto task_use = [&](const TaskState& t, int c) { return t.all[pool] + t.spec_of(pool, c); };
    for (int c = 0; c < config.cpus; ++c) {
      if (r.cpu && r.cpu->value() != c) continue;
      int cpu_pinned = cp(c, pool).pinned();
      int rf = reserve_flex(c, pool);
      int task_load = 0;
      std::optional<TaskId> who;
      if (pinned && r.task) {
        task_load = ts ? task_use(*ts, c) : 0;
        who = r.task;
      } else {
        for (auto& shard : shards) {
          for (auto& [id, t] : shard.tasks) {
            int u = task_use(t, c);
            if (u > task_load || (u == task_load && u > 0 && who && id < *who)) {
              task_load = u;
              who = id;
            }
          }
        }
      }
      int need = pinned ? cpu_pinned + task_load + rf + r.weight
                        : cpu_pinned + task_load + std::max(rf, r.weight);
      if (need <= n) continue;
      x.admitted = false;
      x.code = ErrorCode::kNoSpc;
      x.cpu = CpuId(c);
      x.cpu_pinned = cpu_pinned;
      x.flexible_reserve = rf;
      x.heaviest_task = task_load > 0 ? who : std::nullopt;
      x.heaviest_task_use = task_load;
      for (const auto& node : cpus[c].holders) {
        if (config.profile.pool_of(node.req.type) == pool &&
            (node.req.pinned || config.flexible == FlexiblePolicy::kAsPinned)) {
          x.cpu_holders.push_back(node.req.id);
        }
      }
      std::ostringstream out;
      out << "cpu " << c << " " << pool_name << " pool full (" << n << " slots): " << cpu_pinned
          << " held by CPU-bound requests";
      if (!x.cpu_holders.empty()) out << " [" << join_ids(x.cpu_holders) << "]";
      out << ", " << task_load;
      if (x.heaviest_task) {
        out << " by task " << x.heaviest_task->value();
      } else {
        out << " by tasks";
      }
      out << ", " << rf << " set aside for flexible requests; " << (pinned ? "pinned" : "flexible")
          << " request needs " << r.weight;
      x.reason = out.str();
      return x;
    }
    return x;
  }

  Explanation explain_locked(const Request& r) HWARB_REQUIRES(state_lock) {
    state_lock.assert_held();
    Explanation x;
    x.weight = r.weight;
    x.pool_type = r.type;
    if (auto v = validate(r); !v) {
      x.code = v.error().code();
      x.reason = v.error().message();
      return x;
    }
    if (auto v = check_online(r); !v) {
      x.code = v.error().code();
      x.reason = v.error().message();
      return x;
    }
    if (is_exclusive_kind(r.kind)) {
      if (auto other = busy_with(r.kind)) {
        x.code = ErrorCode::kBusy;
        x.busy_kind = other;
        x.reason = std::string(to_string(r.kind)) + " is exclusive with " +
                   std::string(to_string(*other)) + ", which has " +
                   std::to_string(exclusive_count[static_cast<int>(*other)]) + " live users";
        return x;
      }
      x.admitted = true;
      return x;
    }
    return explain_slots(r);
  }

  std::unexpected<Error> refusal(const Request& r) {
    Explanation x = explain_slots(r);
    HWARB_CHECK(!x.admitted, "a refused request must have an explanation");
    return make_error(ErrorCode::kNoSpc, x.reason);
  }
};

// ================================================================================================

Arbiter::Arbiter(const ArbiterConfig& config)
    : config_(config), state_(std::make_unique<State>(config_)) {}

Arbiter::~Arbiter() {
  HWARB_CHECK(!is_used(), "an Arbiter was destroyed while reservations were live");
}

Result<std::unique_ptr<Arbiter>> Arbiter::create(const ArbiterConfig& config) {
  if (config.cpus < 1 || config.cpus > 65536) {
    return make_error(ErrorCode::kInval,
                      "cpus: must be in 1..65536, got " + std::to_string(config.cpus));
  }
  return std::unique_ptr<Arbiter>(new Arbiter(config));
}

void Arbiter::inject_fault_at(int k) {
  state_->fault_countdown.store(k < 0 ? 0 : k);
}

// ---- reserve ------------------------------------------------------------------------------------

Result<Reservation> Arbiter::reserve(const Request& request) {
  State& s = *state_;
  if (auto v = s.validate(request); !v) return std::unexpected(v.error());
  Effect probe = s.effect_of(request, nullptr);
  if (!is_exclusive_kind(request.kind) && request.weight > s.slots(probe.pool)) {
    detail::WriteGuard guard(s.state_lock);
    if (auto v = s.check_online(request); !v) return std::unexpected(v.error());
    return s.refusal(request);
  }
  auto node = s.new_node(request);
  if (!node) return std::unexpected(node.error());
  NodePtr owned(*node);

  // Fast path: pinned breakpoints under the read side (locking rule 1).
  if (!is_exclusive_kind(request.kind) && probe.pinned) {
    detail::SharedGuard guard(s.state_lock);
    if (auto v = s.check_online(request); !v) return std::unexpected(v.error());
    if (request.task) {
      Shard& shard = s.shard_of(*request.task);
      std::lock_guard task_guard(shard.mutex);
      bool created = false;
      auto ts = s.task_state(shard, *request.task, &created);
      if (!ts) return std::unexpected(ts.error());
      if (request.cpu) {
        if (auto r = s.reserve_spec(**ts, probe.pool, 1); !r) {
          if (created) s.drop_if_empty(shard, *ts);
          return std::unexpected(r.error());
        }
      }
      Effect e = s.effect_of(request, *ts);
      s.publish(e);
      if (s.fits(e)) {
        owned->task = *ts;
        (*ts)->nodes.push_back(*owned);
        return Reservation(this, owned.release());
      }
      s.retract(e);
      if (created) s.drop_if_empty(shard, *ts);
    } else {
      // Rule 3: the CPU lock orders CP[c]'s moves and guards the holders; taking it publishes
      // CP[c] + w. A refusal is retracted when the lock is released.
      const Effect& e = probe;
      const int old = s.lock_cpu(e.cpu, e.pool, e.weight);
      s.move_cpu(e, old, old + e.weight);
      if (s.cpu_fits(e.cpu, e.pool)) {
        s.cpus[e.cpu].holders.push_back(*owned);
        s.unlock_cpu(e.cpu, e.pool, 0);
        return Reservation(this, owned.release());
      }
      s.move_cpu(e, old + e.weight, old);
      s.unlock_cpu(e.cpu, e.pool, -e.weight);
    }
  }

  // Slow path: exact, under the write side.
  detail::WriteGuard guard(s.state_lock);
  if (auto v = s.check_online(request); !v) return std::unexpected(v.error());
  if (is_exclusive_kind(request.kind)) {
    auto k = static_cast<int>(request.kind);
    if (s.busy_with(request.kind)) {
      return make_error(ErrorCode::kBusy, s.explain_locked(request).reason);
    }
    ++s.exclusive_count[k];
    s.exclusive_nodes.push_back(*owned);
    return Reservation(this, owned.release());
  }
  TaskState* ts = nullptr;
  bool created = false;
  Shard* shard = nullptr;
  if (request.task) {
    shard = &s.shard_of(*request.task);
    auto t = s.task_state(*shard, *request.task, &created);
    if (!t) return std::unexpected(t.error());
    ts = *t;
    if (request.cpu && probe.pinned) {
      if (auto r = s.reserve_spec(*ts, probe.pool, 1); !r) {
        if (created) s.drop_if_empty(*shard, ts);
        return std::unexpected(r.error());
      }
    }
  }
  Effect e = s.effect_of(request, ts);
  s.publish(e);
  if (!s.fits(e)) {
    s.retract(e);
    if (created) s.drop_if_empty(*shard, ts);
    return s.refusal(request);
  }
  if (ts) {
    owned->task = ts;
    ts->nodes.push_back(*owned);
  } else {
    s.cpus[request.cpu->value()].holders.push_back(*owned);
  }
  return Reservation(this, owned.release());
}

// ---- reserve_all --------------------------------------------------------------------------------

Result<std::vector<Reservation>> Arbiter::reserve_all(std::span<const Request> requests) {
  State& s = *state_;
  auto at = [](std::size_t i, const Error& e) {
    return std::unexpected(e.with_context("request " + std::to_string(i)));
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (auto v = s.validate(requests[i]); !v) return at(i, v.error());
  }
  detail::WriteGuard guard(s.state_lock);

  // Step 1: everything that can fail, before any counter changes.
  std::vector<NodePtr> nodes;
  std::vector<std::pair<Shard*, TaskState*>> created_tasks;
  std::vector<TaskState*> task_of(requests.size(), nullptr);
  auto undo_tasks = [&] {
    for (auto [shard, ts] : created_tasks) s.drop_if_empty(*shard, ts);
  };
  if (s.fault("allocate the reservation list")) return s.injected("allocate the reservation list");
  nodes.reserve(requests.size());
  std::map<std::pair<TaskState*, int>, std::size_t> new_spec;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    auto node = s.new_node(r);
    if (!node) {
      undo_tasks();
      return std::unexpected(node.error());
    }
    nodes.emplace_back(*node);
    if (r.task && !is_exclusive_kind(r.kind)) {
      Shard& shard = s.shard_of(*r.task);
      bool created = false;
      auto ts = s.task_state(shard, *r.task, &created);
      if (!ts) {
        undo_tasks();
        return std::unexpected(ts.error());
      }
      if (created) created_tasks.emplace_back(&shard, *ts);
      task_of[i] = *ts;
      if (r.cpu && s.effect_of(r, nullptr).pinned) {
        ++new_spec[{*ts, s.config.profile.pool_of(r.type)}];
      }
    }
  }
  for (auto [key, count] : new_spec) {
    if (auto r = s.reserve_spec(*key.first, key.second, count); !r) {
      undo_tasks();
      return std::unexpected(r.error());
    }
  }

  // Step 2: admit in order; on the first refusal take back what was admitted.
  std::vector<Effect> done;
  std::array<int, 4> exclusive_added{};
  auto rollback = [&]() HWARB_REQUIRES(s.state_lock) {
    for (auto it = done.rbegin(); it != done.rend(); ++it) s.retract(*it);
    for (int k = 0; k < 4; ++k) s.exclusive_count[k] -= exclusive_added[k];
    undo_tasks();
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (auto v = s.check_online(r); !v) {
      rollback();
      return at(i, v.error());
    }
    if (is_exclusive_kind(r.kind)) {
      if (s.busy_with(r.kind)) {
        Error e(ErrorCode::kBusy, s.explain_locked(r).reason);
        rollback();
        return at(i, e);
      }
      ++s.exclusive_count[static_cast<int>(r.kind)];
      ++exclusive_added[static_cast<int>(r.kind)];
      continue;
    }
    Effect e = s.effect_of(r, task_of[i]);
    if (r.weight > s.slots(e.pool)) {
      Error err = s.refusal(r).error();
      rollback();
      return at(i, err);
    }
    s.publish(e);
    if (!s.fits(e)) {
      s.retract(e);
      Error err = s.refusal(r).error();
      rollback();
      return at(i, err);
    }
    done.push_back(e);
  }

  // Step 3: link; cannot fail.
  std::vector<Reservation> out;
  out.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ReservationNode* node = nodes[i].release();
    const Request& r = requests[i];
    if (is_exclusive_kind(r.kind)) {
      s.exclusive_nodes.push_back(*node);
    } else if (task_of[i]) {
      node->task = task_of[i];
      task_of[i]->nodes.push_back(*node);
    } else {
      s.cpus[r.cpu->value()].holders.push_back(*node);
    }
    out.push_back(Reservation(this, node));
  }
  return out;
}

// ---- modify -------------------------------------------------------------------------------------

Result<void> Arbiter::modify(Reservation& reservation, const Request& next) {
  State& s = *state_;
  if (!reservation.valid() || reservation.arbiter_ != this) {
    return make_error(ErrorCode::kInval, "reservation: empty or owned by another arbiter");
  }
  ReservationNode* node = reservation.node_;
  const Request old = node->req;
  if (next.task != old.task) {
    return make_error(ErrorCode::kInval, "task: a reservation cannot move to another task");
  }
  if (next.kind != old.kind) {
    return make_error(ErrorCode::kInval, "kind: a reservation cannot change its kind");
  }
  if (auto v = s.validate(next); !v) return std::unexpected(v.error());

  detail::WriteGuard guard(s.state_lock);
  // ENODEV is for moving onto an offline CPU; a reservation that stays on its (offline) CPU may
  // change its type, weight or pinned-ness, as Linux's modify_bp_slot, which never looks at
  // whether the CPU is online.
  if (next.cpu != old.cpu) {
    if (auto v = s.check_online(next); !v) return std::unexpected(v.error());
  }
  if (is_exclusive_kind(old.kind)) {
    node->req = next;
    return {};
  }
  TaskState* ts = old.task ? s.find_task(*old.task) : nullptr;
  HWARB_CHECK(!old.task || ts, "a task-bound reservation without its task state");
  Effect before = s.effect_of(old, ts);
  Effect after = s.effect_of(next, ts);
  if (ts && next.cpu && after.pinned) {
    if (auto r = s.reserve_spec(*ts, after.pool, 1); !r) return std::unexpected(r.error());
  }
  s.retract(before);
  if (next.weight > s.slots(after.pool)) {
    Error err = s.refusal(next).error();
    s.publish(before);
    return std::unexpected(err);
  }
  s.publish(after);
  if (!s.fits(after)) {
    s.retract(after);
    Error err = s.refusal(next).error();
    s.publish(before);
    return std::unexpected(err);
  }
  if (!ts && old.cpu != next.cpu) {
    s.cpus[old.cpu->value()].holders.erase(NodeList::s_iterator_to(*node));
    s.cpus[next.cpu->value()].holders.push_back(*node);
  }
  node->req = next;
  return {};
}

// ---- release ------------------------------------------------------------------------------------

void Arbiter::release(Reservation& reservation) {
  if (!reservation.valid()) return;
  HWARB_CHECK(reservation.arbiter_ == this, "released through another arbiter");
  State& s = *state_;
  NodePtr node(reservation.node_);
  reservation.node_ = nullptr;
  reservation.arbiter_ = nullptr;
  const Request& r = node->req;
  Effect probe = s.effect_of(r, nullptr);

  if (!is_exclusive_kind(r.kind) && probe.pinned) {
    detail::SharedGuard guard(s.state_lock);
    if (r.task) {
      Shard& shard = s.shard_of(*r.task);
      std::lock_guard task_guard(shard.mutex);
      TaskState* ts = node->task;
      s.retract(s.effect_of(r, ts));
      ts->nodes.erase(NodeList::s_iterator_to(*node));
      s.drop_if_empty(shard, ts);
    } else {
      const int old = s.lock_cpu(probe.cpu, probe.pool, -probe.weight);  // rule 3
      s.move_cpu(probe, old, old - probe.weight);
      s.cpus[probe.cpu].holders.erase(NodeList::s_iterator_to(*node));
      s.unlock_cpu(probe.cpu, probe.pool, 0);
    }
    return;
  }

  detail::WriteGuard guard(s.state_lock);
  if (is_exclusive_kind(r.kind)) {
    --s.exclusive_count[static_cast<int>(r.kind)];
    s.exclusive_nodes.erase(NodeList::s_iterator_to(*node));
    return;
  }
  if (r.task) {
    Shard& shard = s.shard_of(*r.task);
    TaskState* ts = node->task;
    s.retract(s.effect_of(r, ts));
    ts->nodes.erase(NodeList::s_iterator_to(*node));
    s.drop_if_empty(shard, ts);
  } else {
    s.retract(probe);
    s.cpus[r.cpu->value()].holders.erase(NodeList::s_iterator_to(*node));
  }
}

// ---- queries ------------------------------------------------------------------------------------

Explanation Arbiter::explain(const Request& request) const {
  detail::WriteGuard guard(state_->state_lock);
  return state_->explain_locked(request);
}

bool Arbiter::is_used() const {
  State& s = *state_;
  detail::WriteGuard guard(s.state_lock);
  if (!s.exclusive_nodes.empty()) return true;
  for (const auto& shard : s.shards) {
    if (!shard.tasks.empty()) return true;
  }
  for (const auto& cpu : s.cpus) {
    if (!cpu.holders.empty()) return true;
  }
  return false;
}

Result<void> Arbiter::set_cpu_online(CpuId cpu, bool online) {
  State& s = *state_;
  if (cpu.value() < 0 || cpu.value() >= config_.cpus) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) +
                                             " is not a possible CPU (0.." +
                                             std::to_string(config_.cpus - 1) + ")");
  }
  detail::WriteGuard guard(s.state_lock);
  s.cpus[cpu.value()].online = online;
  return {};
}

bool Arbiter::cpu_online(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= config_.cpus) return false;
  detail::WriteGuard guard(state_->state_lock);
  return state_->cpus[cpu.value()].online;
}

std::vector<CpuId> Arbiter::online_cpus() const {
  detail::WriteGuard guard(state_->state_lock);
  std::vector<CpuId> out;
  for (int c = 0; c < config_.cpus; ++c) {
    if (state_->cpus[c].online) out.push_back(CpuId(c));
  }
  return out;
}

namespace {

// Recomputation from the live reservations, shared by snapshot and check_consistency.
struct Recount {
  std::vector<std::vector<PoolUsage>> usage;       // [cpu][pool]
  std::vector<std::array<int, 2>> cpu_pinned;      // [cpu][pool]
  std::vector<std::array<int, 2>> flex_max_local;  // [cpu][pool]
  std::array<int, 2> flex_max_all{};
  std::map<TaskId, std::array<int, 2>> all;                  // all(T)
  std::map<TaskId, std::array<std::map<int, int>, 2>> spec;  // spec(T,c)
  int live = 0;
  std::array<int, 4> exclusive{};
};

}  // namespace

static Recount recount(const Arbiter::State& s) HWARB_REQUIRES(s.state_lock) {
  const auto& cfg = s.config;
  Recount rc;
  rc.usage.assign(cfg.cpus, std::vector<PoolUsage>(cfg.profile.pool_count()));
  rc.cpu_pinned.assign(cfg.cpus, {0, 0});
  rc.flex_max_local.assign(cfg.cpus, {0, 0});
  std::vector<std::array<int, 2>> flex_count_local(cfg.cpus, {0, 0});
  std::array<int, 2> flex_count_all{};
  auto pinned = [&](const Request& r) {
    return r.pinned || cfg.flexible == FlexiblePolicy::kAsPinned;
  };
  auto flexible = [&](const Request& r, int pool) {
    if (r.cpu) {
      auto& m = rc.flex_max_local[r.cpu->value()][pool];
      m = std::max(m, r.weight);
      ++flex_count_local[r.cpu->value()][pool];
    } else {
      rc.flex_max_all[pool] = std::max(rc.flex_max_all[pool], r.weight);
      ++flex_count_all[pool];
    }
  };
  for (const auto& node : s.exclusive_nodes) {
    ++rc.exclusive[static_cast<int>(node.req.kind)];
    ++rc.live;
  }
  for (int c = 0; c < cfg.cpus; ++c) {
    for (const auto& node : s.cpus[c].holders) {
      ++rc.live;
      int pool = cfg.profile.pool_of(node.req.type);
      if (pinned(node.req))
        rc.cpu_pinned[c][pool] += node.req.weight;
      else
        flexible(node.req, pool);
    }
  }
  for (const auto& shard : s.shards) {
    for (const auto& [id, ts] : shard.tasks) {
      auto& all = rc.all[id];
      auto& spec = rc.spec[id];
      for (const auto& node : ts.nodes) {
        ++rc.live;
        int pool = cfg.profile.pool_of(node.req.type);
        if (!pinned(node.req))
          flexible(node.req, pool);
        else if (node.req.cpu)
          spec[pool][node.req.cpu->value()] += node.req.weight;
        else
          all[pool] += node.req.weight;
      }
    }
  }
  for (int c = 0; c < cfg.cpus; ++c) {
    for (int p = 0; p < cfg.profile.pool_count(); ++p) {
      PoolUsage& u = rc.usage[c][p];
      u.cpu_pinned = rc.cpu_pinned[c][p];
      u.flexible_reserve = std::max(rc.flex_max_local[c][p], rc.flex_max_all[p]);
      u.flexible_count = flex_count_local[c][p] + flex_count_all[p];
      for (const auto& [id, all] : rc.all) {
        auto it = rc.spec[id][p].find(c);
        int tp = all[p] + (it == rc.spec[id][p].end() ? 0 : it->second);
        u.max_task_pinned = std::max(u.max_task_pinned, tp);
      }
    }
  }
  return rc;
}

Snapshot Arbiter::snapshot() const {
  detail::WriteGuard guard(state_->state_lock);
  Recount rc = recount(*state_);
  Snapshot snap;
  snap.usage = std::move(rc.usage);
  snap.live = rc.live;
  for (int k = 0; k < 4; ++k) snap.exclusive[k] = rc.exclusive[k];
  return snap;
}

Result<void> Arbiter::check_consistency() const {
  State& s = *state_;
  detail::WriteGuard guard(s.state_lock);
  Recount rc = recount(s);
  auto bad = [](std::string what) { return make_error(ErrorCode::kFault, std::move(what)); };
  for (int k = 1; k < 4; ++k) {
    if (rc.exclusive[k] != s.exclusive_count[k]) {
      return bad("exclusive count of " + std::string(to_string(static_cast<ResourceKind>(k))));
    }
  }
  for (int p = 0; p < config_.profile.pool_count(); ++p) {
    const GlobalPool& g = s.global[p];
    const int cap = config_.profile.pool_slots(p) + 1;
    using Counts = std::array<int, kHistSize>;
    auto add = [cap](Counts& h, int value) {
      for (int k = 1; k <= std::min(value, cap); ++k) ++h[k];
    };
    auto same = [](const AtomicHist& h, const Counts& want) {
      for (int k = 1; k < kHistSize; ++k) {
        if (h[k].load() != want[k]) return false;
      }
      return true;
    };
    Counts hist_all{}, flex_hist{};
    std::array<Counts, kCpuShards> cp_hist{};
    std::vector<Counts> tsk(config_.cpus);
    for (const auto& [id, all] : rc.all) {
      add(hist_all, all[p]);
      for (const auto& [c, w] : rc.spec[id][p]) add(tsk[c], all[p] + w);
    }
    if (g.flex_all.max != rc.flex_max_all[p]) return bad("all-CPU flexible reserve");
    int flex_cpus = 0;
    for (int c = 0; c < config_.cpus; ++c) {
      const CpuPool& cp = s.cpus[c].pool[p];
      if (cp.pinned() != rc.cpu_pinned[c][p]) {
        return bad("cpu_pinned of cpu " + std::to_string(c));
      }
      if (cp.flex_max != rc.flex_max_local[c][p] || s.cpus[c].flex[p].max != cp.flex_max) {
        return bad("flexible reserve of cpu " + std::to_string(c));
      }
      add(cp_hist[c % kCpuShards], rc.cpu_pinned[c][p]);
      if (rc.flex_max_local[c][p] > 0) {
        ++flex_cpus;
        add(flex_hist, rc.cpu_pinned[c][p] + rc.flex_max_local[c][p]);
      }
      if (!same(cp.tsk_hist, tsk[c])) return bad("task histogram of cpu " + std::to_string(c));
    }
    if (!same(g.hist_all, hist_all)) return bad("all-CPU task histogram");
    for (int shard = 0; shard < kCpuShards; ++shard) {
      if (!same(g.cpu_hist_cp[shard].h, cp_hist[shard])) {
        return bad("CPU histogram (CP), shard " + std::to_string(shard));
      }
    }
    if (!same(g.cpu_hist_flex, flex_hist) || g.flex_cpus != flex_cpus) {
      return bad("CPU histogram (CP + local flexible reserve)");
    }
    for (const auto& shard : s.shards) {
      for (const auto& [id, ts] : shard.tasks) {
        if (ts.nodes.empty()) return bad("empty task entry for task " + std::to_string(id.value()));
        if (ts.all[p] != rc.all[id][p]) return bad("all(T) of task " + std::to_string(id.value()));
        for (const auto& e : ts.spec[p]) {
          if (e.weight != rc.spec[id][p][e.cpu]) {
            return bad("spec(T,c) of task " + std::to_string(id.value()));
          }
        }
        if (ts.spec[p].size() != rc.spec[id][p].size()) {
          return bad("per-CPU entries of task " + std::to_string(id.value()));
        }
      }
    }
  }
  return {};
}

std::string Arbiter::dump() const {
  State& s = *state_;
  detail::WriteGuard guard(s.state_lock);
  std::ostringstream out;
  out << "arbiter " << config_.profile.name() << " cpus=" << config_.cpus << " flexible="
      << (config_.flexible == FlexiblePolicy::kAsPinned ? "as_pinned" : "multiplexed") << "\n";
  auto hist = [&](const auto& h) {
    std::ostringstream t;
    for (int k = 1; k < kHistSize; ++k) {
      if (int n = h[k]; n != 0) t << " >=" << k << ":" << n;
    }
    return t.str();
  };
  for (int p = 0; p < config_.profile.pool_count(); ++p) {
    const GlobalPool& g = s.global[p];
    std::array<int, kHistSize> cp_sum{};  // the shards of cpu_hist_cp, summed
    for (const CpuHistShard& shard : g.cpu_hist_cp) {
      for (int k = 1; k < kHistSize; ++k) cp_sum[k] += shard.h[k].load();
    }
    out << "pool " << config_.profile.pool_name(p) << " hist_all{" << hist(g.hist_all)
        << " } cpu_hist_cp{" << hist(cp_sum) << " } cpu_hist_flex{" << hist(g.cpu_hist_flex)
        << " } flex_cpus=" << g.flex_cpus << " flex_all max=" << g.flex_all.max
        << " n=" << g.flex_all.total << "\n";
    for (int c = 0; c < config_.cpus; ++c) {
      const CpuPool& cp = s.cpus[c].pool[p];
      out << "  cpu " << c << (s.cpus[c].online ? "" : " offline") << " cp=" << cp.pinned()
          << " tsk_hist{" << hist(cp.tsk_hist) << " } flex max=" << cp.flex_max
          << " n=" << s.cpus[c].flex[p].total << "\n";
    }
  }
  for (int c = 0; c < config_.cpus; ++c) {
    for (const auto& node : s.cpus[c].holders) out << "holder " << to_string(node.req) << "\n";
  }
  std::map<TaskId, const TaskState*> tasks;
  for (const auto& shard : s.shards) {
    for (const auto& [id, ts] : shard.tasks) tasks[id] = &ts;
  }
  for (const auto& [id, ts] : tasks) {
    out << "task " << id.value();
    for (int p = 0; p < config_.profile.pool_count(); ++p) {
      auto spec = ts->spec[p];
      std::sort(spec.begin(), spec.end(), [](auto a, auto b) { return a.cpu < b.cpu; });
      out << " [" << config_.profile.pool_name(p) << " all=" << ts->all[p];
      for (const auto& e : spec) out << " c" << e.cpu << "=" << e.weight;
      out << "]";
    }
    out << "\n";
    for (const auto& node : ts->nodes) out << "  " << to_string(node.req) << "\n";
  }
  out << "exclusive bts=" << s.exclusive_count[1] << " pt=" << s.exclusive_count[2]
      << " lbr=" << s.exclusive_count[3] << "\n";
  for (const auto& node : s.exclusive_nodes) out << "  " << to_string(node.req) << "\n";
  return out.str();
}

// ---- Reservation --------------------------------------------------------------------------------

Reservation::Reservation(Reservation&& other) noexcept
    : arbiter_(std::exchange(other.arbiter_, nullptr)),
      node_(std::exchange(other.node_, nullptr)) {}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    release();
    arbiter_ = std::exchange(other.arbiter_, nullptr);
    node_ = std::exchange(other.node_, nullptr);
  }
  return *this;
}

Reservation::~Reservation() {
  release();
}

const Request& Reservation::request() const {
  HWARB_CHECK(node_ != nullptr, "request() of an empty Reservation");
  return node_->req;
}

void Reservation::release() {
  if (node_) arbiter_->release(*this);
}

}  // namespace hwarb::arbiter

#include "hwarb/linux/trace_engine.h"

#include <sys/syscall.h>

#include <utility>

#include "hwarb/base/ids.h"

namespace hwarb::native {

BranchStore::BranchStore(Sink sink)
    : sink_(std::move(sink)), start_(std::chrono::steady_clock::now()) {}

Result<std::unique_ptr<BranchStore>> BranchStore::open(pid_t pid, Sink sink) {
  std::unique_ptr<BranchStore> store(new BranchStore(std::move(sink)));
  bts::TracerConfig config;
  config.cpus = 1;
  config.format = x86::BtsFormat::k64;
  config.ds_records = kDsRecords;
  auto tracer = bts::Tracer::create(config, store->hardware_, nullptr);
  if (!tracer) return std::unexpected(tracer.error());
  store->tracer_ = std::move(*tracer);
  BranchStore* self = store.get();
  store->hardware_.set_interrupt_handler([self](CpuId cpu) {
    ignore_error(self->tracer_->on_interrupt(cpu), "an interrupt has no caller to answer");
  });
  store->tracer_->set_full_handler(
      [self](bts::ContextId, std::optional<TaskId>) { self->full_ = true; });
  const TaskId task{static_cast<TaskId::rep_type>(pid)};
  if (auto r = store->tracer_->on_switch(CpuId{0}, std::nullopt, task, 0); !r) {
    return std::unexpected(r.error());
  }
  bts::ContextConfig context;
  context.task = task;
  context.flags = bts::kUser;
  context.mode = bts::BufferMode::kSignal;
  context.size = kCapacity * bts::kTraceRecordSize;
  auto id = store->tracer_->open(context);
  if (!id) return std::unexpected(id.error());
  store->context_ = *id;
  return store;
}

void BranchStore::add(const BranchRecord& r) {
  side_.push_back(
      Side{r.tid, r.kind,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()});
  if (auto stored = hardware_.branch(CpuId{0}, r.from, r.to, false, false); !stored) {
    if (!error_) error_ = stored.error();
    side_.pop_back();
    return;
  }
  if (full_ || side_.size() >= kCapacity - kDsRecords) drain();
}

void BranchStore::drain() {
  full_ = false;
  auto drained = tracer_->drain(context_);
  if (!drained) {
    if (!error_) error_ = drained.error();
    return;
  }
  std::vector<StoredBranch> batch;
  batch.reserve(drained->records.size());
  for (const bts::TraceRecord& rec : drained->records) {
    if (rec.kind != bts::RecordKind::kBranch || side_.empty()) continue;
    const Side side = side_.front();
    side_.pop_front();
    batch.push_back(StoredBranch{rec.from, rec.to, side.tid, side.kind, side.time});
  }
  // Records the full context dropped were the newest: their side entries follow.
  for (std::uint64_t i = 0; i < drained->lost && !side_.empty(); ++i) side_.pop_front();
  lost_ += drained->lost;
  sink_(batch);
}

Result<bool> SoftTraceEngine::handle(const Event& event) {
  // The process is about to end: hand the records over while its libraries are mapped.
  if (event.kind == EventKind::kSyscallEnter && event.syscall == SYS_exit_group) store_.drain();
  auto taken = tracer_.handle(event);
  if (taken && store_.error()) return std::unexpected(*store_.error());
  return taken;
}

x86::BranchKind BranchClassifier::kind(std::uint64_t from) {
  if (auto it = cache_.find(from); it != cache_.end()) return it->second;
  auto insn = inferior_.decode_at(from);
  const x86::BranchKind kind = insn ? insn->branch : x86::BranchKind::kNone;
  cache_.emplace(from, kind);
  return kind;
}

BtsTraceEngine::BtsTraceEngine(Inferior& inferior, IntelBtsTrace& bts, BranchStore& store,
                               const BranchTracerOptions& options)
    : bts_(bts), store_(store), kinds_(inferior), options_(options) {
  sink_ = [this](pid_t tid, const x86::BtsRecord& b) { take(tid, b); };
}

Result<void> BtsTraceEngine::add_threads(const std::vector<pid_t>& tids) {
  for (pid_t tid : tids) {
    if (auto r = add(tid); !r) return r;
  }
  return {};
}

Result<bool> BtsTraceEngine::handle(const Event& event) {
  switch (event.kind) {
    case EventKind::kNewThread:
      if (auto r = add(event.tid); !r) return std::unexpected(r.error());
      break;
    case EventKind::kThreadExit:
    case EventKind::kLeaderEnded:
      if (bts_.traced(event.tid)) {
        if (auto r = bts_.remove_thread(event.tid, sink_); !r) return std::unexpected(r.error());
      }
      break;
    case EventKind::kSyscallEnter:
      // The thread (or the process) is about to end: read while its code is still mapped.
      if (event.syscall == SYS_exit_group || event.syscall == SYS_exit) {
        if (auto r = drain(); !r) return std::unexpected(r.error());
        store_.drain();
      }
      break;
    default:
      break;
  }
  if (event.kind == EventKind::kSyscallEnter) ++syscalls_;
  if (event.kind == EventKind::kSignal) ++signals_;
  if (store_.error()) return std::unexpected(*store_.error());
  return false;
}

Result<void> BtsTraceEngine::finish() {
  // Each thread's records are drained as its event goes.
  Result<void> first;
  for (pid_t tid : bts_.threads()) {
    if (auto r = bts_.remove_thread(tid, sink_); !r && first) first = r;
  }
  return first;
}

Result<void> BtsTraceEngine::add(pid_t tid) {
  if (auto r = bts_.add_thread(tid); !r) return r;
  if (!options_.start_at) started_.insert(tid);
  return {};
}

void BtsTraceEngine::take(pid_t tid, const x86::BtsRecord& b) {
  if (!started_.count(tid)) {
    // start_at on an attached process: from the branch that arrives there.
    if (b.to != *options_.start_at) return;
    started_.insert(tid);
  }
  ++taken_;
  if (options_.only && (b.from < options_.only->first || b.from >= options_.only->second)) return;
  store_.add(BranchRecord{b.from, b.to, kinds_.kind(b.from), tid});
}

}  // namespace hwarb::native

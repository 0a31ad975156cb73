#include "hwarb/linux/thread_local_watches.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>

#include "hwarb/linux/link_map.h"
#include "hwarb/linux/proc_maps.h"

namespace hwarb::native {

namespace {

// Resumes the threads a stop_all stopped; a thread gone meanwhile is no error.
Result<void> resume_stopped(Inferior& inferior, const std::vector<pid_t>& stopped, Resume how) {
  for (pid_t t : stopped) {
    if (auto r = inferior.resume(t, how); !r && r.error().code() != ErrorCode::kSrch) return r;
  }
  return {};
}

}  // namespace

ThreadLocalWatches::ThreadLocalWatches(Inferior& inferior, WatchSession& session,
                                       ThreadLocals locals, std::vector<ThreadLocalSpec> wanted,
                                       std::vector<std::uint64_t> lms)
    : inferior_(&inferior),
      session_(&session),
      locals_(std::move(locals)),
      wanted_(std::move(wanted)),
      lms_(std::move(lms)) {}

Result<ThreadLocalWatches> ThreadLocalWatches::open(Inferior& inferior, WatchSession& session,
                                                    std::vector<ThreadLocalSpec> wanted) {
  auto auxv = read_proc_file(inferior.pid(), "auxv");
  if (!auxv) return std::unexpected(auxv.error());
  auto map = read_link_map(std::span<const std::uint8_t>(
                               reinterpret_cast<const std::uint8_t*>(auxv->data()), auxv->size()),
                           [&inferior](std::uint64_t addr, std::span<std::uint8_t> out) {
                             return inferior.read_memory(addr, out);
                           });
  if (!map) return std::unexpected(map.error());
  std::vector<std::uint64_t> lms;
  for (const ThreadLocalSpec& w : wanted) {
    // The executable is the list's first entry (0 in a static program: module 1 then).
    std::optional<std::uint64_t> lm;
    if (w.symbol.executable) lm = map->main_lm;
    for (const LoadedObject& o : map->libraries) {
      if (!lm && o.l_addr == w.symbol.bias) lm = o.lm;
    }
    if (!lm) {
      return make_error(ErrorCode::kNoEnt, "module: " + w.symbol.module +
                                               " (of the thread-local '" + w.symbol.name +
                                               "') is not in the dynamic linker's list");
    }
    lms.push_back(*lm);
  }
  auto locals = ThreadLocals::open(inferior, inferior.pid());
  if (!locals) return std::unexpected(locals.error());
  return ThreadLocalWatches(inferior, session, std::move(*locals), std::move(wanted),
                            std::move(lms));
}

Result<std::vector<ThreadLocalCopy>> ThreadLocalWatches::watch_thread(pid_t tid) {
  std::vector<ThreadLocalCopy> added;
  for (std::size_t i = 0; i < wanted_.size(); ++i) {
    const ThreadLocalSpec& w = wanted_[i];
    auto base = locals_.address(tid, lms_[i], w.symbol.offset);
    // A dlopen'ed library's block is made at the thread's first use of it: nothing to watch yet.
    if (!base && base.error().code() == ErrorCode::kNxio) continue;
    if (!base) return std::unexpected(base.error().with_context(w.symbol.name));
    const std::uint64_t addr = *base + w.offset;
    // A copy there already is a thread's that has ended (its end not seen yet): the thread
    // library gave its memory to this one.
    for (auto it = copies_.begin(); it != copies_.end();) {
      if (it->addr != addr || it->tid == tid) {
        ++it;
        continue;
      }
      if (auto r = session_->remove(it->id); !r) return std::unexpected(r.error());
      it = copies_.erase(it);
    }
    auto info = session_->insert(
        {.addr = addr, .len = w.len, .access = w.access, .mode = w.mode, .thread = tid});
    if (!info) {
      return std::unexpected(
          info.error().with_context(w.symbol.name + " of thread " + std::to_string(tid)));
    }
    ThreadLocalCopy copy{w.id, tid, info->id, addr, *info};
    copies_.push_back(copy);
    added.push_back(std::move(copy));
  }
  return added;
}

Result<void> ThreadLocalWatches::forget_thread(pid_t tid) {
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (it->tid != tid) {
      ++it;
      continue;
    }
    if (auto r = session_->remove(it->id); !r) return r;
    it = copies_.erase(it);
  }
  return {};
}

Result<std::vector<ThreadLocalCopy>> ThreadLocalWatches::arm() {
  std::vector<ThreadLocalCopy> all;
  for (pid_t tid : inferior_->threads()) {
    if (inferior_->process_of(tid) != inferior_->pid()) continue;
    auto added = watch_thread(tid);
    if (!added) {
      // All or none: the copies watched so far go.
      while (!copies_.empty()) {
        ignore_error(session_->remove(copies_.back().id), "the first error is the one reported");
        copies_.pop_back();
      }
      return std::unexpected(added.error());
    }
    all.insert(all.end(), added->begin(), added->end());
  }
  return all;
}

Result<std::vector<ThreadLocalCopy>> ThreadLocalWatches::follow(const Event& event) {
  if (!following_ || inferior_->process_of(event.tid) != inferior_->pid()) return {};
  if (event.kind == EventKind::kExec) {
    copies_.clear();
    following_ = false;
    return {};
  }
  const bool born = event.kind == EventKind::kNewThread;
  const bool gone =
      (event.kind == EventKind::kThreadExit || event.kind == EventKind::kLeaderEnded) &&
      std::any_of(copies_.begin(), copies_.end(),
                  [&](const ThreadLocalCopy& c) { return c.tid == event.tid; });
  if (!born && !gone) return {};
  // The session changes only while every thread is stopped: the new thread is (at its first
  // instruction, unless its event resumed it), the others are stopped for the change.
  const bool held = born && inferior_->is_stopped(event.tid);
  auto stopped = inferior_->stop_all(held ? event.tid : -1);
  if (!stopped) return std::unexpected(stopped.error());
  Result<std::vector<ThreadLocalCopy>> added = std::vector<ThreadLocalCopy>{};
  if (born) {
    added = watch_thread(event.tid);
  } else if (auto r = forget_thread(event.tid); !r) {
    // The whole process is ending (its threads, or its /proc entry, gone before the watches
    // could be set up again): nothing is left to watch.
    const ErrorCode code = r.error().code();
    if (code != ErrorCode::kSrch && code != ErrorCode::kNoEnt) added = std::unexpected(r.error());
    std::erase_if(copies_, [&](const ThreadLocalCopy& c) { return c.tid == event.tid; });
  }
  // As the session runs now: a watch on a thread's stack makes the software path step every
  // thread (rule 4 of watch_session.h), and its removal ends that.
  if (auto r = resume_stopped(*inferior_, *stopped, session_->resume_mode()); !r && added) {
    return std::unexpected(r.error());
  }
  return added;
}

std::optional<ThreadLocalCopy> ThreadLocalWatches::copy_of(WatchId id) const {
  for (const ThreadLocalCopy& c : copies_) {
    if (c.id == id) return c;
  }
  return std::nullopt;
}

void OwnCopyHits::hit(const WatchHit& hit) {
  const auto copy = watches_.copy_of(static_cast<WatchId>(hit.id));
  if (copy && copy->tid != hit.tid) return;
  next_.hit(hit);
}

Result<bool> ThreadLocalEngine::handle(const Event& event) {
  auto mine = engine_.handle(event);
  if (!mine) return mine;
  auto added = watches_.follow(event);
  if (!added) return std::unexpected(added.error());
  for (const ThreadLocalCopy& c : *added) added_(c);
  return *mine;
}

}  // namespace hwarb::native

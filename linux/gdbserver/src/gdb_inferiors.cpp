// GdbInferiors: several processes of one gdb client (see gdb_server.h).

#include <algorithm>
#include <array>
#include <utility>

#include "hwarb/linux/gdb_server.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {

using gdb::StopEvent;
using Kind = gdb::StopEvent::Kind;

GdbInferiors::GdbInferiors(Inferior& inferior, WatchSession& session, GdbConnection& connection)
    : connection_(connection) {
  targets_.push_back(std::make_unique<GdbTarget>(inferior, session, connection));
}

GdbInferiors::GdbInferiors(GdbConnection& connection) : connection_(connection) {
  targets_.push_back(std::make_unique<GdbTarget>(connection));
}

GdbInferiors::~GdbInferiors() = default;

const std::optional<Error>& GdbInferiors::watchdog_error() const {
  for (const auto& t : targets_) {
    if (t->watchdog_error()) return t->watchdog_error();
  }
  return targets_.front()->watchdog_error();
}

bool GdbInferiors::has_process() const {
  return std::any_of(targets_.begin(), targets_.end(),
                     [](const auto& t) { return t->has_process(); });
}

GdbTarget& GdbInferiors::live() const {
  for (const auto& t : targets_) {
    if (t->has_process() && !t->ended()) return *t;
  }
  for (const auto& t : targets_) {
    if (t->has_process()) return *t;
  }
  return *targets_.front();
}

GdbTarget& GdbInferiors::of_thread(gdb::Tid tid) const {
  if (several()) {
    for (const auto& t : targets_) {
      if (t->owns_thread(tid)) return *t;
    }
  }
  return live();
}

GdbTarget& GdbInferiors::of_process(gdb::Tid process) const {
  if (several()) {
    for (const auto& t : targets_) {
      if (t->owns_process(process)) return *t;
    }
  }
  return live();
}

std::vector<gdb::Tid> GdbInferiors::threads() const {
  if (!several()) return targets_.front()->threads();
  std::vector<gdb::Tid> all;
  for (const auto& t : targets_) {
    if (!t->has_process() || t->ended()) continue;
    const std::vector<gdb::Tid> some = t->threads();
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

void GdbInferiors::set_features(const gdb::ClientFeatures& features, bool announced) {
  features_ = features;
  announced_ = announced_ || announced;
  for (auto& t : targets_) t->set_features(features, announced);
}

void GdbInferiors::set_catch_syscalls(std::optional<std::set<long>> numbers) {
  caught_ = numbers;
  for (auto& t : targets_) t->set_catch_syscalls(numbers);
}

void GdbInferiors::set_program_signals(std::set<int> signals) {
  program_signals_ = signals;
  for (auto& t : targets_) t->set_program_signals(signals);
}

void GdbInferiors::set_event_log(std::function<void(const std::string&)> log) {
  log_ = log;
  for (auto& t : targets_) t->set_event_log(log);
}

Result<void> GdbInferiors::set_non_stop(bool on) {
  non_stop_ = on;
  Result<void> first_error;
  for (auto& t : targets_) {
    if (auto r = t->set_non_stop(on); !r && first_error) first_error = r;
  }
  return first_error;
}

std::unique_ptr<GdbTarget> GdbInferiors::another() {
  auto t = std::make_unique<GdbTarget>(connection_);
  if (first().launch()) t->launch_with(*first().launch());
  t->set_features(features_, announced_);
  t->set_catch_syscalls(caught_);
  if (program_signals_) t->set_program_signals(*program_signals_);
  if (log_) t->set_event_log(log_);
  ignore_error(t->set_non_stop(non_stop_), "a target without a process stops nothing");
  return t;
}

Result<gdb::Tid> GdbInferiors::start(std::vector<std::string> argv) {
  GdbTarget& head = first();
  if (head.gone()) {
    if (interrupt_owed_ == &head) interrupt_owed_ = nullptr;  // owed to a process now gone
    auto pid = head.start(std::move(argv));
    if (pid) signalled_ = &head;
    return pid;
  }
  // A process lives: the new one comes beside it. An empty PROG is the last one run.
  if (argv[0].empty() && !head.last_program().empty()) argv[0] = head.last_program()[0];
  auto t = another();
  auto pid = t->start(std::move(argv));
  if (!pid) return pid;
  signalled_ = t.get();
  targets_.push_back(std::move(t));
  return pid;
}

Result<gdb::Tid> GdbInferiors::attach(gdb::Tid pid) {
  GdbTarget& head = first();
  if (head.gone()) {
    if (interrupt_owed_ == &head) interrupt_owed_ = nullptr;
    auto attached = head.attach(pid);
    if (attached) signalled_ = &head;
    return attached;
  }
  for (const auto& t : targets_) {
    if (t->owns_process(pid)) {
      return make_error(ErrorCode::kBusy,
                        "vAttach: process " + std::to_string(pid) + " is already debugged here");
    }
  }
  auto t = another();
  auto attached = t->attach(pid);
  if (!attached) return attached;
  signalled_ = t.get();
  targets_.push_back(std::move(t));
  return attached;
}

Result<void> GdbInferiors::restart() {
  if (auto r = drop_process(gdb::ServerEnd::How::kKilled); !r) return std::unexpected(r.error());
  return first().restart();
}

void GdbInferiors::drop_ended() {
  for (auto it = targets_.begin() + 1; it != targets_.end();) {
    if ((*it)->gone()) {
      ignore_error((*it)->drop_process(gdb::ServerEnd::How::kKilled),
                   "a process that is gone leaves nothing to undo");
      resumed_.erase(it->get());
      if (signalled_ == it->get()) signalled_ = nullptr;
      if (interrupt_owed_ == it->get()) interrupt_owed_ = nullptr;
      it = targets_.erase(it);
    } else {
      ++it;
    }
  }
  // The first target stays (launch settings, host files), without its process once that is gone
  // and another lives.
  if (several() && first().has_process() && first().gone()) {
    ignore_error(first().drop_process(gdb::ServerEnd::How::kKilled),
                 "a process that is gone leaves nothing to undo");
  }
}

Result<void> GdbInferiors::halt_others(const GdbTarget* except) {
  if (non_stop_) return {};
  for (auto& t : targets_) {
    if (t.get() == except || !t->has_process() || t->ended()) continue;
    if (auto r = t->halt(); !r) return r;
  }
  return {};
}

Result<std::optional<StopEvent>> GdbInferiors::reported(GdbTarget& from, StopEvent stop) {
  using Stop = std::optional<StopEvent>;
  if (!several()) return Stop(stop);
  const auto others_live = [&] {
    return std::any_of(targets_.begin(), targets_.end(), [&](const auto& t) {
      return t.get() != &from && t->has_process() && !t->ended() && !t->gone();
    });
  };
  // Rule 4: N only when nothing runs anywhere.
  if (stop.kind == Kind::kNoResumed) {
    const bool elsewhere = std::any_of(targets_.begin(), targets_.end(), [&](const auto& t) {
      return t.get() != &from && t->runs();
    });
    if (elsewhere) return Stop();
  }
  if (auto r = halt_others(&from); !r) return std::unexpected(r.error());
  if ((stop.kind == Kind::kExited || stop.kind == Kind::kKilled) && !stop.remains &&
      others_live()) {
    stop.remains = true;
    stop.tid = 0;
    drop_ended();
  }
  return Stop(stop);
}

Result<std::optional<StopEvent>> GdbInferiors::resume(
    const std::vector<gdb::ResumeAction>& actions) {
  if (!several()) return first().resume(actions);
  if (non_stop_) {
    // Each target resumes the threads of its own that the list names.
    for (auto& t : targets_) {
      if (!t->has_process() || t->ended()) continue;
      auto r = t->resume(actions);
      if (!r) return r;
      if (*r) return reported(*t, **r);
    }
    return std::optional<StopEvent>();
  }
  // Rule 2: the actions each target is named by.
  resumed_.clear();
  for (auto& t : targets_) {
    if (!t->has_process() || t->ended()) continue;
    std::vector<gdb::ResumeAction> mine;
    for (const gdb::ResumeAction& a : actions) {
      const bool named =
          a.tid > 0 ? t->owns_thread(a.tid) : a.process <= 0 || t->owns_process(a.process);
      if (named) mine.push_back(a);
    }
    if (mine.empty()) continue;
    resumed_.insert(t.get());
    auto r = t->resume(mine);
    if (!r) return r;
    if (*r) return reported(*t, **r);
  }
  if (resumed_.empty()) return make_error(ErrorCode::kInval, "vCont: the actions resume no thread");
  if (interrupt_owed_ != nullptr && resumed(*interrupt_owed_)) {
    // The SIGINT a Ctrl-C owed this process (owe_interrupt) is taken as it runs.
    GdbTarget* owed = std::exchange(interrupt_owed_, nullptr);
    auto stop = owed->interrupt();
    if (!stop) return std::unexpected(stop.error());
    if (auto r = halt_others(owed); !r) return std::unexpected(r.error());
    return std::optional<StopEvent>(*stop);
  }
  return std::optional<StopEvent>();
}

Result<gdb::Waited> GdbInferiors::wait(int client_fd) {
  if (!several()) return first().wait(client_fd);
  return wait_several(client_fd);
}

Result<gdb::Waited> GdbInferiors::wait_several(int client_fd) {
  auto status_fd = Inferior::status_fd();
  if (!status_fd) return std::unexpected(status_fd.error());
  for (;;) {
    // Rule 3: drained first, then each target polled, then the sleep.
    if (auto r = Inferior::drain_status_fd(); !r) return std::unexpected(r.error());
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      GdbTarget& t = *targets_[i];
      if (!t.has_process() || t.ended() || !resumed(t)) continue;
      auto got = t.poll_events(client_fd);
      if (!got) return got;
      if (!got->stop) continue;
      auto stop = reported(t, *got->stop);
      if (!stop) return std::unexpected(stop.error());
      if (*stop) return gdb::Waited{.stop = **stop};
    }
    // A target with hardware watches looks for held hits between events (GdbTarget::wait).
    const bool looks = std::any_of(targets_.begin(), targets_.end(), [&](const auto& t) {
      return t->has_process() && !t->ended() && resumed(*t) && t->looks_for_blocked_hits();
    });
    // Each target's program requests (GdbTarget::request_fd) wake the sleep too: the next turn's
    // poll_events serves them.
    std::vector<int> fds{*status_fd};
    if (client_fd >= 0) fds.push_back(client_fd);
    const std::vector<int> requests = request_fds();
    fds.insert(fds.end(), requests.begin(), requests.end());
    auto ready = poll_in_once(fds, looks ? GdbTarget::kBlockedHitLookMs : -1);
    if (!ready) {
      if (ready.error().code() == ErrorCode::kIntr) {
        return make_error(ErrorCode::kIntr, "pid: interrupted");
      }
      return std::unexpected(ready.error());
    }
    if (client_fd >= 0 && (*ready)[1] != 0) return gdb::Waited{};  // the client spoke
  }
}

bool GdbInferiors::end_due() const {
  return std::any_of(targets_.begin(), targets_.end(), [](const auto& t) { return t->end_due(); });
}

std::vector<int> GdbInferiors::request_fds() const {
  std::vector<int> fds;
  for (const auto& t : targets_) {
    if (t->request_fd() >= 0) fds.push_back(t->request_fd());
  }
  return fds;
}

Result<void> GdbInferiors::serve_requests() {
  for (auto& t : targets_) {
    if (auto r = t->serve_requests(); !r) return r;
  }
  return {};
}

Result<StopEvent> GdbInferiors::interrupt() {
  if (!several()) return first().interrupt();
  // As gdbserver, which sends its SIGINT to the process it last started or attached (its
  // signal_pid): that process stops first, and gdb's current inferior becomes its — what a
  // `detach` right after the interrupt then detaches. Else the first resumed one.
  GdbTarget* chosen = signalled_first([&](const GdbTarget& t) { return t.runs() && resumed(t); });
  if (chosen == nullptr) chosen = &live();
  auto stop = chosen->interrupt();
  if (!stop) return stop;
  if (auto r = halt_others(chosen); !r) return std::unexpected(r.error());
  return stop;
}

bool GdbInferiors::owe_interrupt() {
  if (!several() || non_stop_ || resumed_.empty()) return false;
  GdbTarget* t = signalled_first([&](const GdbTarget& s) {
    return &s == signalled_ && s.has_process() && !s.gone() && !resumed(s);
  });
  if (t == nullptr) return false;
  interrupt_owed_ = t;
  return true;
}

Result<void> GdbInferiors::interrupt_process() {
  GdbTarget* t = signalled_first([](const GdbTarget& s) { return s.runs(); });
  return t != nullptr ? t->interrupt_process() : live().interrupt_process();
}

GdbTarget* GdbInferiors::signalled_first(const std::function<bool(const GdbTarget&)>& which) {
  for (auto& t : targets_) {
    if (t.get() == signalled_ && which(*t)) return t.get();
  }
  for (auto& t : targets_) {
    if (which(*t)) return t.get();
  }
  return nullptr;
}

Result<gdb::ServerEnd> GdbInferiors::end_each(
    const std::function<Result<gdb::ServerEnd>(GdbTarget&)>& end_one) {
  // The others first; the first target's end is the server's (else the earliest other's).
  std::optional<gdb::ServerEnd> end;
  Result<void> first_error;
  for (std::size_t i = targets_.size(); i-- > 0;) {
    GdbTarget& t = *targets_[i];
    const bool had = t.has_process();
    auto r = end_one(t);
    if (!r) {
      if (first_error) first_error = std::unexpected(r.error());
      continue;
    }
    if (had || !end) end = *r;
  }
  targets_.resize(1);
  std::erase_if(resumed_, [&](const GdbTarget* t) { return t != targets_.front().get(); });
  if (!first_error) return std::unexpected(first_error.error());
  return *end;
}

Result<gdb::ServerEnd> GdbInferiors::finish(gdb::ServerEnd::How how) {
  return end_each([how](GdbTarget& t) { return t.finish(how); });
}

Result<gdb::ServerEnd> GdbInferiors::drop_process(gdb::ServerEnd::How how) {
  return end_each([how](GdbTarget& t) { return t.drop_process(how); });
}

Result<void> GdbInferiors::detach_process(gdb::Tid process) {
  auto r = of_process(process).detach_process(process);
  drop_ended();
  return r;
}

Result<void> GdbInferiors::kill_process(gdb::Tid process) {
  auto r = of_process(process).kill_process(process);
  drop_ended();
  return r;
}

std::string GdbInferiors::describe_watches() {
  if (!several()) return first().describe_watches();
  std::string out;
  for (auto& t : targets_) {
    if (!t->has_process() || t->gone()) continue;
    out += "process " + std::to_string(t->pid()) + ":\n" + t->describe_watches();
  }
  return out;
}

void GdbInferiors::served() {
  for (auto& t : targets_) t->served();
}

}  // namespace hwarb::native

#include "timeline.h"

#include <fstream>
#include <iostream>

#include "commands.h"
#include "number_scan.h"

#include "hwarb/base/format.h"
#include "hwarb/linux/files.h"

namespace hwarb::cli {
namespace {

std::string micros(double us) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", us < 0 ? 0.0 : us);
  return buf;
}

std::string args_member(std::string_view args) {
  if (args.empty()) return "";
  return ",\"args\":{" + std::string(args) + "}";
}

}  // namespace

Result<Timeline> Timeline::open(const std::string& path, std::uint64_t cap) {
  auto fd = native::create_file(path);
  if (!fd) return std::unexpected(fd.error().with_context("--timeline"));
  std::FILE* file = ::fdopen(fd->get(), "w");
  if (file == nullptr) return make_error(ErrorCode::kNoMem, "--timeline: no stream for " + path);
  (void)fd->release();
  Timeline t(file, path, cap);
  t.raw("[");
  t.process(kHwarbPid, "hwarb");
  t.thread(kHwarbPid, kHwarbPid, "phases");
  return t;
}

Timeline::Timeline(std::FILE* file, std::string path, std::uint64_t cap)
    : file_(file), path_(std::move(path)), cap_(cap), start_(std::chrono::steady_clock::now()) {}

Timeline::Timeline(Timeline&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)),
      cap_(other.cap_),
      written_(other.written_),
      dropped_(other.dropped_),
      first_(other.first_),
      error_(std::move(other.error_)),
      start_(other.start_),
      processes_(std::move(other.processes_)),
      threads_(std::move(other.threads_)),
      last_us_(other.last_us_) {}

Timeline::~Timeline() {
  if (file_ != nullptr) std::fclose(file_);
}

double Timeline::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
      .count();
}

void Timeline::raw(std::string_view event) {
  if (error_ || file_ == nullptr) return;
  std::string text;
  if (event != "[") text = first_ ? "\n" : ",\n";
  if (event != "[") first_ = false;
  text += event;
  if (auto r = native::write_stream(file_, text, "--timeline " + path_); !r) {
    error_.emplace(r.error());
  }
}

bool Timeline::admit() {
  if (written_ >= cap_) {
    ++dropped_;
    return false;
  }
  ++written_;
  return true;
}

void Timeline::process(int pid, std::string_view name) {
  if (!processes_.insert(pid).second) return;
  raw("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
      ",\"args\":{\"name\":" + json_string(name) + "}}");
}

void Timeline::thread(int pid, int tid, std::string_view name) {
  if (!threads_.insert({pid, tid}).second) return;
  raw("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
      ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + json_string(name) + "}}");
}

void Timeline::thread_of(pid_t pid, pid_t tid) {
  if (threads_.contains({pid, tid})) return;
  std::string comm;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (in) std::getline(in, comm);
  thread(pid, tid, comm.empty() ? "tid " + std::to_string(tid) : comm);
}

void Timeline::instant(int pid, int tid, std::string_view name, std::string_view category,
                       double ts_us, std::string_view args) {
  if (!admit()) return;
  last_us_ = std::max(last_us_, ts_us);
  raw("{\"name\":" + json_string(name) + ",\"cat\":" + json_string(category) +
      ",\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) +
      ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + micros(ts_us) + args_member(args) + "}");
}

void Timeline::slice(int pid, int tid, std::string_view name, std::string_view category,
                     double begin_us, double end_us, std::string_view args) {
  if (!admit()) return;
  last_us_ = std::max(last_us_, end_us);
  raw("{\"name\":" + json_string(name) + ",\"cat\":" + json_string(category) +
      ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
      ",\"ts\":" + micros(begin_us) + ",\"dur\":" + micros(end_us - begin_us) + args_member(args) +
      "}");
}

void Timeline::phase(std::string_view name, double begin_us, double end_us, std::string_view args) {
  // Phases are never dropped: there are a handful, and they frame the rest.
  const std::uint64_t cap = cap_;
  cap_ = written_ + 1;
  slice(kHwarbPid, kHwarbPid, name, "hwarb", begin_us, end_us, args);
  cap_ = cap;
}

Result<void> Timeline::close() {
  if (file_ == nullptr) return {};
  if (dropped_ != 0) {
    const std::string note = "timeline capped at " + std::to_string(cap_) + " events; " +
                             std::to_string(dropped_) + " more not written";
    processes_.erase(kHwarbPid);
    process(kHwarbPid, "hwarb (" + note + ")");
    raw("{\"name\":\"timeline capped\",\"cat\":\"hwarb\",\"ph\":\"i\",\"s\":\"p\",\"pid\":" +
        std::to_string(kHwarbPid) + ",\"tid\":" + std::to_string(kHwarbPid) +
        ",\"ts\":" + micros(last_us_) + ",\"args\":{\"note\":" + json_string(note) + "}}");
  }
  if (!error_) {
    if (auto r = native::write_stream(file_, "\n]\n", "--timeline " + path_); !r) {
      error_.emplace(r.error());
    }
  }
  auto closed = native::close_stream(std::exchange(file_, nullptr), "--timeline " + path_);
  if (error_) return std::unexpected(*error_);
  return closed;
}

void name_process(Timeline& timeline, pid_t pid) {
  std::string comm;
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  if (in) std::getline(in, comm);
  timeline.process(pid, comm.empty() ? "pid " + std::to_string(pid) : comm);
}

void record_hit(Timeline& timeline, const TimelineHit& h) {
  timeline.thread_of(h.pid, h.tid);
  std::string args = "\"access\":" + json_string(h.access) + ",\"addr\":\"" + hex(h.addr) +
                     "\",\"ip\":\"" + hex(h.ip) +
                     "\",\"instruction\":" + json_string(h.instruction);
  if (!h.old_value.empty() || !h.new_value.empty()) {
    args +=
        ",\"old\":" + json_string(h.old_value) + ",\"new\":" + json_string(h.new_value) +
        ",\"change\":" + json_string(std::string(h.old_value) + " -> " + std::string(h.new_value));
  }
  if (!h.syscall.empty()) args += ",\"syscall\":" + json_string(h.syscall);
  timeline.instant(h.pid, h.tid, h.expr, "hit", h.ts_us, args);
}

void add_timeline_option(CLI::App& sub, TimelineArgs& args) {
  sub.add_option("--timeline", args.path,
                 "also write the run as Chrome trace-event JSON to FILE (Perfetto, "
                 "chrome://tracing): a track per thread, hwarb's phases")
      ->type_name("FILE");
  args.max_option = sub.add_option("--timeline-max", args.max_text,
                                   "with --timeline: write at most N events, count the rest "
                                   "(default " +
                                       std::to_string(Timeline::kDefaultCap) + ")")
                        ->type_name("N");
}

Result<std::optional<Timeline>> open_timeline(const TimelineArgs& args) {
  std::uint64_t cap = Timeline::kDefaultCap;
  if (args.max_option != nullptr && args.max_option->count() > 0) {
    if (args.path.empty()) {
      return make_error(ErrorCode::kInval, "--timeline-max: only with --timeline FILE");
    }
    auto n = parse_count_option("--timeline-max", args.max_text, "events");
    if (!n) return std::unexpected(n.error());
    if (*n == 0) {
      return make_error(ErrorCode::kInval,
                        "--timeline-max: '" + args.max_text + "' writes no event (give 1 or more)");
    }
    cap = *n;
  }
  if (args.path.empty()) return std::optional<Timeline>();
  auto t = Timeline::open(args.path, cap);
  if (!t) return std::unexpected(t.error());
  return std::optional<Timeline>(std::move(*t));
}

int finish_timeline(const char* command, std::optional<Timeline>& timeline, int status) {
  if (!timeline) return status;
  if (timeline->dropped() != 0) {
    std::cerr << "hwarb " << command << ": --timeline " << timeline->path() << ": capped at "
              << timeline->cap() << " events; " << timeline->dropped() << " more not written\n";
  }
  if (auto r = timeline->close(); !r) {
    std::cerr << "hwarb " << command << ": " << r.error().message() << "\n";
    if (status == kExitOk) return kExitFailure;
  }
  return status;
}

// ---- phases ----

void RunPhases::mark(std::string_view name) {
  if (timeline_ == nullptr) return;
  const double now = timeline_->now_us();
  if (!current_.empty()) timeline_->phase(current_, begin_, now);
  current_ = name;
  begin_ = now;
}

void RunPhases::end(std::string_view args) {
  if (timeline_ == nullptr || current_.empty()) return;
  timeline_->phase(current_, begin_, timeline_->now_us(), args);
  current_.clear();
}

// ---- call slices ----

std::string_view function_of(std::string_view sym_off) {
  const auto plus = sym_off.rfind("+0x");
  return plus == std::string_view::npos || plus == 0 ? sym_off : sym_off.substr(0, plus);
}

CallSlices::Kind call_kind(x86::BranchKind kind) {
  switch (kind) {
    case x86::BranchKind::kCall:
    case x86::BranchKind::kIndirectCall:
      return CallSlices::Kind::kCall;
    case x86::BranchKind::kReturn:
      return CallSlices::Kind::kReturn;
    case x86::BranchKind::kJump:
    case x86::BranchKind::kCondJump:
    case x86::BranchKind::kIndirectJump:
      return CallSlices::Kind::kJump;
    default:
      return CallSlices::Kind::kOther;
  }
}

void CallSlices::close_top(int tid, Stack& s, double ts) {
  const Open top = std::move(s.open.back());
  s.open.pop_back();
  timeline_.slice(pid_, tid, top.name, "call", top.begin, ts);
}

void CallSlices::branch(int tid, double ts, Kind kind, std::string_view from_fn,
                        std::string_view to_fn) {
  Stack& s = stacks_[tid];
  if (s.open.empty()) {
    timeline_.thread_of(pid_, tid);
    s.open.push_back({std::string(from_fn), ts});
  }
  switch (kind) {
    case Kind::kCall:
      if (s.open.size() >= kMaxDepth) {
        ++s.hidden;
      } else {
        s.open.push_back({std::string(to_fn), ts});
      }
      return;
    case Kind::kReturn:
      if (s.hidden != 0) {
        --s.hidden;
        return;
      }
      close_top(tid, s, ts);
      if (s.open.empty()) s.open.push_back({std::string(to_fn), ts});
      return;
    case Kind::kJump:
      if (s.hidden == 0 && to_fn != s.open.back().name) {
        close_top(tid, s, ts);
        s.open.push_back({std::string(to_fn), ts});
      }
      return;
    case Kind::kOther:
      return;
  }
}

void CallSlices::finish(double ts) {
  for (auto& [tid, s] : stacks_) {
    while (!s.open.empty()) close_top(tid, s, ts);
  }
}

}  // namespace hwarb::cli

#include "session.h"

#include <cstdio>
#include <cstring>

#include "hwarb/linux/files.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::cli {
namespace {

std::vector<std::string>& trailing() {
  static std::vector<std::string> command;
  return command;
}

}  // namespace

void set_trailing_command(std::vector<std::string> command) {
  trailing() = std::move(command);
}

void add_target_options(CLI::App& sub, TargetOptions& target) {
  sub.add_option("-p,--pid", target.pid, "attach to the running process PID (all its threads)");
  sub.add_option("-t,--tid", target.tid,
                 "attach to the process of thread TID; report that thread only");
  sub.add_flag("--aslr", target.aslr,
               "keep address-space randomisation for a command (default: off, as in gdb, so "
               "addresses repeat from run to run)");
}

void add_output_option(CLI::App& sub, std::string& path) {
  sub.add_option("-o,--output", path,
                 "write the report (hits, tables, summaries) to FILE; the target's own output "
                 "stays on stdout and stderr")
      ->type_name("FILE");
}

Result<Report> Report::open(const std::string& path) {
  if (path.empty()) return Report(stdout, false);
  auto fd = native::create_file(path);
  if (!fd) return std::unexpected(fd.error().with_context("--output"));
  std::FILE* file = ::fdopen(fd->get(), "w");
  if (file == nullptr) {
    return make_error(ErrorCode::kNoMem, "--output: no stream for " + path);
  }
  (void)fd->release();
  return Report(file, true);
}

Report::Report(Report&& other) noexcept
    : out_(other.out_), to_file_(other.to_file_), flushed_(other.flushed_) {
  other.to_file_ = false;
}

Report::~Report() {
  if (to_file_) std::fclose(out_);
}

void Report::line(const std::string& line) const {
  std::fputs(line.c_str(), out_);
  std::fputc('\n', out_);
  const auto now = std::chrono::steady_clock::now();
  if (!to_file_ || now - flushed_ >= std::chrono::milliseconds(100)) {
    std::fflush(out_);
    flushed_ = now;
  }
}

Result<void> check_target(TargetOptions& target) {
  target.command = trailing();
  const int given =
      (target.pid != 0 ? 1 : 0) + (target.tid != 0 ? 1 : 0) + (target.command.empty() ? 0 : 1);
  if (given == 0) {
    return make_error(ErrorCode::kInval,
                      "target: give one of -p PID, -t TID or '-- COMMAND [ARGS]'");
  }
  if (given > 1) {
    return make_error(ErrorCode::kInval,
                      "target: -p, -t and '-- COMMAND' are exclusive; give exactly one");
  }
  if (target.pid < 0 || target.tid < 0) {
    return make_error(ErrorCode::kInval, "pid: must be a positive process id");
  }
  return {};
}

std::string target_name(const TargetOptions& target) {
  if (!target.command.empty()) return "command '" + target.command[0] + "'";
  if (target.pid != 0) return "process " + std::to_string(target.pid);
  return "thread " + std::to_string(target.tid);
}

std::string describe_end(const native::RunResult& result, bool spawned) {
  if (result.interrupted) {
    return spawned ? "killed (hwarb was interrupted)"
                   : "still running, detached unmodified (hwarb was interrupted)";
  }
  if (!result.exited) return "still running, detached unmodified";
  if (result.signal != 0) {
    const char* name = sigabbrev_np(result.signal);
    return std::string("killed by SIG") + (name != nullptr ? name : std::to_string(result.signal));
  }
  return "exited with status " + std::to_string(result.status);
}

Progress::Progress() : enabled_(native::is_terminal(2)) {}

void Progress::update(const std::string& line) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

native::WatchSessionOptions watch_options(bool software) {
  native::WatchSessionOptions options{.hardware = false, .no_hardware = "--software", .slots = 4};
  if (software) return options;
  auto report = native::probe();
  if (!report) {
    options.no_hardware = "the probe failed: " + report.error().to_string();
    return options;
  }
  return native::session_options(*report);
}

unsigned access_bits(WatchAccess access) {
  switch (access) {
    case WatchAccess::kRead:
      return native::kWatchRead;
    case WatchAccess::kWrite:
      return native::kWatchWrite;
    case WatchAccess::kReadWrite:
      return native::kWatchRead | native::kWatchWrite;
    case WatchAccess::kExec:
      return native::kWatchExec;
  }
  return 0;
}

}  // namespace hwarb::cli

#include "session.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <utility>

#include "commands.h"
#include "hwarb/linux/files.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::cli {
namespace {

std::vector<std::string>& gdbserver_wrapper() {
  static std::vector<std::string> words;
  return words;
}

std::vector<std::string>& trailing() {
  static std::vector<std::string> command;
  return command;
}

bool& separated() {
  static bool given = false;
  return given;
}

}  // namespace

void set_trailing_command(std::vector<std::string> command, bool separator) {
  trailing() = std::move(command);
  separated() = separator;
}

void set_gdbserver_wrapper(std::vector<std::string> wrapper) {
  gdbserver_wrapper() = std::move(wrapper);
}

std::vector<std::string> take_gdbserver_wrapper() {
  return std::exchange(gdbserver_wrapper(), {});
}

std::vector<std::string> take_trailing_words() {
  std::vector<std::string> words;
  if (separated()) words.push_back("--");
  words.insert(words.end(), trailing().begin(), trailing().end());
  trailing().clear();
  separated() = false;
  return words;
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
  if (path.empty()) return standard_output();
  auto fd = native::create_file(path);
  if (!fd) return std::unexpected(fd.error().with_context("--output"));
  std::FILE* file = ::fdopen(fd->get(), "w");
  if (file == nullptr) {
    return make_error(ErrorCode::kNoMem, "--output: no stream for " + path);
  }
  (void)fd->release();
  return Report(file, true, "--output " + path);
}

Report::Report(Report&& other) noexcept
    : out_(other.out_),
      to_file_(other.to_file_),
      name_(std::move(other.name_)),
      error_(std::move(other.error_)),
      flushed_(other.flushed_) {
  other.out_ = nullptr;
  other.to_file_ = false;
}

Report::~Report() {
  if (to_file_ && out_ != nullptr) std::fclose(out_);
}

bool Report::keep(Result<void> result) const {
  if (!result && !error_) error_.emplace(std::move(result.error()));
  return !error_;
}

void Report::line(const std::string& line) const {
  if (error_) return;
  if (!keep(native::write_stream(out_, line, name_)) ||
      !keep(native::write_stream(out_, "\n", name_))) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!to_file_ || now - flushed_ >= std::chrono::milliseconds(100)) {
    keep(native::flush_stream(out_, name_));
    flushed_ = now;
  }
}

void Report::write(std::string_view text) const {
  if (!error_) keep(native::write_stream(out_, text, name_));
}

void Report::print(const char* format, ...) const {
  if (error_) return;
  std::va_list args;
  va_start(args, format);
  std::va_list again;
  va_copy(again, args);
  char small[512];
  const int n = std::vsnprintf(small, sizeof small, format, args);
  va_end(args);
  if (n < 0) {
    va_end(again);
    keep(make_error(ErrorCode::kInval, name_ + ": EINVAL: a format hwarb could not print"));
    return;
  }
  if (static_cast<std::size_t>(n) < sizeof small) {
    va_end(again);
    write(std::string_view(small, static_cast<std::size_t>(n)));
    return;
  }
  std::string text(static_cast<std::size_t>(n) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), format, again);
  va_end(again);
  text.pop_back();
  write(text);
}

void Report::flush() const {
  if (!error_) keep(native::flush_stream(out_, name_));
}

void Report::summary(const std::string& text) const {
  if (to_file_) {
    write(text);
    flush();
    return;
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

Result<void> Report::close() {
  if (out_ != nullptr) {
    if (to_file_) {
      // Closed whether or not an earlier write failed: the descriptor is not kept.
      keep(native::close_stream(out_, name_));
      out_ = nullptr;
      to_file_ = false;
    } else {
      flush();
    }
  }
  if (error_) return std::unexpected(*error_);
  return {};
}

int finish_report(const char* command, Report& report, int status) {
  auto closed = report.close();
  if (closed) return status;
  std::fprintf(stderr, "hwarb %s: %s\n", command, closed.error().message().c_str());
  return status == kExitOk ? kExitFailure : status;
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

native::WatchSessionOptions watch_options(bool software, std::optional<bool> cpu_accesses) {
  native::WatchSessionOptions options{.hardware = false, .no_hardware = "--software", .slots = 4};
  if (!software) {
    auto report = native::probe();
    if (report) {
      options = native::session_options(*report);
    } else {
      options.no_hardware = "the probe failed: " + report.error().to_string();
    }
  }
  if (cpu_accesses) {
    options.cpu_accesses = *cpu_accesses;
    options.cpu_accesses_why = *cpu_accesses ? "--cpu-accesses" : "";
  } else if (!options.cpu_accesses) {
    // Another process with perf events open may have a breakpoint on a watched page.
    const std::vector<std::string> holders = native::perf_event_holders();
    if (!holders.empty()) {
      options.cpu_accesses = true;
      options.cpu_accesses_why = "perf events are open in";
      for (std::size_t i = 0; i < holders.size(); ++i) {
        options.cpu_accesses_why += (i == 0 ? " " : ", ") + holders[i];
      }
    }
  }
  return options;
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

// After an unknown name in a spawned command: where its symbols were looked up. A script (#!) is
// run by its interpreter, whose symbols are the ones hwarb sees; any other program is the one
// looked in, and a program it execs is not followed. Empty where `error` offers near names (a
// misspelling, most likely) or the target is not a command.
std::string lookup_note(const native::Target& target, pid_t pid, const Error& error) {
  if (target.command.empty() || error.code() != ErrorCode::kNoEnt ||
      error.message().find("unknown symbol") == std::string::npos ||
      error.message().find("did you mean") != std::string::npos) {
    return "";
  }
  auto exe = native::executable_path(pid);
  const std::string program = exe ? *exe : "the program started";
  const Result<std::string> file = native::resolve_command(target.command.front());
  std::string first_line;
  if (file) {
    std::ifstream in(*file, std::ios::binary);
    std::getline(in, first_line);
  }
  if (first_line.starts_with("#!")) {
    return "'" + target.command.front() + "' is a script (" + first_line +
           "): hwarb runs its interpreter, " + program +
           ", and looks symbols up in it; to watch the program the script starts, give that "
           "program as the command";
  }
  return "symbols are looked up in " + program +
         ", the program started; a program it execs is not followed: to watch that one, give it "
         "as the command";
}

}  // namespace hwarb::cli

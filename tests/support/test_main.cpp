// main() of every hwarb gtest binary: GoogleTest's, plus a report of every skipped case, and one
// more run of a failed test that relies on this machine's breakpoint hits.
//
// A skipped case prints one line to stderr, "SKIP: BINARY: Suite.Case: REASON", and appends the
// same line to the file HWARB_SKIP_LOG names, if any: ctest shows a passing test's output to
// no one, so scripts/test counts and prints the skips from that file. Each line is one write(2)
// with O_APPEND, whole even when ctest runs tests in parallel.
//
// A failed test marked by HITS_OR_SKIP (skips.h: hardware_tests) is run once more, alone, in a
// fresh process of this binary (HWARB_TEST_RUN_AGAIN set there: no third run). Cases:
//  1. every failure was such a test, and each passed (or skipped, saying why) its second run:
//     each first failure is a skip line, "failed on this machine's breakpoint hardware", with
//     its first message, and the binary passes;
//  2. any other failure, or a second run that failed: the binary fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "skips.h"

namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// Appends `line` to HWARB_SKIP_LOG, if set; a log that cannot be written ends the binary.
void log_skip(const std::string& line) {
  std::fputs(line.c_str(), stderr);
  if (const char* log = std::getenv("HWARB_SKIP_LOG"); log && *log) {
    int fd = ::open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::fprintf(stderr, "HWARB_SKIP_LOG: cannot append to %s\n", log);
      std::_Exit(1);
    }
    ::close(fd);
  }
}

// A failed test that relies on breakpoint hits: its name and its first failure's message.
struct HardwareFailure {
  std::string name;
  std::string message;
};

class SkipReport : public ::testing::EmptyTestEventListener {
 public:
  explicit SkipReport(std::string binary) : binary_(std::move(binary)) {}

  std::vector<HardwareFailure> hardware_failures;
  bool other_failures = false;

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* result = info.result();
    if (result->Failed()) {
      const std::string name = std::string(info.test_suite_name()) + "." + info.name();
      if (!hwarb::testing::hardware_tests().contains(name)) {
        other_failures = true;
        return;
      }
      std::string message;
      for (int i = 0; i < result->total_part_count() && message.empty(); ++i) {
        const auto& part = result->GetTestPartResult(i);
        if (part.failed() && part.message()) {
          message = std::string(part.file_name() ? part.file_name() : "?") + ":" +
                    std::to_string(part.line_number()) + ": " + one_line(part.message());
        }
      }
      if (message.size() > 400) message = message.substr(0, 400) + "...";
      hardware_failures.push_back({name, message});
      return;
    }
    if (!result->Skipped()) return;
    std::string reason;
    for (int i = 0; i < result->total_part_count(); ++i) {
      const auto& part = result->GetTestPartResult(i);
      if (part.skipped() && part.message() && *part.message()) {
        if (!reason.empty()) reason += "; ";
        reason += part.message();
      }
    }
    if (reason.empty()) reason = "(no reason given)";
    log_skip("SKIP: " + binary_ + ": " + info.test_suite_name() + "." + info.name() + ": " +
             one_line(reason) + "\n");
  }

 private:
  std::string binary_;
};

// Runs test `name` alone in a new process of this binary; whether it passed (or skipped).
bool passes_alone(const std::string& name) {
  const std::string filter = "--gtest_filter=" + name;
  std::string self = "/proc/self/exe";
  char* const argv[] = {self.data(), const_cast<char*>(filter.c_str()), nullptr};
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  env_text.emplace_back("HWARB_TEST_RUN_AGAIN=1");
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = 0;
  if (const int err = ::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, env.data());
      err != 0) {
    std::fprintf(stderr, "run again: posix_spawn: errno %d\n", err);
    return false;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool bad = false;
  hwarb::testing::for_each_required([&](std::string_view name) {
    for (auto known : hwarb::testing::kFacilities) {
      if (name == known) return;
    }
    std::fprintf(stderr, "HWARB_REQUIRE: unknown facility '%.*s' (known: hits, bts)\n",
                 static_cast<int>(name.size()), name.data());
    bad = true;
  });
  if (bad) return 2;
  std::string binary = argc > 0 ? argv[0] : "test";
  if (auto slash = binary.rfind('/'); slash != std::string::npos) binary.erase(0, slash + 1);
  auto* report = new SkipReport(binary);
  ::testing::UnitTest::GetInstance()->listeners().Append(report);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0 || report->other_failures || report->hardware_failures.empty() ||
      std::getenv("HWARB_TEST_RUN_AGAIN") != nullptr) {
    return rc;
  }
  // Case 1 or 2 (above).
  for (const HardwareFailure& failure : report->hardware_failures) {
    std::fprintf(stderr, "run again: %s, alone\n", failure.name.c_str());
    if (!passes_alone(failure.name)) return rc;
  }
  for (const HardwareFailure& failure : report->hardware_failures) {
    log_skip("SKIP: " + binary + ": " + failure.name +
             ": failed on this machine's breakpoint hardware (" + failure.message +
             "); its run alone again did not fail\n");
  }
  return 0;
}

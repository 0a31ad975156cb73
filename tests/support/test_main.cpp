// main() of every hwarb gtest binary: GoogleTest's, plus a report of every skipped case.
//
// A skipped case prints one line to stderr, "SKIP: BINARY: Suite.Case: REASON", and appends the
// same line to the file HWARB_SKIP_LOG names, if any: ctest shows a passing test's output to
// no one, so scripts/test counts and prints the skips from that file. Each line is one write(2)
// with O_APPEND, whole even when ctest runs tests in parallel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "skips.h"

namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

class SkipReport : public ::testing::EmptyTestEventListener {
 public:
  explicit SkipReport(std::string binary) : binary_(std::move(binary)) {}

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* result = info.result();
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
    std::string line = "SKIP: " + binary_ + ": " + info.test_suite_name() + "." + info.name() +
                       ": " + one_line(reason) + "\n";
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

 private:
  std::string binary_;
};

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
  ::testing::UnitTest::GetInstance()->listeners().Append(new SkipReport(binary));
  return RUN_ALL_TESTS();
}

// scenario_fuzz_test — a bounded mutation fuzzer of the scenario language.
//
// Fixed seeds: case N mutates one of the .scn files of tests/conformance (errors/ included) and
// examples/ with a generator seeded by N (lines dropped, repeated, swapped; words dropped,
// swapped between lines; numbers replaced by edge values; bytes inserted; a machine line
// prepended ...). Each case runs parse_scenario and run_scenario, as `hwarb sim` does, in a child
// process, which must either succeed (as exit 0) or fail with a scenario error (as exit 2): one
// line "fuzz.scn:LINE: message" that is not an internal error. A crash, an abort, an internal
// error or a case that runs longer than kCaseSeconds fails the test; the case's text is written
// to scenario_fuzz_failure_N.scn in the working directory, to be replayed with `hwarb sim`
// (HWARB_FUZZ_DUMP=DIR keeps every case in DIR; HWARB_FUZZ_CASES=N runs N cases).
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hwarb/scenario/scenario.h"

namespace hwarb::scenario {
namespace {

// Sanitized builds fork slowly (about 50 ms a case, most of it copying the shadow's page tables):
// a fifth of the cases keep the test near half a minute there (HWARB_FUZZ_CASES runs more).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
constexpr int kCases = 600;
constexpr int kCaseSeconds = 60;
#else
constexpr bool kSanitized = false;
constexpr int kCases = 3000;
constexpr int kCaseSeconds = 10;
#endif

std::vector<std::string> seed_texts() {
  namespace fs = std::filesystem;
  const fs::path root = HWARB_SOURCE_DIR;
  std::vector<fs::path> files;
  for (const fs::path& dir :
       {root / "tests/conformance", root / "tests/conformance/errors", root / "examples"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".scn") files.push_back(entry.path());
    }
  }
  std::ranges::sort(files);
  std::vector<std::string> texts;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    texts.push_back(s.str());
  }
  return texts;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? std::string(sep) : "") + parts[i];
  return s;
}

class Mutator {
 public:
  Mutator(std::uint64_t seed, const std::vector<std::string>& seeds) : rng_(seed), seeds_(seeds) {}

  std::string make() {
    std::vector<std::string> lines = split_lines(seeds_[pick(seeds_.size())]);
    const int n = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < n; ++i) mutate(lines);
    std::string text = join(lines, "\n");
    if (pick(8) != 0) text += "\n";
    if (pick(20) == 0) insert_bytes(text);
    return text;
  }

 private:
  std::uint64_t pick(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::string random_line() {
    const std::vector<std::string> lines = split_lines(seeds_[pick(seeds_.size())]);
    return lines.empty() ? "" : lines[pick(lines.size())];
  }

  std::string number() {
    static const char* const kNumbers[] = {"0",
                                           "1",
                                           "2",
                                           "3",
                                           "7",
                                           "8",
                                           "9",
                                           "64",
                                           "4096",
                                           "65535",
                                           "65536",
                                           "65537",
                                           "1048576",
                                           "1048577",
                                           "2147483647",
                                           "2147483648",
                                           "4294967295",
                                           "4294967297",
                                           "16777216",
                                           "16777217",
                                           "-1",
                                           "00",
                                           "1e3",
                                           "268435456",
                                           "9223372036854775807",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "99999999999999999999999"};
    return kNumbers[pick(std::size(kNumbers))];
  }

  std::string hex_number() {
    static const char* const kHex[] = {"0x0",
                                       "0x1",
                                       "0xfff",
                                       "0x1000",
                                       "0x1001",
                                       "0x7ffffffff000",
                                       "0x7ffffffffff8",
                                       "0xffffffff",
                                       "0x100000000",
                                       "0xfffffffffffffff8",
                                       "0xffffffffffffffff",
                                       "0x10000000000000000",
                                       "0x",
                                       "0xg",
                                       "ffff"};
    return kHex[pick(std::size(kHex))];
  }

  // A word with its value (after '=') or the whole of it replaced by an edge value.
  std::string edge_word(const std::string& word) {
    const std::size_t eq = word.find('=');
    const std::string key = eq == std::string::npos ? "" : word.substr(0, eq + 1);
    const std::string value = pick(2) ? number() : hex_number();
    if (eq == std::string::npos) return pick(2) ? value : word + "=" + value;
    return key + value;
  }

  void mutate(std::vector<std::string>& lines) {
    const std::size_t at = pick(lines.size() + 1);
    switch (pick(12)) {
      case 0:  // drop a line
        if (!lines.empty()) lines.erase(lines.begin() + static_cast<long>(pick(lines.size())));
        break;
      case 1:  // repeat a line, sometimes many times
        if (!lines.empty()) {
          const std::string line = lines[pick(lines.size())];
          const std::size_t times = pick(4) == 0 ? 1 + pick(3000) : 1 + pick(3);
          lines.insert(lines.begin() + static_cast<long>(at), times, line);
        }
        break;
      case 2:  // swap two lines
        if (lines.size() > 1) std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
        break;
      case 3:  // a line of another file
        lines.insert(lines.begin() + static_cast<long>(at), random_line());
        break;
      case 4:
      case 5:
      case 6:  // a value replaced by an edge value
        edit_word(lines, [&](std::vector<std::string>& words, std::size_t i) {
          words[i] = edge_word(words[i]);
        });
        break;
      case 7:  // drop a word, or every value of a line replaced
        if (pick(2) == 0) {
          if (lines.empty()) break;
          std::string& line = lines[pick(lines.size())];
          std::vector<std::string> words = split_words(line);
          for (std::size_t i = 1; i < words.size(); ++i) {
            if (words[i].find('=') != std::string::npos && pick(2) == 0) {
              words[i] = edge_word(words[i]);
            }
          }
          line = join(words, " ");
          break;
        }
        edit_word(lines, [&](std::vector<std::string>& words, std::size_t i) {
          words.erase(words.begin() + static_cast<long>(i));
        });
        break;
      case 8:  // a word of another line
        edit_word(lines, [&](std::vector<std::string>& words, std::size_t i) {
          const std::vector<std::string> other = split_words(random_line());
          if (!other.empty())
            words.insert(words.begin() + static_cast<long>(i), other[pick(other.size())]);
        });
        break;
      case 9: {  // a machine line first
        static const char* const kCpus[] = {"1", "2", "3", "4", "8", "64", "4096"};
        std::string cpus = kCpus[pick(std::size(kCpus))];
        if (pick(300) == 0 && !kSanitized) cpus = "65536";
        static const char* const kArch[] = {"", " arch=i386", " arch=arm64", " arch=x86_64"};
        lines.insert(lines.begin(), "machine cpus=" + cpus + kArch[pick(std::size(kArch))]);
        break;
      }
      case 10:  // cut the file
        lines.resize(pick(lines.size() + 1));
        break;
      default: {  // a key's value moved to another key
        edit_word(lines, [&](std::vector<std::string>& words, std::size_t i) {
          const std::vector<std::string> other = split_words(random_line());
          if (other.empty()) return;
          const std::string& w = other[pick(other.size())];
          const std::size_t eq = w.find('=');
          const std::size_t here = words[i].find('=');
          if (eq != std::string::npos && here != std::string::npos) {
            words[i] = words[i].substr(0, here) + w.substr(eq);
          }
        });
        break;
      }
    }
  }

  template <typename F>
  void edit_word(std::vector<std::string>& lines, F edit) {
    if (lines.empty()) return;
    std::string& line = lines[pick(lines.size())];
    std::vector<std::string> words = split_words(line);
    if (words.empty()) return;
    edit(words, pick(words.size()));
    line = join(words, pick(8) == 0 ? "\t" : " ");
  }

  void insert_bytes(std::string& text) {
    static const char kBytes[] = {'\0', '\v',   '\f',   '\r', '\t', ' ', '#', '=',
                                  '|',  '\x7f', '\xff', 'a',  '0',  '-', '\n'};
    const std::size_t n = 1 + pick(3);
    for (std::size_t i = 0; i < n; ++i) {
      text.insert(text.begin() + static_cast<long>(pick(text.size() + 1)),
                  kBytes[pick(sizeof kBytes)]);
    }
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>& seeds_;
};

// "fuzz.scn:LINE: message", one line.
bool one_file_line_error(const std::string& m) {
  const std::string_view prefix = "fuzz.scn:";
  if (!m.starts_with(prefix) || m.find('\n') != std::string::npos) return false;
  std::size_t i = prefix.size();
  const std::size_t digits = i;
  while (i < m.size() && m[i] >= '0' && m[i] <= '9') ++i;
  return i > digits && m.compare(i, 2, ": ") == 0 && m.size() > i + 2;
}

struct Outcome {
  bool signalled = false;
  int status = 0;  // exit status, or the signal
  std::string message;
  bool timed_out = false;
  double seconds = 0;
};

// Runs the scenario as `hwarb sim` would, in a child: exit 0 (ran), 2 (scenario error, message on
// the pipe) or 1 (internal error).
Outcome run_case(const std::string& text) {
  int fds[2];
  if (pipe(fds) != 0) return {.status = -1, .message = "pipe failed"};
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (!kSanitized) {
      rlimit as{.rlim_cur = rlim_t{4} << 30, .rlim_max = rlim_t{4} << 30};
      setrlimit(RLIMIT_AS, &as);
    }
    int code = 0;
    std::string message;
    auto s = parse_scenario(text, "fuzz.scn");
    if (!s) {
      code = 2;
      message = s.error().message();
    } else {
      auto lines = run_scenario(*s, {.explain = text.size() % 2 == 0});
      if (!lines) {
        code = is_internal_error(lines.error()) ? 1 : 2;
        message = lines.error().message();
      } else {
        std::size_t bytes = 0;
        for (const std::string& l : *lines) bytes += l.size() + 1;
        if (bytes > Limits{}.output_bytes) {
          code = 1;
          message = "output of " + std::to_string(bytes) + " bytes";
        }
      }
    }
    std::size_t done = 0;
    while (done < message.size()) {
      const ssize_t n = write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(code);
  }
  close(fds[1]);
  Outcome out;
  char buf[4096];
  const auto deadline = start + std::chrono::seconds(kCaseSeconds);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{.fd = fds[0], .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.message.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.signalled = WIFSIGNALED(status);
  out.status = out.signalled ? WTERMSIG(status) : WEXITSTATUS(status);
  return out;
}

TEST(ScenarioFuzz, EveryMutationRunsOrGivesOneFileLineError) {
  const std::vector<std::string> seeds = seed_texts();
  ASSERT_GT(seeds.size(), 50u);
  int ran = 0;
  int errors = 0;
  double slowest = 0;
  const char* dump = std::getenv("HWARB_FUZZ_DUMP");   // a directory: every case is kept there
  const char* more = std::getenv("HWARB_FUZZ_CASES");  // a longer run
  const int cases = more != nullptr ? std::atoi(more) : kCases;
  for (int n = 0; n < cases; ++n) {
    const std::string text = Mutator(static_cast<std::uint64_t>(n), seeds).make();
    if (dump != nullptr) {
      std::ofstream(std::string(dump) + "/case_" + std::to_string(n) + ".scn", std::ios::binary)
          << text;
    }
    const Outcome o = run_case(text);
    slowest = std::max(slowest, o.seconds);
    bool good = !o.timed_out && !o.signalled && (o.status == 0 || o.status == 2);
    if (good && o.status == 2) good = one_file_line_error(o.message);
    if (good && o.status == 0) good = o.message.empty();
    ran += good && o.status == 0;
    errors += good && o.status == 2;
    if (good) continue;
    const std::string file = "scenario_fuzz_failure_" + std::to_string(n) + ".scn";
    std::ofstream(file, std::ios::binary) << text;
    ADD_FAILURE() << "case " << n << " (written to " << file << "): "
                  << (o.timed_out   ? "ran longer than " + std::to_string(kCaseSeconds) + " s"
                      : o.signalled ? "killed by signal " + std::to_string(o.status)
                                    : "exit " + std::to_string(o.status))
                  << ": " << o.message.substr(0, 500) << "\n--- text (start) ---\n"
                  << text.substr(0, 1500);
  }
  // Both outcomes are exercised (a fuzzer whose cases all fail to parse tests little).
  EXPECT_GT(ran, cases / 10);
  EXPECT_GT(errors, cases / 10);
  std::printf("%d cases: %d ran, %d scenario errors; slowest %.2f s\n", cases, ran, errors,
              slowest);
}

}  // namespace
}  // namespace hwarb::scenario

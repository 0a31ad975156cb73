// test_programs.h (real-process tests that run tests/programs only; they link
// hwarb_test_programs, which defines HWARB_PROGRAMS_DIR) — where the test programs are, and
// Capture, a temporary file to give a program as its standard output and read back.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace hwarb::native::testing {

// The path of tests/programs/NAME.c's executable.
inline std::string program(const char* name) {
  return std::string(HWARB_PROGRAMS_DIR) + "/prog_" + name;
}

// An anonymous temporary file (removed when closed): fd() goes to a child as its stdout, text()
// reads everything written to it so far, whatever the file offset.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  int fd() const { return fileno(file_); }
  std::string text() const {
    std::fflush(file_);
    std::string out;
    char buf[256];
    ssize_t n = 0;
    off_t at = 0;
    while ((n = ::pread(fileno(file_), buf, sizeof(buf), at)) > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return out;
  }

 private:
  std::FILE* file_;
};

}  // namespace hwarb::native::testing

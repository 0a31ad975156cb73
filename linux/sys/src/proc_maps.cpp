#include "hwarb/linux/proc_maps.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "hwarb/base/format.h"
#include "hwarb/linux/fd.h"
#include "sys_error.h"

namespace hwarb::native {
namespace {

using detail::sys_fail;

std::string proc_path(pid_t pid, std::string_view leaf) {
  std::string path = "/proc/" + std::to_string(pid) + "/";
  path += leaf;
  return path;
}

std::string pid_text(pid_t pid) {
  return "pid " + std::to_string(pid);
}

// Cuts the next run of non-blank characters off the front of `rest`, skipping blanks before it.
std::string_view next_field(std::string_view& rest) {
  const std::size_t begin = rest.find_first_not_of(' ');
  if (begin == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(begin);
  const std::size_t end = std::min(rest.find(' '), rest.size());
  const std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

bool parse_hex(std::string_view text, std::uint64_t* out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool parse_dec(std::string_view text, std::uint64_t* out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 10);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "rwxp": each position is its letter or '-'; the last is 'p' or 's'.
bool parse_perms(std::string_view text, Mapping* m) {
  if (text.size() != 4) return false;
  const auto flag = [](char c, char letter, bool* out) {
    if (c != letter && c != '-') return false;
    *out = c == letter;
    return true;
  };
  if (!flag(text[0], 'r', &m->read) || !flag(text[1], 'w', &m->write) ||
      !flag(text[2], 'x', &m->exec)) {
    return false;
  }
  if (text[3] != 'p' && text[3] != 's') return false;
  m->shared = text[3] == 's';
  return true;
}

// "major:minor", both hexadecimal.
bool valid_device(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  std::uint64_t ignored = 0;
  return parse_hex(text.substr(0, colon), &ignored) && parse_hex(text.substr(colon + 1), &ignored);
}

// Why `line` is not a maps line, or "" when it is (and *m holds it).
std::string parse_line(std::string_view line, Mapping* m) {
  std::string_view rest = line;
  const std::string_view range = next_field(rest);
  const std::size_t dash = range.find('-');
  if (dash == std::string_view::npos || !parse_hex(range.substr(0, dash), &m->start) ||
      !parse_hex(range.substr(dash + 1), &m->end)) {
    return "bad address range '" + std::string(range) + "'";
  }
  if (m->end < m->start) return "range '" + std::string(range) + "' ends before it starts";
  const std::string_view perms = next_field(rest);
  if (!parse_perms(perms, m)) return "bad permissions '" + std::string(perms) + "'";
  const std::string_view offset = next_field(rest);
  if (!parse_hex(offset, &m->offset)) return "bad offset '" + std::string(offset) + "'";
  const std::string_view device = next_field(rest);
  if (!valid_device(device)) return "bad device '" + std::string(device) + "'";
  const std::string_view inode = next_field(rest);
  if (!parse_dec(inode, &m->inode)) return "bad inode '" + std::string(inode) + "'";
  // The path is everything after the padding, spaces included.
  const std::size_t path = rest.find_first_not_of(' ');
  m->path = path == std::string_view::npos ? std::string() : std::string(rest.substr(path));
  return {};
}

}  // namespace

// Read until EOF: a /proc file's size is unknown in advance.
Result<std::string> read_proc_file(pid_t pid, std::string_view leaf) {
  const std::string path = proc_path(pid, leaf);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_fail<std::string>(errno, "pid", "open " + path + " of " + pid_text(pid));
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_fail<std::string>(errno, "pid", "read " + path + " of " + pid_text(pid));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

int Mapping::prot() const {
  return (read ? PROT_READ : 0) | (write ? PROT_WRITE : 0) | (exec ? PROT_EXEC : 0);
}

Result<std::vector<Mapping>> parse_maps(std::string_view text) {
  std::vector<Mapping> maps;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(std::min(nl + 1, text.size()));
    ++line_no;
    Mapping m;
    const std::string why = parse_line(line, &m);
    if (!why.empty()) {
      return make_error(ErrorCode::kInval, "maps: line " + std::to_string(line_no) + ": " + why +
                                               " in '" + std::string(line) + "'");
    }
    maps.push_back(std::move(m));
  }
  return maps;
}

Result<std::vector<Mapping>> read_maps(pid_t pid) {
  auto text = read_proc_file(pid, "maps");
  if (!text) return std::unexpected(text.error());
  return parse_maps(*text);
}

std::optional<Mapping> find_mapping(const std::vector<Mapping>& maps, std::uint64_t addr) {
  for (const Mapping& m : maps) {
    if (m.contains(addr)) return m;
  }
  return std::nullopt;
}

Result<std::vector<pid_t>> list_threads(pid_t pid) {
  const std::string path = proc_path(pid, "task");
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    return sys_fail<std::vector<pid_t>>(errno, "pid", "open " + path + " of " + pid_text(pid));
  }
  std::vector<pid_t> tids;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    const std::string_view name(entry->d_name);
    pid_t tid = 0;
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (ec == std::errc() && ptr == name.data() + name.size() && tid > 0) tids.push_back(tid);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) {
    return sys_fail<std::vector<pid_t>>(err, "pid", "read " + path + " of " + pid_text(pid));
  }
  // An empty task directory means the process died while it was read.
  if (tids.empty()) {
    return sys_fail<std::vector<pid_t>>(ESRCH, "pid", "read " + path + " of " + pid_text(pid));
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

Result<std::string> executable_path(pid_t pid) {
  const std::string path = proc_path(pid, "exe");
  auto target = read_link(path);
  if (!target) {
    return sys_fail<std::string>(static_cast<int>(target.error().code()), "pid",
                                 "readlink " + path + " of " + pid_text(pid));
  }
  return target;
}

Result<std::string> read_link(const std::string& path) {
  std::string target(256, '\0');
  for (;;) {
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) return sys_fail<std::string>(errno, "path", "readlink " + path);
    // readlink truncates silently: a full buffer may be a cut name, so grow and retry.
    if (static_cast<std::size_t>(n) < target.size()) {
      target.resize(static_cast<std::size_t>(n));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

namespace {

// The number after `field` ("Tgid:") in /proc/TID/status; ESRCH naming `tid` without it.
Result<pid_t> status_number(pid_t tid, std::string_view field) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (in && std::getline(in, line)) {
    if (line.starts_with(field)) return static_cast<pid_t>(std::stol(line.substr(field.size())));
  }
  return make_error(ErrorCode::kSrch, "tid: no thread " + std::to_string(tid));
}

}  // namespace

Result<pid_t> thread_group(pid_t tid) {
  return status_number(tid, "Tgid:");
}

Result<pid_t> tracer_of(pid_t tid) {
  return status_number(tid, "TracerPid:");
}

Result<SignalDispositions> signal_dispositions(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  SignalDispositions out;
  int seen = 0;
  std::string line;
  while (in && std::getline(in, line)) {
    if (line.starts_with("SigCgt:")) {
      out.caught = std::strtoull(line.c_str() + 7, nullptr, 16);
      ++seen;
    } else if (line.starts_with("SigIgn:")) {
      out.ignored = std::strtoull(line.c_str() + 7, nullptr, 16);
      ++seen;
    }
  }
  if (seen != 2) return make_error(ErrorCode::kSrch, "pid: no process " + std::to_string(pid));
  return out;
}

Result<void> read_process_memory(pid_t pid, std::uint64_t addr, std::span<std::uint8_t> out) {
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return detail::sys_fail(errno, "pid", "open " + path);
  const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(addr));
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(out.size())) {
    return detail::sys_fail(
        n < 0 ? err : EFAULT, "addr",
        "read of " + std::to_string(out.size()) + " bytes of process " + std::to_string(pid));
  }
  return {};
}

Result<void> read_process_memory(pid_t pid, std::span<const RemoteRead> parts) {
  std::vector<iovec> local(parts.size()), remote(parts.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    local[i] = {parts[i].out.data(), parts[i].out.size()};
    remote[i] = {reinterpret_cast<void*>(parts[i].addr), parts[i].out.size()};
    total += parts[i].out.size();
  }
  const ssize_t n =
      ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
  if (n < 0) {
    const int err = errno;
    return detail::sys_fail(err, err == EFAULT ? "addr" : "pid",
                            "process_vm_readv of process " + std::to_string(pid));
  }
  if (static_cast<std::size_t>(n) != total) {
    return detail::sys_fail(EFAULT, "addr",
                            "process_vm_readv of process " + std::to_string(pid) + ": " +
                                std::to_string(n) + " of " + std::to_string(total) + " bytes");
  }
  return {};
}

Result<Fd> open_process_memory(pid_t pid, bool writable) {
  const std::string path = proc_path(pid, "mem");
  const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return sys_fail<Fd>(errno, "pid", "open " + path);
  return Fd(fd);
}

Result<void> pread_memory(int fd, std::uint64_t addr, std::span<std::uint8_t> out) {
  const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(addr));
  if (n != static_cast<ssize_t>(out.size())) {
    const int err = n < 0 ? errno : EFAULT;
    return sys_fail(err, err == EBADF ? "fd" : "addr",
                    "read of " + std::to_string(out.size()) + " bytes at " + hex(addr));
  }
  return {};
}

Result<void> pwrite_memory(int fd, std::uint64_t addr, std::span<const std::uint8_t> data) {
  const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(addr));
  if (n != static_cast<ssize_t>(data.size())) {
    const int err = n < 0 ? errno : EFAULT;
    return sys_fail(err, err == EBADF ? "fd" : "addr",
                    "write of " + std::to_string(data.size()) + " bytes at " + hex(addr));
  }
  return {};
}

}  // namespace hwarb::native

#include "hwarb/linux/os_tables.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <optional>
#include <set>
#include <tuple>

#include "hwarb/linux/proc_maps.h"
#include "sys_error.h"

namespace hwarb::native {
namespace {

using Row = std::vector<std::string>;

std::optional<std::string> read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

// The numeric names in directory `path` (pids, tids, descriptors), ascending; none when the
// directory cannot be read (the process went away, or /proc refuses it).
std::vector<long> numeric_entries(const std::string& path) {
  std::vector<long> out;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return out;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name(entry->d_name);
    long n = 0;
    const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (ec == std::errc() && ptr == name.data() + name.size()) out.push_back(n);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::string user_name(unsigned long uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof buf, &found) == 0 && found) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string group_name(unsigned long gid) {
  group gr{};
  group* found = nullptr;
  char buf[1024];
  if (::getgrgid_r(static_cast<gid_t>(gid), &gr, buf, sizeof buf, &found) == 0 && found) {
    return found->gr_name;
  }
  return std::to_string(gid);
}

std::string proc_path(long pid, std::string_view leaf) {
  return "/proc/" + std::to_string(pid) + "/" + std::string(leaf);
}

// A task's /proc stat line: the command (between the parentheses, which may hold any byte) and
// the fields after it; field(k) is the k-th field of proc(5) (3 = state).
struct Stat {
  std::string comm;
  std::vector<std::string> rest;  // fields 3, 4, ...
  std::string field(std::size_t k) const {
    return k >= 3 && k - 3 < rest.size() ? rest[k - 3] : "";
  }
};

std::optional<Stat> read_stat(const std::string& path) {
  auto text = read_whole(path);
  if (!text) return std::nullopt;
  const std::size_t open = text->find('(');
  const std::size_t close = text->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  Stat st;
  st.comm = text->substr(open + 1, close - open - 1);
  for (std::string_view f : split_fields(std::string_view(*text).substr(close + 1))) {
    st.rest.emplace_back(trim(f));
  }
  return st;
}

// The command of process `pid` (its comm), or the pid itself when it has none to read (it
// exited, or pid 0: "none"), as gdbserver shows it.
std::string command_of(long pid) {
  if (pid > 0) {
    if (auto comm = read_whole(proc_path(pid, "comm"))) return std::string(trim(*comm));
  }
  return std::to_string(pid);
}

// The command line, its arguments joined by spaces; a kernel thread (no command line) shows its
// command in brackets.
std::string command_line(long pid, bool* readable = nullptr) {
  auto text = read_whole(proc_path(pid, "cmdline"));
  if (readable) *readable = text.has_value();
  if (!text) return "";
  while (!text->empty() && text->back() == '\0') text->pop_back();
  if (text->empty()) return "[" + command_of(pid) + "]";
  std::replace(text->begin(), text->end(), '\0', ' ');
  return *text;
}

std::optional<unsigned long> owner_uid(long pid) {
  auto status = read_whole(proc_path(pid, "status"));
  if (!status) return std::nullopt;
  for (std::string_view line : split_lines(*status)) {
    if (!line.starts_with("Uid:")) continue;
    auto f = split_fields(line.substr(4));
    unsigned long uid = 0;
    if (!f.empty() &&
        std::from_chars(f[0].data(), f[0].data() + f[0].size(), uid).ec == std::errc()) {
      return uid;
    }
  }
  return std::nullopt;
}

std::string time_text(std::string_view seconds) {
  long long t = 0;
  std::from_chars(seconds.data(), seconds.data() + seconds.size(), t);
  if (t == 0) return "";
  const std::time_t when = static_cast<std::time_t>(t);
  std::tm tm{};
  ::localtime_r(&when, &tm);
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return std::string(buf, n);
}

std::string join_ids(const std::set<long>& ids) {
  std::string out;
  for (long id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

OsTable processes() {
  OsTable t{"processes", {"pid", "user", "command", "cores"}, {}};
  for (long pid : numeric_entries("/proc")) {
    bool readable = false;
    std::string cmd = command_line(pid, &readable);
    if (!readable) continue;  // gone
    auto uid = owner_uid(pid);
    std::set<long> cores;
    for (long tid : numeric_entries(proc_path(pid, "task"))) {
      auto st = read_stat(proc_path(pid, "task/" + std::to_string(tid) + "/stat"));
      long core = -1;
      if (st)
        std::from_chars(st->field(39).data(), st->field(39).data() + st->field(39).size(), core);
      if (core >= 0) cores.insert(core);
    }
    t.rows.push_back({std::to_string(pid), uid ? user_name(*uid) : "?", cmd, join_ids(cores)});
  }
  return t;
}

OsTable process_groups() {
  OsTable t{"process groups", {"pgid", "leader command", "pid", "command line"}, {}};
  std::vector<std::tuple<long, bool, long, std::string>> members;  // pgid, not leader, pid, cmd
  for (long pid : numeric_entries("/proc")) {
    auto st = read_stat(proc_path(pid, "stat"));
    if (!st) continue;
    long pgid = 0;
    const std::string f = st->field(5);
    std::from_chars(f.data(), f.data() + f.size(), pgid);
    members.emplace_back(pgid, pgid != pid, pid, command_line(pid));
  }
  std::sort(members.begin(), members.end());
  for (const auto& [pgid, not_leader, pid, cmd] : members) {
    t.rows.push_back({std::to_string(pgid), command_of(pgid), std::to_string(pid), cmd});
  }
  return t;
}

OsTable threads() {
  OsTable t{"threads", {"pid", "command", "tid", "core"}, {}};
  for (long pid : numeric_entries("/proc")) {
    const std::string comm = command_of(pid);
    for (long tid : numeric_entries(proc_path(pid, "task"))) {
      auto st = read_stat(proc_path(pid, "task/" + std::to_string(tid) + "/stat"));
      if (!st) continue;
      t.rows.push_back({std::to_string(pid), comm, std::to_string(tid), st->field(39)});
    }
  }
  return t;
}

OsTable files() {
  OsTable t{"files", {"pid", "command", "file descriptor", "name"}, {}};
  for (long pid : numeric_entries("/proc")) {
    const std::vector<long> fds = numeric_entries(proc_path(pid, "fd"));
    if (fds.empty()) continue;
    const std::string comm = command_of(pid);
    for (long fd : fds) {
      auto name = read_link(proc_path(pid, "fd/" + std::to_string(fd)));
      if (!name) continue;  // closed meanwhile
      t.rows.push_back({std::to_string(pid), comm, std::to_string(fd), *name});
    }
  }
  return t;
}

OsTable sockets() {
  OsTable t{"I sockets",
            {"local address", "local port", "remote address", "remote port", "state", "user",
             "family", "protocol"},
            {}};
  struct Source {
    const char* path;
    bool ipv6, stream;
  };
  for (const Source& s :
       {Source{"/proc/net/tcp", false, true}, Source{"/proc/net/udp", false, false},
        Source{"/proc/net/tcp6", true, true}, Source{"/proc/net/udp6", true, false}}) {
    if (auto text = read_whole(s.path)) {
      for (Row& row : parse_inet_sockets(*text, s.ipv6, s.stream)) t.rows.push_back(std::move(row));
    }
  }
  return t;
}

// /proc/sysvipc/{shm,sem,msg}: the fields of each line after the header, by the header's names.
std::vector<std::vector<std::string_view>> ipc_lines(std::string_view text) {
  std::vector<std::vector<std::string_view>> out;
  bool header = true;
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (header) {
      header = false;
      continue;
    }
    if (!f.empty()) out.push_back(std::move(f));
  }
  return out;
}

long number(std::string_view s) {
  long n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

OsTable shared_memory(std::string_view text) {
  OsTable t{"shared memory",
            {"key", "shmid", "permissions", "size", "creator command", "last op. command",
             "num attached", "user", "group", "creator user", "creator group", "last shmat() time",
             "last shmdt() time", "last shmctl() time"},
            {}};
  // key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime ...
  for (const auto& f : ipc_lines(text)) {
    if (f.size() < 14) continue;
    t.rows.push_back({std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3]),
                      command_of(number(f[4])), command_of(number(f[5])), std::string(f[6]),
                      user_name(number(f[7])), group_name(number(f[8])), user_name(number(f[9])),
                      group_name(number(f[10])), time_text(f[11]), time_text(f[12]),
                      time_text(f[13])});
  }
  return t;
}

OsTable semaphores(std::string_view text) {
  OsTable t{"semaphores",
            {"key", "semid", "permissions", "num semaphores", "user", "group", "creator user",
             "creator group", "last semop() time", "last semctl() time"},
            {}};
  // key semid perms nsems uid gid cuid cgid otime ctime
  for (const auto& f : ipc_lines(text)) {
    if (f.size() < 10) continue;
    t.rows.push_back({std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3]),
                      user_name(number(f[4])), group_name(number(f[5])), user_name(number(f[6])),
                      group_name(number(f[7])), time_text(f[8]), time_text(f[9])});
  }
  return t;
}

OsTable message_queues(std::string_view text) {
  OsTable t{"message queues",
            {"key", "msqid", "permissions", "num used bytes", "num messages",
             "last msgsnd() command", "last msgrcv() command", "user", "group", "creator user",
             "creator group", "last msgsnd() time", "last msgrcv() time", "last msgctl() time"},
            {}};
  // key msqid perms cbytes qnum lspid lrpid uid gid cuid cgid stime rtime ctime
  for (const auto& f : ipc_lines(text)) {
    if (f.size() < 14) continue;
    t.rows.push_back({std::string(f[0]), std::string(f[1]), std::string(f[2]), std::string(f[3]),
                      std::string(f[4]), command_of(number(f[5])), command_of(number(f[6])),
                      user_name(number(f[7])), group_name(number(f[8])), user_name(number(f[9])),
                      group_name(number(f[10])), time_text(f[11]), time_text(f[12]),
                      time_text(f[13])});
  }
  return t;
}

OsTable modules(std::string_view text) {
  OsTable t{"modules", {"name", "size", "num uses", "dependencies", "status", "address"}, {}};
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (f.size() < 6) continue;
    Row row;
    for (std::size_t i = 0; i < 6; ++i) row.emplace_back(f[i]);
    t.rows.push_back(std::move(row));
  }
  return t;
}

struct Kind {
  const char* name;
  const char* description;
  const char* title;
};

// Alphabetical, as gdbserver lists them.
constexpr Kind kKinds[] = {
    {"cpus", "Listing of all cpus/cores on the system", "CPUs"},
    {"files", "Listing of all file descriptors", "File descriptors"},
    {"modules", "Listing of all loaded kernel modules", "Kernel modules"},
    {"msg", "Listing of all message queues", "Message queues"},
    {"processes", "Listing of all processes", "Processes"},
    {"procgroups", "Listing of all process groups", "Process groups"},
    {"semaphores", "Listing of all semaphores", "Semaphores"},
    {"shm", "Listing of all shared-memory regions", "Shared-memory regions"},
    {"sockets", "Listing of all internet-domain sockets", "Sockets"},
    {"threads", "Listing of all threads", "Threads"},
};

}  // namespace

std::vector<std::vector<std::string>> parse_inet_sockets(std::string_view text, bool ipv6,
                                                         bool stream) {
  static constexpr const char* kStates[] = {"",           "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
                                            "FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
                                            "CLOSE_WAIT", "LAST_ACK",    "LISTEN",    "CLOSING"};
  // "ADDR:PORT", ADDR the address's 32-bit words in hex as the machine stores them.
  auto endpoint = [ipv6](std::string_view s, std::string& addr, std::string& port) {
    const std::size_t colon = s.find(':');
    const std::size_t digits = ipv6 ? 32 : 8;
    if (colon != digits) return false;
    std::uint32_t words[4] = {};
    for (std::size_t w = 0; w < digits / 8; ++w) {
      const std::string_view hex = s.substr(w * 8, 8);
      if (std::from_chars(hex.data(), hex.data() + 8, words[w], 16).ptr != hex.data() + 8) {
        return false;
      }
    }
    unsigned p = 0;
    const std::string_view ptext = s.substr(colon + 1);
    if (std::from_chars(ptext.data(), ptext.data() + ptext.size(), p, 16).ec != std::errc()) {
      return false;
    }
    char buf[INET6_ADDRSTRLEN] = {};
    if (ipv6) {
      in6_addr a{};
      std::memcpy(&a, words, sizeof a);
      ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
    } else {
      in_addr a{};
      a.s_addr = words[0];
      ::inet_ntop(AF_INET, &a, buf, sizeof buf);
    }
    addr = buf;
    port = std::to_string(p);
    return true;
  };
  std::vector<std::vector<std::string>> rows;
  for (std::string_view line : split_lines(text)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
    const auto f = split_fields(line);
    if (f.size() < 8 || f[0].empty() || f[0].back() != ':') continue;
    Row row(8);
    if (!endpoint(f[1], row[0], row[1]) || !endpoint(f[2], row[2], row[3])) continue;
    unsigned state = 0;
    std::from_chars(f[3].data(), f[3].data() + f[3].size(), state, 16);
    row[4] = state < std::size(kStates) ? kStates[state] : std::to_string(state);
    row[5] = user_name(static_cast<unsigned long>(number(f[7])));
    row[6] = ipv6 ? "INET6" : "INET";
    row[7] = stream ? "STREAM" : "DGRAM";
    rows.push_back(std::move(row));
  }
  return rows;
}

OsTable parse_cpuinfo(std::string_view text) {
  OsTable t{"cpus", {}, {}};
  Row row;
  bool first = true;
  auto end_block = [&] {
    if (row.empty()) return;
    row.resize(t.columns.size());
    t.rows.push_back(std::move(row));
    row.clear();
    first = false;
  };
  for (std::string_view line : split_lines(text)) {
    const std::size_t colon = line.find(':');
    if (trim(line).empty() || colon == std::string_view::npos) {
      end_block();
      continue;
    }
    const std::string key(trim(line.substr(0, colon)));
    const std::string value(trim(line.substr(colon + 1)));
    if (first) {
      t.columns.push_back(key);
    } else if (row.size() >= t.columns.size()) {
      continue;  // a key the first processor does not have
    }
    row.push_back(value);
  }
  end_block();
  return t;
}

Result<OsTable> read_os_table(std::string_view name) {
  if (name.empty()) {
    OsTable t{"types", {"Type", "Description", "Title"}, {}};
    for (const Kind& k : kKinds) t.rows.push_back({k.name, k.description, k.title});
    return t;
  }
  auto file = [](const char* path) { return read_whole(path).value_or(std::string()); };
  if (name == "processes") return processes();
  if (name == "procgroups") return process_groups();
  if (name == "threads") return threads();
  if (name == "files") return files();
  if (name == "sockets") return sockets();
  if (name == "shm") return shared_memory(file("/proc/sysvipc/shm"));
  if (name == "semaphores") return semaphores(file("/proc/sysvipc/sem"));
  if (name == "msg") return message_queues(file("/proc/sysvipc/msg"));
  if (name == "modules") return modules(file("/proc/modules"));
  if (name == "cpus") return parse_cpuinfo(file("/proc/cpuinfo"));
  return detail::sys_fail<OsTable>(ENOENT, "annex", "no table named " + std::string(name));
}

}  // namespace hwarb::native

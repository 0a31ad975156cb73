#include "hwarb/linux/symbols.h"

#include <fcntl.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hwarb/linux/proc_maps.h"

namespace hwarb::native {
namespace {

// The layout of tests/programs/symbols.c's globals.
struct rec {
  int a;
  char pad[3];
  long b;
};

const std::string kProgram = std::string(HWARB_PROGRAMS_DIR) + "/prog_symbols";
const std::string kTlsProgram = std::string(HWARB_PROGRAMS_DIR) + "/prog_tls_counter";

// tests/programs/symbols.c.
std::string program_source() {
  // A path, not string + literal: g++ 12 at -O2 warns (-Warray-bounds) on that one wrongly.
  return (std::filesystem::path(HWARB_PROGRAMS_SOURCE_DIR) / "symbols.c").string();
}

// The 1-based line of the source holding `marker`, 0 if none.
int marker_line(const std::string& marker) {
  std::ifstream in(program_source());
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find("marker: " + marker) != std::string::npos) return n;
  }
  return 0;
}

std::optional<Mapping> mapping_of(pid_t pid, std::uint64_t addr) {
  auto maps = read_maps(pid);
  if (!maps) return std::nullopt;
  return find_mapping(*maps, addr);
}

// The path of the C library mapped in `pid`, "" if it is not mapped (yet).
std::string libc_path(pid_t pid) {
  auto maps = read_maps(pid);
  if (!maps) return {};
  for (const Mapping& m : *maps) {
    if (m.path.find("/libc.so") != std::string::npos) return m.path;
  }
  return {};
}

// prog_symbols in "wait" mode, killed and reaped when destroyed.
class RunningProgram {
 public:
  RunningProgram() {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, STDOUT_FILENO);
      ::execl(kProgram.c_str(), kProgram.c_str(), "wait", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~RunningProgram() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  RunningProgram(const RunningProgram&) = delete;
  RunningProgram& operator=(const RunningProgram&) = delete;

  pid_t pid() const { return pid_; }

  // Waits (up to 10 s) until the C library is mapped and the program runs its own code.
  bool wait_for_libc() const {
    for (int i = 0; i < 1000; ++i) {
      auto exe = executable_path(pid_);
      if (exe && *exe == kProgram && !libc_path(pid_).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
};

TEST(SymbolTableFile, FindsGlobalsAndFunctionsWithTheirSizes) {
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();

  struct Case {
    const char* name;
    std::uint64_t size;
    bool function;
  };
  for (const Case& c :
       {Case{"counter", sizeof(int), false}, Case{"count", sizeof(int), false},
        Case{"record", sizeof(rec), false}, Case{"table", sizeof(int[16]), false}}) {
    auto sym = table->find(c.name);
    ASSERT_TRUE(sym) << sym.error().to_string();
    EXPECT_EQ(sym->name, c.name);
    EXPECT_EQ(sym->size, c.size) << c.name;
    EXPECT_EQ(sym->function, c.function) << c.name;
    EXPECT_NE(sym->address, 0u) << c.name;
    EXPECT_EQ(sym->module, kProgram);
  }
  for (const char* name : {"bump", "main"}) {
    auto sym = table->find(name);
    ASSERT_TRUE(sym) << sym.error().to_string();
    EXPECT_TRUE(sym->function) << name;
    EXPECT_GT(sym->size, 0u) << name;
  }
  ASSERT_TRUE(table->entry());
  auto start = table->find("_start");
  ASSERT_TRUE(start) << start.error().to_string();
  EXPECT_EQ(*table->entry(), start->address);
}

TEST(SymbolTableFile, BiasMovesEveryAddress) {
  constexpr std::uint64_t kBias = 0x5555'0000'0000;
  auto plain = SymbolTable::load_file(kProgram);
  auto moved = SymbolTable::load_file(kProgram, kBias);
  ASSERT_TRUE(plain) << plain.error().to_string();
  ASSERT_TRUE(moved) << moved.error().to_string();
  for (const char* name : {"counter", "record", "bump", "main"}) {
    auto a = plain->find(name);
    auto b = moved->find(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(b->address, a->address + kBias) << name;
  }
  ASSERT_TRUE(plain->entry() && moved->entry());
  EXPECT_EQ(*moved->entry(), *plain->entry() + kBias);
  // The ELF header at the start of the module is in no symbol.
  EXPECT_EQ(moved->describe(kBias), "[prog_symbols]+0x0");
  EXPECT_EQ(moved->describe(kBias + 0x10), "[prog_symbols]+0x10");
  Location loc = moved->locate(kBias + 0x10);
  EXPECT_FALSE(loc.symbol);
  EXPECT_EQ(loc.module, kProgram);
  EXPECT_EQ(loc.module_offset, 0x10u);
}

// The stubs through which the executable calls its shared libraries: named NAME@plt (as perf,
// objdump and gdb name them), 16 bytes each, one per imported function, none of them _init.
TEST(SymbolTableFile, NamesPltStubs) {
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();
  std::vector<std::uint64_t> stubs;
  for (const char* name : {"puts", "strcmp", "fflush", "sleep"}) {
    const std::string plt = std::string(name) + "@plt";
    auto sym = table->find(plt);
    ASSERT_TRUE(sym) << sym.error().to_string();
    EXPECT_EQ(sym->name, plt);
    EXPECT_TRUE(sym->function) << plt;
    EXPECT_EQ(sym->size, 16u) << plt;
    EXPECT_EQ(sym->module, kProgram);
    EXPECT_EQ(table->describe(sym->address + 4), plt + "+0x4");
    Location loc = table->locate(sym->address + 15);
    ASSERT_TRUE(loc.symbol) << plt;
    EXPECT_EQ(loc.symbol->name, plt);
    stubs.push_back(sym->address);
  }
  std::sort(stubs.begin(), stubs.end());
  for (std::size_t i = 1; i < stubs.size(); ++i) EXPECT_EQ(stubs[i] % 16, stubs[0] % 16);
  EXPECT_EQ(std::adjacent_find(stubs.begin(), stubs.end()), stubs.end())
      << "stubs share an address";
  // Undefined imports stay unknown under their plain name: "puts" is the library's.
  EXPECT_FALSE(table->find("puts"));
  // The stubs' section starts with the resolver trampoline, which imports nothing.
  const Location first = table->locate(stubs.front() - 16);
  EXPECT_FALSE(first.symbol && first.symbol->name.ends_with("@plt")) << first.symbol->name;
}

TEST(SymbolTableFile, LocatesInsideDataObjects) {
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();
  auto record = table->find("record");
  ASSERT_TRUE(record);
  const std::uint64_t b = record->address + offsetof(rec, b);
  Location loc = table->locate(b);
  ASSERT_TRUE(loc.symbol);
  EXPECT_EQ(loc.symbol->name, "record");
  EXPECT_EQ(loc.offset, offsetof(rec, b));
  EXPECT_EQ(loc.file, "");
  EXPECT_EQ(table->describe(b), "record+0x" + std::to_string(offsetof(rec, b)));
  auto tab = table->find("table");
  ASSERT_TRUE(tab);
  EXPECT_EQ(table->describe(tab->address + 60), "table+0x3c");
}

TEST(SymbolTableFile, DescribesCodeWithFileAndLine) {
  const int begin = marker_line("bump-begin");
  const int end = marker_line("bump-end");
  ASSERT_GT(begin, 0);
  ASSERT_GT(end, begin);
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();
  auto bump = table->find("bump");
  ASSERT_TRUE(bump);
  // The entry address has rows for the opening line and the first statement; either is right.
  Location first = table->locate(bump->address);
  EXPECT_GE(first.line, begin);
  EXPECT_LE(first.line, begin + 1);
  EXPECT_EQ(table->describe(bump->address),
            "bump+0x0 (symbols.c:" + std::to_string(first.line) + ")");
  Location loc = table->locate(bump->address + 3);
  ASSERT_TRUE(loc.symbol);
  EXPECT_EQ(loc.symbol->name, "bump");
  EXPECT_EQ(loc.offset, 3u);
  EXPECT_EQ(loc.file, "symbols.c");
  EXPECT_GE(loc.line, begin);
  EXPECT_LE(loc.line, end);
  EXPECT_EQ(table->describe(bump->address + 3),
            "bump+0x3 (symbols.c:" + std::to_string(loc.line) + ")");
}

TEST(SymbolTableFile, UnknownNameSuggestsNearNames) {
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();
  struct Case {
    const char* name;
    const char* message;
  };
  for (const Case& c : {
           Case{"countr", "symbol: unknown symbol 'countr'; did you mean: count, counter"},
           Case{"cuont", "symbol: unknown symbol 'cuont'; did you mean: count"},
           Case{"recrod", "symbol: unknown symbol 'recrod'; did you mean: record"},
           Case{"zzzzzzzzzz", "symbol: unknown symbol 'zzzzzzzzzz'"},
           Case{"", "symbol: unknown symbol ''"},
       }) {
    auto sym = table->find(c.name);
    ASSERT_FALSE(sym) << c.name;
    EXPECT_EQ(sym.error().code(), ErrorCode::kNoEnt);
    EXPECT_EQ(sym.error().message(), c.message);
  }
  EXPECT_EQ(table->near("bmup", 3), std::vector<std::string>{"bump"});
  EXPECT_EQ(table->near("countr", 1), std::vector<std::string>{"count"});
}

TEST(SymbolTableFile, MovedTableKeepsWorking) {
  auto table = SymbolTable::load_file(kProgram);
  ASSERT_TRUE(table) << table.error().to_string();
  SymbolTable moved(std::move(*table));
  auto bump = moved.find("bump");
  ASSERT_TRUE(bump);
  EXPECT_TRUE(moved.describe(bump->address).starts_with("bump+0x0 (symbols.c:"));
}

TEST(SymbolTableFile, RefusesMissingAndNonElfFiles) {
  auto missing = SymbolTable::load_file(kProgram + ".missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(missing.error().message().starts_with("file: ")) << missing.error().to_string();

  auto text = SymbolTable::load_file(program_source());
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code(), ErrorCode::kInval);
  EXPECT_EQ(text.error().message(), "file: " + program_source() + " is not an ELF file");
}

TEST(SymbolTableFile, LibcLoadsQuicklyAndIgnoresSymbolVersions) {
  const std::string libc = libc_path(::getpid());
  ASSERT_FALSE(libc.empty()) << "this test program has no C library mapped";
  const auto t0 = std::chrono::steady_clock::now();
  auto table = SymbolTable::load_file(libc);
  ASSERT_TRUE(table) << table.error().to_string();
  auto malloc_sym = table->find("malloc");
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  std::printf("libc symbols (%s) loaded in %lld ms\n", libc.c_str(), static_cast<long long>(ms));
  // A generous bound (sanitizers, a loaded machine): what it catches is a pathological load, such
  // as a network look-up of debug information.
  EXPECT_LT(ms, 2000);
  ASSERT_TRUE(malloc_sym) << malloc_sym.error().to_string();
  EXPECT_TRUE(malloc_sym->function);
  EXPECT_GT(malloc_sym->size, 0u);
  auto versioned = table->find("malloc@@GLIBC_2.2.5");
  ASSERT_TRUE(versioned) << versioned.error().to_string();
  EXPECT_EQ(versioned->address, malloc_sym->address);
  EXPECT_EQ(versioned->name, "malloc");
  // A shared library's aliases: the address of malloc is described as malloc.
  EXPECT_EQ(table->describe(malloc_sym->address).substr(0, 9), "malloc+0x");
}

// A thread-local is no address: find refuses it, find_thread_local gives its offset in its
// module's block (the executable's, or libc's errno).
TEST(SymbolTableFile, FindsThreadLocalsByTheirOffsetInTheirModule) {
  auto table = SymbolTable::load_file(kTlsProgram, 0x1000);
  ASSERT_TRUE(table) << table.error().to_string();
  auto var = table->find_thread_local("tls_counter");
  ASSERT_TRUE(var) << var.error().to_string();
  EXPECT_EQ(var->name, "tls_counter");
  EXPECT_EQ(var->size, 4u);
  EXPECT_EQ(var->offset, 0u);  // its only thread-local
  EXPECT_EQ(var->module, kTlsProgram);
  EXPECT_EQ(var->bias, 0x1000u);
  EXPECT_TRUE(var->executable);
  EXPECT_EQ(table->find("tls_counter").error().code(), ErrorCode::kOpNotSupp);
  auto global = table->find_thread_local("main");
  ASSERT_FALSE(global);
  EXPECT_EQ(global.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(global.error().message(), "symbol: 'main' is not a thread-local variable");

  auto libc = SymbolTable::load_file(libc_path(::getpid()));
  ASSERT_TRUE(libc) << libc.error().to_string();
  auto err = libc->find_thread_local("errno");
  ASSERT_TRUE(err) << err.error().to_string();
  EXPECT_EQ(err->size, sizeof(int));
}

TEST(SymbolTableProcess, ResolvesRunTimeAddressesOfARunningProgram) {
  RunningProgram prog;
  ASSERT_GT(prog.pid(), 0);
  ASSERT_TRUE(prog.wait_for_libc()) << "prog_symbols never mapped its C library";
  auto table = SymbolTable::load(prog.pid());
  ASSERT_TRUE(table) << table.error().to_string();

  auto counter = table->find("counter");
  ASSERT_TRUE(counter) << counter.error().to_string();
  EXPECT_EQ(counter->module, kProgram);
  auto data = mapping_of(prog.pid(), counter->address);
  ASSERT_TRUE(data) << "counter at " << counter->address << " is not mapped";
  EXPECT_TRUE(data->write);
  EXPECT_EQ(data->path, kProgram);

  auto bump = table->find("bump");
  ASSERT_TRUE(bump) << bump.error().to_string();
  auto code = mapping_of(prog.pid(), bump->address);
  ASSERT_TRUE(code);
  EXPECT_TRUE(code->exec);
  EXPECT_EQ(code->path, kProgram);

  ASSERT_TRUE(table->entry());
  auto entry = mapping_of(prog.pid(), *table->entry());
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->exec);
  EXPECT_EQ(entry->path, kProgram);

  auto malloc_sym = table->find("malloc");
  ASSERT_TRUE(malloc_sym) << malloc_sym.error().to_string();
  EXPECT_EQ(malloc_sym->module, libc_path(prog.pid()));
  auto libc_code = mapping_of(prog.pid(), malloc_sym->address);
  ASSERT_TRUE(libc_code);
  EXPECT_TRUE(libc_code->exec);
  EXPECT_EQ(libc_code->path, malloc_sym->module);

  const int begin = marker_line("bump-begin");
  const int end = marker_line("bump-end");
  ASSERT_GT(begin, 0);
  Location loc = table->locate(bump->address + 3);
  EXPECT_EQ(loc.file, "symbols.c");
  EXPECT_GE(loc.line, begin);
  EXPECT_LE(loc.line, end);
  EXPECT_EQ(table->describe(bump->address + 3),
            "bump+0x3 (symbols.c:" + std::to_string(loc.line) + ")");

  auto typo = table->find("countr");
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().code(), ErrorCode::kNoEnt);
  EXPECT_NE(typo.error().message().find("did you mean: "), std::string::npos);
  EXPECT_NE(typo.error().message().find("counter"), std::string::npos) << typo.error().message();

  // Below mmap_min_addr: never mapped, in no module.
  Location nowhere = table->locate(0x1000);
  EXPECT_FALSE(nowhere.symbol);
  EXPECT_EQ(nowhere.module, "");
  EXPECT_EQ(table->describe(0x1000), "0x1000");
}

TEST(SymbolTableProcess, GoneProcessNamesThePid) {
  constexpr pid_t kNoSuchPid = 4194304 + 17;  // above PID_MAX_LIMIT
  auto table = SymbolTable::load(kNoSuchPid);
  ASSERT_FALSE(table);
  EXPECT_EQ(table.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(table.error().message().starts_with("pid: ")) << table.error().to_string();
}

TEST(SymbolTableProcess, OwnProcessFindsItsLibraries) {
  auto table = SymbolTable::load(::getpid());
  ASSERT_TRUE(table) << table.error().to_string();
  // A C library function no sanitizer intercepts, so its address is the library's own.
  auto version = table->find("gnu_get_libc_version");
  ASSERT_TRUE(version) << version.error().to_string();
  EXPECT_EQ(version->module, libc_path(::getpid()));
  EXPECT_EQ(reinterpret_cast<std::uint64_t>(&::gnu_get_libc_version), version->address);
  EXPECT_TRUE(table->describe(version->address + 1).starts_with("gnu_get_libc_version+0x1"));
}

}  // namespace
}  // namespace hwarb::native

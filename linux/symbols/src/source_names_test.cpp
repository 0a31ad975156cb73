// SymbolTable's C++ names and source-level objects on tests/programs/names.cpp (prog_names):
// demangled names, anonymous namespaces, templates, members and elements through DWARF, a
// pointer read from a running process, and the errors that say what a name is.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "hwarb/linux/symbols.h"

namespace hwarb::native {
namespace {

// The layout of tests/programs/names.cpp's types.
struct Limit {
  int min;
  int max;
};
struct Config {
  char name[16];
  Limit limits[4];
  long flags;
};
struct Shape {
  double ratio;
  bool on;
  int mode;
  short delta;
};

const std::string kProgram = std::string(HWARB_PROGRAMS_DIR) + "/prog_names";

// The 1-based line of names.cpp that holds `text`, 0 if none.
int line_of(const std::string& text) {
  // A path, not string + literal: g++ 12 at -O2 warns (-Warray-bounds) on that one wrongly.
  std::ifstream in(std::filesystem::path(HWARB_PROGRAMS_SOURCE_DIR) / "names.cpp");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(text) != std::string::npos) return n;
  }
  return 0;
}

// Reads nothing: the file's tables have no process behind them.
const MemoryReader kNoMemory = [](std::uint64_t, std::span<std::uint8_t>) -> Result<void> {
  return make_error(ErrorCode::kFault, "no process");
};

class SourceNames : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = SymbolTable::load_file(kProgram);
    ASSERT_TRUE(t) << t.error().to_string();
    table_.emplace(std::move(*t));
  }
  std::uint64_t address(const char* name) {
    auto sym = table_->find(name);
    EXPECT_TRUE(sym) << name << ": " << (sym ? "" : sym.error().to_string());
    return sym ? sym->address : 0;
  }
  SourceObject object(const char* text) {
    auto o = table_->resolve(text, kNoMemory);
    EXPECT_TRUE(o) << text << ": " << (o ? "" : o.error().to_string());
    return o ? *o : SourceObject{};
  }
  Error error(const char* text) {
    auto o = table_->resolve(text, kNoMemory);
    EXPECT_FALSE(o) << text << " resolved to " << (o ? o->address : 0);
    return o ? Error(ErrorCode::kIo, "resolved") : o.error();
  }
  std::optional<SymbolTable> table_;
};

TEST_F(SourceNames, FindsCxxNamesDemangledAndMangled) {
  auto total = table_->find("ns::Counter::total");
  ASSERT_TRUE(total) << total.error().to_string();
  EXPECT_EQ(total->name, "ns::Counter::total");
  EXPECT_EQ(total->linkage_name, "_ZN2ns7Counter5totalE");
  EXPECT_EQ(total->size, sizeof(long));
  EXPECT_FALSE(total->function);
  auto mangled = table_->find("_ZN2ns7Counter5totalE");
  ASSERT_TRUE(mangled) << mangled.error().to_string();
  EXPECT_EQ(mangled->address, total->address);
  EXPECT_EQ(mangled->name, "ns::Counter::total");

  // A template's static member as c++filt writes it, spaces aside.
  const std::uint64_t count = address("ns::Box<int>::count");
  EXPECT_NE(count, 0u);
  EXPECT_EQ(address("ns::Box< int >::count"), count);
  // An anonymous namespace: spelt out, or left out while the name is unique.
  const std::uint64_t hidden = address("(anonymous namespace)::hidden");
  EXPECT_NE(hidden, 0u);
  EXPECT_EQ(address("hidden"), hidden);
  // A function with or without its parameter list; plain C names as before.
  auto bump = table_->find("ns::Counter::bump()");
  ASSERT_TRUE(bump) << bump.error().to_string();
  EXPECT_TRUE(bump->function);
  EXPECT_EQ(address("ns::Counter::bump"), bump->address);
  EXPECT_EQ(address("_ZN2ns7Counter4bumpEv"), bump->address);
  EXPECT_NE(address("main"), 0u);
  EXPECT_NE(address("g_matrix"), 0u);
}

TEST_F(SourceNames, DescribesAddressesByDemangledNames) {
  const std::uint64_t bump = address("ns::Counter::bump");
  EXPECT_TRUE(table_->describe(bump + 1).starts_with("ns::Counter::bump()+0x1 (names.cpp:"))
      << table_->describe(bump + 1);
  const Location loc = table_->locate(bump);
  ASSERT_TRUE(loc.symbol);
  EXPECT_EQ(loc.symbol->linkage_name, "_ZN2ns7Counter4bumpEv");
}

TEST_F(SourceNames, ResolvesMembersAndElementsThroughDwarf) {
  const std::uint64_t cfg = address("ns::g_cfg");
  SourceObject max = object("ns::g_cfg.limits[2].max");
  EXPECT_EQ(max.address, cfg + offsetof(Config, limits) + 2 * sizeof(Limit) + offsetof(Limit, max));
  EXPECT_EQ(max.size, sizeof(int));
  EXPECT_EQ(max.type.kind, ValueKind::kSigned);
  EXPECT_EQ(max.type.name, "int");
  EXPECT_EQ(max.symbol.name, "ns::g_cfg");
  EXPECT_TRUE(max.notes.empty());

  SourceObject limits = object("ns::g_cfg.limits");
  EXPECT_EQ(limits.address, cfg + offsetof(Config, limits));
  EXPECT_EQ(limits.size, sizeof(Limit[4]));
  EXPECT_EQ(limits.type.name, "Limit[4]");
  SourceObject limit = object("ns::g_cfg.limits[1]");
  EXPECT_EQ(limit.size, sizeof(Limit));
  EXPECT_EQ(limit.address, cfg + offsetof(Config, limits) + sizeof(Limit));
  EXPECT_EQ(object("ns::g_cfg.limits[0x3].min").address, cfg + offsetof(Config, limits) + 24);
  SourceObject name = object("ns::g_cfg.name");
  EXPECT_EQ(name.size, 16u);
  EXPECT_EQ(name.type.kind, ValueKind::kCharArray);
  SourceObject whole = object("ns::g_cfg");
  EXPECT_EQ(whole.address, cfg);
  EXPECT_EQ(whole.size, sizeof(Config));

  // Two dimensions: a row, an element.
  const std::uint64_t matrix = address("g_matrix");
  SourceObject row = object("g_matrix[1]");
  EXPECT_EQ(row.address, matrix + 4 * sizeof(int));
  EXPECT_EQ(row.size, 4 * sizeof(int));
  EXPECT_EQ(row.type.name, "int[4]");
  SourceObject cell = object("g_matrix[1][2]");
  EXPECT_EQ(cell.address, matrix + 6 * sizeof(int));
  EXPECT_EQ(cell.size, sizeof(int));

  // A class object's member; the value kinds.
  EXPECT_EQ(object("g_counter.value").address, address("g_counter"));
  const std::uint64_t shape = address("g_shape");
  SourceObject on = object("g_shape.on");
  EXPECT_EQ(on.address, shape + offsetof(Shape, on));
  EXPECT_EQ(on.type.kind, ValueKind::kBool);
  EXPECT_EQ(object("g_shape.ratio").type.kind, ValueKind::kFloat);
  SourceObject delta = object("g_shape.delta");
  EXPECT_EQ(delta.size, sizeof(short));
  EXPECT_EQ(delta.type.kind, ValueKind::kSigned);
  SourceObject mode = object("g_shape.mode");
  EXPECT_EQ(mode.address, shape + offsetof(Shape, mode));
  EXPECT_EQ(mode.type.kind, ValueKind::kEnum);
  ASSERT_EQ(mode.type.enumerators.size(), 3u);
  EXPECT_EQ(mode.type.enumerators[2], (std::pair<std::int64_t, std::string>{2, "kAuto"}));
  EXPECT_EQ(object("g_cfg_ptr").type.kind, ValueKind::kPointer);
  EXPECT_EQ(object("ns::Counter::total").type.name, "long int");
}

TEST_F(SourceNames, ErrorsSayWhatTheNameIs) {
  Error e = error("ns::g_cfg.limits[2].maxx");
  EXPECT_EQ(e.code(), ErrorCode::kNoEnt);
  EXPECT_EQ(e.message(),
            "member: 'ns::g_cfg.limits[2]' (Limit) has no member 'maxx'; did you mean: max");
  e = error("ns::g_cfg.limitz[1]");
  EXPECT_EQ(e.code(), ErrorCode::kNoEnt);
  EXPECT_NE(e.message().find("did you mean: limits"), std::string::npos) << e.message();
  e = error("g_shape.size");
  EXPECT_NE(e.message().find("; its members: delta, mode, on, ratio"), std::string::npos)
      << e.message();
  e = error("ns::g_cfg.limits[4].max");
  EXPECT_EQ(e.code(), ErrorCode::kRange);
  EXPECT_EQ(e.message(), "index: 4 is past the end of 'ns::g_cfg.limits' (Limit[4]: 0 to 3)");
  e = error("g_matrix[1][4]");
  EXPECT_EQ(e.code(), ErrorCode::kRange);
  e = error("ns::g_cfg.flags.x");
  EXPECT_EQ(e.code(), ErrorCode::kInval);
  EXPECT_NE(e.message().find("'ns::g_cfg.flags' is a long int, not a struct"), std::string::npos)
      << e.message();
  e = error("ns::g_cfg.flags[1]");
  EXPECT_EQ(e.code(), ErrorCode::kInval);
  e = error("ns::g_cfg.limits[x]");
  EXPECT_EQ(e.code(), ErrorCode::kInval);
  e = error("g_counter.total");
  EXPECT_EQ(e.code(), ErrorCode::kInval);
  EXPECT_EQ(e.message(),
            "member: 'total' is a static member of Counter, not in 'g_counter': watch it as "
            "ns::Counter::total");
  e = error("ns::Counter::totl");
  EXPECT_EQ(e.code(), ErrorCode::kNoEnt);
  EXPECT_NE(e.message().find("did you mean: ns::Counter::total"), std::string::npos) << e.message();

  // Two `twin`s that differ only by where their anonymous namespace is.
  e = error("inner::twin");
  EXPECT_EQ(e.code(), ErrorCode::kInval);
  EXPECT_NE(e.message().find("'inner::twin' is ambiguous: it names "), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("(anonymous namespace)::inner::twin"), std::string::npos);
  EXPECT_NE(e.message().find("inner::(anonymous namespace)::twin"), std::string::npos);
  EXPECT_NE(address("(anonymous namespace)::inner::twin"),
            address("inner::(anonymous namespace)::twin"));

  e = error("t_local");
  EXPECT_EQ(e.code(), ErrorCode::kOpNotSupp);
  EXPECT_NE(e.message().find("thread-local"), std::string::npos) << e.message();
  // A misspelt thread-local is offered with what it is.
  e = error("t_lokal");
  EXPECT_EQ(e.code(), ErrorCode::kNoEnt);
  EXPECT_NE(e.message().find("did you mean: t_local (thread-local)"), std::string::npos)
      << e.message();
  e = error("local_rounds");
  EXPECT_EQ(e.code(), ErrorCode::kNoEnt);
  const std::string where = "is a local variable of main (names.cpp:" +
                            std::to_string(line_of("volatile int local_rounds")) + ")";
  EXPECT_NE(e.message().find(where), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("hwarb gdbserver"), std::string::npos) << e.message();
  // A pointer on the path needs the process.
  e = error("g_cfg_ptr->flags");
  EXPECT_EQ(e.code(), ErrorCode::kFault);
}

// prog_names waiting for SIGUSR1 (its globals relocated): a pointer read from it.
TEST(SourceNamesProcess, FollowsAPointerReadFromTheProcess) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::execl(kProgram.c_str(), kProgram.c_str(), "1", "wait", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  char ready[6] = {};
  ASSERT_EQ(::read(out[0], ready, 5), 5);
  EXPECT_STREQ(ready, "ready");
  auto table = SymbolTable::load(pid);
  ASSERT_TRUE(table) << table.error().to_string();
  const std::string mem = "/proc/" + std::to_string(pid) + "/mem";
  const MemoryReader read = [&](std::uint64_t addr, std::span<std::uint8_t> bytes) -> Result<void> {
    const int fd = ::open(mem.c_str(), O_RDONLY);
    if (fd < 0) return make_error(from_errno(errno), mem);
    const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(addr));
    ::close(fd);
    if (n != static_cast<ssize_t>(bytes.size())) return make_error(ErrorCode::kIo, mem);
    return {};
  };
  auto direct = table->resolve("ns::g_cfg.limits[2].max", read);
  auto through = table->resolve("g_cfg_ptr->limits[2].max", read);
  auto star = table->resolve("(*g_cfg_ptr).limits[2].max", read);
  auto indexed = table->resolve("g_cfg_ptr[0].limits[2].max", read);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(out[0]);
  ASSERT_TRUE(direct) << direct.error().to_string();
  for (auto* r : {&through, &star, &indexed}) {
    ASSERT_TRUE(*r) << r->error().to_string();
    EXPECT_EQ((*r)->address, direct->address);
    EXPECT_EQ((*r)->size, sizeof(int));
    ASSERT_EQ((*r)->notes.size(), 1u);
    EXPECT_NE((*r)->notes[0].find("'g_cfg_ptr' (Config*) was read once"), std::string::npos)
        << (*r)->notes[0];
  }
}

}  // namespace
}  // namespace hwarb::native

// Tests of how `hwarb gdbserver` starts programs as gdbserver does: the shell command's escaping
// (pure), and spawn_program through a real shell and without one.
#include "hwarb/linux/gdb_server.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwarb/linux/proc_maps.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

TEST(ShellCommand, EscapesWhatAShellWouldExpandAndQuotesNewlines) {
  EXPECT_EQ(shell_command({"/bin/echo"}), "exec /bin/echo");
  EXPECT_EQ(shell_command({"/bin/echo", "a b", "$HOME", "*.c", "", "x\ny", "it's", "a\\b"}),
            "exec /bin/echo a\\ b \\$HOME \\*.c '' x'\n'y it\\'s a\\\\b");
  EXPECT_EQ(shell_command({"p", ">out", "|", ";", "`id`", "~", "#c"}),
            "exec p \\>out \\| \\; \\`id\\` \\~ \\#c");
}

// The program, not the shell, is what stops at its first instruction; its arguments arrive as
// given (the shell expanded nothing), and the shell's own exec is not seen.
TEST(SpawnProgram, ThroughTheShellTheProgramStopsAtItsOwnExec) {
  auto inf = spawn_program({}, {"/bin/echo", "$HOME", "a  b"}, {}, "/bin/sh");
  if (!inf && testing::refused(inf.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", inf.error());
  }
  ASSERT_TRUE(inf) << inf.error().to_string();
  auto exe = executable_path(inf->pid());
  ASSERT_TRUE(exe) << exe.error().to_string();
  EXPECT_EQ(*exe, "/usr/bin/echo");
  auto cmdline = read_proc_file(inf->pid(), "cmdline");
  ASSERT_TRUE(cmdline) << cmdline.error().to_string();
  EXPECT_EQ(*cmdline, std::string("/bin/echo\0$HOME\0a  b\0", 21));
}

// A program the shell cannot find: the shell's exit status, as gdbserver reports it.
TEST(SpawnProgram, AProgramTheShellCannotFindIsItsExitDuringStartup) {
  auto inf = spawn_program({}, {"/nonexistent-hwarb-program"}, {}, "/bin/sh");
  if (!inf && testing::refused(inf.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", inf.error());
  }
  ASSERT_FALSE(inf);
  EXPECT_EQ(inf.error().code(), ErrorCode::kChild);
  EXPECT_EQ(inf.error().message(), "during startup program exited with code 127");
}

// Without a shell, the program is spawned itself (its missing file is the spawn's own error).
TEST(SpawnProgram, WithoutAShellAMissingProgramIsEnoent) {
  auto inf = spawn_program({}, {"/nonexistent-hwarb-program"}, {});
  ASSERT_FALSE(inf);
  EXPECT_EQ(inf.error().code(), ErrorCode::kNoEnt) << inf.error().to_string();
}

}  // namespace
}  // namespace hwarb::native

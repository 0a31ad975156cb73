#include "hwarb/linux/trap_parachute.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

Result<KernelSigaction> trap_action(Inferior& inf) {
  return inject_sigaction(inf, inf.pid(), SIGTRAP, nullptr);
}

TEST(TrapParachute, GoesUpOverTheDefaultActionAndDownToIt) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("spin")}), out);
  TrapParachute parachute;
  auto raised = parachute.raise(*inf, inf->pid());
  ASSERT_TRUE(raised) << raised.error().to_string();
  ASSERT_TRUE(*raised);
  EXPECT_TRUE(parachute.up(inf->pid()));
  auto during = trap_action(*inf);
  ASSERT_TRUE(during);
  EXPECT_NE(during->handler, kSigDflHandler);
  EXPECT_NE(during->restorer, 0U);
  const std::vector<RestoreSignals> plan = parachute.plan();
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].process, inf->pid());
  EXPECT_EQ(plan[0].signals, signal_bit(SIGTRAP));
  // A fork inherits it; an exec would reset it.
  parachute.fork(inf->pid(), 4242);
  EXPECT_TRUE(parachute.up(4242));
  parachute.forget(4242);
  EXPECT_FALSE(parachute.up(4242));

  ASSERT_TRUE(parachute.lower(*inf, inf->pid()));
  EXPECT_TRUE(parachute.empty());
  auto after = trap_action(*inf);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, KernelSigaction{});
  ASSERT_TRUE(inf->kill());
}

TEST(TrapParachute, GoesUpOverAHandlerOfTheProgramsOwnAndGivesItBack) {
  Capture out;
  SPAWN_OR_SKIP(inf, (std::vector<std::string>{program("spin")}), out);
  // A handler of the program's own (never run: the process is killed).
  constexpr std::uint64_t kSaRestorer = 0x04000000;
  const KernelSigaction own{.handler = 0x401000, .flags = kSaRestorer, .restorer = 0x401000};
  ASSERT_TRUE(inject_sigaction(*inf, inf->pid(), SIGTRAP, &own));
  TrapParachute parachute;
  auto raised = parachute.raise(*inf, inf->pid());
  ASSERT_TRUE(raised) << raised.error().to_string();
  EXPECT_TRUE(*raised);
  const std::vector<RestoreSignals> plan = parachute.plan();
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].trap, own);  // what the watchdog sets back
  ASSERT_TRUE(parachute.lower(*inf, inf->pid()));
  auto back = trap_action(*inf);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, own);
  // Up, then the program sets an action of its own: lowering leaves the program's.
  ASSERT_TRUE(parachute.raise(*inf, inf->pid()));
  const KernelSigaction other{.handler = 0x402000, .flags = kSaRestorer, .restorer = 0x401000};
  ASSERT_TRUE(inject_sigaction(*inf, inf->pid(), SIGTRAP, &other));
  ASSERT_TRUE(parachute.lower(*inf, inf->pid()));
  auto after = trap_action(*inf);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, other);
  ASSERT_TRUE(inf->kill());
}

}  // namespace
}  // namespace hwarb::native

// Tests of SyscallInjector on a forked child stopped under ptrace (StoppedChild), with a tracer
// of the test's own: waitpid on the child, its registers, ProcessMemory for its text.
#include "hwarb/linux/syscall_injection.h"

#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstring>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "hwarb/linux/process_memory.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

class ChildTracer final : public SyscallInjector::Tracer {
 public:
  explicit ChildTracer(pid_t pid) { EXPECT_TRUE(memory.open(pid)); }

  Result<int> wait_stop(pid_t tid) override {
    auto got = wait_for(tid, false);
    if (!got) return std::unexpected(got.error());
    return got->raw;
  }
  Result<x86::Regs> get_regs(pid_t tid) override {
    x86::Regs regs{};
    auto got = ptrace_get_regset(tid, NT_PRSTATUS, std::as_writable_bytes(std::span(&regs, 1)));
    if (!got) return std::unexpected(got.error());
    return regs;
  }
  Result<void> set_regs(pid_t tid, const x86::Regs& regs) override {
    return ptrace_set_regset(tid, NT_PRSTATUS, std::as_bytes(std::span(&regs, 1)));
  }
  Result<std::uint64_t> find_code(pid_t process, std::span<const std::uint8_t> code) override {
    ++finds;
    return memory.find_code(process, code);
  }

  ProcessMemory memory;
  int finds = 0;
};

TEST(SyscallInjector, InjectsGetpidInASignalDeliveryStop) {
  auto child = StoppedChild::spawn();
  ASSERT_TRUE(child) << child.error().to_string();
  const pid_t pid = child->pid();
  ChildTracer tracer(pid);
  SyscallInjector injector;
  std::vector<std::pair<pid_t, std::uint64_t>> told;
  injector.set_observer([&](pid_t tid, const x86::Regs* restore) {
    told.emplace_back(tid, restore != nullptr ? restore->rip : 0);
  });
  auto before = tracer.get_regs(pid);
  ASSERT_TRUE(before) << before.error().to_string();

  StopState state{.stop = ThreadStop::kSignal, .stop_signal = SIGSTOP};
  auto got = injector.inject(tracer, pid, pid, state, SYS_getpid, {});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(*got, pid);
  auto after = tracer.get_regs(pid);
  ASSERT_TRUE(after) << after.error().to_string();
  EXPECT_EQ(std::memcmp(&*before, &*after, sizeof(x86::Regs)), 0);
  EXPECT_EQ(state.stop, ThreadStop::kSignal);
  EXPECT_EQ(state.stop_signal, SIGSTOP);
  EXPECT_EQ(state.kept_signal, 0);
  EXPECT_EQ(told, (std::vector<std::pair<pid_t, std::uint64_t>>{{pid, before->rip}, {pid, 0}}));
  // Still the SIGSTOP's delivery stop, with its siginfo.
  siginfo_t info{};
  ASSERT_TRUE(ptrace_getsiginfo(pid, info));
  EXPECT_EQ(info.si_signo, SIGSTOP);

  // The `syscall` instruction is looked for once per process, until forgotten.
  auto again = injector.inject(tracer, pid, pid, state, SYS_getppid, {});
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(*again, ::getpid());
  EXPECT_EQ(tracer.finds, 1);
  auto gadget = injector.gadget(tracer, pid);
  ASSERT_TRUE(gadget);
  EXPECT_EQ(tracer.memory.read_word(*gadget, 2), 0x050fu);
  EXPECT_EQ(tracer.finds, 1);
  injector.forget(pid);
  ASSERT_TRUE(injector.gadget(tracer, pid));
  EXPECT_EQ(tracer.finds, 2);
}

TEST(SyscallInjector, InjectsAtASyscallEntryAndReentersTheProgramsCall) {
  auto child = StoppedChild::spawn();
  ASSERT_TRUE(child) << child.error().to_string();
  const pid_t pid = child->pid();
  ASSERT_EQ(::ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD), 0);
  ChildTracer tracer(pid);
  // On to the entry of the child's next system call (its pause).
  __ptrace_syscall_info info{};
  for (;;) {
    ASSERT_TRUE(ptrace_syscall(pid));
    auto status = tracer.wait_stop(pid);
    ASSERT_TRUE(status) << status.error().to_string();
    ASSERT_TRUE(WIFSTOPPED(*status));
    if (WSTOPSIG(*status) != (SIGTRAP | 0x80)) continue;
    ASSERT_TRUE(ptrace_get_syscall_info(pid, info));
    if (info.op == PTRACE_SYSCALL_INFO_ENTRY) break;
  }
  auto before = tracer.get_regs(pid);
  ASSERT_TRUE(before) << before.error().to_string();
  SyscallInjector injector;
  std::uint64_t restore_rip = 0;
  injector.set_observer([&](pid_t, const x86::Regs* restore) {
    if (restore != nullptr) restore_rip = restore->rip;
  });

  StopState state{.stop = ThreadStop::kSyscallEnter};
  auto got = injector.inject(tracer, pid, pid, state, SYS_getpid, {});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(*got, pid);
  EXPECT_EQ(restore_rip, before->rip - 2);  // on the program's `syscall` instruction
  EXPECT_EQ(state.stop, ThreadStop::kSyscallEnter);
  EXPECT_EQ(tracer.finds, 0);  // the program's own instruction, no other
  // At the entry of the program's call again, its arguments as they were.
  auto after = tracer.get_regs(pid);
  ASSERT_TRUE(after) << after.error().to_string();
  EXPECT_EQ(after->rip, before->rip);
  EXPECT_EQ(after->orig_rax, before->orig_rax);
  EXPECT_EQ(after->rdi, before->rdi);
  EXPECT_EQ(after->rsp, before->rsp);
  __ptrace_syscall_info now{};
  ASSERT_TRUE(ptrace_get_syscall_info(pid, now));
  EXPECT_EQ(now.op, PTRACE_SYSCALL_INFO_ENTRY);
  EXPECT_EQ(now.entry.nr, info.entry.nr);
}

}  // namespace
}  // namespace hwarb::native

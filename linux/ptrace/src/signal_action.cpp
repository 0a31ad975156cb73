#include "hwarb/linux/signal_action.h"

#include <signal.h>
#include <sys/syscall.h>

#include <array>
#include <span>
#include <string>

#include "hwarb/linux/syscalls.h"

namespace hwarb::native {

namespace {

// SA_RESTORER is the kernel's flag (asm/signal.h), not in the C library's headers.
constexpr std::uint64_t kSaRestorer = 0x04000000;

}  // namespace

Result<KernelSigaction> inject_sigaction(Inferior& inferior, pid_t tid, int sig,
                                         const KernelSigaction* set) {
  auto regs = inferior.get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  const pid_t process = inferior.process_of(tid);
  constexpr std::uint64_t kRedZone = 128;
  std::array<KernelSigaction, 2> structs{};  // act, oldact
  const std::uint64_t at = (regs->rsp - kRedZone - sizeof structs) & ~std::uint64_t{15};
  std::array<std::uint8_t, sizeof structs> saved{};
  if (auto r = inferior.read_memory(at, saved, process); !r) return std::unexpected(r.error());
  if (set != nullptr) structs[0] = *set;
  auto bytes = std::span(reinterpret_cast<std::uint8_t*>(structs.data()), sizeof structs);
  if (auto r = inferior.write_memory(at, bytes, process); !r) return std::unexpected(r.error());
  auto ret = inferior.inject_syscall(tid, SYS_rt_sigaction,
                                     {static_cast<std::uint64_t>(sig), set != nullptr ? at : 0,
                                      at + sizeof(KernelSigaction), 8, 0, 0});
  auto read = inferior.read_memory(at, bytes, process);
  auto put_back = inferior.write_memory(at, saved, process);
  if (!ret) return std::unexpected(ret.error());
  if (*ret < 0) {
    return std::unexpected(syscall_return_error(
        *ret, "pid", "rt_sigaction(" + std::to_string(sig) + ") in thread " + std::to_string(tid)));
  }
  if (!read) return std::unexpected(read.error());
  if (!put_back) return std::unexpected(put_back.error());
  return structs[1];
}

Result<KernelSigaction> parachute_action(Inferior& inferior, pid_t process) {
  constexpr std::uint8_t kRet[] = {0xc3};
  // mov $15, %rax; syscall (glibc's __restore_rt), or mov $15, %eax; syscall (musl's).
  constexpr std::uint8_t kSigreturn64[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  constexpr std::uint8_t kSigreturn32[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  auto ret = inferior.find_code(process, kRet);
  if (!ret) return std::unexpected(ret.error());
  auto restorer = inferior.find_code(process, kSigreturn64);
  if (!restorer) restorer = inferior.find_code(process, kSigreturn32);
  if (!restorer) return std::unexpected(restorer.error());
  KernelSigaction act;
  act.handler = *ret;
  act.flags = kSaRestorer | SA_NODEFER;
  act.restorer = *restorer;
  return act;
}

}  // namespace hwarb::native

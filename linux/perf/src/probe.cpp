#include "hwarb/linux/probe.h"

#include <sys/user.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/spawn.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/x86/debugreg.h"

// A straight-line block of five instructions (four 1-byte nops, then a jmp that skips one nop)
// and the jmp's target, which spins. The traced child's rip is moved here; it never runs it on
// its own.
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".globl hwarb_probe_block\n"
    ".hidden hwarb_probe_block\n"
    ".type hwarb_probe_block, @function\n"
    "hwarb_probe_block:\n"
    "  nop\n"
    "  nop\n"
    "  nop\n"
    "  nop\n"
    "  jmp 1f\n"
    "  nop\n"
    ".globl hwarb_probe_block_target\n"
    ".hidden hwarb_probe_block_target\n"
    "hwarb_probe_block_target:\n"
    "1:\n"
    "  jmp 1b\n"
    ".size hwarb_probe_block, . - hwarb_probe_block\n"
    ".popsection\n");
extern "C" const char hwarb_probe_block[];
extern "C" const char hwarb_probe_block_target[];

namespace hwarb::native {
namespace {

constexpr int kBlockInstructions = 5;
// Enough for any x86 machine (4 debug registers) and any sane virtual one.
constexpr int kMaxSlotsCounted = 64;

// Written by the canary child (a fork: the same address there).
alignas(8) volatile std::uint64_t g_canary = 0;

void default_canary(volatile std::uint64_t* canary, int) {
  for (std::uint64_t i = 1; i <= kCanaryWrites; ++i) *canary = i;
}

// The body and run number of the next canary child, set before its fork (the child's copies).
CanaryBody g_body = default_canary;
int g_run = 0;

// The canary child's work once its parent says go (fork_gated: no system call, no allocation).
void run_canary() {
  g_body(&g_canary, g_run);
}

// Owns a forked child: SIGKILL and reap on destruction unless it was reaped already.
class ForkedChild {
 public:
  explicit ForkedChild(pid_t pid) : pid_(pid) {}
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ <= 0) return;
    ignore_error(send_signal(pid_, SIGKILL), "a destructor: the wait below reaps it either way");
    while (true) {
      auto st = wait_for(pid_, false);
      if (!st || st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) break;
    }
  }
  pid_t pid() const { return pid_; }
  // Waits for the exit (or death); the child is reaped afterwards.
  Result<WaitStatus> wait_exit() {
    while (true) {
      auto st = wait_for(pid_, false);
      if (!st) return st;
      if (st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) {
        pid_ = -1;
        return st;
      }
    }
  }

 private:
  pid_t pid_;
};

std::optional<int> read_int_file(const char* path) {
  std::ifstream in(path);
  int value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

bool exists(const char* path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// Counts the breakpoint slots a fresh canary child gets.
Result<void> count_slots(ProbeReport& report) {
  auto gated = fork_gated(run_canary);
  if (!gated) return std::unexpected(gated.error().with_context("canary"));
  ForkedChild child(gated->pid);
  const auto canary = reinterpret_cast<std::uint64_t>(&g_canary);
  std::vector<Fd> held;
  while (static_cast<int>(held.size()) < kMaxSlotsCounted) {
    auto fd = perf_breakpoint_open(gated->pid, canary, sizeof g_canary, BpType::kW);
    if (!fd) {
      report.slots_error = held.empty() ? fd.error().to_string() : errno_name(fd.error().code());
      report.slots_held_elsewhere =
          fd.error().code() == ErrorCode::kNoSpc && static_cast<int>(held.size()) < x86::kSlots;
      break;
    }
    held.push_back(std::move(*fd));
  }
  report.breakpoint_slots = static_cast<int>(held.size());
  if (report.slots_error.empty()) {
    report.slots_error = "none: counting stopped at " + std::to_string(kMaxSlotsCounted);
  }
  return {};
}

// One canary run: a child writes the canary under a write breakpoint; the event's count after it
// exited. nullopt (with a note) when the run could not be made.
Result<std::optional<std::uint64_t>> run_canary_once(ProbeReport& report) {
  auto gated = fork_gated(run_canary);
  if (!gated) return std::unexpected(gated.error().with_context("canary"));
  ForkedChild child(gated->pid);
  const auto canary = reinterpret_cast<std::uint64_t>(&g_canary);
  auto counter = perf_breakpoint_open(gated->pid, canary, sizeof g_canary, BpType::kW);
  if (!counter) {
    report.notes.push_back("the canary breakpoint could not be opened again: " +
                           counter.error().to_string());
    return std::optional<std::uint64_t>();
  }
  if (auto started = start_gated(*gated); !started) {
    return std::unexpected(started.error().with_context("canary"));
  }
  auto st = child.wait_exit();
  if (!st) return std::unexpected(st.error().with_context("child"));
  if (st->kind != WaitKind::kExited || st->value != 0) {
    report.notes.push_back("the canary child did not finish its writes (waitpid status " +
                           hex(static_cast<unsigned>(st->raw)) + ")");
    return std::optional<std::uint64_t>();
  }
  auto count = perf_read_count(counter->get());
  if (!count) return std::unexpected(count.error().with_context("canary"));
  return std::optional<std::uint64_t>(*count);
}

// Counts the slots, then runs the canary until a run counts writes (at most options.canary_runs
// runs): a run that counted none decides nothing.
Result<void> probe_breakpoints(ProbeReport& report, const ProbeOptions& options) {
  g_body = options.canary != nullptr ? options.canary : default_canary;
  if (auto ok = count_slots(report); !ok) return ok;
  if (report.slots_held_elsewhere) report.perf_holders = perf_event_holders();
  if (report.breakpoint_slots == 0) return {};
  const int runs = std::max(options.canary_runs, 1);
  int finished = 0;
  for (g_run = 1; g_run <= runs; ++g_run) {
    auto count = run_canary_once(report);
    if (!count) return std::unexpected(count.error());
    // A run that did not finish (its breakpoint refused for a moment, or the child killed by a
    // stray SIGTRAP, seen on KVM guests) decides nothing either: the next run may. canary_runs
    // counts the runs that finished.
    if (!*count) continue;
    report.canary_runs = ++finished;
    report.canary_writes = kCanaryWrites;
    report.canary_hits = **count;
    if (report.canary_hits > 0) break;
  }
  if (finished == 0) return {};
  report.hits_delivered = report.canary_hits == report.canary_writes;
  if (report.canary_hits == 0) {
    report.notes.push_back("the canary breakpoint counted 0 writes in " + std::to_string(runs) +
                           (runs == 1 ? " run" : " runs"));
  }
  return {};
}

// Waits for the traced child's next stop and returns its rip; an error when it did not stop
// with SIGTRAP.
Result<std::uint64_t> rip_after_trap(StoppedChild& child, std::string_view request) {
  auto st = child.wait(false);
  if (!st) return std::unexpected(st.error());
  if (st->kind != WaitKind::kStopped || st->value != SIGTRAP) {
    return make_error(ErrorCode::kIo,
                      "child: after " + std::string(request) + " waitpid reported status " +
                          hex(static_cast<unsigned>(st->raw)) + ", not a SIGTRAP stop");
  }
  user_regs_struct regs;
  if (auto ok = ptrace_getregs(child.pid(), regs); !ok) return std::unexpected(ok.error());
  return regs.rip;
}

// Moves the child's rip to the probe block (no syscall restart: orig_rax = -1).
Result<void> enter_block(StoppedChild& child, user_regs_struct& regs) {
  regs.rip = reinterpret_cast<std::uint64_t>(hwarb_probe_block);
  regs.orig_rax = static_cast<unsigned long long>(-1);
  return ptrace_setregs(child.pid(), regs);
}

std::string instructions(std::uint64_t n) {
  return std::to_string(n) + (n == 1 ? " instruction" : " instructions");
}

Result<void> probe_stepping(ProbeReport& report) {
  auto child = StoppedChild::spawn();
  if (!child) {
    if (child.error().code() != ErrorCode::kPerm) return std::unexpected(child.error());
    report.notes.push_back("ptrace refused: " + child.error().message());
    return {};
  }
  report.ptrace_allowed = true;
  const auto block = reinterpret_cast<std::uint64_t>(hwarb_probe_block);
  const auto target = reinterpret_cast<std::uint64_t>(hwarb_probe_block_target);

  user_regs_struct regs;
  if (auto ok = ptrace_getregs(child->pid(), regs); !ok) return ok;
  if (auto ok = enter_block(*child, regs); !ok) return ok;
  if (auto ok = ptrace_singlestep(child->pid()); !ok) return ok;
  auto step = rip_after_trap(*child, "PTRACE_SINGLESTEP");
  if (!step) {
    report.notes.push_back("PTRACE_SINGLESTEP: " + step.error().message());
    return {};
  }
  report.singlestep_works = *step == block + 1;
  if (!report.singlestep_works) {
    report.notes.push_back("PTRACE_SINGLESTEP from the block start " + hex(block) + " stopped at " +
                           hex(*step) + ", expected " + hex(block + 1));
  }

  if (auto ok = enter_block(*child, regs); !ok) return ok;
  if (auto ok = ptrace_singleblock(child->pid()); !ok) {
    report.singleblock_detail = "refused: " + ok.error().message();
    return {};
  }
  auto blockstep = rip_after_trap(*child, "PTRACE_SINGLEBLOCK");
  if (!blockstep) {
    report.singleblock_detail = blockstep.error().message();
    return {};
  }
  const std::uint64_t rip = *blockstep;
  report.singleblock_steps_blocks = rip == target;
  if (rip == target) {
    report.singleblock_detail =
        "reached the branch target of a " + instructions(kBlockInstructions) + " block in one stop";
  } else if (rip > block && rip < block + kBlockInstructions) {
    report.singleblock_detail = "stopped after " + instructions(rip - block) + " of a " +
                                std::to_string(kBlockInstructions) + "-instruction block";
  } else {
    report.singleblock_detail =
        "stopped at " + hex(rip) + " (block " + hex(block) + ", branch target " + hex(target) + ")";
  }
  return {};
}

void add_notes(ProbeReport& r) {
  if (!r.breakpoint_pmu) {
    r.notes.push_back("no breakpoint PMU: watchpoints use the software fallback");
  } else if (r.breakpoint_slots == 0 && r.slots_held_elsewhere) {
    r.notes.push_back(slots_held_text(r) + ": watchpoints use the software fallback");
  } else if (r.breakpoint_slots == 0) {
    r.notes.push_back("no breakpoint event could be opened (" + r.slots_error +
                      "): watchpoints use the software fallback");
  } else {
    if (r.slots_held_elsewhere) r.notes.push_back(slots_held_text(r));
    if (!r.hits_delivered && r.canary_writes > 0)
      r.notes.push_back("breakpoints open but hits are not delivered (" +
                        std::to_string(r.canary_hits) + " of " + std::to_string(r.canary_writes) +
                        " canary writes counted): using the software fallback");
  }
  if (r.ptrace_allowed && !r.singleblock_steps_blocks) {
    r.notes.push_back("PTRACE_SINGLEBLOCK does not step blocks (" + r.singleblock_detail +
                      "): branch tracing uses int3 on block ends");
  }
}

std::string json_bool(bool b) {
  return b ? "true" : "false";
}

std::string json_int(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "null";
}

// ["a","b"]: a JSON array of strings.
std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ",";
    out += json_string(items[i]);
  }
  return out + "]";
}

std::string yes_no(bool b) {
  return b ? "yes" : "no";
}

}  // namespace

std::vector<std::string> perf_event_holders() {
  std::vector<std::string> found;
  std::error_code ec;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit) || pid == self) continue;
    std::error_code fd_ec;
    for (const auto& fd : std::filesystem::directory_iterator(entry.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (std::filesystem::read_symlink(fd.path(), link_ec).string() != "anon_inode:[perf_event]") {
        continue;
      }
      std::ifstream comm(entry.path() / "comm");
      std::string name;
      std::getline(comm, name);
      found.push_back(name + "[" + pid + "]");
      break;
    }
  }
  return found;
}

Result<ProbeReport> probe(const ProbeOptions& options) {
  ProbeReport r;
  r.perf_event_paranoid = perf_event_paranoid();
  r.breakpoint_pmu = exists("/sys/bus/event_source/devices/breakpoint");
  r.intel_bts = exists("/sys/bus/event_source/devices/intel_bts");
  r.intel_pt = exists("/sys/bus/event_source/devices/intel_pt");
  r.ptrace_scope = read_int_file("/proc/sys/kernel/yama/ptrace_scope");
  if (auto ok = probe_breakpoints(r, options); !ok) return std::unexpected(ok.error());
  if (auto ok = probe_stepping(r); !ok) return std::unexpected(ok.error());
  add_notes(r);
  return r;
}

std::string slots_held_text(const ProbeReport& r) {
  if (!r.slots_held_elsewhere) return {};
  std::string text = "ENOSPC: ";
  text += r.breakpoint_slots == 0 ? std::string("every breakpoint slot is")
                                  : std::to_string(x86::kSlots - r.breakpoint_slots) + " of " +
                                        std::to_string(x86::kSlots) + " breakpoint slots are";
  text += " held CPU-wide by another user";
  if (r.perf_holders.empty())
    return text + " (no other process has a perf event open: the kernel's)";
  text += " (perf events open in: ";
  for (std::size_t i = 0; i < r.perf_holders.size(); ++i) {
    if (i > 0) text += ", ";
    text += r.perf_holders[i];
  }
  return text + ")";
}

std::string slots_explain(const ProbeReport& r) {
  if (!r.breakpoint_pmu) return {};
  const std::string total = std::to_string(x86::kSlots) + " slots (DR0-DR3)";
  if (!r.slots_held_elsewhere && r.breakpoint_slots >= x86::kSlots) {
    return "ok — " + total + ", " + std::to_string(r.breakpoint_slots) + " free for a thread here";
  }
  if (!r.slots_held_elsewhere) {
    return (r.slots_error.empty() ? std::string("error") : r.slots_error) + " — " + total +
           "; free " + std::to_string(r.breakpoint_slots);
  }
  std::string text =
      "ENOSPC — " + total + "; held: elsewhere " + std::to_string(x86::kSlots - r.breakpoint_slots);
  if (!r.perf_holders.empty()) {
    text += " (";
    for (std::size_t i = 0; i < r.perf_holders.size(); ++i) {
      text += (i == 0 ? "" : ", ") + r.perf_holders[i];
    }
    text += ")";
  }
  return text + "; free " + std::to_string(r.breakpoint_slots);
}

std::string probe_to_json(const ProbeReport& r) {
  std::string out = "{";
  out += "\"perf_event_paranoid\":" + json_int(r.perf_event_paranoid);
  out += ",\"breakpoint_pmu\":" + json_bool(r.breakpoint_pmu);
  out += ",\"breakpoint_slots\":" + std::to_string(r.breakpoint_slots);
  out += ",\"slots_error\":" + json_string(r.slots_error);
  out += ",\"slots_held_elsewhere\":" + json_bool(r.slots_held_elsewhere);
  out += ",\"perf_holders\":" + json_strings(r.perf_holders);
  out += ",\"slots\":{\"registers\":" + std::to_string(x86::kSlots) +
         ",\"free\":" + std::to_string(r.breakpoint_slots) + ",\"held_elsewhere\":" +
         std::to_string(r.slots_held_elsewhere ? x86::kSlots - r.breakpoint_slots : 0) +
         ",\"explain\":" + json_string(slots_explain(r)) + "}";
  out += ",\"hits_delivered\":" + json_bool(r.hits_delivered);
  out += ",\"canary_writes\":" + std::to_string(r.canary_writes);
  out += ",\"canary_hits\":" + std::to_string(r.canary_hits);
  out += ",\"canary_runs\":" + std::to_string(r.canary_runs);
  out += ",\"intel_bts\":" + json_bool(r.intel_bts);
  out += ",\"intel_pt\":" + json_bool(r.intel_pt);
  out += ",\"ptrace_scope\":" + json_int(r.ptrace_scope);
  out += ",\"ptrace_allowed\":" + json_bool(r.ptrace_allowed);
  out += ",\"singlestep_works\":" + json_bool(r.singlestep_works);
  out += ",\"singleblock_steps_blocks\":" + json_bool(r.singleblock_steps_blocks);
  out += ",\"singleblock_detail\":" + json_string(r.singleblock_detail);
  out += ",\"notes\":" + json_strings(r.notes) + "}";
  return out;
}

std::string probe_to_text(const ProbeReport& r) {
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("perf_event_paranoid: " +
       (r.perf_event_paranoid ? std::to_string(*r.perf_event_paranoid) : "unknown"));
  if (!r.breakpoint_pmu) {
    line("breakpoint PMU: no");
  } else if (r.breakpoint_slots > 0 && r.slots_held_elsewhere) {
    line("breakpoint PMU: yes (" + std::to_string(r.breakpoint_slots) + " slots per thread free; " +
         slots_held_text(r) + ")");
  } else if (r.breakpoint_slots > 0) {
    line("breakpoint PMU: yes (" + std::to_string(r.breakpoint_slots) + " slots per thread)");
  } else if (r.slots_held_elsewhere) {
    line("breakpoint PMU: yes (" + slots_held_text(r) + ")");
  } else {
    line("breakpoint PMU: yes (no event could be opened: " + r.slots_error + ")");
  }
  if (r.canary_writes > 0) {
    line(std::string("hits delivered: ") + (r.hits_delivered ? "yes" : "NO") + " (" +
         std::to_string(r.canary_hits) + " of " + std::to_string(r.canary_writes) +
         " canary writes" +
         (r.canary_runs > 1 ? ", canary run " + std::to_string(r.canary_runs) + " times" : "") +
         ")");
  } else if (r.slots_held_elsewhere) {
    line("hits delivered: unknown (no breakpoint slot was free for the canary)");
  } else {
    line("hits delivered: NO (no canary ran)");
  }
  if (r.breakpoint_pmu) line("breakpoint slots: " + slots_explain(r));
  line("BTS: " + yes_no(r.intel_bts));
  line("intel_pt: " + yes_no(r.intel_pt));
  line(std::string("ptrace: ") + (r.ptrace_allowed ? "allowed" : "refused") +
       " (yama ptrace_scope: " + (r.ptrace_scope ? std::to_string(*r.ptrace_scope) : "absent") +
       ")");
  if (r.ptrace_allowed) {
    line(std::string("PTRACE_SINGLESTEP: ") +
         (r.singlestep_works ? "steps one instruction" : "does not step one instruction"));
    if (r.singleblock_steps_blocks) {
      line("PTRACE_SINGLEBLOCK: steps blocks");
    } else if (r.singleblock_detail.starts_with("stopped after 1 instruction ")) {
      line("PTRACE_SINGLEBLOCK: steps single instructions, not blocks");
    } else {
      line("PTRACE_SINGLEBLOCK: does not step blocks (" + r.singleblock_detail + ")");
    }
  }
  if (r.hits_delivered && r.breakpoint_slots > 0) {
    line("watch: hardware (perf breakpoints, " + std::to_string(r.breakpoint_slots) +
         " slots per thread)");
  } else if (r.ptrace_allowed) {
    line("watch: software (page protection with instruction decoding; int3 for execute)");
  } else {
    line("watch: unavailable (breakpoint hits are not delivered and ptrace is refused)");
  }
  if (r.intel_bts) {
    line("trace: hardware (intel_bts)");
  } else if (r.ptrace_allowed) {
    line("trace: software (int3 on basic-block ends)");
  } else {
    line("trace: unavailable (ptrace refused, no intel_bts)");
  }
  for (const std::string& note : r.notes) line("note: " + note);
  return out;
}

}  // namespace hwarb::native

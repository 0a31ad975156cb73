#include "hwarb/linux/session.h"

#include <signal.h>

#include <chrono>
#include <optional>
#include <span>
#include <utility>

#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/register_yield.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::native {

Result<Inferior> open_target(const Target& target) {
  if (!target.command.empty()) {
    return Inferior::spawn(target.command, {.disable_aslr = !target.aslr});
  }
  if (target.pid != 0) return Inferior::attach(target.pid);
  auto process = thread_group(target.tid);
  if (!process) return std::unexpected(process.error());
  return Inferior::attach(*process);
}

Result<void> run_to(Inferior& inferior, std::uint64_t addr) {
  const pid_t pid = inferior.pid();
  std::uint8_t original = 0;
  if (auto r = inferior.read_memory(addr, std::span(&original, 1)); !r) return r;
  const std::uint8_t int3 = 0xCC;
  if (auto r = inferior.write_memory(addr, std::span<const std::uint8_t>(&int3, 1)); !r) return r;
  if (auto r = inferior.resume(pid, Resume::kCont); !r) return r;
  for (;;) {
    auto ev = inferior.wait();
    if (!ev) return std::unexpected(ev.error());
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
      return make_error(ErrorCode::kSrch, "target: ended before reaching its entry point");
    }
    if (ev->kind == EventKind::kSignal && ev->signal == SIGTRAP) {
      auto regs = inferior.get_regs(ev->tid);
      if (regs && regs->rip == addr + 1) {
        regs->rip = addr;
        if (auto r = inferior.set_regs(ev->tid, *regs); !r) return r;
        return inferior.write_memory(addr, std::span<const std::uint8_t>(&original, 1));
      }
    }
    const int sig = ev->kind == EventKind::kSignal ? ev->signal : 0;
    if (ev->kind == EventKind::kFork && !ev->vfork) {
      if (auto r = inferior.release(ev->child); !r) return r;
      continue;
    }
    if (ev->kind == EventKind::kThreadExit || ev->kind == EventKind::kLeaderEnded) continue;
    if (auto r = inferior.resume(ev->tid, Resume::kCont, sig); !r) return r;
  }
}

namespace {

// Runs a spawned program to `addr` and loads its symbols again (its libraries mapped since).
Result<void> run_and_reload(Inferior& inferior, SymbolTable& table, std::uint64_t addr) {
  if (auto r = run_to(inferior, addr); !r) return r;
  auto fresh = SymbolTable::load(inferior.pid());
  if (!fresh) return std::unexpected(fresh.error());
  table = std::move(*fresh);
  return {};
}

// Whether a name not found (ENOENT) is looked up again after the program runs to its entry.
bool second_look(const Error& error, Inferior& inferior, const SymbolTable& table,
                 bool ran_to_entry) {
  return error.code() == ErrorCode::kNoEnt && !ran_to_entry && inferior.spawned() &&
         table.entry().has_value();
}

}  // namespace

Result<Symbol> find_symbol(Inferior& inferior, SymbolTable& table, bool& ran_to_entry,
                           std::string_view name) {
  auto sym = table.find(name);
  if (!sym && second_look(sym.error(), inferior, table, ran_to_entry)) {
    ran_to_entry = true;
    if (auto r = run_and_reload(inferior, table, *table.entry()); !r) {
      return std::unexpected(r.error());
    }
    sym = table.find(name);
  }
  return sym;
}

Result<SourceObject> find_object(Inferior& inferior, SymbolTable& table, bool& ran_to_entry,
                                 std::string_view text) {
  const MemoryReader read = [&inferior](std::uint64_t addr, std::span<std::uint8_t> out) {
    return inferior.read_memory(addr, out);
  };
  auto object = table.resolve(text, read);
  if (!object && second_look(object.error(), inferior, table, ran_to_entry)) {
    ran_to_entry = true;
    if (auto r = run_and_reload(inferior, table, *table.entry()); !r) {
      return std::unexpected(r.error());
    }
    object = table.resolve(text, read);
  }
  // A pointer read at a spawned program's first instruction is not relocated yet (nor set by a
  // static constructor): the program runs to main (else its entry point) and it is read again.
  if (object && !object->notes.empty() && !ran_to_entry && inferior.spawned()) {
    ran_to_entry = true;
    auto main_sym = table.find("main");
    const std::optional<std::uint64_t> stop =
        main_sym && main_sym->function ? std::optional(main_sym->address) : table.entry();
    if (!stop) return object;
    if (auto r = run_and_reload(inferior, table, *stop); !r) return std::unexpected(r.error());
    object = table.resolve(text, read);
    if (object) {
      object->notes.push_back("the program ran to " + table.describe(*stop) +
                              " to read it; watches start there");
    }
  }
  return object;
}

Result<ThreadLocalSymbol> find_thread_local(Inferior& inferior, SymbolTable& table,
                                            bool& ran_to_entry, std::string_view name) {
  if (!ran_to_entry && inferior.spawned() && table.entry()) {
    ran_to_entry = true;
    if (auto r = run_and_reload(inferior, table, *table.entry()); !r) {
      return std::unexpected(r.error());
    }
  }
  return table.find_thread_local(name);
}

bool wait_end(pid_t pid, bool nohang, RunResult& result) {
  auto status = wait_for(pid, nohang);
  if (!status) return false;
  switch (status->kind) {
    case WaitKind::kExited:
      result.exited = true;
      result.status = status->value;
      return true;
    case WaitKind::kKilled:
      result.exited = true;
      result.signal = status->value;
      return true;
    case WaitKind::kRunning:
    case WaitKind::kStopped:
      return false;
  }
  return false;
}

bool interrupted() {
  return interrupt_requested();
}

void arm_interrupt() {
  install_interrupt_flag();
}

Result<RunResult> run_target(Inferior& inferior, Engine& engine) {
  arm_interrupt();
  RunResult result;
  result.pid = inferior.pid();
  const bool spawned = inferior.spawned();
  // Stops everything, lets the engine undo its changes, and lets go of the process (and of the
  // followed processes that outlive it, once it has ended).
  auto leave = [&](bool keep_running) -> Result<void> {
    if (inferior.threads().empty()) return {};
    Result<void> first;
    if (auto s = inferior.stop_all(); !s) first = std::unexpected(s.error());
    if (auto f = engine.finish(); !f && first) first = f;
    if (keep_running || !spawned) {
      if (auto d = inferior.detach(); !d && first) first = d;
    } else {
      if (auto k = inferior.kill(); !k && first) first = k;
    }
    return first;
  };
  // The process ended: followed processes that outlive it are let go, unwatched and unharmed.
  auto ended = [&]() -> Result<RunResult> {
    if (auto r = leave(true); !r) return std::unexpected(r.error());
    return result;
  };
  auto fail = [&](const Error& error) -> Result<RunResult> {
    ignore_error(leave(false), "the first error is the one reported");
    return std::unexpected(error);
  };
  // A spawned program that asks for a debug register gets one of the engine's, and its
  // breakpoint requests are seen while the engine holds any (register_yield.h).
  std::optional<RegisterYield> yield;
  if (spawned && engine.held_registers() > 0 && !inferior.threads().empty()) {
    auto armed = RegisterYield::arm(inferior, inferior.threads().front());
    if (armed) {
      yield.emplace(std::move(*armed));
    } else {
      engine.note(
          "should the program ask for a debug register, it finds only those hwarb "
          "does not hold: " +
          armed.error().to_string());
    }
  }
  const bool polls = engine.wants_wakeups() || yield.has_value();
  if (auto r = inferior.resume_all(engine.resume_mode()); !r) return fail(r.error());
  auto last_tick = std::chrono::steady_clock::now();
  for (;;) {
    if (interrupted()) {
      result.interrupted = true;
      if (auto r = leave(false); !r) return std::unexpected(r.error());
      return result;
    }
    if (engine.done()) {
      // Enough: the process goes on unwatched and unmodified.
      if (auto r = leave(true); !r) return std::unexpected(r.error());
      if (spawned) (void)wait_end(result.pid, false, result);
      return result;
    }
    // An engine with rings to drain also wakes when one is readable, and at least every 100 ms.
    auto got = [&]() -> Result<std::optional<Event>> {
      if (polls) {
        std::vector<int> wake = engine.wake_fds();
        if (yield) wake.push_back(yield->listener());
        return inferior.wait_or_poll(wake, engine.wants_wakeups() ? 100 : -1);
      }
      auto ev = inferior.wait();
      if (!ev) return std::unexpected(ev.error());
      return std::optional<Event>(std::move(*ev));
    }();
    if (!got) {
      if (got.error().code() == ErrorCode::kIntr) continue;
      return fail(got.error());
    }
    if (!*got) {
      if (yield) {
        if (auto r = yield->serve(inferior, engine); !r) return fail(r.error());
      }
      engine.tick();
      last_tick = std::chrono::steady_clock::now();
      continue;
    }
    const Event& ev = **got;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick > std::chrono::milliseconds(100)) {
      engine.tick();
      last_tick = now;
    }
    auto mine = engine.handle(ev);
    if (!mine) return fail(mine.error());
    if (*mine) continue;
    const Resume how = engine.resume_mode();
    Result<void> step;
    switch (ev.kind) {
      case EventKind::kExited:
        result.exited = true;
        result.status = ev.status;
        engine.tick();  // the last look: hits of threads that ended unstopped (perf rings)
        return ended();
      case EventKind::kKilled:
        result.exited = true;
        result.signal = ev.signal;
        engine.tick();
        return ended();
      case EventKind::kThreadExit:
      case EventKind::kLeaderEnded:
        break;
      case EventKind::kSignal:
        step = inferior.resume(ev.tid, how, ev.signal);
        break;
      case EventKind::kFork:
        step = ev.vfork ? inferior.resume(ev.child, how) : inferior.release(ev.child);
        break;
      default:
        step = inferior.resume(ev.tid, how);
        break;
    }
    if (!step && step.error().code() != ErrorCode::kSrch) return fail(step.error());
  }
}

}  // namespace hwarb::native

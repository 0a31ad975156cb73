// hwarb/linux/session.h — a debugging session on a real process: the target (a command spawned,
// or a process attached), running it to an address, finding its symbols once its libraries are
// mapped, and the event loop that drives one Engine (a watch, a branch tracer) over an Inferior
// until the process ends, the engine has seen enough, or SIGINT/SIGTERM arrives.
//
// Contract:
//  - open_target() spawns target.command (address-space randomisation off unless target.aslr),
//    or attaches to target.pid, or to the process of thread target.tid; the Inferior's errors.
//    Exactly one of the three must be given (the caller checks; the command wins, then pid).
//  - run_to() needs a spawned process stopped where nothing else is planted at `addr`: one int3
//    there, every thread resumed (signals of the program passed through, forks released) until
//    a thread reaches it; the int3 is removed and that thread's rip moved back, and the process
//    is left stopped. ESRCH when the process ends first.
//  - find_symbol() is SymbolTable::find, except that a name not found in a spawned process is
//    looked up again after run_to(entry point) (shared libraries are mapped by the dynamic
//    loader), at most once per `ran_to_entry`; the table is reloaded then. ENOENT with near
//    matches for an unknown name.
//  - find_object() is SymbolTable::resolve (a source-level name: C++ names, members, elements,
//    pointers read from the process) with find_symbol's second look after run_to(entry point).
//    A path through a pointer in a spawned program that has not run yet (ran_to_entry false)
//    runs it to main (else its entry point) first: relocations and static constructors set
//    pointers; a note says so.
//  - run_target() resumes every thread with the engine's resume mode and passes each event to
//    the engine first; events it does not take are handled as a debugger does (signals passed
//    through unchanged, new threads and exits followed, forks released). It returns when:
//      the process ends: RunResult.exited with its status or signal; followed processes (forks
//        an engine follow()ed) still running are stopped, engine.finish() undoes its changes,
//        and they are detached and run on;
//      the engine is done(): every thread is stopped, engine.finish() undoes its changes, the
//        process is detached and runs on (a spawned one is then waited for, for its status);
//      SIGINT/SIGTERM arrives (interrupted()): the same cleanup, then a spawned process is killed,
//        an attached one detached — an attached target always runs on unmodified.
//    An error of the engine or of the Inferior is returned after the same cleanup (a spawned
//    process killed). A thread that vanished while being resumed (ESRCH) is not an error.
//  - wait_end() is the one conversion of a child's wait status into a RunResult.
// Thread-safety: none; the Inferior's thread only (Linux's ptrace rule).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/symbols.h"

namespace hwarb::native {

// What to debug: exactly one of pid, tid or command.
struct Target {
  pid_t pid = 0;  // attach to this process (all its threads)
  pid_t tid = 0;  // attach to the process of this thread
  std::vector<std::string> command;
  bool aslr = false;  // keep address-space randomisation for a spawned command
};

Result<Inferior> open_target(const Target& target);
Result<void> run_to(Inferior& inferior, std::uint64_t addr);
Result<Symbol> find_symbol(Inferior& inferior, SymbolTable& table, bool& ran_to_entry,
                           std::string_view name);
Result<SourceObject> find_object(Inferior& inferior, SymbolTable& table, bool& ran_to_entry,
                                 std::string_view text);
// A thread-local variable (SymbolTable::find_thread_local). A spawned program runs to its entry
// point first (once, `table` reloaded): libc, in which libthread_db looks, is loaded by then, and
// so is a library's variable.
Result<ThreadLocalSymbol> find_thread_local(Inferior& inferior, SymbolTable& table,
                                            bool& ran_to_entry, std::string_view name);

// An engine driven by run_target.
class Engine {
 public:
  virtual ~Engine() = default;
  // Takes an event; true when it resumed the thread itself.
  virtual Result<bool> handle(const Event& event) = 0;
  virtual Resume resume_mode() const = 0;
  // Undoes every change to the tracee; all threads are stopped.
  virtual Result<void> finish() = 0;
  // Called between events at most every 100 ms (progress, polling), and once as the process
  // ends, before finish(); default none. An engine
  // with wake_fds() is also called when one of them is readable and every 100 ms without events.
  virtual void tick() {}
  // Descriptors (perf rings) whose POLLIN must wake the loop while the threads run.
  virtual std::vector<int> wake_fds() const { return {}; }
  // True: the loop waits with wake_fds() and a 100 ms timeout; false (the default): it sleeps
  // until the next event.
  virtual bool wants_wakeups() const { return false; }
  // True when the engine has seen enough: run_target then undoes, detaches and lets the process
  // run on.
  virtual bool done() const { return false; }
  // Debug registers the engine holds and could give up to the program (register_yield.h): a
  // spawned program is armed for the yield when this is above 0 as run_target starts.
  virtual int yieldable_registers() const { return 0; }
  // Debug registers the engine holds now, whether or not it could give them up. A spawned
  // program is armed for the yield when this is above 0 as run_target starts: its breakpoint
  // requests are then seen (register_yield.h, case 5) even where none can be given.
  virtual int held_registers() const { return 0; }
  // Gives up the registers of one hardware watch, which goes on in software; `who` took them
  // (every thread stopped). The registers freed; 0 when there is nothing left to give.
  virtual Result<int> yield_registers(const std::string& who) {
    (void)who;
    return 0;
  }
  // A remark about the run as a whole (e.g. that the program could not be armed for the yield).
  virtual void note(const std::string& text) { (void)text; }
  // Resumes a thread the yield stopped (register_yield.h, case 3), as the engine runs it now:
  // by default with resume_mode(). ESRCH when it is gone.
  virtual Result<void> resume_stopped(Inferior& inferior, pid_t tid) {
    return inferior.resume(tid, resume_mode());
  }
};

// An Engine that passes everything to another: a wrapper overrides only what it adds.
class ForwardingEngine : public Engine {
 public:
  explicit ForwardingEngine(Engine& engine) : engine_(engine) {}
  Result<bool> handle(const Event& event) override { return engine_.handle(event); }
  Resume resume_mode() const override { return engine_.resume_mode(); }
  Result<void> finish() override { return engine_.finish(); }
  void tick() override { engine_.tick(); }
  std::vector<int> wake_fds() const override { return engine_.wake_fds(); }
  bool wants_wakeups() const override { return engine_.wants_wakeups(); }
  bool done() const override { return engine_.done(); }
  int yieldable_registers() const override { return engine_.yieldable_registers(); }
  int held_registers() const override { return engine_.held_registers(); }
  Result<int> yield_registers(const std::string& who) override {
    return engine_.yield_registers(who);
  }
  void note(const std::string& text) override { engine_.note(text); }
  Result<void> resume_stopped(Inferior& inferior, pid_t tid) override {
    return engine_.resume_stopped(inferior, tid);
  }

 protected:
  Engine& engine_;
};

struct RunResult {
  bool exited = false;  // the process ended: status or signal
  int status = 0;
  int signal = 0;
  bool interrupted = false;  // SIGINT/SIGTERM: detached (attached target) or killed (spawned)
  pid_t pid = -1;
};

Result<RunResult> run_target(Inferior& inferior, Engine& engine);

// Waits for child `pid` to end (nohang: only looks) and records how it ended in `result`; false
// when it has not ended (nohang) or cannot be waited for (not a child, reaped already).
bool wait_end(pid_t pid, bool nohang, RunResult& result);

// Whether SIGINT/SIGTERM has arrived since run_target (or arm_interrupt) installed the handler.
bool interrupted();
// Installs the SIGINT/SIGTERM flag (terminal.h) for a loop that is not run_target's.
void arm_interrupt();

}  // namespace hwarb::native

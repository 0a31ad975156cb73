// hwarb/sim/machine.h — the deterministic simulated machine (docs/architecture.md section 7).
//
// What it models:
//  - N possible CPUs (1..65536), all online at creation. CPU hotplug: a CPU goes offline only
//    when it is idle and is not the last online CPU (else EBUSY). Switching, ticking, accessing
//    or executing on an offline CPU is ENODEV. Debug registers of an offline CPU stay readable
//    and writable and keep their values across offline/online (the driver owns them).
//  - Tasks with ids (1, 2, 3, ... in creation order, never reused, including the id of a fork
//    that an observer vetoed). fork(parent) gives a new task with a plain copy of the parent's
//    memory and its ip; it does not inherit single-step. exit(task): if the task is running, its
//    CPU is first switched to idle (on_switch(cpu, task, idle) is reported), then the task is
//    removed and on_exit(task) is reported.
//  - An explicit scheduler: switch_to(cpu, task) / switch_to_idle(cpu). A task runs on at most
//    one CPU (EBUSY otherwise). Switching a CPU to what it already runs is a no-op (no report).
//  - A global simulated clock in nanoseconds, starting at 0: tick(cpu) advances it by kTickNs,
//    every access() and exec() by kAccessNs; nothing else advances it.
//  - Per-CPU debug registers DR0–DR3, DR6, DR7 (hwarb/x86/debugreg.h layouts). The machine only
//    stores them and applies x86 rules on accesses; who owns a slot is the driver's business.
//    DR6 is stored with "set means happened" polarity (dr6_hardware() gives the raw image). Like
//    the hardware, the machine only ever sets DR6 bits (sticky); the handler clears them.
//  - Per-task sparse memory (SparseMemory): unset bytes read 0, little-endian values.
//
// Debug semantics (x86):
//  - Only slots enabled in DR7 (L or G bit) are considered; their Bn bits are never set otherwise.
//  - Data breakpoints: RW=01 matches writes, RW=11 reads and writes, RW=10 (I/O) never matches
//    memory, RW=00 never matches data. A slot matches when x86::data_match(DRn, LENn, addr, size)
//    holds (the access's byte range overlaps the aligned range [DRn & ~(len-1), +len)). They are
//    TRAPS: the access happens first (memory is updated for writes), then one exception reports
//    every matching slot (Bn bits in one DR6 value) with the access's ip/addr/size/old/new value.
//  - Execute breakpoints (RW=00) match exec(ip) when x86::exec_match(DRn, ip) (LEN is ignored).
//    They are FAULTS: the exception is delivered before the instruction executes; the machine
//    then resumes it with the resume flag (RF) set, so the same exec does not fault again: exactly
//    one fault report per exec() call.
//  - The ip of a data access is the ip of the task's last exec() (0 before any).
//  - Single step (per task, optional): after each access()/exec() of a single-stepping task, BS
//    is raised; for an access it is reported in the same exception as the data traps; for an exec
//    it is a separate trap after the instruction (so a faulting, single-stepped exec reports two).
//  - The exception's `time` is the clock when it is raised: a fault at the start of the exec, a
//    trap after the access (start + kAccessNs).
//
// Branch Trace Store (per CPU, hwarb/x86/bts.h rules):
//  - One machine-wide record/DS format (bts_format(), default k64), changeable only while no CPU
//    has a DS area installed and not from a callback (EBUSY). kernel_start() is the first kernel
//    address of the format: 0x00007ffffffff000 (k64, Linux's TASK_SIZE_MAX) or 0xc0000000 (k32).
//  - Per CPU (any possible CPU, online or not): IA32_DEBUGCTL (stored as is), an optional DS area
//    (its BTS fields) with the memory it describes, and a count of dropped records. Like the debug
//    registers they are CPU state: they stay across task switches and offline/online, and the
//    machine never changes them except through a store (the index) or a drop (the count, which
//    only grows). set_ds_area validates the area (x86::ds::validate_bts) and needs a buffer
//    covering [bts_buffer_base, bts_absolute_maximum); the machine does not own that memory, the
//    caller keeps it alive while it is installed. clear_ds_area with no area is a no-op.
//  - branch(cpu, task, from, to, predicted) is one taken branch of the running task: the same
//    preconditions and errors as exec(). The branch is a kernel branch iff from >= kernel_start().
//    It applies x86::store_bts with the CPU's DEBUGCTL and DS area (no area: nothing stored); a
//    store error (a 64-bit address on a 32-bit machine) fails the call and changes nothing.
//    Otherwise the task's ip becomes `to`, the clock advances by kAccessNs, a drop is counted, and
//    then, when the store reached the interrupt threshold with BTINT set, the BtsInterruptHandler
//    is called (the PMI). Like the debug handler it runs inside the call (callback rules below);
//    it typically reads the buffer and moves the index back (set_bts_index), or stops the task.
//  - run(cpu, task, walk, count) takes up to `count` branches of `walk` through branch(),
//    stopping early once the task is stopped (by the PMI handler); it returns how many were
//    taken. The walk's format must be the machine's (EINVAL), so its addresses fit and its kernel
//    blocks are kernel branches. A stopped or not-running task is refused before any branch.
//
// Guest mode (a KVM vCPU; sim/src/machine_guest.cpp):
//  - enter_guest(cpu, regs) is VM entry on an online CPU that runs a task (the vCPU thread): the
//    guest's DR0-DR3/DR6/DR7 are loaded into the CPU's registers (DR7 bits 32-63: EINVAL, as
//    set_dr7). EBUSY when the CPU is already in a guest; EINVAL naming `cpu` when it is idle;
//    ENODEV when it is offline.
//  - While a CPU is in a guest, guest_access(cpu, kind, addr, size) is one access (kRead/kWrite,
//    size 1, 2, 4 or 8) or instruction fetch (kExec, size ignored) by the guest: it matches the
//    CPU's registers, which are the guest's, by the x86 rules above, ORs the raised B0-B3 into the
//    CPU's DR6 (the guest's) and returns them. Nothing is delivered to the host's handler (the
//    guest's #DB is the guest's), guest memory is not modelled and the host clock does not move.
//    EINVAL when the CPU is not in a guest.
//  - exit_guest(cpu) is VM exit: it returns the registers as the guest left them. As on VMX, the
//    exit loads DR7 with kVmExitDr7 (0x400: every breakpoint disabled) and leaves DR0-DR3 and DR6
//    as the guest left them: restoring the host's values is the host's job (System::guest_exit,
//    Linux's hw_breakpoint_restore). EINVAL when the CPU is not in a guest.
//  - The task of a CPU in a guest is busy in it: switch_to/switch_to_idle on that CPU, exit of
//    that task, and access/exec/branch/run on that CPU are EBUSY (naming the CPU). tick, the
//    register accessors and everything on other CPUs work as usual.
//
// Observers and reentrancy: observers are called synchronously, in registration order, after the
// state change they report (inside on_switch, current(cpu) is already `next`). From inside any
// callback a handler may read/write debug registers, read/write memory directly and query state;
// every scheduling or scripted call (create_task, fork, exit, switch_to*, tick, set_online,
// access, exec, branch, run, set_single_step, add/remove observers, set_debug_handler,
// set_bts_interrupt_handler, set_bts_format) returns EBUSY there. The BTS calls set_debugctl,
// set_ds_area, clear_ds_area, set_bts_index and their reads are allowed, like set_stopped.
// on_fork may veto the fork: the first error stops it, the observers already told get
// on_fork_rollback(parent, child), the child is removed and fork returns that error.
//
// Errors: every fallible call returns Result; the message names the field ("cpu: 9 is not a
// possible CPU (0..3)"). A failing call changes nothing. Determinism: the same calls give the same
// results and the same callbacks. Thread-safety: none; a Machine must be used by one thread at a
// time (callers serialise).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/sim/memory.h"
#include "hwarb/x86/bts.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {

class BranchWalk;  // hwarb/sim/branch_walk.h

inline constexpr int kMaxCpus = 65536;
inline constexpr std::uint64_t kTickNs = 1'000'000;  // one scheduler tick: 1 ms
inline constexpr std::uint64_t kAccessNs = 1;        // one access(), exec() or branch(): 1 ns
inline constexpr std::uint64_t kVmExitDr7 = 0x400;   // DR7 after a VM exit (VMX: 400H)

// The first kernel address of a BTS format: Linux's TASK_SIZE_MAX (k64) or the 3G/1G split (k32).
constexpr std::uint64_t kernel_start_of(x86::BtsFormat format) {
  return format == x86::BtsFormat::k64 ? 0x00007ffffffff000 : 0xc0000000;
}

enum class AccessKind : std::uint8_t { kRead, kWrite, kExec };

// Per-CPU debug registers. dr6 has "set means happened" polarity.
struct DebugRegisters {
  std::uint64_t dr[4] = {0, 0, 0, 0};
  std::uint64_t dr6 = 0;
  std::uint64_t dr7 = 0;
  friend bool operator==(const DebugRegisters&, const DebugRegisters&) = default;
};

// One #DB exception as delivered to the handler.
struct DebugException {
  CpuId cpu;
  TaskId task;
  std::uint64_t dr6 = 0;  // the bits this exception raised (B0–B3, BS), "set means happened"
  std::uint64_t ip = 0;
  std::uint64_t addr = 0;  // data address; for exec the instruction address (== ip)
  int size = 0;            // access size; 0 for exec
  AccessKind kind = AccessKind::kRead;
  std::uint64_t old_value = 0;  // memory before the access (reads: the value read)
  std::uint64_t new_value = 0;  // memory after the access (reads: the value read)
  std::uint64_t time = 0;
  // A kernel-mode access (Machine::kernel_access): `task` is the task the CPU ran, or TaskId{}
  // (0, never a task's id) when it was idle.
  bool kernel = false;
  friend bool operator==(const DebugException&, const DebugException&) = default;
};

class DebugExceptionHandler {
 public:
  virtual ~DebugExceptionHandler() = default;
  virtual void on_debug_exception(const DebugException& e) = 0;
};

// Scheduler events. All default to doing nothing. A task of std::nullopt means idle.
class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void on_switch(CpuId, std::optional<TaskId> /*prev*/, std::optional<TaskId> /*next*/) {}
  virtual void on_tick(CpuId) {}
  // Called after the child exists; an error vetoes the fork (see the header comment).
  virtual Result<void> on_fork(TaskId /*parent*/, TaskId /*child*/) { return {}; }
  virtual void on_fork_rollback(TaskId /*parent*/, TaskId /*child*/) {}
  // Called after the task is gone.
  virtual void on_exit(TaskId) {}
  virtual void on_cpu_online(CpuId) {}
  virtual void on_cpu_offline(CpuId) {}
};

// The PMI of the BTS facility: called synchronously inside branch()/run() when a store reaches the
// interrupt threshold with BTINT set.
class BtsInterruptHandler {
 public:
  virtual ~BtsInterruptHandler() = default;
  virtual void on_bts_interrupt(CpuId cpu) = 0;
};

// What one branch() did (x86::BtsStore).
struct BranchOutcome {
  bool stored = false;     // a record was written
  bool wrapped = false;    // the circular buffer went back to its base first
  bool dropped = false;    // full with BTINT set: not stored, counted in bts_dropped
  bool interrupt = false;  // the store reached the threshold: the PMI was raised
};

// What one access()/exec() did.
struct Outcome {
  std::uint64_t old_value = 0;  // access: memory before (reads: the value read); exec: 0
  std::uint64_t new_value = 0;  // access: memory after (reads: the value read); exec: 0
  std::uint64_t dr6 = 0;        // union of the bits raised by this call's exceptions
  int exceptions = 0;           // exceptions delivered by this call
};

// One access of a batch (Machine::access_many): what access() takes.
struct AccessOp {
  AccessKind kind = AccessKind::kRead;  // kRead or kWrite
  int size = 1;                         // 1, 2, 4 or 8
  std::uint64_t addr = 0;
  std::uint64_t value = 0;  // ignored for reads
};

// What one access_many() did.
struct BatchOutcome {
  std::size_t done = 0;   // accesses carried out: all of them unless the task was stopped
  int exceptions = 0;     // exceptions delivered (at most one per access)
  std::uint64_t dr6 = 0;  // union of the bits raised by these exceptions
};

// Pure x86 matching rules over one CPU's registers (what access()/exec() use): the B0–B3 bits of
// the enabled slots that a data access (kRead/kWrite; kExec gives 0) or an instruction fetch at ip
// matches.
std::uint64_t data_breakpoint_hits(const DebugRegisters& regs, AccessKind kind, std::uint64_t addr,
                                   int size);
std::uint64_t exec_breakpoint_hits(const DebugRegisters& regs, std::uint64_t ip);

class Machine {
 public:
  // cpus in 1..kMaxCpus, else EINVAL.
  static Result<std::unique_ptr<Machine>> create(int cpus);

  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // --- CPUs -------------------------------------------------------------------------------
  int possible_cpus() const { return static_cast<int>(cpus_.size()); }
  int online_cpus() const { return online_count_; }
  Result<bool> is_online(CpuId cpu) const;
  // Online/offline a CPU. Already in that state: EINVAL. Offline needs an idle CPU that is not the
  // last online one (EBUSY).
  Result<void> set_online(CpuId cpu, bool online);
  // The task running on cpu, nullopt when idle.
  Result<std::optional<TaskId>> current(CpuId cpu) const;

  // --- Tasks ------------------------------------------------------------------------------
  Result<TaskId> create_task();
  Result<TaskId> fork(TaskId parent);
  Result<void> exit(TaskId task);
  bool task_exists(TaskId task) const { return tasks_.contains(task.value()); }
  std::size_t task_count() const { return tasks_.size(); }
  // Live tasks in id order.
  std::vector<TaskId> tasks() const;
  // The parent a task was forked from (nullopt for create_task), ESRCH for an unknown task.
  Result<std::optional<TaskId>> parent(TaskId task) const;
  // The CPU the task runs on, nullopt when not running.
  Result<std::optional<CpuId>> running_on(TaskId task) const;
  Result<void> set_single_step(TaskId task, bool on);
  // A stopped task (a ptrace stop) does no work: access()/exec() by it are EBUSY. Stopping does
  // not deschedule it. Unlike the other scheduling calls, set_stopped may be called from inside
  // a callback, as the debug-exception handler stops the task that trapped (the rest of the
  // access or exec in progress still completes; the stop takes effect after it).
  Result<void> set_stopped(TaskId task, bool stopped);
  Result<bool> stopped(TaskId task) const;

  // --- Scheduler and clock ----------------------------------------------------------------
  Result<void> switch_to(CpuId cpu, TaskId task);
  Result<void> switch_to_idle(CpuId cpu);
  Result<void> tick(CpuId cpu);
  std::uint64_t now() const { return now_ns_; }
  Result<std::uint64_t> ticks(CpuId cpu) const;  // ticks done on cpu

  // --- Debug registers (any possible CPU, online or not) -----------------------------------
  Result<DebugRegisters> debug_registers(CpuId cpu) const;
  Result<std::uint64_t> debug_address(CpuId cpu, int slot) const;  // DR0–DR3
  Result<void> set_debug_address(CpuId cpu, int slot, std::uint64_t addr);
  Result<std::uint64_t> dr7(CpuId cpu) const;
  // Bits 32–63 are reserved: a value with any of them set is EINVAL (the hardware's #GP).
  Result<void> set_dr7(CpuId cpu, std::uint64_t value);
  Result<std::uint64_t> dr6(CpuId cpu) const;           // "set means happened"
  Result<std::uint64_t> dr6_hardware(CpuId cpu) const;  // x86::dr6::to_hardware(dr6)
  Result<void> set_dr6(CpuId cpu, std::uint64_t happened);

  // --- Memory (direct, no debug semantics, no CPU needed) ----------------------------------
  Result<std::uint64_t> read_memory(TaskId task, std::uint64_t addr, int size) const;
  Result<void> write_memory(TaskId task, std::uint64_t addr, int size, std::uint64_t value);

  // --- Scripted work: the task must be running on cpu --------------------------------------
  // kind is kRead or kWrite; value is ignored for reads. Checks, in this order: not in a callback
  // (EBUSY), kind (EINVAL), the task running on that online CPU, not stopped (EBUSY), size and
  // range (EINVAL). Defined inline below: the successful call is inlined into its caller.
  Result<Outcome> access(CpuId cpu, TaskId task, AccessKind kind, std::uint64_t addr, int size,
                         std::uint64_t value = 0);
  Result<Outcome> exec(CpuId cpu, TaskId task, std::uint64_t ip);
  // A kernel-mode data access by CPU N (online), whatever it runs (a task, even a stopped one, or
  // idle), at a kernel address: addr at or above kernel_start(), else EINVAL naming addr. Kernel
  // memory is one sparse memory shared by every CPU (unset bytes read 0). The same trap
  // semantics as access(), with `ip` as the exception's ip, `kernel` set, and no single-step.
  Result<Outcome> kernel_access(CpuId cpu, AccessKind kind, std::uint64_t addr, int size,
                                std::uint64_t value = 0, std::uint64_t ip = 0);
  // A batch of accesses by the task running on cpu: the same as calling access() for ops[0],
  // ops[1], ... in order (same memory, clock, DR6, exceptions and handler calls, one after the
  // other), without building a Result per access.
  //  - All-or-nothing checks first, in this order: not in a callback (EBUSY); every op's kind,
  //    size and range (EINVAL, access()'s message prefixed with "ops[i]"); `outcomes` empty or
  //    at least ops.size() long (EINVAL); the task running on that online CPU; not stopped
  //    (EBUSY). On an error no access has been made.
  //  - Then the accesses. A debug-exception handler may stop the task (set_stopped): the batch
  //    ends after that access (done < ops.size()), as run() does. Register writes by a handler
  //    apply from the next access on.
  //  - outcomes[i] receives access i's Outcome for i < done (nothing is written when empty).
  // An empty batch succeeds after the checks with done = 0.
  Result<BatchOutcome> access_many(CpuId cpu, TaskId task, std::span<const AccessOp> ops,
                                   std::span<Outcome> outcomes = {});

  // --- Branch Trace Store (see the header comment) ------------------------------------------
  x86::BtsFormat bts_format() const { return bts_format_; }
  // EBUSY while any CPU has a DS area installed, or from a callback.
  Result<void> set_bts_format(x86::BtsFormat format);
  std::uint64_t kernel_start() const { return kernel_start_; }
  // Per CPU, any possible CPU (online or not).
  Result<void> set_debugctl(CpuId cpu, std::uint64_t value);
  Result<std::uint64_t> debugctl(CpuId cpu) const;
  // Installs the area's BTS fields and their memory (buffer[i] is linear address
  // area.bts_buffer_base + i; not owned). EINVAL when x86::ds::validate_bts fails (its message)
  // or the buffer is shorter than bts_absolute_maximum - bts_buffer_base ("buffer: ...").
  // Replaces the previous area.
  Result<void> set_ds_area(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer);
  Result<void> clear_ds_area(CpuId cpu);
  Result<x86::DsArea> ds_area(CpuId cpu) const;  // ENOENT when none is installed
  // ENOENT without an area; EINVAL when the area with this index would not validate.
  Result<void> set_bts_index(CpuId cpu, std::uint64_t index);
  // Records not stored because the buffer was full with BTINT set, since the machine started.
  Result<std::uint64_t> bts_dropped(CpuId cpu) const;
  Result<void> set_bts_interrupt_handler(BtsInterruptHandler* handler);  // nullptr: none
  // One taken branch of the task running on cpu.
  Result<BranchOutcome> branch(CpuId cpu, TaskId task, std::uint64_t from, std::uint64_t to,
                               bool predicted = false);
  // Up to `count` branches of `walk`; stops early when the task is stopped. Returns how many.
  Result<std::uint64_t> run(CpuId cpu, TaskId task, BranchWalk& walk, std::uint64_t count);

  // --- Guest mode (see the header comment) ---------------------------------------------------
  Result<void> enter_guest(CpuId cpu, const DebugRegisters& guest);
  Result<std::uint64_t> guest_access(CpuId cpu, AccessKind kind, std::uint64_t addr, int size);
  Result<DebugRegisters> exit_guest(CpuId cpu);
  Result<bool> in_guest(CpuId cpu) const;

  // --- Observers (not owned; they must outlive the machine or be removed) ------------------
  Result<void> set_debug_handler(DebugExceptionHandler* handler);  // nullptr: none
  Result<void> add_observer(SchedulerObserver* observer);          // EEXIST if already added
  Result<void> remove_observer(SchedulerObserver* observer);       // ENOENT if not added

 private:
  struct Task;
  // A CPU's data slots decoded for access(), by slot number: slot s matches an access of `kind`
  // when bit s of watch[kind] is set and the byte ranges overlap (x86::data_match's half-open
  // [lo[s], hi[s]), with hi computed the same way). Only enabled data slots (L or G, RW = 01 or
  // 11) have their bit in watch. Rebuilt on every DR0–DR3/DR7 write.
  struct DataSlots {
    std::array<std::uint64_t, 4> lo{};
    std::array<std::uint64_t, 4> hi{};
    std::array<std::uint8_t, 2> watch{};  // [kRead], [kWrite]: the B0–B3 bits of the slots
  };
  // The B0–B3 bits of the slots an access of [addr, addr+size) of `kind` matches: four compares
  // without a branch, masked by the slots that watch this kind (inline below).
  static std::uint64_t data_hits(const DataSlots& d, AccessKind kind, std::uint64_t addr, int size);
  struct Cpu {
    bool online = true;
    std::optional<TaskId> current;
    Task* running = nullptr;  // tasks_' node of `current` (std::map nodes are stable)
    DebugRegisters regs;
    std::uint64_t ticks = 0;
    DataSlots data;
    std::uint64_t debugctl = 0;
    bool has_ds = false;
    x86::DsArea ds;                   // meaningful when has_ds
    std::span<std::byte> bts_buffer;  // the memory of [bts_buffer_base, bts_absolute_maximum)
    std::uint64_t bts_dropped = 0;
    bool guest = false;  // in guest mode (enter_guest .. exit_guest)
  };
  struct Task {
    std::optional<TaskId> parent;
    std::optional<CpuId> running_on;
    bool single_step = false;
    bool stopped = false;
    std::uint64_t ip = 0;
    SparseMemory memory;
  };

  explicit Machine(int cpus);

  Result<void> not_in_callback(const char* op) const;
  static std::unexpected<Error> stopped_error(TaskId task);
  Result<const Cpu*> find_cpu(CpuId cpu) const;
  Result<Cpu*> find_cpu(CpuId cpu);
  Result<Cpu*> find_online_cpu(CpuId cpu);
  Result<const Task*> find_task(TaskId task) const;
  Result<Task*> find_task(TaskId task);
  Result<Task*> find_running(CpuId cpu, TaskId task);
  // access()/exec()'s fast path: the task when it is running on that online CPU, else nullptr
  // (then find_running gives the error). Inline below.
  Task* running_task(CpuId cpu, TaskId task);
  // The task running on that online CPU and not stopped (running_task, else find_running's
  // error; then EBUSY when stopped): what access(), access_many() and working_task() check.
  Result<Task*> running_unstopped(CpuId cpu, TaskId task);
  static void decode_data_slots(Cpu& c);
  // One access once its checks passed (access() and access_many()): memory, clock, the match
  // against the decoded slots and the exception, if any. Inline below.
  Outcome do_access(CpuId cpu, TaskId task, Task& s, AccessKind kind, std::uint64_t addr, int size,
                    std::uint64_t value);
  // access() with each check made by the slow helpers, in access()'s order, that build its error.
  // The inline access() calls it only when one of its own checks failed, so that out-of-line code
  // builds the error; given arguments that pass every check it makes the access (do_access).
  Result<Outcome> access_checked(CpuId cpu, TaskId task, AccessKind kind, std::uint64_t addr,
                                 int size, std::uint64_t value);
  // Checks what exec(), branch() and run() need, in this order: not in a callback (op names the
  // call), then running_unstopped.
  Result<Task*> working_task(CpuId cpu, TaskId task, const char* op);
  // branch() once its checks passed.
  Result<BranchOutcome> take_branch(CpuId cpu, Task& task, std::uint64_t from, std::uint64_t to,
                                    bool predicted);
  // EBUSY when cpu (a valid index) is in guest mode; `op` names the refused call.
  Result<void> not_in_guest(CpuId cpu, const char* op) const;
  void notify_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next);
  void deliver(const DebugException& e);

  std::vector<Cpu> cpus_;
  int online_count_ = 0;
  std::map<std::int64_t, Task> tasks_;
  std::int64_t next_task_id_ = 1;
  std::uint64_t now_ns_ = 0;
  DebugExceptionHandler* handler_ = nullptr;
  BtsInterruptHandler* bts_handler_ = nullptr;
  x86::BtsFormat bts_format_ = x86::BtsFormat::k64;
  std::uint64_t kernel_start_ = kernel_start_of(x86::BtsFormat::k64);
  SparseMemory kernel_memory_;  // kernel_access()
  int ds_areas_ = 0;            // CPUs with a DS area installed
  std::vector<SchedulerObserver*> observers_;
  int callback_depth_ = 0;
};

// --- access()'s fast path, inline so that a successful access() is inlined into its caller -----

inline std::uint64_t Machine::data_hits(const DataSlots& d, AccessKind kind, std::uint64_t addr,
                                        int size) {
  const std::uint64_t end = addr + static_cast<std::uint64_t>(size);
  std::uint64_t bits = 0;
  for (std::size_t slot = 0; slot < 4; ++slot) {
    const auto below = static_cast<std::uint64_t>(addr < d.hi[slot]);
    const auto above = static_cast<std::uint64_t>(d.lo[slot] < end);
    bits |= (below & above) << slot;
  }
  return bits & d.watch[static_cast<std::size_t>(kind)];
}

inline Machine::Task* Machine::running_task(CpuId cpu, TaskId task) {
  // One unsigned compare: a negative id converts to a huge index.
  const auto index = static_cast<std::size_t>(cpu.value());
  if (index >= cpus_.size()) return nullptr;
  Cpu& c = cpus_[index];
  if (!c.online || c.current != task || c.guest) return nullptr;
  return c.running;
}

inline Outcome Machine::do_access(CpuId cpu, TaskId task, Task& s, AccessKind kind,
                                  std::uint64_t addr, int size, std::uint64_t value) {
  // The match and the clock come first: they read the machine's own fields, which the write to
  // guest memory below could alias as far as the compiler knows (it would reload them).
  std::uint64_t bits =
      data_hits(cpus_[static_cast<std::size_t>(cpu.value())].data, kind, addr, size);
  if (s.single_step) bits |= x86::dr6::kSingleStep;
  now_ns_ += kAccessNs;
  Outcome out;
  const bool write = kind == AccessKind::kWrite;
  out.old_value = s.memory.exchange(addr, size, write, value);
  out.new_value = write ? value & SparseMemory::mask_of(size) : out.old_value;
  if (bits != 0) [[unlikely]] {
    DebugException e{cpu,  task, bits,          s.ip,          addr,
                     size, kind, out.old_value, out.new_value, now_ns_};
    out.dr6 = bits;
    out.exceptions = 1;
    deliver(e);
  }
  return out;
}

// The same checks as access_checked, in the same order, without building anything; any failure
// goes to access_checked, which builds the error.
inline Result<Outcome> Machine::access(CpuId cpu, TaskId task, AccessKind kind, std::uint64_t addr,
                                       int size, std::uint64_t value) {
  if (callback_depth_ > 0) [[unlikely]] {
    return access_checked(cpu, task, kind, addr, size, value);
  }
  if (kind != AccessKind::kRead && kind != AccessKind::kWrite) [[unlikely]] {
    return access_checked(cpu, task, kind, addr, size, value);
  }
  Task* running = running_task(cpu, task);
  if (running == nullptr || running->stopped || !SparseMemory::valid_size(size) ||
      !SparseMemory::valid_range(addr, size)) [[unlikely]] {
    return access_checked(cpu, task, kind, addr, size, value);
  }
  return do_access(cpu, task, *running, kind, addr, size, value);
}

}  // namespace hwarb::sim

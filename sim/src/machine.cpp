#include "hwarb/sim/machine.h"

#include "hwarb/base/format.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "hwarb/sim/branch_walk.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {

namespace {

std::string task_name(std::optional<TaskId> t) {
  return t ? std::to_string(t->value()) : std::string("idle");
}

// Does a data slot of this type watch this kind of access?
constexpr bool type_matches(x86::DrType type, AccessKind kind) {
  switch (type) {
    case x86::DrType::kWrite:
      return kind == AccessKind::kWrite;
    case x86::DrType::kReadWrite:
      return kind == AccessKind::kRead || kind == AccessKind::kWrite;
    case x86::DrType::kExecute:
    case x86::DrType::kIo:
      return false;
  }
  return false;
}

Result<void> check_slot(int slot) {
  if (slot < 0 || slot >= x86::kSlots) {
    return make_error(ErrorCode::kInval,
                      "slot: " + std::to_string(slot) + " is not a debug address register (0..3)");
  }
  return {};
}

constexpr std::uint8_t kind_bit(AccessKind kind) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(kind));
}

// The access kinds a data slot of this type watches, as kind_bit()s (type_matches as a mask).
constexpr std::uint8_t kinds_of(x86::DrType type) {
  std::uint8_t k = 0;
  if (type_matches(type, AccessKind::kRead)) k |= kind_bit(AccessKind::kRead);
  if (type_matches(type, AccessKind::kWrite)) k |= kind_bit(AccessKind::kWrite);
  return k;
}

Result<void> check_range(std::uint64_t addr, int size) {
  if (!SparseMemory::valid_size(size)) {
    return make_error(ErrorCode::kInval, "size: " + std::to_string(size) + " is not 1, 2, 4 or 8");
  }
  if (!SparseMemory::valid_range(addr, size)) {
    return make_error(ErrorCode::kInval,
                      "addr: " + hex(addr) + " + " + std::to_string(size) + " wraps past 2^64");
  }
  return {};
}

}  // namespace

std::uint64_t data_breakpoint_hits(const DebugRegisters& regs, AccessKind kind, std::uint64_t addr,
                                   int size) {
  std::uint64_t bits = 0;
  if (!x86::dr7::any_enabled(regs.dr7)) return 0;
  for (int slot = 0; slot < x86::kSlots; ++slot) {
    if (!x86::dr7::enabled(regs.dr7, slot)) continue;
    if (!type_matches(x86::dr7::type(regs.dr7, slot), kind)) continue;
    if (x86::data_match(regs.dr[slot], x86::dr7::len(regs.dr7, slot), addr, size)) {
      bits |= x86::dr6::trap_bit(slot);
    }
  }
  return bits;
}

std::uint64_t exec_breakpoint_hits(const DebugRegisters& regs, std::uint64_t ip) {
  std::uint64_t bits = 0;
  if (!x86::dr7::any_enabled(regs.dr7)) return 0;
  for (int slot = 0; slot < x86::kSlots; ++slot) {
    if (!x86::dr7::enabled(regs.dr7, slot)) continue;
    if (x86::dr7::type(regs.dr7, slot) != x86::DrType::kExecute) continue;
    if (x86::exec_match(regs.dr[slot], ip)) bits |= x86::dr6::trap_bit(slot);
  }
  return bits;
}

// Counts callback nesting so that scheduling calls from inside a callback are refused.
class CallbackScope {
 public:
  explicit CallbackScope(int& depth) : depth_(depth) { ++depth_; }
  ~CallbackScope() { --depth_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  int& depth_;
};

Machine::Machine(int cpus) : cpus_(static_cast<std::size_t>(cpus)), online_count_(cpus) {}

Result<std::unique_ptr<Machine>> Machine::create(int cpus) {
  if (cpus < 1 || cpus > kMaxCpus) {
    return make_error(ErrorCode::kInval, "cpus: " + std::to_string(cpus) + " is not in 1.." +
                                             std::to_string(kMaxCpus));
  }
  return std::unique_ptr<Machine>(new Machine(cpus));
}

// --- lookups -------------------------------------------------------------------------------

Result<void> Machine::not_in_callback(const char* op) const {
  if (callback_depth_ > 0) {
    return make_error(ErrorCode::kBusy,
                      std::string("machine: ") + op + " called from inside an observer callback");
  }
  return {};
}

Result<const Machine::Cpu*> Machine::find_cpu(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= possible_cpus()) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) +
                                             " is not a possible CPU (0.." +
                                             std::to_string(possible_cpus() - 1) + ")");
  }
  return &cpus_[static_cast<std::size_t>(cpu.value())];
}

Result<Machine::Cpu*> Machine::find_cpu(CpuId cpu) {
  auto c = std::as_const(*this).find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return const_cast<Cpu*>(*c);
}

Result<Machine::Cpu*> Machine::find_online_cpu(CpuId cpu) {
  auto c = find_cpu(cpu);
  if (!c) return c;
  if (!(*c)->online) {
    return make_error(ErrorCode::kNoDev, "cpu: " + std::to_string(cpu.value()) + " is offline");
  }
  return c;
}

Result<const Machine::Task*> Machine::find_task(TaskId task) const {
  auto it = tasks_.find(task.value());
  if (it == tasks_.end()) {
    return make_error(ErrorCode::kSrch,
                      "task: " + std::to_string(task.value()) + " does not exist");
  }
  return &it->second;
}

Result<Machine::Task*> Machine::find_task(TaskId task) {
  auto t = std::as_const(*this).find_task(task);
  if (!t) return std::unexpected(t.error());
  return const_cast<Task*>(*t);
}

Result<Machine::Task*> Machine::find_running(CpuId cpu, TaskId task) {
  auto c = find_online_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  auto t = find_task(task);
  if (!t) return t;
  if ((*c)->current != task) {
    return make_error(ErrorCode::kInval, "task: " + std::to_string(task.value()) +
                                             " is not running on cpu " +
                                             std::to_string(cpu.value()) +
                                             " (running: " + task_name((*c)->current) + ")");
  }
  if (auto g = not_in_guest(cpu, "work"); !g) return std::unexpected(g.error());
  return t;
}

[[gnu::always_inline]] inline Result<Machine::Task*> Machine::running_unstopped(CpuId cpu,
                                                                                TaskId task) {
  Task* running = running_task(cpu, task);
  if (running == nullptr) {
    auto t = find_running(cpu, task);
    if (!t) return t;
    running = *t;
  }
  if (running->stopped) return stopped_error(task);
  return running;
}

// --- CPUs ----------------------------------------------------------------------------------

Result<bool> Machine::is_online(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->online;
}

Result<void> Machine::set_online(CpuId cpu, bool online) {
  if (auto ok = not_in_callback("set_online"); !ok) return ok;
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  const std::string name = "cpu: " + std::to_string(cpu.value());
  if (s.online == online) {
    return make_error(ErrorCode::kInval,
                      name + (online ? " is already online" : " is already offline"));
  }
  if (!online) {
    if (s.current) {
      return make_error(ErrorCode::kBusy,
                        name + " is running task " + std::to_string(s.current->value()));
    }
    if (online_count_ == 1) return make_error(ErrorCode::kBusy, name + " is the last online CPU");
  }
  s.online = online;
  online_count_ += online ? 1 : -1;
  CallbackScope scope(callback_depth_);
  for (auto* o : observers_) {
    if (online) {
      o->on_cpu_online(cpu);
    } else {
      o->on_cpu_offline(cpu);
    }
  }
  return {};
}

Result<std::optional<TaskId>> Machine::current(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->current;
}

// --- tasks ---------------------------------------------------------------------------------

Result<TaskId> Machine::create_task() {
  if (auto ok = not_in_callback("create_task"); !ok) return std::unexpected(ok.error());
  TaskId id(next_task_id_++);
  tasks_.emplace(id.value(), Task{});
  return id;
}

Result<TaskId> Machine::fork(TaskId parent) {
  if (auto ok = not_in_callback("fork"); !ok) return std::unexpected(ok.error());
  auto p = find_task(parent);
  if (!p)
    return make_error(p.error().code(),
                      "parent: " + std::to_string(parent.value()) + " does not exist");
  Task child;
  child.parent = parent;
  child.ip = (*p)->ip;
  child.memory = (*p)->memory;
  TaskId id(next_task_id_++);
  tasks_.emplace(id.value(), std::move(child));
  CallbackScope scope(callback_depth_);
  for (std::size_t i = 0; i < observers_.size(); ++i) {
    auto ok = observers_[i]->on_fork(parent, id);
    if (ok) continue;
    for (std::size_t j = 0; j < i; ++j) observers_[j]->on_fork_rollback(parent, id);
    tasks_.erase(id.value());
    return std::unexpected(ok.error());
  }
  return id;
}

Result<void> Machine::exit(TaskId task) {
  if (auto ok = not_in_callback("exit"); !ok) return ok;
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  std::optional<CpuId> cpu = (*t)->running_on;
  if (cpu) {
    if (auto g = not_in_guest(*cpu, "exit"); !g) return g;
    Cpu& c = cpus_[static_cast<std::size_t>(cpu->value())];
    c.current.reset();
    c.running = nullptr;
  }
  tasks_.erase(task.value());
  if (cpu) notify_switch(*cpu, task, std::nullopt);
  CallbackScope scope(callback_depth_);
  for (auto* o : observers_) o->on_exit(task);
  return {};
}

std::vector<TaskId> Machine::tasks() const {
  std::vector<TaskId> out;
  out.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_) out.emplace_back(id);
  return out;
}

Result<std::optional<TaskId>> Machine::parent(TaskId task) const {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  return (*t)->parent;
}

Result<std::optional<CpuId>> Machine::running_on(TaskId task) const {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  return (*t)->running_on;
}

Result<void> Machine::set_single_step(TaskId task, bool on) {
  if (auto ok = not_in_callback("set_single_step"); !ok) return ok;
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  (*t)->single_step = on;
  return {};
}

Result<void> Machine::set_stopped(TaskId task, bool stopped) {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  (*t)->stopped = stopped;
  return {};
}

Result<bool> Machine::stopped(TaskId task) const {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  return (*t)->stopped;
}

std::unexpected<Error> Machine::stopped_error(TaskId task) {
  return make_error(ErrorCode::kBusy, "task: " + std::to_string(task.value()) +
                                          " is in a ptrace stop; its tracer must resume it");
}

// --- scheduler -----------------------------------------------------------------------------

void Machine::notify_switch(CpuId cpu, std::optional<TaskId> prev, std::optional<TaskId> next) {
  CallbackScope scope(callback_depth_);
  for (auto* o : observers_) o->on_switch(cpu, prev, next);
}

Result<void> Machine::switch_to(CpuId cpu, TaskId task) {
  if (auto ok = not_in_callback("switch_to"); !ok) return ok;
  auto c = find_online_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  if (auto g = not_in_guest(cpu, "switch_to"); !g) return g;
  Cpu& s = **c;
  if (s.current == task) return {};
  if ((*t)->running_on) {
    return make_error(ErrorCode::kBusy, "task: " + std::to_string(task.value()) +
                                            " is already running on cpu " +
                                            std::to_string((*t)->running_on->value()));
  }
  std::optional<TaskId> prev = s.current;
  if (prev) tasks_.at(prev->value()).running_on.reset();
  s.current = task;
  s.running = *t;
  (*t)->running_on = cpu;
  notify_switch(cpu, prev, task);
  return {};
}

Result<void> Machine::switch_to_idle(CpuId cpu) {
  if (auto ok = not_in_callback("switch_to_idle"); !ok) return ok;
  auto c = find_online_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  if (auto g = not_in_guest(cpu, "switch_to_idle"); !g) return g;
  if (!s.current) return {};
  std::optional<TaskId> prev = s.current;
  tasks_.at(prev->value()).running_on.reset();
  s.current.reset();
  s.running = nullptr;
  notify_switch(cpu, prev, std::nullopt);
  return {};
}

Result<void> Machine::tick(CpuId cpu) {
  if (auto ok = not_in_callback("tick"); !ok) return ok;
  auto c = find_online_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  ++(*c)->ticks;
  now_ns_ += kTickNs;
  CallbackScope scope(callback_depth_);
  for (auto* o : observers_) o->on_tick(cpu);
  return {};
}

Result<std::uint64_t> Machine::ticks(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->ticks;
}

// --- debug registers -----------------------------------------------------------------------

void Machine::decode_data_slots(Cpu& c) {
  c.data = DataSlots{};
  for (int slot = 0; slot < x86::kSlots; ++slot) {
    if (!x86::dr7::enabled(c.regs.dr7, slot)) continue;
    const std::uint8_t kinds = kinds_of(x86::dr7::type(c.regs.dr7, slot));
    if (kinds == 0) continue;
    const auto n = static_cast<std::uint64_t>(x86::len_bytes(x86::dr7::len(c.regs.dr7, slot)));
    const auto s = static_cast<std::size_t>(slot);
    c.data.lo[s] = c.regs.dr[slot] & ~(n - 1);
    c.data.hi[s] = c.data.lo[s] + n;
    for (AccessKind kind : {AccessKind::kRead, AccessKind::kWrite}) {
      if ((kinds & kind_bit(kind)) != 0) {
        c.data.watch[static_cast<std::size_t>(kind)] |=
            static_cast<std::uint8_t>(x86::dr6::trap_bit(slot));
      }
    }
  }
}

Result<DebugRegisters> Machine::debug_registers(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->regs;
}

Result<std::uint64_t> Machine::debug_address(CpuId cpu, int slot) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  if (auto ok = check_slot(slot); !ok) return std::unexpected(ok.error());
  return (*c)->regs.dr[slot];
}

Result<void> Machine::set_debug_address(CpuId cpu, int slot, std::uint64_t addr) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  if (auto ok = check_slot(slot); !ok) return ok;
  (*c)->regs.dr[slot] = addr;
  decode_data_slots(**c);
  return {};
}

Result<std::uint64_t> Machine::dr7(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->regs.dr7;
}

Result<void> Machine::set_dr7(CpuId cpu, std::uint64_t value) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  if ((value >> 32) != 0) {
    return make_error(ErrorCode::kInval, "dr7: " + hex(value) + " sets reserved bits 32-63");
  }
  (*c)->regs.dr7 = value;
  decode_data_slots(**c);
  return {};
}

Result<std::uint64_t> Machine::dr6(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->regs.dr6;
}

Result<std::uint64_t> Machine::dr6_hardware(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return x86::dr6::to_hardware((*c)->regs.dr6);
}

Result<void> Machine::set_dr6(CpuId cpu, std::uint64_t happened) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  (*c)->regs.dr6 = happened;
  return {};
}

// --- memory --------------------------------------------------------------------------------

Result<std::uint64_t> Machine::read_memory(TaskId task, std::uint64_t addr, int size) const {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  if (auto ok = check_range(addr, size); !ok) return std::unexpected(ok.error());
  return (*t)->memory.read(addr, size);
}

Result<void> Machine::write_memory(TaskId task, std::uint64_t addr, int size, std::uint64_t value) {
  auto t = find_task(task);
  if (!t) return std::unexpected(t.error());
  if (auto ok = check_range(addr, size); !ok) return ok;
  (*t)->memory.write(addr, size, value);
  return {};
}

// --- scripted work -------------------------------------------------------------------------

void Machine::deliver(const DebugException& e) {
  cpus_[static_cast<std::size_t>(e.cpu.value())].regs.dr6 |= e.dr6;
  if (handler_ == nullptr) return;
  CallbackScope scope(callback_depth_);
  handler_->on_debug_exception(e);
}

Result<Outcome> Machine::access_checked(CpuId cpu, TaskId task, AccessKind kind, std::uint64_t addr,
                                        int size, std::uint64_t value) {
  if (auto ok = not_in_callback("access"); !ok) return std::unexpected(ok.error());
  if (kind != AccessKind::kRead && kind != AccessKind::kWrite) {
    return make_error(ErrorCode::kInval, "kind: an access is a read or a write (use exec)");
  }
  auto running = running_unstopped(cpu, task);
  if (!running) return std::unexpected(running.error());
  if (auto ok = check_range(addr, size); !ok) return std::unexpected(ok.error());
  return do_access(cpu, task, **running, kind, addr, size, value);
}

Result<BatchOutcome> Machine::access_many(CpuId cpu, TaskId task, std::span<const AccessOp> ops,
                                          std::span<Outcome> outcomes) {
  if (callback_depth_ > 0) return std::unexpected(not_in_callback("access_many").error());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const AccessOp& op = ops[i];
    if (op.kind != AccessKind::kRead && op.kind != AccessKind::kWrite) [[unlikely]] {
      return std::unexpected(
          Error(ErrorCode::kInval, "kind: an access is a read or a write (use exec)")
              .with_context("ops[" + std::to_string(i) + "]"));
    }
    if (!SparseMemory::valid_size(op.size) || !SparseMemory::valid_range(op.addr, op.size))
        [[unlikely]] {
      return std::unexpected(
          check_range(op.addr, op.size).error().with_context("ops[" + std::to_string(i) + "]"));
    }
  }
  if (!outcomes.empty() && outcomes.size() < ops.size()) {
    return make_error(ErrorCode::kInval, "outcomes: " + std::to_string(outcomes.size()) +
                                             " entries for " + std::to_string(ops.size()) +
                                             " accesses (give none or at least one per access)");
  }
  auto found = running_unstopped(cpu, task);
  if (!found) return std::unexpected(found.error());
  Task* running = *found;
  BatchOutcome batch;
  for (const AccessOp& op : ops) {
    const Outcome out = do_access(cpu, task, *running, op.kind, op.addr, op.size, op.value);
    if (!outcomes.empty()) outcomes[batch.done] = out;
    ++batch.done;
    if (out.exceptions != 0) [[unlikely]] {
      batch.exceptions += out.exceptions;
      batch.dr6 |= out.dr6;
      if (running->stopped) break;
    }
  }
  return batch;
}

Result<Outcome> Machine::kernel_access(CpuId cpu, AccessKind kind, std::uint64_t addr, int size,
                                       std::uint64_t value, std::uint64_t ip) {
  if (auto ok = not_in_callback("kernel_access"); !ok) return std::unexpected(ok.error());
  if (kind != AccessKind::kRead && kind != AccessKind::kWrite) {
    return make_error(ErrorCode::kInval, "kind: an access is a read or a write");
  }
  auto found = find_online_cpu(cpu);
  if (!found) return std::unexpected(found.error());
  if (addr < kernel_start_) {
    return make_error(ErrorCode::kInval, "addr: " + hex(addr) +
                                             " is a user-space address (kernel accesses are at or "
                                             "above TASK_SIZE_MAX " +
                                             hex(kernel_start_) + ")");
  }
  if (auto r = check_range(addr, size); !r) return std::unexpected(r.error());
  Outcome out;
  out.old_value = kernel_memory_.read(addr, size);
  if (kind == AccessKind::kWrite) {
    const std::uint64_t mask = size == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * size)) - 1;
    out.new_value = value & mask;
    kernel_memory_.write(addr, size, out.new_value);
  } else {
    out.new_value = out.old_value;
  }
  now_ns_ += kAccessNs;
  const Cpu& c = **found;
  const std::uint64_t bits = data_hits(c.data, kind, addr, size);
  if (bits != 0) {
    DebugException e{cpu,           c.current.value_or(TaskId{}),
                     bits,          ip,
                     addr,          size,
                     kind,          out.old_value,
                     out.new_value, now_ns_,
                     true};
    out.dr6 = bits;
    out.exceptions = 1;
    deliver(e);
  }
  return out;
}

Result<Machine::Task*> Machine::working_task(CpuId cpu, TaskId task, const char* op) {
  if (callback_depth_ > 0) return std::unexpected(not_in_callback(op).error());
  return running_unstopped(cpu, task);
}

Result<Outcome> Machine::exec(CpuId cpu, TaskId task, std::uint64_t ip) {
  auto running = working_task(cpu, task, "exec");
  if (!running) return std::unexpected(running.error());
  Task& s = **running;
  Outcome out;
  s.ip = ip;

  // Fault: reported before the instruction; it then runs with RF set, so it cannot fault again.
  const std::uint64_t fault =
      exec_breakpoint_hits(cpus_[static_cast<std::size_t>(cpu.value())].regs, ip);
  if (fault != 0) {
    out.dr6 |= fault;
    ++out.exceptions;
    deliver(DebugException{cpu, task, fault, ip, ip, 0, AccessKind::kExec, 0, 0, now_ns_});
  }
  now_ns_ += kAccessNs;
  // The handler cannot exit the task (EBUSY), so `s` is still valid here.
  if (s.single_step) {
    out.dr6 |= x86::dr6::kSingleStep;
    ++out.exceptions;
    deliver(DebugException{cpu, task, x86::dr6::kSingleStep, ip, ip, 0, AccessKind::kExec, 0, 0,
                           now_ns_});
  }
  return out;
}

// --- Branch Trace Store --------------------------------------------------------------------

Result<void> Machine::set_bts_format(x86::BtsFormat format) {
  if (auto ok = not_in_callback("set_bts_format"); !ok) return ok;
  if (format != x86::BtsFormat::k32 && format != x86::BtsFormat::k64) {
    return make_error(ErrorCode::kInval, "format: is neither k32 nor k64");
  }
  if (ds_areas_ > 0) {
    return make_error(ErrorCode::kBusy,
                      "format: " + std::to_string(ds_areas_) + " CPU(s) have a DS area installed");
  }
  bts_format_ = format;
  kernel_start_ = kernel_start_of(format);
  return {};
}

Result<void> Machine::set_debugctl(CpuId cpu, std::uint64_t value) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  (*c)->debugctl = value;
  return {};
}

Result<std::uint64_t> Machine::debugctl(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->debugctl;
}

Result<void> Machine::set_ds_area(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  if (auto ok = x86::ds::validate_bts(bts_format_, area); !ok) return ok;
  const std::uint64_t bytes = area.bts_absolute_maximum - area.bts_buffer_base;
  if (buffer.size() < bytes) {
    return make_error(ErrorCode::kInval, "buffer: " + std::to_string(buffer.size()) +
                                             " bytes, the DS area describes " +
                                             std::to_string(bytes));
  }
  Cpu& s = **c;
  if (!s.has_ds) ++ds_areas_;
  s.has_ds = true;
  s.ds = area;
  s.bts_buffer = buffer.first(static_cast<std::size_t>(bytes));
  return {};
}

Result<void> Machine::clear_ds_area(CpuId cpu) {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  Cpu& s = **c;
  if (!s.has_ds) return {};
  --ds_areas_;
  s.has_ds = false;
  s.ds = {};
  s.bts_buffer = {};
  return {};
}

Result<x86::DsArea> Machine::ds_area(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  if (!(*c)->has_ds) {
    return make_error(ErrorCode::kNoEnt,
                      "cpu: " + std::to_string(cpu.value()) + " has no DS area installed");
  }
  return (*c)->ds;
}

Result<void> Machine::set_bts_index(CpuId cpu, std::uint64_t index) {
  auto area = ds_area(cpu);
  if (!area) return std::unexpected(area.error());
  area->bts_index = index;
  if (auto ok = x86::ds::validate_bts(bts_format_, *area); !ok) return ok;
  cpus_[static_cast<std::size_t>(cpu.value())].ds.bts_index = index;
  return {};
}

Result<std::uint64_t> Machine::bts_dropped(CpuId cpu) const {
  auto c = find_cpu(cpu);
  if (!c) return std::unexpected(c.error());
  return (*c)->bts_dropped;
}

Result<void> Machine::set_bts_interrupt_handler(BtsInterruptHandler* handler) {
  if (auto ok = not_in_callback("set_bts_interrupt_handler"); !ok) return ok;
  bts_handler_ = handler;
  return {};
}

Result<BranchOutcome> Machine::take_branch(CpuId cpu, Task& task, std::uint64_t from,
                                           std::uint64_t to, bool predicted) {
  Cpu& c = cpus_[static_cast<std::size_t>(cpu.value())];
  BranchOutcome out;
  if (c.has_ds && x86::debugctl::bts_enabled(c.debugctl)) {
    auto store = x86::store_bts(bts_format_, c.debugctl, c.ds, c.bts_buffer, {from, to, predicted},
                                from >= kernel_start_);
    if (!store) return std::unexpected(store.error());
    out = {store->stored, store->wrapped, store->dropped, store->interrupt};
    if (store->dropped) ++c.bts_dropped;
  }
  task.ip = to;
  now_ns_ += kAccessNs;
  if (out.interrupt && bts_handler_ != nullptr) {
    CallbackScope scope(callback_depth_);
    bts_handler_->on_bts_interrupt(cpu);
  }
  return out;
}

Result<BranchOutcome> Machine::branch(CpuId cpu, TaskId task, std::uint64_t from, std::uint64_t to,
                                      bool predicted) {
  auto running = working_task(cpu, task, "branch");
  if (!running) return std::unexpected(running.error());
  return take_branch(cpu, **running, from, to, predicted);
}

Result<std::uint64_t> Machine::run(CpuId cpu, TaskId task, BranchWalk& walk, std::uint64_t count) {
  auto running = working_task(cpu, task, "run");
  if (!running) return std::unexpected(running.error());
  if (walk.format() != bts_format_) {
    const auto name = [](x86::BtsFormat f) { return f == x86::BtsFormat::k64 ? "64" : "32"; };
    return make_error(ErrorCode::kInval, std::string("walk: a ") + name(walk.format()) +
                                             "-bit walk on a " + name(bts_format_) +
                                             "-bit machine");
  }
  // The handler cannot exit or switch the task (EBUSY), so it stays valid and running; it can
  // stop it, which ends the run.
  Task& s = **running;
  std::uint64_t taken = 0;
  while (taken < count && !s.stopped) {
    const TakenBranch b = walk.next();
    auto r = take_branch(cpu, s, b.from, b.to, b.predicted);
    if (!r) return std::unexpected(r.error());
    ++taken;
  }
  return taken;
}

// --- observers -----------------------------------------------------------------------------

Result<void> Machine::set_debug_handler(DebugExceptionHandler* handler) {
  if (auto ok = not_in_callback("set_debug_handler"); !ok) return ok;
  handler_ = handler;
  return {};
}

Result<void> Machine::add_observer(SchedulerObserver* observer) {
  if (auto ok = not_in_callback("add_observer"); !ok) return ok;
  if (observer == nullptr) return make_error(ErrorCode::kInval, "observer: is null");
  if (std::ranges::find(observers_, observer) != observers_.end()) {
    return make_error(ErrorCode::kExist, "observer: already added");
  }
  observers_.push_back(observer);
  return {};
}

Result<void> Machine::remove_observer(SchedulerObserver* observer) {
  if (auto ok = not_in_callback("remove_observer"); !ok) return ok;
  auto it = std::ranges::find(observers_, observer);
  if (it == observers_.end()) return make_error(ErrorCode::kNoEnt, "observer: not added");
  observers_.erase(it);
  return {};
}

}  // namespace hwarb::sim

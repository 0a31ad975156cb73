// The scenario runner's ksym commands: the machine's kernel symbol table, the ksym tracer and
// kernel-mode accesses (sim::System::kernel_symbols(), ksym_tracer(), Machine::kernel_access).
#include "hwarb/base/format.h"
#include "runner.h"

namespace hwarb::scenario::internal {

namespace {

// FILE as the scenario names it, relative to the scenario's directory.
std::string relative_to(const std::string& scenario_file, const std::string& file) {
  if (file.starts_with('/')) return file;
  const std::size_t slash = scenario_file.rfind('/');
  return slash == std::string::npos ? file : scenario_file.substr(0, slash + 1) + file;
}

}  // namespace

Result<void> Runner::ksym(const Command& cmd) {
  breakpoints::KernelSymbols& symbols = sys_->kernel_symbols();
  breakpoints::KsymTracer& tracer = sys_->ksym_tracer();
  auto refuse_with = [&](const std::string& what, const Error& e) {
    refuse(what, e.code(), [e] { return e.message(); });
  };
  switch (cmd.kind) {
    case CommandKind::kKsym: {
      breakpoints::KernelSymbol s;
      s.name = cmd.name;
      s.addr = *cmd.addr;
      s.size = cmd.size.value_or(0);
      if (auto r = symbols.add(std::move(s)); !r) refuse_with(cmd.name, r.error());
      return {};
    }
    case CommandKind::kKallsyms: {
      auto n = symbols.load_kallsyms_file(relative_to(scenario_.file, cmd.name));
      if (!n) {
        refuse_with("kallsyms " + cmd.name, n.error());
      } else {
        emit("kallsyms " + cmd.name + " " + std::to_string(*n) + " symbols");
      }
      return {};
    }
    case CommandKind::kKsymTrace: {
      tracer.set_hit_sink([this](const breakpoints::KsymHit& h) {
        emit("ksym_hit " + h.symbol + " cpu=" + std::to_string(h.cpu.value()) +
             " task=" + (h.task ? task_name(*h.task) : "-") + " ip=" + hex(h.ip) + " addr=" +
             hex(h.access_addr) + " access=" + (h.access == pmu::AccessKind::kWrite ? "w" : "r") +
             " count=" + std::to_string(h.count));
      });
      auto r = tracer.trace(cmd.name, *cmd.type);
      // `show` names the events after the symbol (also those a failed type change put back).
      if (auto addr = symbols.resolve(cmd.name)) {
        if (const std::optional<breakpoints::KsymEntry> e = tracer.find(*addr)) {
          for (pmu::EventId id : e->events) names_[id] = "ksym:" + e->symbol;
        }
      }
      if (!r) {
        refuse_with(cmd.name, r.error());
      } else {
        ok(cmd.name);
      }
      return {};
    }
    case CommandKind::kKsymTraceDel:
      if (auto r = tracer.untrace(cmd.name); !r) refuse_with(cmd.name, r.error());
      return {};
    case CommandKind::kKsymStats:
      for (const breakpoints::KsymEntry& e : tracer.entries()) {
        emit("ksym_stat " + e.symbol + " type=" + std::string(to_string(e.type)) +
             " count=" + std::to_string(e.count));
      }
      return {};
    case CommandKind::kKaccess: {
      auto r = machine().kernel_access(
          CpuId(cmd.cpu->index), cmd.write ? sim::AccessKind::kWrite : sim::AccessKind::kRead,
          *cmd.addr, static_cast<int>(*cmd.len), cmd.value.value_or(0), cmd.ip.value_or(0));
      if (!r) return std::unexpected(r.error());
      return {};
    }
    default:
      return {};
  }
}

}  // namespace hwarb::scenario::internal

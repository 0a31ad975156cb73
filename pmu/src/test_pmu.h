// A PMU for the unit tests: N counters per CPU, counts every callback.
#pragma once

#include <string>
#include <vector>

#include "hwarb/pmu/event.h"
#include "hwarb/pmu/pmu.h"

namespace hwarb::pmu::testing {

class TestPmu : public Pmu {
 public:
  TestPmu(int cpus, int counters)
      : used_(static_cast<std::size_t>(cpus), std::vector<Event*>(counters, nullptr)) {}
  std::string_view name() const override { return "test"; }
  arbiter::ResourceKind resource_kind() const override { return kind; }

  Result<void> validate(const EventAttr&) const override {
    ++validates;
    if (fail_validate) return make_error(ErrorCode::kInval, "config: refused by the test PMU");
    return {};
  }
  Result<void> event_init(Event&) override {
    ++inits;
    if (fail_init) return make_error(ErrorCode::kInval, "config: rejected by the test PMU");
    return {};
  }
  Result<void> add(Event& e, CpuId cpu) override {
    auto& v = used_[static_cast<std::size_t>(cpu.value())];
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == nullptr) {
        v[i] = &e;
        e.hw_index = static_cast<int>(i);
        ++adds;
        return {};
      }
    }
    return make_error(ErrorCode::kNoSpc, "no free counter");
  }
  void del(Event& e, CpuId cpu) override {
    used_[static_cast<std::size_t>(cpu.value())][static_cast<std::size_t>(e.hw_index)] = nullptr;
    e.hw_index = -1;
    ++dels;
  }
  void start(Event&, CpuId) override { ++starts; }
  void stop(Event&, CpuId) override { ++stops; }
  void read(Event&) override { ++reads; }
  void event_destroy(Event&) override { ++destroys; }

  int active(CpuId cpu) const {
    int n = 0;
    for (Event* e : used_[static_cast<std::size_t>(cpu.value())]) n += e != nullptr;
    return n;
  }
  // The hardware of `cpu` fires for every installed event.
  void fire(CpuId cpu, Sample s) {
    s.cpu = cpu;
    for (Event* e : used_[static_cast<std::size_t>(cpu.value())]) {
      if (e) e->deliver(s);
    }
  }

  arbiter::ResourceKind kind = arbiter::ResourceKind::kBreakpoint;
  bool fail_init = false;
  bool fail_validate = false;
  mutable int validates = 0;
  int inits = 0, adds = 0, dels = 0, starts = 0, stops = 0, reads = 0, destroys = 0;

 private:
  std::vector<std::vector<Event*>> used_;
};

}  // namespace hwarb::pmu::testing

#include "hwarb/pmu/core.h"

#include <algorithm>
#include <string>

#include "hwarb/base/check.h"

namespace hwarb::pmu {

Core::Core(arbiter::Arbiter& arbiter, const Clock& clock) : arbiter_(arbiter), clock_(clock) {
  int n = arbiter.cpus();
  cpu_ctx_.reserve(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c) {
    auto ctx = std::make_unique<Context>();
    ctx->cpu = CpuId(c);
    cpu_ctx_.push_back(std::move(ctx));
  }
  running_.resize(static_cast<std::size_t>(n));
  online_.assign(static_cast<std::size_t>(n), true);
}

Core::~Core() {
  while (!events_.empty()) destroy(events_.begin()->first);
}

Result<void> Core::register_pmu(EventType type, Pmu& pmu) {
  if (pmus_.contains(type)) {
    return make_error(ErrorCode::kExist, "type: a PMU is already registered for this type");
  }
  pmus_[type] = &pmu;
  return {};
}

Event* Core::lookup(EventId id) {
  auto it = events_.find(id);
  return it == events_.end() ? nullptr : it->second.event.get();
}

const Event* Core::find(EventId id) const {
  auto it = events_.find(id);
  return it == events_.end() ? nullptr : it->second.event.get();
}

std::vector<EventId> Core::events() const {
  std::vector<EventId> out;
  for (const auto& [id, slot] : events_) out.push_back(id);
  return out;
}

std::vector<EventId> Core::task_events(TaskId task) const {
  std::vector<EventId> out;
  auto it = task_ctx_.find(task);
  if (it == task_ctx_.end()) return out;
  for (const Event& e : it->second->pinned) out.push_back(e.id());
  for (const Event& e : it->second->flexible) out.push_back(e.id());
  return out;
}

Context* Core::context_of(const Event& e) {
  if (e.task()) {
    auto it = task_ctx_.find(*e.task());
    return it == task_ctx_.end() ? nullptr : it->second.get();
  }
  return cpu_ctx_[static_cast<std::size_t>(e.cpu()->value())].get();
}

Context& Core::task_context(TaskId task) {
  auto& slot = task_ctx_[task];
  if (!slot) {
    slot = std::make_unique<Context>();
    slot->task = task;
  }
  return *slot;
}

std::optional<CpuId> Core::active_cpu_of(const Context& ctx) const {
  if (!ctx.task) {
    return online_[static_cast<std::size_t>(ctx.cpu->value())] ? ctx.cpu : std::nullopt;
  }
  auto it = running_on_.find(*ctx.task);
  if (it == running_on_.end()) return std::nullopt;
  return it->second;
}

std::optional<TaskId> Core::current(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= cpus()) return std::nullopt;
  return running_[static_cast<std::size_t>(cpu.value())];
}

arbiter::Request Core::request_for(const EventAttr& attr, EventOwner owner, EventId id,
                                   const Pmu& pmu) const {
  arbiter::Request r;
  r.kind = pmu.resource_kind();
  r.type = attr.bp_type == BpType::kX ? arbiter::SlotType::kInst : arbiter::SlotType::kData;
  r.task = owner.task;
  r.cpu = owner.cpu;
  r.weight = attr.weight;
  r.pinned = attr.pinned;
  r.id = RequestId(id);
  return r;
}

// ---- scheduling ----

bool Core::event_sched_in(Event& e, CpuId cpu) {
  if (!e.pmu().add(e, cpu)) return false;
  e.pmu().start(e, cpu);
  e.active_cpu_ = cpu;
  e.set_state(EventState::kActive, clock_.now());
  return true;
}

void Core::event_sched_out(Event& e) {
  HWARB_CHECK(e.state() == EventState::kActive && e.active_cpu_, "sched_out of an idle event");
  CpuId cpu = *e.active_cpu_;
  e.pmu().stop(e, cpu);
  e.pmu().read(e);
  e.pmu().del(e, cpu);
  e.active_hook.unlink();
  e.active_cpu_.reset();
  e.set_state(EventState::kInactive, clock_.now());
}

void Core::flexible_out(Context* ctx, CpuId cpu) {
  if (!ctx) return;
  while (!ctx->active_flexible.empty()) {
    Event& e = ctx->active_flexible.front();
    HWARB_CHECK(e.active_cpu_ == cpu, "an active flexible event on another CPU");
    event_sched_out(e);  // unlinks it
  }
}

void Core::pinned_in(Context* ctx, CpuId cpu) {
  if (!ctx) return;
  for (Event& e : ctx->pinned) {
    if (e.state() != EventState::kInactive || !e.eligible_) continue;
    if (!event_sched_in(e, cpu)) e.set_state(EventState::kError, clock_.now());
  }
}

void Core::flexible_in(Context* ctx, CpuId cpu, bool& can_add) {
  if (!ctx) return;
  for (Event& e : ctx->flexible) {
    if (!can_add) return;
    if (e.state() != EventState::kInactive || !e.eligible_) continue;
    if (!event_sched_in(e, cpu)) {
      can_add = false;
    } else {
      ctx->active_flexible.push_back(e);
    }
  }
}

void Core::resched(CpuId cpu) {
  Context* cctx = cpu_ctx_[static_cast<std::size_t>(cpu.value())].get();
  Context* tctx = nullptr;
  if (auto t = running_[static_cast<std::size_t>(cpu.value())]) {
    auto it = task_ctx_.find(*t);
    if (it != task_ctx_.end()) tctx = it->second.get();
  }
  flexible_out(cctx, cpu);
  flexible_out(tctx, cpu);
  pinned_in(cctx, cpu);
  pinned_in(tctx, cpu);
  bool can_add = true;
  flexible_in(cctx, cpu, can_add);
  flexible_in(tctx, cpu, can_add);
}

void Core::set_context_eligible(Context& ctx, std::optional<CpuId> cpu) {
  Time now = clock_.now();
  for (EventList* list : {&ctx.pinned, &ctx.flexible}) {
    for (Event& e : *list) e.set_eligible(cpu && may_run_on(e, *cpu), now);
  }
}

Result<void> Core::sched_in(CpuId cpu, TaskId task) {
  if (cpu.value() < 0 || cpu.value() >= cpus()) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " out of range");
  }
  if (running_[static_cast<std::size_t>(cpu.value())]) {
    return make_error(ErrorCode::kBusy, "sched_in: " + to_string(cpu) + " already runs a task");
  }
  if (!online_[static_cast<std::size_t>(cpu.value())]) {
    return make_error(ErrorCode::kNoDev, "sched_in: " + to_string(cpu) + " is offline");
  }
  if (running_on_.contains(task)) {
    return make_error(ErrorCode::kBusy,
                      "sched_in: " + to_string(task) + " already runs on another CPU");
  }
  running_[static_cast<std::size_t>(cpu.value())] = task;
  running_on_[task] = cpu;
  if (auto it = task_ctx_.find(task); it != task_ctx_.end()) {
    set_context_eligible(*it->second, cpu);
  }
  resched(cpu);
  return {};
}

Result<void> Core::sched_out(CpuId cpu, TaskId task) {
  if (cpu.value() < 0 || cpu.value() >= cpus()) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " out of range");
  }
  if (running_[static_cast<std::size_t>(cpu.value())] != task) {
    return make_error(ErrorCode::kInval,
                      "sched_out: " + to_string(task) + " does not run on " + to_string(cpu));
  }
  if (auto it = task_ctx_.find(task); it != task_ctx_.end()) {
    for (EventList* list : {&it->second->pinned, &it->second->flexible}) {
      for (Event& e : *list) {
        if (e.state() == EventState::kActive) event_sched_out(e);
      }
    }
    set_context_eligible(*it->second, std::nullopt);
  }
  running_[static_cast<std::size_t>(cpu.value())].reset();
  running_on_.erase(task);
  resched(cpu);  // CPU-wide flexible events may use the freed counters
  return {};
}

Result<void> Core::tick(CpuId cpu) {
  if (cpu.value() < 0 || cpu.value() >= cpus()) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " out of range");
  }
  Context* cctx = cpu_ctx_[static_cast<std::size_t>(cpu.value())].get();
  Context* tctx = nullptr;
  if (auto t = running_[static_cast<std::size_t>(cpu.value())]) {
    auto it = task_ctx_.find(*t);
    if (it != task_ctx_.end()) tctx = it->second.get();
  }
  auto waiting = [](Event& e) { return e.state() == EventState::kInactive && e.eligible_; };
  // Stops at the first waiting event: right after the installed ones when all are eligible.
  bool need = false;
  for (Context* ctx : {cctx, tctx}) {
    if (ctx && !need) need = std::any_of(ctx->flexible.begin(), ctx->flexible.end(), waiting);
  }
  if (!need) return {};
  flexible_out(cctx, cpu);
  flexible_out(tctx, cpu);
  for (Context* ctx : {cctx, tctx}) {
    if (!ctx) continue;
    auto it = std::find_if(ctx->flexible.begin(), ctx->flexible.end(), waiting);
    if (it == ctx->flexible.end()) continue;
    Event& e = *it;
    ctx->flexible.erase(it);
    ctx->flexible.push_back(e);
  }
  bool can_add = true;
  flexible_in(cctx, cpu, can_add);
  flexible_in(tctx, cpu, can_add);
  return {};
}

// ---- lifetime ----

Result<void> Core::check_owner(const EventAttr& attr, EventOwner owner) const {
  if (!owner.task && !owner.cpu) {
    return make_error(ErrorCode::kInval, "owner: an event needs a task, a CPU or both");
  }
  if (owner.cpu && (owner.cpu->value() < 0 || owner.cpu->value() >= cpus())) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(owner.cpu->value()) +
                                             " out of range (machine has " +
                                             std::to_string(cpus()) + " CPUs)");
  }
  if (attr.weight < 1) {
    return make_error(ErrorCode::kInval, "weight: must be at least 1");
  }
  return {};
}

Result<Pmu*> Core::pmu_for(const EventAttr& attr) const {
  auto pit = pmus_.find(attr.type);
  if (pit == pmus_.end()) {
    return make_error(ErrorCode::kNoEnt, "type: no PMU registered for this event type");
  }
  return pit->second;
}

Result<std::unique_ptr<Event>> Core::make_event(EventId id, const EventAttr& attr, EventOwner owner,
                                                Pmu& pmu, OverflowHandler handler) {
  std::unique_ptr<Event> ev(new Event(id, attr, owner, &pmu, clock_.now()));
  ev->handler_ = std::move(handler);
  if (attr.ring_capacity > 0) {
    ev->ring_ = std::make_shared<SampleRing>(attr.ring_capacity, attr.ring_mode);
  }
  if (auto r = pmu.event_init(*ev); !r) return std::unexpected(r.error());
  ev->state_ = attr.disabled ? EventState::kOff : EventState::kInactive;
  return ev;
}

void Core::install_event(std::unique_ptr<Event> ev, arbiter::Reservation reservation) {
  Event& e = *ev;
  Context& ctx =
      e.task() ? task_context(*e.task()) : *cpu_ctx_[static_cast<std::size_t>(e.cpu()->value())];
  (e.attr().pinned ? ctx.pinned : ctx.flexible).push_back(e);
  auto acpu = active_cpu_of(ctx);
  e.set_eligible(acpu && may_run_on(e, *acpu), clock_.now());
  bool run = e.eligible_ && e.state() == EventState::kInactive;
  events_.emplace(e.id(), Slot{std::move(ev), std::move(reservation), true});
  if (run) resched(*acpu);
}

Result<EventHandle> Core::open(const EventAttr& attr, EventOwner owner, OverflowHandler handler) {
  if (auto r = check_owner(attr, owner); !r) return std::unexpected(r.error());
  auto pmu = pmu_for(attr);
  if (!pmu) return std::unexpected(pmu.error());
  if (auto r = (*pmu)->check_reservable(attr); !r) return std::unexpected(r.error());
  EventId id = next_id_;
  auto reservation = arbiter_.reserve(request_for(attr, owner, id, **pmu));
  if (!reservation) return std::unexpected(reservation.error());
  auto ev = make_event(id, attr, owner, **pmu, std::move(handler));
  if (!ev) return std::unexpected(ev.error());
  // Committed: nothing below fails.
  ++next_id_;
  install_event(std::move(*ev), std::move(*reservation));
  return EventHandle(this, id);
}

Result<std::vector<EventHandle>> Core::open_all(std::span<const OpenRequest> requests) {
  std::vector<Pmu*> pmus;
  std::vector<arbiter::Request> slots;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const OpenRequest& r = requests[i];
    if (auto c = check_owner(r.attr, r.owner); !c) return std::unexpected(c.error());
    auto pmu = pmu_for(r.attr);
    if (!pmu) return std::unexpected(pmu.error());
    if (auto c = (*pmu)->check_reservable(r.attr); !c) return std::unexpected(c.error());
    pmus.push_back(*pmu);
    slots.push_back(request_for(r.attr, r.owner, next_id_ + i, **pmu));
  }
  auto reservations = arbiter_.reserve_all(slots);
  if (!reservations) return std::unexpected(reservations.error());
  std::vector<std::unique_ptr<Event>> made;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto ev = make_event(next_id_ + i, requests[i].attr, requests[i].owner, *pmus[i],
                         requests[i].handler);
    if (!ev) {
      for (auto& done : made) done->pmu().event_destroy(*done);
      return std::unexpected(ev.error());
    }
    made.push_back(std::move(*ev));
  }
  // Committed.
  std::vector<EventHandle> handles;
  for (std::size_t i = 0; i < made.size(); ++i) {
    handles.push_back(EventHandle(this, made[i]->id()));
    install_event(std::move(made[i]), std::move((*reservations)[i]));
  }
  next_id_ += requests.size();
  return handles;
}

Result<void> Core::modify(EventId id, const EventAttr& attr, EventOwner owner) {
  Event* e = lookup(id);
  if (!e) return make_error(ErrorCode::kNoEnt, "modify: no event " + std::to_string(id));
  if (e->state() == EventState::kExit) {
    return make_error(ErrorCode::kInval, "modify: event " + std::to_string(id) + " has exited");
  }
  if (attr.type != e->attr().type) {
    return make_error(ErrorCode::kInval, "type: an event's type cannot change");
  }
  if (owner.task != e->task()) {
    return make_error(ErrorCode::kInval, "task: an event's task cannot change");
  }
  if (auto r = check_owner(attr, owner); !r) return r;
  // 1. The driver's field checks come first: nothing has changed yet.
  if (auto r = e->pmu().validate(attr); !r) return r;
  // 2. The slots: the arbiter's modify is all or nothing by itself.
  Slot& slot = events_.at(id);
  arbiter::Request next = request_for(attr, owner, id, e->pmu());
  if (next != slot.reservation.request()) {
    if (auto r = arbiter_.modify(slot.reservation, next); !r) return r;
  }
  // 3. Committed: take it off, change it, schedule again.
  Context* old_ctx = context_of(*e);
  // A CPU-bound event whose CPU changes moves to that CPU's context.
  Context* ctx =
      owner.task ? old_ctx : cpu_ctx_[static_cast<std::size_t>(owner.cpu->value())].get();
  std::optional<CpuId> old_cpu = e->active_cpu_;
  if (e->state() == EventState::kActive) event_sched_out(*e);
  Time now = clock_.now();
  if (attr.pinned != e->attr().pinned || ctx != old_ctx) {
    EventList& from = e->attr().pinned ? old_ctx->pinned : old_ctx->flexible;
    from.erase(from.iterator_to(*e));
    (attr.pinned ? ctx->pinned : ctx->flexible).push_back(*e);
  }
  e->attr_ = attr;
  e->owner_ = owner;
  if (attr.disabled && e->state() != EventState::kOff) e->set_state(EventState::kOff, now);
  // As Linux's modify_user_hw_breakpoint: an enabled result is enabled (OFF or ERROR -> INACTIVE).
  if (!attr.disabled && (e->state() == EventState::kOff || e->state() == EventState::kError)) {
    e->set_state(EventState::kInactive, now);
  }
  auto acpu = active_cpu_of(*ctx);
  e->set_eligible(acpu && may_run_on(*e, *acpu), now);
  if (old_cpu) resched(*old_cpu);
  if (acpu && acpu != old_cpu) resched(*acpu);
  return {};
}

Result<void> Core::set_cpu_online(CpuId cpu, bool online) {
  if (cpu.value() < 0 || cpu.value() >= cpus()) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " out of range");
  }
  std::size_t c = static_cast<std::size_t>(cpu.value());
  if (online_[c] == online) {
    return make_error(ErrorCode::kInval, "cpu: " + std::to_string(cpu.value()) + " is already " +
                                             (online ? "online" : "offline"));
  }
  if (!online && running_[c]) {
    return make_error(ErrorCode::kBusy,
                      "cpu: " + std::to_string(cpu.value()) + " still runs a task");
  }
  Context& ctx = *cpu_ctx_[c];
  if (!online) {
    for (EventList* list : {&ctx.pinned, &ctx.flexible}) {
      for (Event& e : *list) {
        if (e.state() == EventState::kActive) event_sched_out(e);
      }
    }
  }
  online_[c] = online;
  set_context_eligible(ctx, online ? std::optional(cpu) : std::nullopt);
  if (online) resched(cpu);
  return {};
}

bool Core::cpu_online(CpuId cpu) const {
  if (cpu.value() < 0 || cpu.value() >= cpus()) return false;
  return online_[static_cast<std::size_t>(cpu.value())];
}

void Core::detach(Event& e) {
  Slot& slot = events_.at(e.id());
  HWARB_CHECK(slot.attached, "detach of a detached event");
  Context* ctx = context_of(e);
  HWARB_CHECK(ctx != nullptr, "attached event without context");
  bool was_active = e.state() == EventState::kActive;
  if (was_active) event_sched_out(e);
  e.set_eligible(false, clock_.now());
  EventList& list = e.attr().pinned ? ctx->pinned : ctx->flexible;
  list.erase(list.iterator_to(e));
  slot.reservation.release();
  slot.attached = false;
  if (was_active) {
    if (auto acpu = active_cpu_of(*ctx)) resched(*acpu);
  }
}

void Core::destroy(EventId id) {
  auto it = events_.find(id);
  if (it == events_.end()) return;
  Event& e = *it->second.event;
  std::vector<EventId> kids = e.children_;
  for (EventId k : kids) destroy(k);
  if (it->second.attached) detach(e);
  if (e.parent_ != 0) {
    if (Event* p = lookup(e.parent_)) std::erase(p->children_, id);
  }
  e.pmu().event_destroy(e);
  events_.erase(id);
}

Result<void> Core::close(EventId id) {
  if (!lookup(id)) return make_error(ErrorCode::kNoEnt, "close: no event " + std::to_string(id));
  destroy(id);
  return {};
}

Result<void> Core::enable(EventId id) {
  Event* e = lookup(id);
  if (!e) return make_error(ErrorCode::kNoEnt, "enable: no event " + std::to_string(id));
  if (e->state() == EventState::kExit) {
    return make_error(ErrorCode::kInval, "enable: event " + std::to_string(id) + " has exited");
  }
  if (e->state() == EventState::kOff || e->state() == EventState::kError) {
    e->set_state(EventState::kInactive, clock_.now());
    if (auto acpu = active_cpu_of(*context_of(*e)); acpu && e->eligible_) resched(*acpu);
  }
  return {};
}

Result<void> Core::disable(EventId id) {
  Event* e = lookup(id);
  if (!e) return make_error(ErrorCode::kNoEnt, "disable: no event " + std::to_string(id));
  if (e->state() == EventState::kExit) {
    return make_error(ErrorCode::kInval, "disable: event " + std::to_string(id) + " has exited");
  }
  if (e->state() == EventState::kOff) return {};
  bool was_active = e->state() == EventState::kActive;
  if (was_active) event_sched_out(*e);
  e->set_state(EventState::kOff, clock_.now());
  if (was_active) {
    if (auto acpu = active_cpu_of(*context_of(*e))) resched(*acpu);
  }
  return {};
}

Result<ReadValue> Core::read(EventId id) {
  Event* e = lookup(id);
  if (!e) return make_error(ErrorCode::kNoEnt, "read: no event " + std::to_string(id));
  if (e->state() == EventState::kActive) e->pmu().read(*e);
  return e->read_at(clock_.now());
}

// ---- inheritance ----

Result<void> Core::fork(TaskId parent, TaskId child) {
  if (parent == child) return make_error(ErrorCode::kInval, "fork: child == parent");
  if (running_on_.contains(child)) {
    return make_error(ErrorCode::kExist, "fork: " + to_string(child) + " already runs");
  }
  if (auto it = task_ctx_.find(child);
      it != task_ctx_.end() && (!it->second->pinned.empty() || !it->second->flexible.empty())) {
    return make_error(ErrorCode::kExist, "fork: " + to_string(child) + " already has events");
  }
  auto pit = task_ctx_.find(parent);
  if (pit == task_ctx_.end()) return {};
  std::vector<Event*> src;
  for (EventList* list : {&pit->second->pinned, &pit->second->flexible}) {
    for (Event& e : *list) {
      if (e.attr().inherit) src.push_back(&e);
    }
  }
  if (src.empty()) return {};

  std::vector<arbiter::Request> requests;
  for (std::size_t i = 0; i < src.size(); ++i) {
    requests.push_back(
        request_for(src[i]->attr(), {child, src[i]->cpu()}, next_id_ + i, src[i]->pmu()));
  }
  auto reservations = arbiter_.reserve_all(requests);
  if (!reservations) return std::unexpected(reservations.error().with_context("fork"));

  Time now = clock_.now();
  std::vector<std::unique_ptr<Event>> copies;
  for (std::size_t i = 0; i < src.size(); ++i) {
    Event& s = *src[i];
    EventId origin = s.parent_ != 0 ? s.parent_ : s.id();
    std::unique_ptr<Event> c(new Event(next_id_ + i, s.attr(), {child, s.cpu()}, s.pmu_, now));
    c->handler_ = s.handler_;
    c->ring_ = s.ring_;
    c->parent_ = origin;
    c->state_ = s.state() >= EventState::kInactive ? EventState::kInactive : EventState::kOff;
    if (auto r = c->pmu().event_init(*c); !r) {
      for (auto& done : copies) done->pmu().event_destroy(*done);
      return std::unexpected(r.error().with_context("fork"));
    }
    copies.push_back(std::move(c));
  }
  // Committed.
  next_id_ += src.size();
  Context& ctx = task_context(child);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    Event& c = *copies[i];
    (c.attr().pinned ? ctx.pinned : ctx.flexible).push_back(c);
    lookup(c.parent_)->children_.push_back(c.id());
    events_.emplace(c.id(), Slot{std::move(copies[i]), std::move((*reservations)[i]), true});
  }
  return {};
}

Result<void> Core::exit(TaskId task) {
  if (auto r = running_on_.find(task); r != running_on_.end()) {
    if (auto s = sched_out(r->second, task); !s) return s;
  }
  auto it = task_ctx_.find(task);
  if (it == task_ctx_.end()) return {};
  std::vector<EventId> ids = task_events(task);
  Time now = clock_.now();
  for (EventId id : ids) {
    Event* e = lookup(id);
    if (e->parent_ != 0) {
      ReadValue v = e->read_at(now);
      Event* origin = lookup(e->parent_);
      origin->child_total_.count += v.count;
      origin->child_total_.time_enabled += v.time_enabled;
      origin->child_total_.time_running += v.time_running;
      destroy(id);
    } else {
      detach(*e);
      e->set_state(EventState::kExit, now);
    }
  }
  task_ctx_.erase(task);
  return {};
}

}  // namespace hwarb::pmu

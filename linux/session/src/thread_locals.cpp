#include "hwarb/linux/thread_locals.h"

#include <proc_service.h>
#include <sys/reg.h>

// glibc's thread_db.h declares its functions without C linkage for C++.
extern "C" {
#include <thread_db.h>
}

#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/symbols.h"

// libthread_db's handle on the process: what its callbacks below are given back.
struct ps_prochandle {
  hwarb::native::ThreadLocals::Impl* impl;
};

namespace hwarb::native {

// Its address is stable (a ThreadLocals holds it by pointer): libthread_db keeps `handle`'s.
struct ThreadLocals::Impl {
  Inferior* inferior = nullptr;
  pid_t process = 0;
  std::optional<SymbolTable> symbols;
  ps_prochandle handle{this};
  td_thragent_t* agent = nullptr;
};

}  // namespace hwarb::native

namespace {

using hwarb::native::ThreadLocals;

ThreadLocals::Impl& impl_of(ps_prochandle* ph) {
  return *ph->impl;
}

ps_err_e read_process(ps_prochandle* ph, psaddr_t addr, void* buf, std::size_t size) {
  auto& impl = impl_of(ph);
  auto r =
      impl.inferior->read_memory(reinterpret_cast<std::uintptr_t>(addr),
                                 std::span(static_cast<std::uint8_t*>(buf), size), impl.process);
  return r ? PS_OK : PS_ERR;
}

ps_err_e write_process(ps_prochandle* ph, psaddr_t addr, const void* buf, std::size_t size) {
  auto& impl = impl_of(ph);
  auto r = impl.inferior->write_memory(reinterpret_cast<std::uintptr_t>(addr),
                                       std::span(static_cast<const std::uint8_t*>(buf), size),
                                       impl.process);
  return r ? PS_OK : PS_ERR;
}

static_assert(sizeof(prgregset_t) == sizeof(hwarb::x86::Regs));
static_assert(sizeof(prfpregset_t) == sizeof(hwarb::native::Fxsave));

}  // namespace

// The process services libthread_db calls (proc_service.h), over the ThreadLocals that opened
// its agent. Symbols are looked up by name in every loaded module, as gdb and gdbserver do: the
// names libthread_db asks for are unique to the thread library and the dynamic linker.
extern "C" {

ps_err_e ps_pdread(ps_prochandle* ph, psaddr_t addr, void* buf, std::size_t size) {
  return read_process(ph, addr, buf, size);
}

ps_err_e ps_pdwrite(ps_prochandle* ph, psaddr_t addr, const void* buf, std::size_t size) {
  return write_process(ph, addr, buf, size);
}

ps_err_e ps_ptread(ps_prochandle* ph, psaddr_t addr, void* buf, std::size_t size) {
  return read_process(ph, addr, buf, size);
}

ps_err_e ps_ptwrite(ps_prochandle* ph, psaddr_t addr, const void* buf, std::size_t size) {
  return write_process(ph, addr, buf, size);
}

ps_err_e ps_lgetregs(ps_prochandle* ph, lwpid_t lwp, prgregset_t regs) {
  auto got = impl_of(ph).inferior->get_regs(lwp);
  if (!got) return PS_ERR;
  std::memcpy(regs, &*got, sizeof(*got));
  return PS_OK;
}

ps_err_e ps_lsetregs(ps_prochandle* ph, lwpid_t lwp, const prgregset_t regs) {
  hwarb::x86::Regs r{};
  std::memcpy(&r, regs, sizeof(r));
  return impl_of(ph).inferior->set_regs(lwp, r) ? PS_OK : PS_ERR;
}

ps_err_e ps_lgetfpregs(ps_prochandle* ph, lwpid_t lwp, prfpregset_t* regs) {
  auto got = impl_of(ph).inferior->get_fxsave(lwp);
  if (!got) return PS_ERR;
  std::memcpy(regs, got->data(), got->size());
  return PS_OK;
}

ps_err_e ps_lsetfpregs(ps_prochandle* ph, lwpid_t lwp, const prfpregset_t* regs) {
  hwarb::native::Fxsave area{};
  std::memcpy(area.data(), regs, area.size());
  return impl_of(ph).inferior->set_fxsave(lwp, area) ? PS_OK : PS_ERR;
}

pid_t ps_getpid(ps_prochandle* ph) {
  return impl_of(ph).process;
}

// x86-64: the thread pointer is FS's base (GS's base asked for by its register number too).
ps_err_e ps_get_thread_area(ps_prochandle* ph, lwpid_t lwp, int idx, psaddr_t* addr) {
  if (idx != FS && idx != GS) return PS_BADADDR;
  auto got = impl_of(ph).inferior->get_regs(lwp);
  if (!got) return PS_ERR;
  *addr = reinterpret_cast<psaddr_t>(idx == FS ? got->fs_base : got->gs_base);
  return PS_OK;
}

ps_err_e ps_pglobal_lookup(ps_prochandle* ph, const char* /*object_name*/, const char* name,
                           psaddr_t* addr) {
  auto& impl = impl_of(ph);
  if (!impl.symbols) return PS_NOSYM;
  auto found = impl.symbols->find(name);
  if (!found) return PS_NOSYM;
  *addr = reinterpret_cast<psaddr_t>(found->address);
  return PS_OK;
}

ps_err_e ps_pstop(ps_prochandle* /*ph*/) {
  return PS_OK;
}

ps_err_e ps_pcontinue(ps_prochandle* /*ph*/) {
  return PS_OK;
}

ps_err_e ps_lstop(ps_prochandle* /*ph*/, lwpid_t /*lwp*/) {
  return PS_OK;
}

ps_err_e ps_lcontinue(ps_prochandle* /*ph*/, lwpid_t /*lwp*/) {
  return PS_OK;
}

}  // extern "C"

namespace hwarb::native {

namespace {

const char* td_name(td_err_e e) {
  switch (e) {
    case TD_OK:
      return "TD_OK";
    case TD_ERR:
      return "TD_ERR";
    case TD_NOTHR:
      return "TD_NOTHR";
    case TD_NOSV:
      return "TD_NOSV";
    case TD_NOLWP:
      return "TD_NOLWP";
    case TD_BADPH:
      return "TD_BADPH";
    case TD_BADTH:
      return "TD_BADTH";
    case TD_BADSH:
      return "TD_BADSH";
    case TD_BADTA:
      return "TD_BADTA";
    case TD_BADKEY:
      return "TD_BADKEY";
    case TD_NOMSG:
      return "TD_NOMSG";
    case TD_NOFPREGS:
      return "TD_NOFPREGS";
    case TD_NOLIBTHREAD:
      return "TD_NOLIBTHREAD";
    case TD_NOEVENT:
      return "TD_NOEVENT";
    case TD_NOCAPAB:
      return "TD_NOCAPAB";
    case TD_DBERR:
      return "TD_DBERR";
    case TD_NOAPLIC:
      return "TD_NOAPLIC";
    case TD_NOTSD:
      return "TD_NOTSD";
    case TD_MALLOC:
      return "TD_MALLOC";
    case TD_PARTIALREG:
      return "TD_PARTIALREG";
    case TD_NOXREGS:
      return "TD_NOXREGS";
    case TD_TLSDEFER:
      return "TD_TLSDEFER";
    case TD_VERSION:
      return "TD_VERSION";
    case TD_NOTLS:
      return "TD_NOTLS";
  }
  return "TD_?";
}

std::unexpected<Error> td_error(td_err_e e, const std::string& what) {
  return make_error(ErrorCode::kIo, what + ": libthread_db error " + td_name(e));
}

Result<void> init_thread_db() {
  static std::once_flag once;
  static td_err_e result = TD_OK;
  std::call_once(once, [] { result = td_init(); });
  if (result != TD_OK) {
    return make_error(
        ErrorCode::kOpNotSupp,
        std::string("libthread_db could not be initialised (") + td_name(result) + ")");
  }
  return {};
}

}  // namespace

ThreadLocals::ThreadLocals(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ThreadLocals::ThreadLocals(ThreadLocals&&) noexcept = default;
ThreadLocals& ThreadLocals::operator=(ThreadLocals&& other) noexcept {
  if (this != &other) {
    if (impl_ && impl_->agent != nullptr) td_ta_delete(impl_->agent);
    impl_ = std::move(other.impl_);
  }
  return *this;
}
ThreadLocals::~ThreadLocals() {
  if (impl_ && impl_->agent != nullptr) td_ta_delete(impl_->agent);
}

pid_t ThreadLocals::process() const {
  return impl_->process;
}

Result<ThreadLocals> ThreadLocals::open(Inferior& inferior, pid_t process) {
  if (auto r = init_thread_db(); !r) return std::unexpected(r.error());
  auto impl = std::make_unique<Impl>();
  impl->inferior = &inferior;
  impl->process = process;
  auto symbols = SymbolTable::load(process);
  if (!symbols) return std::unexpected(symbols.error());
  impl->symbols.emplace(std::move(*symbols));
  ThreadLocals locals(std::move(impl));
  const td_err_e e = td_ta_new(&locals.impl_->handle, &locals.impl_->agent);
  const std::string where = "libthread_db: process " + std::to_string(process);
  switch (e) {
    case TD_OK:
      return locals;
    case TD_NOLIBTHREAD:
      return make_error(ErrorCode::kOpNotSupp,
                        where +
                            ": no thread library found (libc not loaded yet, or a static "
                            "program without it)");
    case TD_VERSION:
      return make_error(ErrorCode::kOpNotSupp,
                        where + ": its libc's version is not this libthread_db's");
    default:
      return td_error(e, where);
  }
}

Result<std::uint64_t> ThreadLocals::address(pid_t tid, std::uint64_t lm, std::uint64_t offset) {
  const std::string thread = "thread " + std::to_string(tid);
  if (!impl_->inferior->is_stopped(tid) || impl_->inferior->process_of(tid) != impl_->process) {
    return make_error(ErrorCode::kSrch, thread + ": not a stopped thread of process " +
                                            std::to_string(impl_->process));
  }
  td_thrhandle_t th{};
  td_err_e e = td_ta_map_lwp2thr(impl_->agent, tid, &th);
  if (e == TD_NOTHR || e == TD_NOLWP) {
    return make_error(ErrorCode::kSrch, thread + ": not a thread libthread_db knows");
  }
  if (e != TD_OK) return td_error(e, thread);
  psaddr_t addr = nullptr;
  if (lm != 0) {
    e = td_thr_tls_get_addr(&th, reinterpret_cast<psaddr_t>(lm), offset, &addr);
  } else {
    e = td_thr_tlsbase(&th, 1, &addr);
    if (e == TD_OK) addr = static_cast<char*>(addr) + offset;
  }
  const std::string module = lm != 0 ? "the module of link_map " + hex(lm) : "the executable";
  switch (e) {
    case TD_OK:
      return reinterpret_cast<std::uintptr_t>(addr);
    case TD_TLSDEFER:
      return make_error(ErrorCode::kNxio, thread + ": TLS not allocated yet for " + module +
                                              " (the thread has not used it yet)");
    case TD_NOTLS:
      return make_error(ErrorCode::kOpNotSupp, module + " has no thread-local storage");
    default:
      return td_error(e, thread);
  }
}

}  // namespace hwarb::native

#include "hwarb/base/error.h"

#include <array>
#include <cstdio>
#include <cstdlib>

#include "hwarb/base/check.h"

namespace hwarb {
namespace {

struct NamedCode {
  ErrorCode code;
  std::string_view name;
};

constexpr std::array kNames = {
    NamedCode{ErrorCode::kPerm, "EPERM"},
    NamedCode{ErrorCode::kNoEnt, "ENOENT"},
    NamedCode{ErrorCode::kSrch, "ESRCH"},
    NamedCode{ErrorCode::kIntr, "EINTR"},
    NamedCode{ErrorCode::kIo, "EIO"},
    NamedCode{ErrorCode::kNxio, "ENXIO"},
    NamedCode{ErrorCode::kChild, "ECHILD"},
    NamedCode{ErrorCode::kAgain, "EAGAIN"},
    NamedCode{ErrorCode::kNoMem, "ENOMEM"},
    NamedCode{ErrorCode::kAcces, "EACCES"},
    NamedCode{ErrorCode::kFault, "EFAULT"},
    NamedCode{ErrorCode::kBusy, "EBUSY"},
    NamedCode{ErrorCode::kExist, "EEXIST"},
    NamedCode{ErrorCode::kNoDev, "ENODEV"},
    NamedCode{ErrorCode::kInval, "EINVAL"},
    NamedCode{ErrorCode::kNoSpc, "ENOSPC"},
    NamedCode{ErrorCode::kRange, "ERANGE"},
    NamedCode{ErrorCode::kNoSys, "ENOSYS"},
    NamedCode{ErrorCode::kOpNotSupp, "EOPNOTSUPP"},
    NamedCode{ErrorCode::kTimedOut, "ETIMEDOUT"},
};

}  // namespace

std::string errno_name(ErrorCode code) {
  for (const auto& n : kNames) {
    if (n.code == code) return std::string(n.name);
  }
  return "E?" + std::to_string(static_cast<int>(code));
}

ErrorCode from_errno(int err) {
  for (const auto& n : kNames) {
    if (static_cast<int>(n.code) == err) return n.code;
  }
  return ErrorCode::kIo;
}

bool parse_errno_name(std::string_view name, ErrorCode* out) {
  for (const auto& n : kNames) {
    if (n.name == name) {
      *out = n.code;
      return true;
    }
  }
  return false;
}

std::string Error::to_string() const {
  return errno_name(code_) + ": " + message_;
}

Error Error::with_context(std::string_view context) const {
  return Error(code_, std::string(context) + ": " + message_);
}

namespace detail {
void check_failed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "%s:%d: hwarb invariant broken: %s (%s)\n", file, line, cond, msg);
  std::abort();
}
}  // namespace detail

}  // namespace hwarb

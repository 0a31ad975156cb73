// hwarb/base/error.h — the one error type of hwarb.
//
// Contract:
//  - Every fallible hwarb API returns Result<T> = std::expected<T, Error>; no exception crosses an
//    API boundary.
//  - An Error carries a canonical, errno-style ErrorCode (the numeric values are Linux's, so a
//    code converts to and from errno exactly once, at the syscall boundary in linux/sys) and
//    a human message that names the field and the reason.
//  - errno_name(code) prints the symbolic name ("ENOSPC"), which is what the CLI and the
//    scenario runner show.
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

// `constexpr` on a function that returns a Result: C++23 allows a non-literal return type
// (P2448), which g++ 12 implements and Clang only from version 17; for older Clangs such a
// function is plain `inline` (it is then never evaluated at compile time there).
#if defined(__clang__) && __clang_major__ < 17
#define HWARB_CONSTEXPR_RESULT inline
#else
#define HWARB_CONSTEXPR_RESULT constexpr
#endif

namespace hwarb {

// Canonical codes. Values are the Linux errno numbers; names avoid the <cerrno> macros.
enum class ErrorCode : int {
  kPerm = EPERM,
  kNoEnt = ENOENT,
  kSrch = ESRCH,
  kIntr = EINTR,
  kIo = EIO,
  kNxio = ENXIO,
  kChild = ECHILD,
  kAgain = EAGAIN,
  kNoMem = ENOMEM,
  kAcces = EACCES,
  kFault = EFAULT,
  kBusy = EBUSY,
  kExist = EEXIST,
  kNoDev = ENODEV,
  kInval = EINVAL,
  kNoSpc = ENOSPC,
  kRange = ERANGE,
  kNoSys = ENOSYS,
  kOpNotSupp = EOPNOTSUPP,
  kTimedOut = ETIMEDOUT,
};

// "ENOSPC" for kNoSpc; "E?<n>" for a value outside the enumeration.
std::string errno_name(ErrorCode code);
// The code for an errno value; unknown values map to kIo with no loss of the number in messages.
ErrorCode from_errno(int err);
// Parses "ENOSPC" back to its code; false when the name is unknown.
bool parse_errno_name(std::string_view name, ErrorCode* out);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ENOSPC: <message>"
  std::string to_string() const;

  // Prefixes the message with context ("modify: " + message), keeping the code.
  Error with_context(std::string_view context) const;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  ErrorCode code_;
  std::string message_;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> make_error(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error(code, std::move(message)));
}

}  // namespace hwarb

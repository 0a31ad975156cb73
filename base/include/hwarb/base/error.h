// hwarb/base/error.h — the one error type of hwarb.
//
// Contract:
//  - Every fallible hwarb API returns Result<T> (a [[nodiscard]] std::expected<T, Error>); no
//    exception crosses an API boundary, and no Result is dropped without ignore_error's reason.
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
#include <type_traits>
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

// Result<T>: std::expected<T, Error> whose every drop is a compile error. The type is
// [[nodiscard]], so a call whose Result is left unused warns (-Wunused-result), and hwarb's build
// makes that warning an error (cmake/hwarb_component.cmake). A Result whose failure truly changes
// nothing for the caller goes through ignore_error(result, "why"), which names that intent.
//
// It is a std::expected in everything else: every constructor of std::expected<T, Error> (a
// value, make_error's std::unexpected<Error>, std::in_place, std::unexpect), conversion from a
// std::expected<T, Error>, and the base's members and comparisons. and_then, transform and
// or_else are its own (libstdc++ 12 has no monadic members, and a newer one's would accept only
// std::expected from the function): and_then's and or_else's function returns a Result (or a
// std::expected of Error), transform's returns a value or void; each gives back a Result.
template <typename T>
class [[nodiscard]] Result : public std::expected<T, Error> {
  using Base = std::expected<T, Error>;

 public:
  using Base::Base;
  constexpr Result() = default;
  constexpr Result(const Base& other) : Base(other) {}
  constexpr Result(Base&& other) : Base(std::move(other)) {}

  template <typename F>
  constexpr auto and_then(F&& f) const& {
    return and_then_of(*this, std::forward<F>(f));
  }
  template <typename F>
  constexpr auto and_then(F&& f) && {
    return and_then_of(std::move(*this), std::forward<F>(f));
  }
  template <typename F>
  constexpr auto transform(F&& f) const& {
    return transform_of(*this, std::forward<F>(f));
  }
  template <typename F>
  constexpr auto transform(F&& f) && {
    return transform_of(std::move(*this), std::forward<F>(f));
  }
  template <typename F>
  constexpr Result or_else(F&& f) const& {
    if (this->has_value()) return *this;
    return std::forward<F>(f)(this->error());
  }
  template <typename F>
  constexpr Result or_else(F&& f) && {
    if (this->has_value()) return std::move(*this);
    return std::forward<F>(f)(std::move(this->error()));
  }

 private:
  // The function applied to the value (none for Result<void>).
  template <typename Self, typename F>
  static constexpr decltype(auto) apply(Self&& self, F&& f) {
    if constexpr (std::is_void_v<T>) {
      return std::forward<F>(f)();
    } else {
      return std::forward<F>(f)(*std::forward<Self>(self));
    }
  }
  template <typename Self, typename F>
  static constexpr auto and_then_of(Self&& self, F&& f) {
    using Next = std::remove_cvref_t<decltype(apply(std::forward<Self>(self), std::forward<F>(f)))>;
    using Out = Result<typename Next::value_type>;
    static_assert(std::is_same_v<typename Next::error_type, Error>,
                  "and_then: the function must return a Result");
    if (!self.has_value()) return Out(std::unexpect, std::forward<Self>(self).error());
    return Out(apply(std::forward<Self>(self), std::forward<F>(f)));
  }
  template <typename Self, typename F>
  static constexpr auto transform_of(Self&& self, F&& f) {
    using U = std::remove_cv_t<decltype(apply(std::forward<Self>(self), std::forward<F>(f)))>;
    using Out = Result<U>;
    if (!self.has_value()) return Out(std::unexpect, std::forward<Self>(self).error());
    if constexpr (std::is_void_v<U>) {
      apply(std::forward<Self>(self), std::forward<F>(f));
      return Out();
    } else {
      return Out(std::in_place, apply(std::forward<Self>(self), std::forward<F>(f)));
    }
  }
};

// A Result compares as its std::expected: with a Result, a std::unexpected or a value. (Without
// this, std::expected's comparisons, each of them also tried with its operands swapped, would
// find a Result == value ambiguous, a Result being a std::expected only through its base.)
template <typename T>
inline constexpr bool kIsResult = false;
template <typename T>
inline constexpr bool kIsResult<Result<T>> = true;

template <typename T, typename U>
constexpr bool operator==(const Result<T>& x, const U& y) {
  const std::expected<T, Error>& left = x;
  if constexpr (kIsResult<U>) {
    return left == static_cast<const std::expected<typename U::value_type, Error>&>(y);
  } else {
    return left == y;
  }
}

// Drops a Result on purpose: its failure changes nothing for the caller, and `why` (a literal at
// the call site) says why. Nothing is logged and nothing else happens.
template <typename T>
constexpr void ignore_error(const Result<T>& result, std::string_view why) {
  static_cast<void>(result);
  static_cast<void>(why);
}

inline std::unexpected<Error> make_error(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error(code, std::move(message)));
}

}  // namespace hwarb

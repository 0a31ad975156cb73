// sys_error.h (private to linux/sys) — the one place errno becomes an hwarb::Error.
//
// sys_error(err, field, what) is an Error with code from_errno(err) and the message
// "<field>: <what>: <ERRNAME> (<text>)", so an errno that ErrorCode folds into EIO keeps its name.
// Thread-safe (no static buffers).
#pragma once

#include <string>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::native::detail {

Error sys_error(int err, std::string_view field, std::string_view what);

template <typename T = void>
Result<T> sys_fail(int err, std::string_view field, std::string_view what) {
  return std::unexpected(sys_error(err, field, what));
}

}  // namespace hwarb::native::detail

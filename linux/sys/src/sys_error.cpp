#include "sys_error.h"

#include <cstring>

namespace hwarb::native::detail {

Error sys_error(int err, std::string_view field, std::string_view what) {
  const char* name = strerrorname_np(err);
  const char* text = strerrordesc_np(err);
  std::string msg(field);
  msg += ": ";
  msg += what;
  msg += ": ";
  msg += name != nullptr ? name : "errno " + std::to_string(err);
  if (text != nullptr) {
    msg += " (";
    msg += text;
    msg += ")";
  }
  return Error(from_errno(err), std::move(msg));
}

}  // namespace hwarb::native::detail

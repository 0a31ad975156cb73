// A translation unit that drops Results, for the ctest result_dropped (result_dropped.cmake):
// compiled with hwarb's flags it must fail, once per dropped Result. With
// HWARB_RESULTS_KEPT the same calls keep or name their Results, and it must compile.
#include "hwarb/base/error.h"

namespace {

hwarb::Result<int> parse(int text) {
  if (text < 0) return hwarb::make_error(hwarb::ErrorCode::kInval, "text: negative");
  return text;
}

hwarb::Result<void> apply(int value) {
  if (value == 0) return hwarb::make_error(hwarb::ErrorCode::kRange, "value: zero");
  return {};
}

struct Device {
  hwarb::Result<void> close() { return {}; }
};

}  // namespace

int run(int text) {
  Device device;
#ifdef HWARB_RESULTS_KEPT
  auto value = parse(text);
  if (!value) return 1;
  if (auto r = apply(*value); !r) return 2;
  hwarb::ignore_error(device.close(), "closing a device that is still open cannot fail");
#else
  parse(text);     // dropped Result<int>
  apply(text);     // dropped Result<void>
  device.close();  // dropped Result of a member
#endif
  return 0;
}

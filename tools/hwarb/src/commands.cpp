#include "commands.h"

#include <array>

namespace hwarb::cli {

std::span<const CommandSpec> commands() {
  static constexpr std::array kCommands = {
      CommandSpec{"probe", &setup_probe},         CommandSpec{"watch", &setup_watch},
      CommandSpec{"stat", &setup_stat},           CommandSpec{"trace", &setup_trace},
      CommandSpec{"gdbserver", &setup_gdbserver}, CommandSpec{"sim", &setup_sim},
      CommandSpec{"report", &setup_report},
  };
  return kCommands;
}

}  // namespace hwarb::cli

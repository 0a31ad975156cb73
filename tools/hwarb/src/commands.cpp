#include "commands.h"

#include <array>

namespace hwarb::cli {

std::span<const CommandSpec> commands() {
  static constexpr std::array kCommands = {
      CommandSpec{"sim", &setup_sim},
  };
  return kCommands;
}

}  // namespace hwarb::cli

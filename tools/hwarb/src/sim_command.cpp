// `hwarb sim FILE.scn [--explain]`: runs a scenario on the simulated machine's slot arbiter. Its
// help is generated from the scenario command table (hwarb/scenario/grammar.h).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "hwarb/scenario/grammar.h"
#include "hwarb/scenario/scenario.h"
#include "session.h"
#include "svg_occupancy.h"

namespace hwarb::cli {
namespace {

int run_sim(const std::string& file, bool explain, const std::string& svg_path) {
  auto text = scenario::read_scenario_file(file);
  if (!text) {
    std::cerr << "hwarb sim: " << text.error().message() << "\n";
    return kExitUsage;
  }
  auto scenario = scenario::parse_scenario(*text, file);
  if (!scenario) {
    std::cerr << scenario.error().message() << "\n";
    return kExitUsage;
  }
  std::optional<PictureFile> svg;
  OccupancyChart chart;
  scenario::RunOptions options{.explain = explain};
  if (!svg_path.empty()) {
    auto f = PictureFile::open("--svg", svg_path);
    if (!f) {
      std::cerr << "hwarb sim: " << f.error().to_string() << "\n";
      return kExitUsage;
    }
    svg.emplace(std::move(*f));
    options.on_step = [&chart](const scenario::SlotStep& step) { chart.add(step); };
  }
  auto lines = scenario::run_scenario(*scenario, options);
  if (!lines) {
    if (!scenario::is_internal_error(lines.error())) {  // a run-time scenario error
      std::cerr << lines.error().message() << "\n";
      return kExitUsage;
    }
    std::cerr << "hwarb sim: " << lines.error().to_string() << "\n";
    return kExitFailure;
  }
  // Buffered (a scenario may print 32 MiB); a failed write is said once, at the end (exit 1).
  Report out = Report::standard_output();
  for (const std::string& line : *lines) {
    out.write(line);
    out.write("\n");
  }
  int status = kExitOk;
  if (svg) {
    const auto slash = file.rfind('/');
    if (auto r =
            svg->write_all(chart.svg(slash == std::string::npos ? file : file.substr(slash + 1)));
        !r) {
      std::cerr << "hwarb sim: " << r.error().message() << "\n";
      status = kExitFailure;
    }
  }
  return finish_report("sim", out, status);
}

}  // namespace

CommandRunner setup_sim(CLI::App& app) {
  struct Options {
    std::string file;
    bool explain = false;
    std::string svg;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sim = app.add_subcommand("sim", "Run a scenario file (.scn) on the simulated machine");
  sim->add_option("FILE", options->file, "The scenario file (.scn)")->required();
  sim->add_flag("--explain", options->explain,
                "Append ' — reason' to each refusal: the full CPU and pool and who holds it, "
                "the exclusive kind in use, the offline CPU or the invalid field");
  sim->add_option("--svg", options->svg,
                  "also draw the slots of each CPU over the scenario's commands as an SVG picture "
                  "in FILE: a lane per debug register and BTS, refusals marked (their reason on "
                  "hover)")
      ->type_name("FILE");
  sim->footer(scenario::scenario_help());
  return [options] { return run_sim(options->file, options->explain, options->svg); };
}

}  // namespace hwarb::cli

// `hwarb report RUN.json [-o OUT.html]`: a self-contained HTML page from the records of a
// `hwarb watch --json` run (report_html.h says what the page holds).
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "hwarb/scenario/scenario.h"
#include "report_html.h"
#include "session.h"

namespace hwarb::cli {
namespace {

constexpr std::size_t kMaxRunBytes = std::size_t{1} << 30;

int run_report(const std::string& input, const std::string& output) {
  // The scenario reader: the errno of a missing, unreadable or directory RUN, and a bound.
  scenario::Limits limits;
  limits.file_bytes = kMaxRunBytes;
  auto text = scenario::read_scenario_file(input, limits);
  if (!text) {
    std::cerr << "hwarb report: " << text.error().to_string() << "\n";
    return kExitUsage;
  }
  if (text->size() > kMaxRunBytes) {
    std::cerr << "hwarb report: EFBIG: " << input << " is larger than 1 GiB\n";
    return kExitUsage;
  }
  auto html = render_report(*text, input);
  if (!html) {
    std::cerr << "hwarb report: " << html.error().to_string() << "\n";
    return kExitUsage;
  }
  auto out = Report::open(output);  // after the page: no empty OUT for a RUN without records
  if (!out) {
    std::cerr << "hwarb report: " << out.error().to_string() << "\n";
    return kExitUsage;
  }
  out->write(*html);
  return finish_report("report", *out, kExitOk);
}

}  // namespace

CommandRunner setup_report(CLI::App& app) {
  struct Options {
    std::string input;
    std::string output;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "report", "a self-contained HTML page from the output of 'hwarb watch --json'");
  sub->add_option("RUN", options->input, "the records of a 'hwarb watch --json' run (its -o FILE)")
      ->required();
  sub->add_option("-o,--output", options->output, "write the page to FILE (default: stdout)")
      ->type_name("FILE");
  sub->footer(
      "The page: the run, where each watch went (hardware or software, and why), hits over time "
      "per thread, hits per site in a sortable table. No network access: everything is inline.\n"
      "Exit status: 0 written, 1 the page could not be written, 2 usage error, unreadable RUN or "
      "no watch records in it.");
  return [options] { return run_report(options->input, options->output); };
}

}  // namespace hwarb::cli

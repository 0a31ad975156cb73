// `hwarb report RUN.json [-o OUT.html]`: a self-contained HTML page from the records of a
// `hwarb watch --json` run (report_html.h says what the page holds).
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "commands.h"
#include "report_html.h"
#include "session.h"

namespace hwarb::cli {
namespace {

int run_report(const std::string& input, const std::string& output) {
  std::ifstream in(input, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    std::cerr << "hwarb report: cannot read " << input << "\n";
    return kExitUsage;
  }
  auto out = Report::open(output);
  if (!out) {
    std::cerr << "hwarb report: " << out.error().to_string() << "\n";
    return kExitUsage;
  }
  auto html = render_report(text.str(), input);
  if (!html) {
    std::cerr << "hwarb report: " << html.error().to_string() << "\n";
    return finish_report("report", *out, kExitUsage);
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

// tools/hwarb/src/report_html.h — `hwarb report RUN.json -o OUT.html`: one self-contained HTML page
// from the records of a `hwarb watch --json` run.
//
// Contract:
//  - The input is the run's output: one JSON object per line ("watch", "hit", "note", "summary"
//    records); other lines (a spawned program's own output on the same stdout, a line that is
//    not a JSON object) are skipped and counted, as are records of other kinds. No "watch", "hit"
//    or "summary" record at all is EINVAL ("no hwarb watch --json records in NAME").
//  - The page: the run (target, mode, method, hits); the placement of each watch (hardware or
//    software, why, debug registers); hits over time per thread (inline SVG: per thread a row of
//    kTimeBins bins, each bar as high as its hits, a <title> with the count and time); hits per
//    site (instruction, expression, access) in a table that sorts by any column on a click
//    (small inline script); the notes. At most kMaxThreads rows and kMaxSites sites are shown,
//    the busiest; the page says how many were left out.
//  - Self-contained: styles and script inline, no URL of any kind (nothing is fetched).
//  - Cost: linear in the input; memory linear in the hits (their times, for the bins).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::cli {

inline constexpr std::size_t kTimeBins = 240;
inline constexpr std::size_t kMaxThreads = 64;
inline constexpr std::size_t kMaxSites = 2000;

// `records`: the run's output; `name`: the input's name, for the page's title and errors.
Result<std::string> render_report(std::string_view records, std::string_view name);

}  // namespace hwarb::cli

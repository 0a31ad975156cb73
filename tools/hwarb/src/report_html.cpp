#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "hwarb/base/format.h"
#include "json_reader.h"
#include "svg_occupancy.h"

namespace hwarb::cli {
namespace {

struct Watch {
  std::string expr, addr, type, placement, why;
  double len = 0, registers = 0;
};

struct Site {
  std::uint64_t hits = 0;
  std::set<long> threads;
  double first = 0, last = 0;
  std::string last_change;  // "old -> new" of the last hit
};

struct Run {
  std::vector<Watch> watches;
  // (instruction, expression, access) -> site
  std::map<std::tuple<std::string, std::string, std::string>, Site> sites;
  std::map<long, std::vector<double>> times;  // per thread
  std::vector<std::string> notes;
  std::uint64_t notes_left_out = 0;
  std::uint64_t hits = 0;
  double end = 0;  // the last hit's time
  JsonValue summary_value;
  std::uint64_t skipped = 0;  // lines that are no record of a watch
};

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string number_text(double v) {
  return v == std::floor(v) && std::fabs(v) < 1e15 ? std::to_string(static_cast<long long>(v))
                                                   : fixed(v, 6);
}

void take(Run& run, const JsonValue& r) {
  const std::string event = r.string_of("event");
  if (event == "watch") {
    run.watches.push_back({r.string_of("expr"), r.string_of("addr"), r.string_of("type"),
                           r.string_of("placement"), r.string_of("why"), r.number_of("len"),
                           r.number_of("registers")});
  } else if (event == "hit") {
    const double time = r.number_of("time");
    const long tid = static_cast<long>(r.number_of("tid", -1));
    Site& s = run.sites[{r.string_of("symbol", r.string_of("ip")), r.string_of("expr"),
                         r.string_of("access")}];
    if (s.hits == 0) s.first = time;
    ++s.hits;
    s.threads.insert(tid);
    s.last = std::max(s.last, time);
    if (r.find("old") != nullptr || r.find("new") != nullptr) {
      s.last_change = r.string_of("old", "?") + " -> " + r.string_of("new", "?");
    }
    run.times[tid].push_back(time);
    run.end = std::max(run.end, time);
    ++run.hits;
  } else if (event == "note") {
    if (run.notes.size() < 200) {
      run.notes.push_back(r.string_of("expr") + " " + r.string_of("text"));
    } else {
      ++run.notes_left_out;
    }
  } else if (event == "summary") {
    run.summary_value = r;
  } else {
    ++run.skipped;
  }
}

const char* kStyle = R"CSS(<style>
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px 0; }
h2 { font-size: 17px; margin: 26px 0 8px 0; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.facts { color: #444; margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f7; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th:hover { background: #e2e8f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.hardware { background: #dff0d8; color: #2b5a1e; padding: 1px 6px; border-radius: 3px; }
.software { background: #fcf0d4; color: #7a5200; padding: 1px 6px; border-radius: 3px; }
.note { color: #7a5200; }
code { font-size: 12px; }
</style>
)CSS";

const char* kScript = R"JS(<script>
// Sorts a table.sortable by the clicked column (numbers as numbers); a second click reverses.
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var down = th.getAttribute("data-dir") !== "down";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("data-dir"); });
      th.setAttribute("data-dir", down ? "down" : "up");
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-v") || a.cells[col].textContent;
        var y = b.cells[col].getAttribute("data-v") || b.cells[col].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return down ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
// Last: the whole script ran (the tests look for it in the rendered page).
document.body.setAttribute("data-script", "ran");
</script>
)JS";

// Hits over time: per thread a row of bins.
std::string time_svg(const Run& run) {
  std::vector<std::pair<long, const std::vector<double>*>> threads;
  for (const auto& [tid, times] : run.times) threads.emplace_back(tid, &times);
  std::stable_sort(threads.begin(), threads.end(), [](const auto& a, const auto& b) {
    return a.second->size() > b.second->size();
  });
  const std::size_t shown = std::min(threads.size(), kMaxThreads);
  threads.resize(shown);
  std::sort(threads.begin(), threads.end());  // by tid
  const double left = 110, bin_w = 3.5, row_h = 34, top = 10;
  const double plot_w = static_cast<double>(kTimeBins) * bin_w;
  const double width = left + plot_w + 30;
  const double height = top + static_cast<double>(shown) * row_h + 36;
  const double span = run.end > 0 ? run.end : 1e-6;
  std::string out = "<svg width=\"" + fixed(width, 0) + "\" height=\"" + fixed(height, 0) +
                    "\" viewBox=\"0 0 " + fixed(width, 0) + " " + fixed(height, 0) +
                    "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\" "
                    "role=\"img\">\n";
  for (std::size_t row = 0; row < shown; ++row) {
    const auto& [tid, times] = threads[row];
    std::vector<std::uint64_t> bins(kTimeBins, 0);
    for (const double t : *times) {
      // A time outside [0, end] (a record edited by hand) goes to the nearest bin.
      const double at = t > 0 ? std::min(t / span, 1.0) : 0.0;
      const auto b = static_cast<std::size_t>(at * static_cast<double>(kTimeBins));
      bins[std::min(b, kTimeBins - 1)]++;
    }
    const std::uint64_t most = *std::max_element(bins.begin(), bins.end());
    const double y = top + static_cast<double>(row) * row_h;
    out += "<rect x=\"" + fixed(left, 0) + "\" y=\"" + fixed(y, 1) + "\" width=\"" +
           fixed(plot_w, 1) + "\" height=\"" + fixed(row_h - 6, 1) + "\" fill=\"#f4f6f9\"/>\n";
    out += "<text x=\"" + fixed(left - 8, 0) + "\" y=\"" + fixed(y + row_h / 2, 1) +
           "\" text-anchor=\"end\">tid " + std::to_string(tid) + " (" +
           std::to_string(times->size()) + ")</text>\n";
    for (std::size_t b = 0; b < kTimeBins; ++b) {
      if (bins[b] == 0) continue;
      const double h =
          std::max(2.0, (row_h - 8) * static_cast<double>(bins[b]) / static_cast<double>(most));
      const double t0 = span * static_cast<double>(b) / static_cast<double>(kTimeBins);
      const double t1 = span * static_cast<double>(b + 1) / static_cast<double>(kTimeBins);
      out += "<rect x=\"" + fixed(left + static_cast<double>(b) * bin_w, 1) + "\" y=\"" +
             fixed(y + row_h - 7 - h, 1) + "\" width=\"" + fixed(bin_w - 0.5, 1) + "\" height=\"" +
             fixed(h, 1) + "\" fill=\"#4e79a7\"><title>tid " + std::to_string(tid) + ": " +
             std::to_string(bins[b]) + " hits in " + fixed(t0, 6) + "-" + fixed(t1, 6) +
             " s</title></rect>\n";
    }
  }
  const double axis = top + static_cast<double>(shown) * row_h + 4;
  for (int i = 0; i <= 4; ++i) {
    const double x = left + plot_w * i / 4;
    out += "<line x1=\"" + fixed(x, 1) + "\" y1=\"" + fixed(top, 1) + "\" x2=\"" + fixed(x, 1) +
           "\" y2=\"" + fixed(axis, 1) + "\" stroke=\"#ccc\"/>\n";
    out += "<text x=\"" + fixed(x, 1) + "\" y=\"" + fixed(axis + 14, 1) +
           "\" text-anchor=\"middle\" fill=\"#555\">" + fixed(span * i / 4, 4) + " s</text>\n";
  }
  out += "</svg>\n";
  if (run.times.size() > shown) {
    out += "<p class=\"note\">" + std::to_string(run.times.size() - shown) +
           " threads with fewer hits are not drawn (at most " + std::to_string(kMaxThreads) +
           ").</p>\n";
  }
  return out;
}

std::string summary_html(const Run& run, std::string_view name) {
  std::string out =
      "<h1>hwarb watch: " + xml_escape(std::string(name)) + "</h1>\n<p class=\"facts\">";
  const JsonValue& s = run.summary_value;
  if (s.type == JsonValue::Type::kObject) {
    out += "<b>" + std::to_string(run.hits) + "</b> hits";
    out += " &middot; mode <b>" + xml_escape(s.string_of("mode", "?")) + "</b> (" +
           xml_escape(s.string_of("method")) + ")";
    if (const JsonValue* t = s.find("target");
        t != nullptr && t->type == JsonValue::Type::kObject) {
      out += " &middot; pid " + number_text(t->number_of("pid"));
      if (t->find("exit") != nullptr)
        out += ", exited with status " + number_text(t->number_of("exit"));
      if (t->find("signal") != nullptr)
        out += ", killed by signal " + number_text(t->number_of("signal"));
      if (t->find("interrupted") != nullptr) out += ", interrupted";
    }
    if (s.find("lost") != nullptr) {
      out += " &middot; <span class=\"note\">" + number_text(s.number_of("lost")) +
             " samples lost (the counts are lower bounds)</span>";
    }
  } else {
    out += "<b>" + std::to_string(run.hits) +
           "</b> hits &middot; <span class=\"note\">no "
           "summary record: the run did not end (or its output was cut)</span>";
  }
  out += " &middot; over " + fixed(run.end, 6) + " s</p>\n";
  if (run.skipped != 0) {
    out += "<p class=\"facts\">" + std::to_string(run.skipped) +
           " input lines were not records of the watch (the program's own output) and are left "
           "out.</p>\n";
  }
  return out;
}

std::string watches_html(const Run& run) {
  std::string out = "<h2>Where each watch went</h2>\n";
  if (run.watches.empty()) {
    return out +
           "<p class=\"note\">No placement records (a run of an older hwarb, or a "
           "system-wide watch).</p>\n";
  }
  out +=
      "<table><thead><tr><th>expression</th><th>range</th><th>access</th><th>placement</th>"
      "<th>why</th><th>debug registers</th></tr></thead><tbody>\n";
  for (const Watch& w : run.watches) {
    const std::string cls = w.placement == "hardware" ? "hardware" : "software";
    out += "<tr><td><code>" + xml_escape(w.expr) + "</code></td><td><code>" + xml_escape(w.addr) +
           "/" + number_text(w.len) + "</code></td><td>" + xml_escape(w.type) +
           "</td><td><span class=\"" + cls + "\">" + xml_escape(w.placement) + "</span></td><td>" +
           xml_escape(w.why) + "</td><td class=\"num\">" + number_text(w.registers) +
           "</td></tr>\n";
  }
  return out + "</tbody></table>\n";
}

std::string sites_html(const Run& run) {
  std::vector<std::pair<const std::tuple<std::string, std::string, std::string>*, const Site*>>
      sites;
  for (const auto& [key, site] : run.sites) sites.emplace_back(&key, &site);
  std::stable_sort(sites.begin(), sites.end(),
                   [](const auto& a, const auto& b) { return a.second->hits > b.second->hits; });
  const std::size_t shown = std::min(sites.size(), kMaxSites);
  std::string out = "<h2>Hits per site</h2>\n<p class=\"facts\">" + std::to_string(sites.size()) +
                    (sites.size() == 1 ? " site" : " sites") +
                    " (instruction, expression, access); click a column to sort.</p>\n";
  out +=
      "<table class=\"sortable\" id=\"sites\"><thead><tr><th>instruction</th><th>expression"
      "</th><th>access</th><th>hits</th><th>threads</th><th>first (s)</th><th>last (s)</th>"
      "<th>last change</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& [where, expr, access] = *sites[i].first;
    const Site& s = *sites[i].second;
    out += "<tr><td><code>" + xml_escape(where) + "</code></td><td><code>" + xml_escape(expr) +
           "</code></td><td>" + xml_escape(access) + "</td><td class=\"num\">" +
           std::to_string(s.hits) + "</td><td class=\"num\">" + std::to_string(s.threads.size()) +
           "</td><td class=\"num\">" + fixed(s.first, 6) + "</td><td class=\"num\">" +
           fixed(s.last, 6) + "</td><td><code>" + xml_escape(s.last_change) + "</code></td></tr>\n";
  }
  out += "</tbody></table>\n";
  if (sites.size() > shown) {
    out += "<p class=\"note\">" + std::to_string(sites.size() - shown) +
           " sites with fewer hits are not listed (at most " + std::to_string(kMaxSites) +
           ").</p>\n";
  }
  return out;
}

}  // namespace

Result<std::string> render_report(std::string_view records, std::string_view name) {
  Run run;
  bool any = false;
  std::size_t at = 0;
  while (at < records.size()) {
    std::size_t end = records.find('\n', at);
    if (end == std::string_view::npos) end = records.size();
    std::string_view line = records.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.front() != '{') {
      ++run.skipped;
      continue;
    }
    auto value = parse_json(line);
    if (!value || value->type != JsonValue::Type::kObject) {
      ++run.skipped;
      continue;
    }
    const std::string event = value->string_of("event");
    if (event == "watch" || event == "hit" || event == "summary") any = true;
    take(run, *value);
  }
  if (!any) {
    return make_error(ErrorCode::kInval,
                      "no hwarb watch --json records in " + std::string(name) +
                          " (give the output of 'hwarb watch --json -o FILE ...')");
  }
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hwarb "
      "watch: " +
      xml_escape(std::string(name)) + "</title>\n" + kStyle + "</head>\n<body>\n";
  html += summary_html(run, name);
  html += watches_html(run);
  html += "<h2>Hits over time, per thread</h2>\n";
  html += run.times.empty() ? "<p class=\"facts\">No hits.</p>\n" : time_svg(run);
  html += sites_html(run);
  if (!run.notes.empty()) {
    html += "<h2>Notes</h2>\n<ul>\n";
    for (const std::string& n : run.notes) html += "<li>" + xml_escape(n) + "</li>\n";
    html += "</ul>\n";
    if (run.notes_left_out != 0) {
      html += "<p class=\"note\">" + std::to_string(run.notes_left_out) + " more notes.</p>\n";
    }
  }
  html += kScript;
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace hwarb::cli

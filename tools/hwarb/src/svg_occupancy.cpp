#include "svg_occupancy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "hwarb/base/format.h"
#include "hwarb/linux/files.h"

namespace hwarb::cli {
namespace {

constexpr double kLeft = 130;  // lane names
constexpr double kTop = 58;    // title and legend
constexpr double kLaneH = 22;
constexpr double kHeaderH = 20;
constexpr double kCpuGap = 14;
constexpr double kAxisH = 40;

// Fill colours, picked by a stable hash of the occupant's name (same name, same colour).
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                    "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
                                    "#86bcb6", "#8cd17d", "#d4a6c8", "#a0cbe8"};

std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

const char* colour(std::string_view label) {
  return kPalette[fnv1a(label) % (sizeof kPalette / sizeof kPalette[0])];
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

Result<PictureFile> PictureFile::open(std::string_view option, const std::string& path) {
  auto fd = native::create_file(path);
  if (!fd) return std::unexpected(fd.error().with_context(option));
  std::FILE* file = ::fdopen(fd->get(), "w");
  if (file == nullptr) {
    return make_error(ErrorCode::kNoMem, std::string(option) + ": no stream for " + path);
  }
  (void)fd->release();
  return PictureFile(file, std::string(option) + " " + path);
}

PictureFile::PictureFile(PictureFile&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)), name_(std::move(other.name_)) {}

PictureFile::~PictureFile() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<void> PictureFile::write_all(std::string_view text) {
  std::FILE* file = std::exchange(file_, nullptr);
  if (file == nullptr) return make_error(ErrorCode::kInval, name_ + ": already written");
  auto written = native::write_stream(file, text, name_);
  auto closed = native::close_stream(file, name_);
  if (!written) return written;
  return closed;
}

void OccupancyChart::extend(std::size_t cpu, std::size_t lane, const std::string& label) {
  Open& o = open_[cpu][lane];
  if (o.label == label) return;
  const std::size_t now = columns_.size() - 1;
  if (!o.label.empty()) spans_.push_back({cpu, lane, o.begin, now, o.label});
  o.label = label;
  o.begin = now;
}

void OccupancyChart::add(const scenario::SlotStep& step) {
  columns_.push_back({step.line, std::string(step.command)});
  const std::size_t col = columns_.size() - 1;
  for (const scenario::SlotStep::Cpu& c : step.cpus) slots_ = std::max(slots_, c.slots.size());
  if (open_.size() < step.cpus.size()) {
    open_.resize(step.cpus.size());
    offline_.resize(step.cpus.size());
  }
  for (std::size_t c = 0; c < step.cpus.size(); ++c) {
    const scenario::SlotStep::Cpu& cpu = step.cpus[c];
    if (open_[c].size() < slots_ + 2) open_[c].resize(slots_ + 2);
    extend(c, 0, cpu.task == "idle" ? std::string() : cpu.task);
    for (std::size_t s = 0; s < slots_; ++s) {
      extend(c, 1 + s, s < cpu.slots.size() ? cpu.slots[s] : std::string());
    }
    for (const std::string& e : cpu.exclusive) {
      if (!e.starts_with("bts ") && !e.starts_with("ptrace bts ")) pt_or_lbr_ = true;
    }
    extend(c, slots_ + 1, join(cpu.exclusive));
    if (!cpu.online) offline_[c].push_back(col);
  }
  for (const scenario::SlotStep::Refusal& r : step.refusals) {
    marks_.push_back({col, r.cpu.value_or(-1),
                      r.name + " " + r.error + (r.reason.empty() ? "" : " — " + r.reason) +
                          " (line " + std::to_string(step.line) + ")"});
  }
}

std::string OccupancyChart::svg(std::string_view title) const {
  const std::size_t n = std::max<std::size_t>(columns_.size(), 1);
  const std::size_t cpus = open_.size();
  const std::size_t lanes = slots_ + 2;
  const double col_w = std::clamp((kMaxWidth - kLeft - 20) / static_cast<double>(n), 1.0, 40.0);
  const double cpu_h = kHeaderH + static_cast<double>(lanes) * kLaneH + kCpuGap;
  const double width = std::max(kLeft + static_cast<double>(n) * col_w + 20, 640.0);
  const double height = kTop + static_cast<double>(cpus) * cpu_h + kAxisH;
  const auto x_of = [&](std::size_t column) { return kLeft + static_cast<double>(column) * col_w; };
  const auto cpu_y = [&](std::size_t cpu) { return kTop + static_cast<double>(cpu) * cpu_h; };
  const auto lane_y = [&](std::size_t cpu, std::size_t lane) {
    return cpu_y(cpu) + kHeaderH + static_cast<double>(lane) * kLaneH;
  };
  const std::string last_line = columns_.empty() ? "0" : std::to_string(columns_.back().line);

  // The spans still open at the end, closed there.
  std::vector<Span> spans = spans_;
  for (std::size_t c = 0; c < open_.size(); ++c) {
    for (std::size_t l = 0; l < open_[c].size(); ++l) {
      if (!open_[c][l].label.empty()) {
        spans.push_back({c, l, open_[c][l].begin, columns_.size(), open_[c][l].label});
      }
    }
  }

  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += "<text x=\"12\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" +
         xml_escape("hwarb sim " + std::string(title)) + ": debug-register slots per CPU</text>\n";
  out +=
      "<text x=\"12\" y=\"42\" fill=\"#555\">x: the scenario's commands in order (file "
      "lines); a rect: what holds the lane; red: a refusal (hover for the reason); dashed: "
      "a tick (flexible events rotate)</text>\n";

  // Lanes, names and offline stretches.
  const std::string tracing = pt_or_lbr_ ? "BTS/PT/LBR" : "BTS";
  for (std::size_t c = 0; c < cpus; ++c) {
    out += "<text x=\"12\" y=\"" + num(cpu_y(c) + 14) + "\" font-weight=\"bold\">CPU " +
           std::to_string(c) + "</text>\n";
    for (std::size_t l = 0; l < lanes; ++l) {
      const double y = lane_y(c, l);
      const std::string name = l == 0           ? "task"
                               : l == lanes - 1 ? tracing
                               : slots_ == 4    ? "DR" + std::to_string(l - 1)
                                                : "slot" + std::to_string(l - 1);
      out += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(y) + "\" width=\"" +
             num(static_cast<double>(n) * col_w) + "\" height=\"" + num(kLaneH) + "\" fill=\"" +
             (l % 2 == 0 ? "#f4f4f4" : "#fafafa") + "\"/>\n";
      out += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(y + 15) +
             "\" text-anchor=\"end\" fill=\"#333\">" + name + "</text>\n";
    }
    const std::vector<std::size_t>& off = offline_[c];
    for (std::size_t i = 0; i < off.size();) {
      std::size_t j = i;
      while (j + 1 < off.size() && off[j + 1] == off[j] + 1) ++j;
      out += "<rect class=\"offline\" x=\"" + num(x_of(off[i])) + "\" y=\"" + num(lane_y(c, 0)) +
             "\" width=\"" + num(static_cast<double>(off[j] - off[i] + 1) * col_w) +
             "\" height=\"" + num(static_cast<double>(lanes) * kLaneH) +
             "\" fill=\"#bbbbbb\" opacity=\"0.6\"><title>CPU " + std::to_string(c) +
             " offline</title></rect>\n";
      i = j + 1;
    }
  }
  // Ticks.
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].command != "tick") continue;
    const double x = x_of(i) + col_w / 2;
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(kTop + static_cast<double>(cpus) * cpu_h - kCpuGap) +
           "\" stroke=\"#888\" stroke-dasharray=\"3,3\"/>\n";
  }
  std::size_t shapes = 0;
  std::size_t left_out = 0;
  for (const Span& s : spans) {
    if (shapes >= kMaxShapes) {
      ++left_out;
      continue;
    }
    ++shapes;
    const double x = x_of(s.begin);
    const double w = std::max(static_cast<double>(s.end - s.begin) * col_w - 1, 1.0);
    const double y = lane_y(s.cpu, s.lane);
    const std::string first = std::to_string(columns_[s.begin].line);
    const std::string last = std::to_string(columns_[s.end - 1].line);
    const std::string where = s.end == columns_.size() ? "line " + first + " to the end"
                              : first == last          ? "line " + first
                                                       : "lines " + first + "-" + last;
    out += "<g class=\"span\"><title>" + xml_escape(s.label + ": " + where) + "</title><rect x=\"" +
           num(x) + "\" y=\"" + num(y + 2) + "\" width=\"" + num(w) + "\" height=\"" +
           num(kLaneH - 4) + "\" rx=\"3\" fill=\"" + (s.lane == 0 ? "#d9d9d9" : colour(s.label)) +
           "\"/>";
    if (w >= 6.5 * static_cast<double>(s.label.size()) + 8) {
      out += "<text x=\"" + num(x + 4) + "\" y=\"" + num(y + 15) + "\" fill=\"" +
             (s.lane == 0 ? "#333" : "#fff") + "\">" + xml_escape(s.label) + "</text>";
    }
    out += "</g>\n";
  }
  for (const Mark& m : marks_) {
    for (std::size_t c = 0; c < cpus; ++c) {
      if (m.cpu >= 0 && static_cast<std::size_t>(m.cpu) != c) continue;
      if (shapes >= kMaxShapes) {
        ++left_out;
        continue;
      }
      ++shapes;
      const double x = x_of(m.column) + col_w / 2;
      const double y0 = lane_y(c, 1);
      const double y1 = lane_y(c, lanes);
      out += "<g class=\"refusal\"><title>" + xml_escape(m.text) + "</title><line x1=\"" + num(x) +
             "\" y1=\"" + num(y0) + "\" x2=\"" + num(x) + "\" y2=\"" + num(y1) +
             "\" stroke=\"#d62728\" stroke-width=\"2\"/><circle cx=\"" + num(x) + "\" cy=\"" +
             num(cpu_y(c) + 10) + "\" r=\"7\" fill=\"#d62728\"/><text x=\"" + num(x) + "\" y=\"" +
             num(cpu_y(c) + 14) +
             "\" text-anchor=\"middle\" fill=\"#fff\" font-weight=\"bold\">!</text></g>\n";
    }
  }
  // The axis: file lines, spaced so that they do not overlap.
  const double axis_y = kTop + static_cast<double>(cpus) * cpu_h;
  const std::size_t every =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(30.0 / col_w)));
  for (std::size_t i = 0; i < columns_.size(); i += every) {
    const double x = x_of(i) + col_w / 2;
    out += "<text x=\"" + num(x) + "\" y=\"" + num(axis_y + 4) +
           "\" text-anchor=\"middle\" fill=\"#555\">" + std::to_string(columns_[i].line) +
           "</text>\n";
  }
  out += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(axis_y + 4) +
         "\" text-anchor=\"end\" fill=\"#555\">line</text>\n";
  if (left_out != 0) {
    out += "<text x=\"12\" y=\"" + num(axis_y + 26) + "\" fill=\"#d62728\">" +
           std::to_string(left_out) + " more rects and marks not drawn (at most " +
           std::to_string(kMaxShapes) + "; the scenario ends at line " + last_line + ")</text>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace hwarb::cli

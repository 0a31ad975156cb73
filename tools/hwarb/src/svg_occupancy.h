// tools/hwarb/src/svg_occupancy.h — `hwarb sim FILE --svg OUT.svg`: the slots of the simulated
// machine over the scenario's commands, as an SVG picture.
//
// Contract:
//  - add() takes the SlotStep of each command in order (RunOptions::on_step); svg() draws them:
//    the x axis is the commands in order (labelled with their file lines); per CPU a lane for the
//    running task, one per debug register (DR0-DR3; slot0.. on arm64) and one for the exclusive
//    tracing units (BTS, and PT/LBR when the scenario uses them). Each stretch of commands over
//    which a lane keeps the same occupant is one labelled rect (its name, the name alone when
//    the rect is too narrow for it), with a <title> giving the name and the lines; a flexible
//    event rotated out by a `tick` ends its rect there, so rotations show as alternating rects;
//    `tick` columns are marked with dashed lines. Offline stretches are grey. Each refusal is a
//    red mark on the CPU it names (every drawn CPU when it names none) with a <title>
//    "NAME ERRNO — reason (line N)" that a browser shows on hover.
//  - The picture is bounded: at most kMaxShapes rects and marks (past it, a note in the picture
//    says how many were left out); the width grows with the commands up to kMaxWidth pixels.
//  - Same steps, same bytes (no clock, no randomness): goldens can compare the text.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/scenario/scenario.h"

namespace hwarb::cli {

class OccupancyChart {
 public:
  static constexpr std::size_t kMaxShapes = 50'000;
  static constexpr double kMaxWidth = 1600;

  void add(const scenario::SlotStep& step);
  // The whole picture; `title` heads it (the scenario's file name).
  std::string svg(std::string_view title) const;

 private:
  struct Column {
    int line = 0;
    std::string command;
  };
  struct Span {
    std::size_t cpu = 0;
    std::size_t lane = 0;  // 0 task, 1.. slots, then the tracing lane
    std::size_t begin = 0;
    std::size_t end = 0;  // exclusive
    std::string label;
  };
  struct Mark {
    std::size_t column = 0;
    int cpu = -1;  // -1: every CPU
    std::string text;
  };
  // Per CPU and lane, the open span's label and begin.
  struct Open {
    std::string label;
    std::size_t begin = 0;
  };
  void extend(std::size_t cpu, std::size_t lane, const std::string& label);

  std::vector<Column> columns_;
  std::vector<Span> spans_;
  std::vector<Mark> marks_;
  std::vector<std::vector<Open>> open_;            // [cpu][lane]
  std::vector<std::vector<std::size_t>> offline_;  // [cpu]: columns where it is offline
  std::size_t slots_ = 0;
  bool pt_or_lbr_ = false;
};

// The file a picture goes to (--svg): created (or truncated) by open() before anything runs,
// an Error naming the option ("--svg: file: create PATH: ENOENT (...)"); write_all() writes the
// text and closes the file, the first failure ("--svg PATH: ENOSPC: ...").
class PictureFile {
 public:
  static Result<PictureFile> open(std::string_view option, const std::string& path);
  PictureFile(PictureFile&& other) noexcept;
  PictureFile& operator=(PictureFile&&) = delete;
  ~PictureFile();
  Result<void> write_all(std::string_view text);

 private:
  PictureFile(std::FILE* file, std::string name) : file_(file), name_(std::move(name)) {}
  std::FILE* file_;
  std::string name_;  // "--svg PATH"
};

// Text and attribute values are escaped by xml_escape (hwarb/base/format.h).

}  // namespace hwarb::cli

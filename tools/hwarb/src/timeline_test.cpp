#include "timeline.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "json_reader.h"

namespace hwarb::cli {
namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/hwarb_timeline_test_" + name;
}

// The file as JSON, every event checked for the trace-event format's required fields.
std::vector<JsonValue> events_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = parse_json(text.str());
  EXPECT_TRUE(doc.has_value()) << (doc ? "" : doc.error().message());
  if (!doc) return {};
  EXPECT_EQ(doc->type, JsonValue::Type::kArray);
  for (const JsonValue& e : doc->items) {
    EXPECT_EQ(e.type, JsonValue::Type::kObject);
    const std::string ph = e.string_of("ph");
    EXPECT_FALSE(e.string_of("name").empty());
    EXPECT_NE(e.find("pid"), nullptr);
    if (ph != "M") {
      EXPECT_NE(e.find("ts"), nullptr);
      EXPECT_NE(e.find("tid"), nullptr);
    }
    if (ph == "X") {
      EXPECT_GE(e.number_of("dur", -1), 0);
    }
  }
  return doc->items;
}

std::vector<const JsonValue*> with_ph(const std::vector<JsonValue>& events, std::string_view ph) {
  std::vector<const JsonValue*> out;
  for (const JsonValue& e : events) {
    if (e.string_of("ph") == ph) out.push_back(&e);
  }
  return out;
}

TEST(Timeline, HitsPhasesAndTracksAreValidTraceEvents) {
  const std::string path = temp_path("hits.json");
  auto t = Timeline::open(path);
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  t->process(100, "prog");
  t->thread(100, 101, "worker \"1\"");
  t->thread(100, 101, "again");  // named once
  RunPhases phases(&*t);
  phases.mark("attach");
  phases.mark("arm");
  record_hit(*t, {.pid = 100,
                  .tid = 101,
                  .ts_us = 12.5,
                  .expr = "target:w",
                  .access = "w",
                  .ip = 0x401000,
                  .addr = 0x404000,
                  .instruction = "set_target+0x4 (writer.c:21)",
                  .old_value = "0x1",
                  .new_value = "0x2"});
  phases.mark("run");
  phases.end("\"target\":\"exited with status 3\"");
  ASSERT_TRUE(t->close().has_value());
  const std::vector<JsonValue> events = events_of(path);
  const auto meta = with_ph(events, "M");
  ASSERT_EQ(meta.size(), 4u);  // hwarb's process and thread, prog, its thread
  EXPECT_EQ(meta[3]->find("args")->string_of("name"), "worker \"1\"");
  const auto hits = with_ph(events, "i");
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0]->string_of("name"), "target:w");
  EXPECT_EQ(hits[0]->number_of("ts"), 12.5);
  const JsonValue* args = hits[0]->find("args");
  ASSERT_NE(args, nullptr);
  EXPECT_EQ(args->string_of("instruction"), "set_target+0x4 (writer.c:21)");
  EXPECT_EQ(args->string_of("change"), "0x1 -> 0x2");
  EXPECT_EQ(args->string_of("access"), "w");
  const auto slices = with_ph(events, "X");
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0]->string_of("name"), "attach");
  EXPECT_EQ(slices[1]->string_of("name"), "arm");
  EXPECT_EQ(slices[2]->string_of("name"), "run");
  EXPECT_EQ(slices[2]->number_of("pid"), Timeline::kHwarbPid);
  std::remove(path.c_str());
}

TEST(Timeline, CapWritesANoteAndCountsTheRest) {
  const std::string path = temp_path("cap.json");
  auto t = Timeline::open(path, 3);
  ASSERT_TRUE(t.has_value());
  for (int i = 0; i < 5; ++i) t->instant(1, 1, "hit", "hit", i);
  RunPhases phases(&*t);
  phases.mark("detach");  // phases pass the cap
  phases.end();
  EXPECT_EQ(t->dropped(), 2u);
  std::optional<Timeline> holder(std::move(*t));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(finish_timeline("watch", holder, kExitOk), kExitOk);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "hwarb watch: --timeline " + path + ": capped at 3 events; 2 more not written\n");
  const std::vector<JsonValue> events = events_of(path);
  EXPECT_EQ(with_ph(events, "i").size(), 4u);  // 3 hits and the note
  bool noted = false;
  for (const JsonValue& e : events) noted |= e.string_of("name") == "timeline capped";
  EXPECT_TRUE(noted);
  EXPECT_EQ(with_ph(events, "X").size(), 1u);
  std::remove(path.c_str());
}

TEST(Timeline, UnwritableFileNamesTheOptionAndErrno) {
  auto t = Timeline::open("/nonexistent-dir/t.json");
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), ErrorCode::kNoEnt);
  EXPECT_TRUE(t.error().message().starts_with("--timeline: ")) << t.error().message();
}

TEST(Timeline, FullDeviceIsAFailureOfTheCommand) {
  auto t = Timeline::open("/dev/full");
  ASSERT_TRUE(t.has_value());
  for (int i = 0; i < 10000; ++i) t->instant(1, 1, "hit", "hit", i);
  std::optional<Timeline> holder(std::move(*t));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(finish_timeline("trace", holder, kExitOk), kExitFailure);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "hwarb trace: --timeline /dev/full: ENOSPC: No space left on device\n");
}

TEST(CallSlices, CallsAndReturnsNest) {
  const std::string path = temp_path("calls.json");
  auto t = Timeline::open(path);
  ASSERT_TRUE(t.has_value());
  {
    CallSlices calls(*t, 7);
    using K = CallSlices::Kind;
    calls.branch(7, 10, K::kCall, "main", "work");      // main (from 10), work 10..
    calls.branch(7, 11, K::kJump, "work", "work");      // inside work: nothing
    calls.branch(7, 12, K::kCall, "work", "leaf@plt");  // leaf@plt 12..
    calls.branch(7, 13, K::kJump, "leaf@plt", "leaf");  // the stub jumps on: leaf 13..
    calls.branch(7, 14, K::kReturn, "leaf", "work");    // leaf ends 14
    calls.branch(7, 15, K::kReturn, "work", "main");    // work ends 15
    calls.branch(7, 16, K::kReturn, "main", "__libc_start_call_main");  // main ends 16
    calls.finish(20);
  }
  ASSERT_TRUE(t->close().has_value());
  const std::vector<JsonValue> events = events_of(path);
  std::vector<std::string> got;
  for (const JsonValue* e : with_ph(events, "X")) {
    got.push_back(e->string_of("name") + " " +
                  std::to_string(static_cast<int>(e->number_of("ts"))) + "+" +
                  std::to_string(static_cast<int>(e->number_of("dur"))));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"leaf@plt 12+1", "leaf 13+1", "work 10+5", "main 10+6",
                                           "__libc_start_call_main 16+4"}));
  std::remove(path.c_str());
}

TEST(CallSlices, DepthIsBounded) {
  const std::string path = temp_path("deep.json");
  auto t = Timeline::open(path);
  ASSERT_TRUE(t.has_value());
  {
    CallSlices calls(*t, 7);
    for (int i = 0; i < 1000; ++i) calls.branch(7, i, CallSlices::Kind::kCall, "f", "f");
    for (int i = 0; i < 1000; ++i) calls.branch(7, 1000 + i, CallSlices::Kind::kReturn, "f", "f");
    calls.finish(3000);
  }
  EXPECT_EQ(t->written(), CallSlices::kMaxDepth);  // the deeper calls are not drawn
  ASSERT_TRUE(t->close().has_value());
  std::remove(path.c_str());
}

TEST(Timeline, FunctionOfSymOff) {
  EXPECT_EQ(function_of("main+0x1c"), "main");
  EXPECT_EQ(function_of("[unknown]"), "[unknown]");
  EXPECT_EQ(function_of("puts@plt+0x4"), "puts@plt");
  EXPECT_EQ(call_kind(x86::BranchKind::kIndirectCall), CallSlices::Kind::kCall);
  EXPECT_EQ(call_kind(x86::BranchKind::kCondJump), CallSlices::Kind::kJump);
  EXPECT_EQ(call_kind(x86::BranchKind::kSyscall), CallSlices::Kind::kOther);
}

}  // namespace
}  // namespace hwarb::cli

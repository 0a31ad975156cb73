#include "hwarb/base/error.h"

#include <gtest/gtest.h>

#include "hwarb/base/ids.h"

namespace hwarb {
namespace {

TEST(ErrorTest, NamesRoundTrip) {
  for (ErrorCode c : {ErrorCode::kNoSpc, ErrorCode::kInval, ErrorCode::kBusy, ErrorCode::kPerm,
                      ErrorCode::kIo, ErrorCode::kNxio, ErrorCode::kNoEnt, ErrorCode::kOpNotSupp,
                      ErrorCode::kNoMem, ErrorCode::kFault, ErrorCode::kNoDev}) {
    ErrorCode back{};
    ASSERT_TRUE(parse_errno_name(errno_name(c), &back)) << errno_name(c);
    EXPECT_EQ(back, c);
  }
  EXPECT_EQ(errno_name(ErrorCode::kNoSpc), "ENOSPC");
  EXPECT_EQ(errno_name(static_cast<ErrorCode>(9999)), "E?9999");
  ErrorCode ignored{};
  EXPECT_FALSE(parse_errno_name("ENOTANERROR", &ignored));
}

TEST(ErrorTest, FromErrnoUsesLinuxValues) {
  EXPECT_EQ(from_errno(ENOSPC), ErrorCode::kNoSpc);
  EXPECT_EQ(from_errno(EINVAL), ErrorCode::kInval);
  EXPECT_EQ(static_cast<int>(ErrorCode::kNoSpc), 28);
  EXPECT_EQ(from_errno(-12345), ErrorCode::kIo);
}

TEST(ErrorTest, MessageAndContext) {
  Error e(ErrorCode::kInval, "weight: must be at least 1");
  EXPECT_EQ(e.to_string(), "EINVAL: weight: must be at least 1");
  EXPECT_EQ(e.with_context("reserve").message(), "reserve: weight: must be at least 1");
  EXPECT_EQ(e.with_context("reserve").code(), ErrorCode::kInval);
  Result<int> r = make_error(ErrorCode::kBusy, "x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kBusy);
}

TEST(IdsTest, StrongIdsCompareAndHash) {
  EXPECT_LT(CpuId(1), CpuId(2));
  EXPECT_EQ(TaskId(7), TaskId(7));
  EXPECT_EQ(std::hash<TaskId>{}(TaskId(7)), std::hash<std::int64_t>{}(7));
  std::optional<CpuId> all;
  EXPECT_FALSE(all.has_value());
  EXPECT_EQ(to_string(CpuId(3)), "cpu 3");
}

}  // namespace
}  // namespace hwarb

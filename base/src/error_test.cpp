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

Result<int> half(int n) {
  if (n % 2 != 0) return make_error(ErrorCode::kInval, "n: odd");
  return n / 2;
}

TEST(ResultTest, ConvertsFromExpectedAndUnexpected) {
  std::expected<int, Error> plain = 4;
  Result<int> r = plain;
  EXPECT_EQ(r, 4);
  r = std::expected<int, Error>(std::unexpect, Error(ErrorCode::kIo, "x"));
  EXPECT_EQ(r, std::unexpected(Error(ErrorCode::kIo, "x")));
  Result<void> v = std::unexpected(Error(ErrorCode::kBusy, "y"));
  EXPECT_NE(v, Result<void>());
  EXPECT_EQ(Result<void>(), Result<void>());
  EXPECT_EQ(half(4), half(4));
  EXPECT_NE(half(4), half(3));
  EXPECT_EQ(2, half(4));
}

TEST(ResultTest, MonadicMembersGiveResults) {
  Result<int> chained = half(8).and_then(half).and_then(half);
  EXPECT_EQ(chained, 1);
  Result<int> failed = half(8).and_then(half).and_then(half).and_then(half);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message(), "n: odd");
  Result<std::string> shown = half(6).transform([](int n) { return std::to_string(n); });
  EXPECT_EQ(shown, "3");
  int seen = 0;
  Result<void> done = half(2).transform([&](int n) { seen = n; });
  EXPECT_TRUE(done.has_value());
  EXPECT_EQ(seen, 1);
  Result<int> recovered = half(3).or_else([](const Error& e) -> Result<int> {
    return e.code() == ErrorCode::kInval ? Result<int>(0) : Result<int>(std::unexpected(e));
  });
  EXPECT_EQ(recovered, 0);
  Result<void> ok;
  EXPECT_EQ(ok.and_then([] { return half(10); }), 5);
  Result<void> bad = make_error(ErrorCode::kPerm, "z");
  EXPECT_EQ(bad.transform([] { return 1; }).error().code(), ErrorCode::kPerm);
  ignore_error(half(1), "the test drops it on purpose");
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

// The words of a call-ordered collective's agreement rounds and what each
// process concludes from them (call_agreement.h): every process must reach
// the same verdict from the same words.
#include "server/collective/cluster/call_agreement.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

CallWord Word(uint64_t call, std::string digest, absl::Status status = absl::OkStatus()) {
  return CallWord{call, std::move(digest), std::move(status)};
}

TEST(CallAgreementTest, WordsRoundTripAndLongMessagesAreCut) {
  const CallWord word = Word(7, "0123456789abcdef", absl::ResourceExhaustedError("no room"));
  const std::string block = EncodeCallWord(word);
  ASSERT_EQ(block.size(), kCallWordBytes);
  absl::StatusOr<CallWord> back = DecodeCallWord(block);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->call, 7u);
  EXPECT_EQ(back->digest, "0123456789abcdef");
  EXPECT_EQ(back->status, word.status);

  absl::StatusOr<CallWord> cut =
      DecodeCallWord(EncodeCallWord(Word(1, "d", absl::InternalError(std::string(2000, 'x')))));
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_LT(cut->status.message().size(), kCallWordBytes);
  EXPECT_THAT(std::string(cut->status.message()), HasSubstr("..."));

  const absl::Status short_word = DecodeCallWord("short").status();
  EXPECT_EQ(short_word.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(short_word.message()),
              HasSubstr(absl::StrCat("of 5 bytes (expected ", kCallWordBytes, ")")));
  std::string bad = block;
  bad[0] ^= 1;
  const absl::Status bad_magic = DecodeCallWord(bad).status();
  EXPECT_EQ(bad_magic.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(bad_magic.message()), HasSubstr("it starts with 0x"));
}

TEST(CallAgreementTest, SameCallEverywhereAgrees) {
  const std::vector<int32_t> processes = {0, 2, 5};
  const std::vector<CallWord> words = {Word(3, "d"), Word(3, "d"), Word(3, "d")};
  for (size_t self = 0; self < 3; ++self) {
    EXPECT_TRUE(JudgeRound(processes, self, words, "set mc/0,2,5").ok());
  }
}

TEST(CallAgreementTest, DifferentRequestsOrNumbersAreInvalidArgumentNamingBoth) {
  const std::vector<int32_t> processes = {0, 1};
  absl::Status s = JudgeRound(processes, 0, {Word(4, "sum"), Word(4, "max")}, "set mc/0,1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("process 0 and process 1 asked for different collectives as call 4 of "
                        "set mc/0,1"));
  s = JudgeRound(processes, 1, {Word(4, "d"), Word(5, "d")}, "set mc/0,1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("process 1 and process 0 asked for different collectives (this "
                        "process's call 5, process 0's call 4)"));
}

TEST(CallAgreementTest, AFailedPartIsTheCauseEverywhere) {
  const std::vector<int32_t> processes = {0, 1, 2};
  const std::vector<CallWord> words = {
      Word(0, "d", absl::UnavailableError("connection closed")),
      Word(0, "d", absl::ResourceExhaustedError("device 3: 4096 bytes over budget")), Word(0, "d")};
  // The failing process keeps its own cause.
  absl::Status s = JudgeRound(processes, 1, words, "set mc/0,1,2");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // A process that succeeded, and one that only saw the consequence, name it.
  for (size_t self : {size_t{0}, size_t{2}}) {
    s = JudgeRound(processes, self, words, "set mc/0,1,2");
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(s.message(),
              "process 1 failed its part: RESOURCE_EXHAUSTED: device 3: 4096 bytes over budget");
  }
  // Only consequences: each keeps its own, or names the first that failed.
  const std::vector<CallWord> consequences = {Word(0, "d", absl::UnavailableError("closed")),
                                              Word(0, "d")};
  EXPECT_EQ(JudgeRound({0, 1}, 0, consequences, "s").code(), absl::StatusCode::kUnavailable);
  s = JudgeRound({0, 1}, 1, consequences, "s");
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "process 0 failed its part: UNAVAILABLE: closed");
}

TEST(CallAgreementTest, AForfeitNoticeCarriesItsProcessCallAndFailure) {
  const std::string notice =
      EncodeForfeit(7, Word(12, "digest", absl::ResourceExhaustedError("device 7: 64 bytes")));
  absl::StatusOr<std::pair<int32_t, CallWord>> decoded = DecodeForfeit(notice);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->first, 7);
  EXPECT_EQ(decoded->second.call, 12u);
  EXPECT_EQ(decoded->second.status, absl::ResourceExhaustedError("device 7: 64 bytes"));
  EXPECT_EQ(PartFailedError(decoded->first, decoded->second.status).message(),
            "process 7 failed its part: RESOURCE_EXHAUSTED: device 7: 64 bytes");
  absl::Status bad = DecodeForfeit(notice.substr(1)).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("a malformed forfeit notice of 515 bytes"));
}

}  // namespace
}  // namespace placement::server

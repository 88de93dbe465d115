#include "common/partition_spec_text.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using ::testing::HasSubstr;

PartitionSpec P(std::vector<std::vector<std::string>> dims) {
  return PartitionSpec{std::move(dims)};
}

TEST(ParsePartitionSpecTest, AcceptsCliAndPythonForms) {
  EXPECT_EQ(*ParsePartitionSpec("data,None"), P({{"data"}, {}}));
  EXPECT_EQ(*ParsePartitionSpec("None, model"), P({{}, {"model"}}));
  EXPECT_EQ(*ParsePartitionSpec("(x,y),None"), P({{"x", "y"}, {}}));
  EXPECT_EQ(*ParsePartitionSpec("P('data', None, ('x', 'y'))"), P({{"data"}, {}, {"x", "y"}}));
  EXPECT_EQ(*ParsePartitionSpec("PartitionSpec(\"data\",)"), P({{"data"}}));
  EXPECT_EQ(*ParsePartitionSpec("('x',)"), P({{"x"}}));
  EXPECT_EQ(*ParsePartitionSpec(""), P({}));
  EXPECT_EQ(*ParsePartitionSpec("P()"), P({}));
}

TEST(ParsePartitionSpecTest, NamesTheTextAndEntryAtFault) {
  auto nested = ParsePartitionSpec("((x,y))");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nested.status().message(), "spec '((x,y))': nested tuples are not allowed");
  auto unbalanced = ParsePartitionSpec("(x,y");
  EXPECT_EQ(unbalanced.status().message(), "spec '(x,y': unbalanced '('");
  auto bad_name = ParsePartitionSpec("data,'a b'");
  EXPECT_EQ(bad_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_name.status().message(), HasSubstr("entry 1"));
  EXPECT_THAT(bad_name.status().message(), HasSubstr("is not an axis name"));
}

TEST(ParsePartitionSpecTest, ToStringParsesBack) {
  for (const PartitionSpec& spec :
       {P({}), P({{"data"}}), P({{"data"}, {}}), P({{}, {"x", "y"}, {"z"}})}) {
    auto back = ParsePartitionSpec(spec.ToString());
    ASSERT_TRUE(back.ok()) << spec.ToString() << ": " << back.status();
    EXPECT_EQ(*back, spec) << spec.ToString();
  }
}

}  // namespace
}  // namespace placement

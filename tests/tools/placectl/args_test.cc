// placectl's command-line splitting and checking (tools/placectl/args.h),
// with flags defined here the way the command files define theirs.
#include "tools/placectl/args.h"

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "global");
ABSL_FLAG(bool, json, false, "global");
ABSL_FLAG(int32_t, timeout_seconds, 30, "global");
ABSL_FLAG(int64_t, dim, 0, "a number");
ABSL_FLAG(bool, donate, false, "a bool");
ABSL_FLAG(std::string, spec, "", "a string");

namespace placement::placectl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

int Nop(Session&, const Args&) { return 0; }

std::vector<CommandSpec> Table() {
  return {{.path = "devices", .run = Nop},
          {.path = "collective all-gather",
           .operands = "ID",
           .summary = "gather",
           .flags = {"dim", "donate"},
           .min_operands = 1,
           .max_operands = 1,
           .run = Nop},
          {.path = "tensor rm",
           .operands = "ID...",
           .flags = {"spec"},
           .max_operands = -1,
           .run = Nop,
           .aliases = {"tensor delete"}}};
}

TEST(SplitArgsTest, FlagsAnywhereValuesInEveryForm) {
  auto line = SplitArgs(
      {"--json", "collective", "all-gather", "--dim", "-1", "t-1", "-donate", "--spec=data,None"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(line->words, ElementsAre("collective", "all-gather", "t-1"));
  EXPECT_THAT(line->flags, ElementsAre(Pair("json", "true"), Pair("dim", "-1"),
                                       Pair("donate", "true"), Pair("spec", "data,None")));
  auto negated = SplitArgs({"--nodonate", "--nojson"});
  ASSERT_TRUE(negated.ok());
  EXPECT_THAT(negated->flags, ElementsAre(Pair("donate", "false"), Pair("json", "false")));
}

TEST(SplitArgsTest, NegativeNumbersDoubleDashHelpVersion) {
  auto line = SplitArgs({"validate-batch-size", "-5", "-0.5", "-", "--", "--json", "-h"});
  ASSERT_TRUE(line.ok());
  EXPECT_THAT(line->words, ElementsAre("validate-batch-size", "-5", "-0.5", "-", "--json", "-h"));
  EXPECT_TRUE(line->flags.empty());
  EXPECT_FALSE(line->help);
  auto help = SplitArgs({"tensor", "-h", "--version"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
  EXPECT_TRUE(help->version);
}

TEST(SplitArgsTest, UnknownFlagsAndMissingValues) {
  EXPECT_THAT(SplitArgs({"--frobnicate"}).status().message(),
              HasSubstr("unknown flag --frobnicate"));
  EXPECT_THAT(SplitArgs({"--nodim"}).status().message(), HasSubstr("unknown flag --nodim"));
  EXPECT_THAT(SplitArgs({"--dim"}).status().message(), HasSubstr("flag --dim needs a value"));
  // absl's own flags are not placectl's.
  EXPECT_THAT(SplitArgs({"--flagfile=x"}).status().message(), HasSubstr("unknown flag --flagfile"));
}

TEST(FindCommandTest, LongestPathAndAliases) {
  auto table = Table();
  auto found = FindCommand(table, {"collective", "all-gather", "t-1"});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->first->path, "collective all-gather");
  EXPECT_EQ(found->second, 2u);
  auto alias = FindCommand(table, {"tensor", "delete", "a"});
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->first->path, "tensor rm");
  EXPECT_THAT(FindCommand(table, {"tensor"}).status().message(),
              HasSubstr("'tensor' needs a subcommand"));
  EXPECT_THAT(FindCommand(table, {"tensor", "x"}).status().message(),
              HasSubstr("unknown tensor command 'x'"));
  EXPECT_THAT(FindCommand(table, {"x"}).status().message(), HasSubstr("unknown command 'x'"));
  EXPECT_FALSE(FindCommand(table, {}).ok());
}

TEST(CheckInvocationTest, OperandCountsAndFlagsThatApply) {
  auto table = Table();
  SplitCommandLine line;
  EXPECT_TRUE(CheckInvocation(table[1], line, {"t-1"}).ok());
  EXPECT_THAT(CheckInvocation(table[1], line, {}).message(),
              HasSubstr("'collective all-gather' needs ID: got 0 arguments, expected 1"));
  EXPECT_THAT(CheckInvocation(table[1], line, {"a", "b", "c"}).message(),
              HasSubstr("takes ID (1 argument); unexpected extra 'b' 'c'"));
  EXPECT_THAT(CheckInvocation(table[0], line, {"x"}).message(),
              HasSubstr("'devices' takes no arguments, got 'x'"));
  EXPECT_TRUE(CheckInvocation(table[2], line, {"a", "b", "c", "d", "e"}).ok());
  line.flags = {{"json", "true"}, {"spec", "x"}};
  EXPECT_TRUE(CheckInvocation(table[2], line, {"a"}).ok());
  EXPECT_THAT(CheckInvocation(table[1], line, {"a"}).message(),
              HasSubstr("--spec does not apply to 'collective all-gather'"));
}

TEST(ApplyFlagsTest, StoresValuesOrNamesTheBadOne) {
  SplitCommandLine line;
  line.flags = {{"dim", "-2"}, {"donate", "true"}};
  ASSERT_TRUE(ApplyFlags(line).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_dim), -2);
  EXPECT_TRUE(absl::GetFlag(FLAGS_donate));
  line.flags = {{"dim", "two"}};
  EXPECT_THAT(ApplyFlags(line).message(), HasSubstr("invalid value 'two' for --dim"));
}

TEST(HelpTest, UsageLinesAndFlagDefaults) {
  auto table = Table();
  EXPECT_EQ(UsageLine(table[1]), "usage: placectl collective all-gather ID [flags]");
  EXPECT_EQ(UsageLine(table[0]), "usage: placectl devices");
  std::string help = CommandHelp(table[1]);
  EXPECT_THAT(help, HasSubstr("--dim (default: 0)\n      a number"));
  EXPECT_THAT(help, HasSubstr("global flags:\n  --target (default: 127.0.0.1:50051)"));
  EXPECT_THAT(CommandList(table, "collective"), HasSubstr("collective all-gather ID  gather"));
  EXPECT_THAT(CommandList(table, "collective"), ::testing::Not(HasSubstr("devices")));
}

}  // namespace
}  // namespace placement::placectl

// Pagination of listings (AIP-158): pages of the requested size in order,
// tokens that resume strictly after the last item even when items come and
// go between calls, and precise errors for bad sizes and tokens.
#include "server/tensor/list_page.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("k", 100 + i));
  return keys;
}

TEST(ListPageTest, KeysComeInPagesWithoutRepeats) {
  const std::vector<std::string> keys = Keys(25);
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = PageOfKeys(keys, 10, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (size_t i = page->begin; i < page->end; ++i) seen.push_back(keys[i]);
    token = page->next_page_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, keys);
}

TEST(ListPageTest, TokensResumeAfterTheLastKeyWhenTheListChanges) {
  std::vector<std::string> keys = Keys(6);
  auto first = PageOfKeys(keys, 3, "");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->end, 3u);
  // k101 (seen) and k103 (not yet seen) go away; nothing repeats or shifts.
  keys.erase(keys.begin() + 3);
  keys.erase(keys.begin() + 1);
  auto second = PageOfKeys(keys, 3, first->next_page_token);
  ASSERT_TRUE(second.ok());
  std::vector<std::string> rest(keys.begin() + second->begin, keys.begin() + second->end);
  EXPECT_THAT(rest, ::testing::ElementsAre("k104", "k105"));
  EXPECT_TRUE(second->next_page_token.empty());
}

TEST(ListPageTest, DefaultAndMaximumSizes) {
  const std::vector<std::string> keys = Keys(12000);
  EXPECT_EQ(PageOfKeys(keys, 0, "")->end, static_cast<size_t>(kDefaultListPageSize));
  EXPECT_EQ(PageOfKeys(keys, 50000, "")->end, static_cast<size_t>(kMaxListPageSize));
}

TEST(ListPageTest, BadSizesAndTokens) {
  const std::vector<std::string> keys = Keys(3);
  auto negative = PageOfKeys(keys, -1, "");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "page_size is -1; must be >= 0 (0 selects 1000)");
  for (const std::string& token :
       {std::string("%%%"), std::string("aGVsbG8"), std::string(5000, 'A')}) {
    auto bad = PageOfKeys(keys, 1, token);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("page_token is malformed"));
  }
  std::vector<std::shared_ptr<const Tensor>> none;
  EXPECT_EQ(PageOf(none, 1, "%%%").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ListPageTest, TensorsPageByNameThenId) {
  std::vector<std::shared_ptr<const Tensor>> tensors;
  for (const auto& [name, id] : std::vector<std::pair<std::string, std::string>>{
           {"a", "t-2"}, {"a", "t-9"}, {"b", "t-1"}, {"c", "t-0"}}) {
    auto t = std::make_shared<Tensor>();
    t->name = name;
    t->id = id;
    tensors.push_back(t);
  }
  auto first = PageOf(tensors, 3, "");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->tensors.size(), 3u);
  EXPECT_EQ(first->tensors[2]->id, "t-1");
  auto second = PageOf(tensors, 3, first->next_page_token);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->tensors.size(), 1u);
  EXPECT_EQ(second->tensors[0]->id, "t-0");
  EXPECT_TRUE(second->next_page_token.empty());
}

}  // namespace
}  // namespace placement::server

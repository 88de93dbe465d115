#include "server/cluster/kv_store.h"

#include <thread>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(KvStoreTest, GetWaitsForTheKey) {
  KvStore kv;
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = kv.Get("gloo/a", absl::Seconds(10)); });
  ASSERT_TRUE(kv.Set("gloo/a", "addr").ok());
  reader.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "addr");
  EXPECT_EQ(kv.Get("missing", absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(KvStoreTest, BoundsPrefixesAndShutdown) {
  KvStore kv;
  EXPECT_EQ(kv.Set("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set("k", std::string(KvStore::kMaxValueBytes + 1, 'x')).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv.Set("p/1", "a").ok());
  ASSERT_TRUE(kv.Set("p/2", "b").ok());
  ASSERT_TRUE(kv.Set("q", "c").ok());
  EXPECT_EQ(kv.DeletePrefix("p/"), 2);
  EXPECT_EQ(kv.size(), 1);
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = kv.Get("never", absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(20));
  kv.Shutdown();
  reader.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace placement::server

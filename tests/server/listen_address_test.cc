#include "server/listen_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

TEST(ListenAddressTest, Parses) {
  auto a = ParseListenAddress("127.0.0.1:50051");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 50051);
  EXPECT_EQ(a->ToGrpcUri(0), "127.0.0.1:50051");
  auto any = ParseListenAddress("0.0.0.0:0");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->ToGrpcUri(4321), "0.0.0.0:4321");
  auto v6 = ParseListenAddress("[::1]:7000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToGrpcUri(0), "[::1]:7000");
  auto unix_socket = ParseListenAddress("unix:/run/placementd/p.sock");
  ASSERT_TRUE(unix_socket.ok());
  EXPECT_TRUE(unix_socket->is_unix);
  EXPECT_EQ(unix_socket->ToGrpcUri(0), "unix:/run/placementd/p.sock");
}

TEST(ListenAddressTest, RejectsWithReasons) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"localhost", "missing ':port'"},
      {"localhost:http", "not a number"},
      {"localhost:70000", "[0, 65535]"},
      {":50051", "empty host"},
      {"unix:relative.sock", "must be absolute"},
      {"::1:50", "[addr]:port"},
      {"[::1]50", "missing ':port'"},
  };
  for (const auto& [value, why] : bad) {
    auto parsed = ParseListenAddress(value);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(why)) << value;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--listen='" + value + "'"));
  }
}

}  // namespace
}  // namespace placement::server

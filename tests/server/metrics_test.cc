#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/http_server.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  std::string response;
  char buf[4096];
  for (int i = 0; i < 1000; ++i) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

TEST(MetricsTest, RendersCountersAndCollectedGauges) {
  Metrics metrics;
  metrics.Describe("placementd_rpcs_total", "counter", "RPCs.");
  metrics.Increment("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}});
  metrics.Increment("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}});
  metrics.Add("placementd_bytes_total", {}, 10);
  metrics.AddCollector([](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_device_memory_in_use_bytes", {{"device", "0"}}, 42});
  });
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_rpcs_total counter"));
  EXPECT_THAT(text, HasSubstr("placementd_rpcs_total{method=\"/a\",code=\"OK\"} 2"));
  EXPECT_THAT(text, HasSubstr("placementd_bytes_total 10"));
  EXPECT_THAT(text, HasSubstr("placementd_device_memory_in_use_bytes{device=\"0\"} 42"));
  EXPECT_EQ(metrics.CounterValue("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}}), 2);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(RenderLabels({{"a", "x\"y\\z\n"}}), "{a=\"x\\\"y\\\\z\\n\"}");
}

TEST(MetricsHttpServerTest, ServesMetricsAndHealth) {
  std::atomic<bool> healthy{true};
  auto server = MetricsHttpServer::Start(
      "127.0.0.1:0", [] { return std::string("up 1\n"); }, [&] { return healthy.load(); });
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  EXPECT_THAT(HttpGet(port, "/metrics"), HasSubstr("up 1"));
  EXPECT_THAT(HttpGet(port, "/healthz"), HasSubstr("200 OK"));
  healthy = false;
  EXPECT_THAT(HttpGet(port, "/healthz"), HasSubstr("503"));
  EXPECT_THAT(HttpGet(port, "/nope"), HasSubstr("404"));
  (*server)->Stop();
}

TEST(MetricsHttpServerTest, BadAddress) {
  auto server = MetricsHttpServer::Start("nonsense", [] { return std::string(); }, [] { return true; });
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::server

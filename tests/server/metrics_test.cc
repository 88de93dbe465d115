#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/http_server.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
  metrics.Describe("placementd_device_memory_in_use_bytes", "gauge", "Bytes in use.");
  metrics.Increment("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}});
  metrics.Increment("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}});
  metrics.Add("placementd_bytes_total", {}, 10);
  metrics.AddCollector([](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_device_memory_in_use_bytes", {{"device", "0"}}, 42});
  });
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# HELP placementd_rpcs_total RPCs.\n"
                              "# TYPE placementd_rpcs_total counter\n"));
  // Labels render sorted by name.
  EXPECT_THAT(text, HasSubstr("placementd_rpcs_total{code=\"OK\",method=\"/a\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("placementd_bytes_total 10\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_device_memory_in_use_bytes gauge\n"
                              "placementd_device_memory_in_use_bytes{device=\"0\"} 42\n"));
  EXPECT_EQ(metrics.CounterValue("placementd_rpcs_total", {{"method", "/a"}, {"code", "OK"}}), 2);
  EXPECT_EQ(metrics.CounterValue("placementd_rpcs_total", {{"method", "/b"}, {"code", "OK"}}), 0);
  EXPECT_EQ(metrics.CounterValue("never_declared_total"), 0);
}

TEST(MetricsTest, DeclaredFamiliesAreThereAtZeroBeforeTheirFirstEvent) {
  Metrics metrics;
  metrics.Describe("placementd_failures_total", "counter", "Failures.");
  metrics.Describe("placementd_by_op_total", "counter", "By op.",
                   {{{"op", "register"}}, {{"op", "use"}}});
  metrics.Describe("placementd_held", "gauge", "Held.");
  metrics.DescribeHistogram("placementd_seconds", "Seconds.", {0.5, 1});
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_failures_total counter\n"
                              "placementd_failures_total 0\n"));
  EXPECT_THAT(text, HasSubstr("placementd_by_op_total{op=\"register\"} 0\n"
                              "placementd_by_op_total{op=\"use\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("placementd_by_op_total 0")));
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_held gauge\nplacementd_held 0\n"));
  EXPECT_THAT(text, HasSubstr("placementd_seconds_bucket{le=\"0.5\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("placementd_seconds_bucket{le=\"+Inf\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("placementd_seconds_count 0\n"));

  // The first event replaces the stand-in zero series.
  metrics.Increment("placementd_failures_total", {{"op", "x"}});
  metrics.Observe("placementd_seconds", {{"method", "m"}}, 0.7);
  metrics.InitHistogram("placementd_seconds", {{"method", "n"}});
  text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("placementd_failures_total{op=\"x\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("placementd_failures_total 0")));
  EXPECT_THAT(text, HasSubstr("placementd_seconds_count{method=\"m\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("placementd_seconds_count{method=\"n\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("placementd_seconds_count 0")));
}

TEST(MetricsTest, CollectorsMayReportCountersTheyKeep) {
  Metrics metrics;
  metrics.Describe("placementd_reaped_total", "counter", "Reaped.");
  metrics.AddCollector([](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_reaped_total", {}, 7});
    out->push_back({"placementd_open", {}, 2});
  });
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_reaped_total counter\n"
                              "placementd_reaped_total 7\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_open gauge\nplacementd_open 2\n"));
  // Families come out sorted by name.
  EXPECT_LT(text.find("placementd_open"), text.find("placementd_reaped_total"));
}

TEST(MetricsTest, IntegersRenderExactly) {
  // Byte counts and gauges must not lose digits (the old exposition printed
  // 4805288 as 4.80529e+06).
  Metrics metrics;
  metrics.Add("placementd_bytes_total", {}, 4805288);
  metrics.Add("placementd_big_total", {}, 9007199254740992.0);  // 2^53
  metrics.AddCollector([](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_device_memory_limit_bytes", {}, 85899345920.0});  // 80 GiB
  });
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("placementd_bytes_total 4805288\n"));
  EXPECT_THAT(text, HasSubstr("placementd_big_total 9007199254740992\n"));
  EXPECT_THAT(text, HasSubstr("placementd_device_memory_limit_bytes 85899345920\n"));
  EXPECT_THAT(text, Not(HasSubstr("e+")));
}

TEST(MetricsTest, Histograms) {
  Metrics metrics;
  metrics.DescribeHistogram("placementd_rpc_sent_bytes", "Bytes.", {1024, 4096});
  metrics.Observe("placementd_rpc_sent_bytes", {{"method", "/d"}}, 100);
  metrics.Observe("placementd_rpc_sent_bytes", {{"method", "/d"}}, 2000);
  metrics.Observe("placementd_rpc_sent_bytes", {{"method", "/d"}}, 1e6);
  metrics.Observe("undeclared_histogram", {}, 1);  // ignored
  HistogramSnapshot h = metrics.HistogramValue("placementd_rpc_sent_bytes", {{"method", "/d"}});
  EXPECT_EQ(h.count, 3u);
  EXPECT_EQ(h.sum, 1002100);
  EXPECT_EQ(metrics.HistogramValue("placementd_rpc_sent_bytes", {{"method", "/x"}}).count, 0u);
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE placementd_rpc_sent_bytes histogram\n"));
  EXPECT_THAT(text, HasSubstr("placementd_rpc_sent_bytes_bucket{method=\"/d\",le=\"1024\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("placementd_rpc_sent_bytes_bucket{method=\"/d\",le=\"4096\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("placementd_rpc_sent_bytes_bucket{method=\"/d\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("placementd_rpc_sent_bytes_sum{method=\"/d\"} 1002100\n"));
  EXPECT_THAT(text, Not(HasSubstr("undeclared_histogram")));
}

TEST(MetricsTest, SeriesHandlesUpdateTheSameSeriesAsNamedCalls) {
  Metrics metrics;
  metrics.DescribeHistogram("placementd_h_seconds", "h", {1});
  const MetricLabels labels = {{"grpc_method", "M"}};
  CounterSeries counter = metrics.Counter("placementd_c_total", labels);
  // Made at zero by the lookup, before any Add.
  EXPECT_THAT(metrics.Render(), HasSubstr("placementd_c_total{grpc_method=\"M\"} 0\n"));
  counter.Add(2);
  metrics.Add("placementd_c_total", labels, 3);
  EXPECT_EQ(metrics.CounterValue("placementd_c_total", labels), 5);
  HistogramSeries histogram = metrics.Histogram("placementd_h_seconds", labels);
  histogram.Observe(0.5);
  metrics.Observe("placementd_h_seconds", labels, 2);
  EXPECT_EQ(metrics.HistogramValue("placementd_h_seconds", labels).count, 2u);
  // Undeclared histograms and default handles ignore updates.
  metrics.Histogram("placementd_undeclared", labels).Observe(1);
  CounterSeries().Add(1);
  HistogramSeries().Observe(1);
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("placementd_undeclared")));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Metrics metrics;
  metrics.Increment("placementd_x_total", {{"a", "x\"y\\z\n"}});
  EXPECT_THAT(metrics.Render(), HasSubstr("placementd_x_total{a=\"x\\\"y\\\\z\\n\"} 1\n"));
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  Metrics metrics;
  metrics.DescribeHistogram("placementd_h", "h", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        metrics.Increment("placementd_n_total", {{"thread", std::to_string(t % 2)}});
        metrics.Observe("placementd_h", {}, 1);
        if (i % 100 == 0) metrics.Render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(metrics.CounterValue("placementd_n_total", {{"thread", "0"}}), 4000);
  EXPECT_EQ(metrics.CounterValue("placementd_n_total", {{"thread", "1"}}), 4000);
  EXPECT_EQ(metrics.HistogramValue("placementd_h").count, 8000u);
}

TEST(MetricsHttpServerTest, ServesMetricsAndHealth) {
  Metrics metrics;
  metrics.AddCollector([](std::vector<GaugeSample>* out) { out->push_back({"up", {}, 1}); });
  std::atomic<bool> healthy{true};
  auto server = MetricsHttpServer::Start("127.0.0.1:0", metrics, [&] { return healthy.load(); });
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string(port));
  std::string scrape = HttpGet(port, "/metrics");
  EXPECT_THAT(scrape, HasSubstr("200 OK"));
  EXPECT_THAT(scrape, HasSubstr("\nup 1\n"));
  std::string health = HttpGet(port, "/healthz");
  EXPECT_THAT(health, HasSubstr("200 OK"));
  EXPECT_THAT(health, HasSubstr("\r\n\r\nok\n"));
  healthy = false;
  std::string draining = HttpGet(port, "/healthz");
  EXPECT_THAT(draining, HasSubstr("503"));
  EXPECT_THAT(draining, HasSubstr("draining\n"));
  EXPECT_THAT(HttpGet(port, "/nope"), HasSubstr("404"));

  // A second server in the same process answers its own health.
  auto other = MetricsHttpServer::Start("127.0.0.1:0", metrics, [] { return true; });
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(HttpGet((*other)->port(), "/healthz"), HasSubstr("200 OK"));
  EXPECT_THAT(HttpGet(port, "/healthz"), HasSubstr("503"));

  // Its port is taken while it serves: a precise UNAVAILABLE.
  auto clash =
      MetricsHttpServer::Start("127.0.0.1:" + std::to_string(port), metrics, [] { return true; });
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(clash.status().message(), HasSubstr("cannot listen for metrics on 127.0.0.1:"));

  (*server)->Stop();
  (*server)->Stop();  // idempotent
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

TEST(MetricsHttpServerTest, BadAddresses) {
  Metrics metrics;
  auto healthy = [] { return true; };
  for (const char* bad : {"nonsense", "unix:/tmp/x.sock", "127.0.0.1:99999"}) {
    auto server = MetricsHttpServer::Start(bad, metrics, healthy);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(server.status().message(), HasSubstr(std::string("--metrics_listen='") + bad));
  }
  auto v6 = MetricsHttpServer::Start("[::1]:0", metrics, healthy);
  EXPECT_EQ(v6.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v6.status().message(), HasSubstr("IPv6 is not supported"));
  auto unknown_host = MetricsHttpServer::Start("no-such-host.invalid:0", metrics, healthy);
  EXPECT_EQ(unknown_host.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown_host.status().message(), HasSubstr("has no IPv4 address"));
}

}  // namespace
}  // namespace placement::server

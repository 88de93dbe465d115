// A certificate rotation that goes wrong does not take TLS down
// (server/auth/served_tls_files.h): a certificate file that does not parse,
// then a new certificate beside the old key (a non-atomic rotation), are
// refused -- logged, counted in placementd_tls_reload_failures_total -- and
// new TLS connections keep getting the old certificate; once the new key
// arrives too, the new pair is served. Certificates are made by `openssl`.
#include <signal.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"
#include "tests/testing/test_certificates.h"

namespace placement {
namespace {

using ::testing::HasSubstr;
using testing::TestCertificates;

void Overwrite(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::trunc | std::ios::binary) << contents;
}

// Lists devices over a brand-new TLS connection (a channel of its own, not
// shared through gRPC's subchannel pool) that trusts `ca_pem`; returns the
// status and, through `served`, the certificate the daemon presented.
grpc::Status CallOverNewConnection(const std::string& address, const std::string& ca_pem,
                                   std::string* served) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(options), args);
  auto stub = v1::DeviceService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::ListDevicesResponse response;
  grpc::Status status = stub->ListDevices(&context, {}, &response);
  served->clear();
  if (status.ok()) {
    for (const auto& value : context.auth_context()->FindPropertyValues("x509_pem_cert")) {
      served->assign(value.data(), value.size());
    }
  }
  return status;
}

double Metric(const testing::DaemonProcess& daemon, const std::string& series) {
  return testing::MetricValue(
      testing::HttpGet(testing::MetricsPort(daemon.ReadyValue("metrics")), "/metrics"), series);
}

// Polls (bounded: the daemon checks its files every second) until `done`.
template <typename Done>
bool Eventually(Done done) {
  for (int i = 0; i < 300; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(TlsRotationTest, BadFilesAreRefusedAndTheOldPairKeepsServingUntilAGoodPairArrives) {
  auto certs = TestCertificates::Create();
  ASSERT_TRUE(certs.ok()) << certs.status();
  const TestCertificates& pki = **certs;
  ASSERT_TRUE(pki.Issue("server2", "placementd-next", "ca",
                        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                        "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
                  .ok());
  const std::string old_cert = pki.Read(pki.Cert("server"));
  const std::string old_key = pki.Read(pki.Key("server"));
  const std::string new_cert = pki.Read(pki.Cert("server2"));
  const std::string new_key = pki.Read(pki.Key("server2"));
  const std::string ca = pki.Read(pki.Cert("ca"));
  const std::string cert_path = pki.dir() + "/live.pem";
  const std::string key_path = pki.dir() + "/live.key";
  Overwrite(cert_path, old_cert);
  Overwrite(key_path, old_key);

  auto started = testing::DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--tls_cert=" + cert_path,
                       "--tls_key=" + key_path, "--tls_refresh_interval=1s",
                       "--metrics_listen=127.0.0.1:0"}});
  ASSERT_TRUE(started.ok()) << started.status();
  const testing::DaemonProcess& daemon = **started;
  std::string served;
  ASSERT_TRUE(CallOverNewConnection(daemon.address(), ca, &served).ok());
  EXPECT_EQ(served, old_cert);
  EXPECT_EQ(Metric(daemon, "placementd_tls_reload_failures_total"), 0);
  const int64_t fds = testing::OpenFds(daemon.pid());

  // 1. A certificate file that does not parse.
  Overwrite(cert_path,
            "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n");
  ASSERT_TRUE(Eventually([&] {
    return Metric(daemon, "placementd_tls_reload_failures_total") == 1;
  })) << daemon.Stderr();
  EXPECT_THAT(daemon.Stderr(), HasSubstr("TLS: refusing the changed TLS files"));
  EXPECT_THAT(daemon.Stderr(), HasSubstr("holds no certificate that parses"));
  // Long enough for gRPC's own watcher (every second) to have looked too.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  grpc::Status status = CallOverNewConnection(daemon.address(), ca, &served);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(served, old_cert);

  // 2. The new certificate beside the old key: a rotation half done.
  Overwrite(cert_path, new_cert);
  ASSERT_TRUE(Eventually([&] {
    return Metric(daemon, "placementd_tls_reload_failures_total") == 2;
  })) << daemon.Stderr();
  EXPECT_THAT(daemon.Stderr(), HasSubstr("is not the private key of the certificate"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  status = CallOverNewConnection(daemon.address(), ca, &served);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(served, old_cert);

  // 3. The new key arrives: the new pair is served to new connections.
  Overwrite(key_path, new_key);
  ASSERT_TRUE(Eventually([&] { return Metric(daemon, "placementd_tls_reloads_total") == 1; }))
      << daemon.Stderr();
  EXPECT_TRUE(Eventually([&] {
    return CallOverNewConnection(daemon.address(), ca, &served).ok() && served == new_cert;
  })) << daemon.Stderr();
  EXPECT_EQ(Metric(daemon, "placementd_tls_reload_failures_total"), 2);
  // No descriptor kept per refused or published set.
  EXPECT_LE(testing::OpenFds(daemon.pid()), fds + 4);
  EXPECT_EQ(started->get()->Stop(SIGTERM), 0);
}

TEST(TlsRotationTest, AMismatchedPairAtStartIsRefusedNamingTheFlags) {
  auto certs = TestCertificates::Create();
  ASSERT_TRUE(certs.ok()) << certs.status();
  const TestCertificates& pki = **certs;
  auto daemon = testing::DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--cpu_devices=1", "--tls_cert=" + pki.Cert("server"),
                       "--tls_key=" + pki.Key("client")}});
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("is not the private key of the certificate"));
  EXPECT_THAT(daemon.status().message(), HasSubstr("--tls_key="));
}

}  // namespace
}  // namespace placement

// placementd over TLS and mutual TLS, with certificates made by `openssl` in
// the test: a trusting client gets through, a plaintext one, one that trusts
// another CA, one with a certificate from an unknown CA or an expired one do
// not; non-loopback plaintext needs --allow_insecure; health stays open.
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/tensors.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/test_certificates.h"

namespace placement {
namespace {

using testing::DaemonOptions;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::TestCertificates;

std::unique_ptr<DaemonProcess> StartDaemon(std::vector<std::string> flags) {
  flags.push_back("--backend=cpu");
  flags.push_back("--cpu_devices=2");
  auto daemon = DaemonProcess::Start({.extra_flags = flags});
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

// A TLS channel that trusts `root` and presents `client` (none when empty).
std::shared_ptr<grpc::Channel> TlsChannel(const TestCertificates& certs, const std::string& address,
                                          const std::string& root, const std::string& client = "") {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = certs.Read(certs.Cert(root));
  if (!client.empty()) {
    options.pem_cert_chain = certs.Read(certs.Cert(client));
    options.pem_private_key = certs.Read(certs.Key(client));
  }
  return grpc::CreateChannel(address, grpc::SslCredentials(options));
}

grpc::Status ListDevices(const std::shared_ptr<grpc::Channel>& channel, int* count = nullptr) {
  auto stub = v1::DeviceService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::ListDevicesResponse response;
  grpc::Status status = stub->ListDevices(&context, {}, &response);
  if (count != nullptr) *count = response.devices_size();
  return status;
}

class TransportSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = TestCertificates::Create();
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = std::move(*certs);
  }
  std::vector<std::string> TlsFlags(bool mutual) const {
    std::vector<std::string> flags = {"--tls_cert=" + certs_->Cert("server"),
                                      "--tls_key=" + certs_->Key("server")};
    if (mutual) flags.push_back("--tls_client_ca=" + certs_->Cert("ca"));
    return flags;
  }
  std::unique_ptr<TestCertificates> certs_;
};

TEST_F(TransportSecurityTest, TlsServesClientsThatTrustItsCa) {
  auto daemon = StartDaemon(TlsFlags(/*mutual=*/false));
  ASSERT_NE(daemon, nullptr);
  int count = 0;
  grpc::Status ok = ListDevices(TlsChannel(*certs_, daemon->address(), "ca"), &count);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(count, 2);

  // A client that trusts another CA refuses the server; a plaintext client
  // cannot speak to a TLS port.
  EXPECT_EQ(ListDevices(TlsChannel(*certs_, daemon->address(), "other_ca")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListDevices(grpc::CreateChannel(daemon->address(), grpc::InsecureChannelCredentials()))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(daemon->Stderr(), HasSubstr("transport: TLS"));
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

TEST_F(TransportSecurityTest, MutualTlsNeedsAClientCertificateFromTheTrustedCa) {
  auto daemon = StartDaemon(TlsFlags(/*mutual=*/true));
  ASSERT_NE(daemon, nullptr);
  grpc::Status ok = ListDevices(TlsChannel(*certs_, daemon->address(), "ca", "client"));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  // No certificate, one from a CA the daemon does not trust, an expired one:
  // the handshake fails.
  EXPECT_EQ(ListDevices(TlsChannel(*certs_, daemon->address(), "ca")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListDevices(TlsChannel(*certs_, daemon->address(), "ca", "stranger")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListDevices(TlsChannel(*certs_, daemon->address(), "ca", "expired")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(daemon->Stderr(), HasSubstr("transport: mutual TLS"));
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

TEST_F(TransportSecurityTest, HealthStaysOpenWithAuthentication) {
  // Authentication on (an empty credentials file admits nobody): the data
  // plane refuses, grpc.health.v1 still answers.
  const std::string creds = certs_->dir() + "/creds";
  std::ofstream(creds) << "# nobody\n";
  std::vector<std::string> flags = TlsFlags(/*mutual=*/false);
  flags.push_back("--auth_file=" + creds);
  auto daemon = StartDaemon(flags);
  ASSERT_NE(daemon, nullptr);
  auto channel = TlsChannel(*certs_, daemon->address(), "ca");
  EXPECT_EQ(ListDevices(channel).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  grpc::GenericStub health(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  health.UnaryCall(&context, "/grpc.health.v1.Health/Check", {}, &request, &response,
                   [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = s;
                     done = true;
                     cv.notify_all();
                   });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

TEST_F(TransportSecurityTest, ClientLibraryUsesTlsCertificatesAndTokens) {
  // Mutual TLS; the client certificate maps to team-a, a token to team-b.
  server::TokenDigest digest = server::DigestToken("bravo-token");
  std::string hex;
  for (uint8_t b : digest) hex += absl::StrCat(absl::Hex(b, absl::kZeroPad2));
  const std::string creds = certs_->dir() + "/creds";
  std::ofstream(creds) << "cert trainer-1.team-a.example team-a user\n"
                       << "token sha256:" << hex << " team-b user\n";
  std::vector<std::string> flags = TlsFlags(/*mutual=*/true);
  flags.push_back("--auth_file=" + creds);
  auto daemon = StartDaemon(flags);
  ASSERT_NE(daemon, nullptr);

  client::ClientOptions options;
  options.tls = true;
  options.tls_ca_file = certs_->Cert("ca");
  options.tls_cert_file = certs_->Cert("client");
  options.tls_key_file = certs_->Key("client");
  auto by_cert = client::Client::Connect(daemon->address(), options);
  ASSERT_TRUE(by_cert.ok()) << by_cert.status();
  std::vector<float> x = {1, 2, 3, 4};
  auto a = client::TensorClient(**by_cert).Upload(client::HostArray::Of<float>(x, {4}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->tenant, "team-a");

  options.token = "bravo-token";  // a token wins over the certificate
  auto by_token = client::Client::Connect(daemon->address(), options);
  ASSERT_TRUE(by_token.ok()) << by_token.status();
  auto b = client::TensorClient(**by_token).Upload(client::HostArray::Of<float>(x, {4}));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->tenant, "team-b");
  EXPECT_EQ(client::TensorClient(**by_token).Describe(a->id).status().code(),
            absl::StatusCode::kNotFound);

  options.token = "wrong";
  // Connect opens the client's session: a token the daemon does not know
  // fails there, not at the first call.
  auto wrong = client::Client::Connect(daemon->address(), options);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
  options.session_policy = client::SessionPolicy::kNone;
  auto sessionless = client::Client::Connect(daemon->address(), options);
  ASSERT_TRUE(sessionless.ok()) << sessionless.status();
  EXPECT_EQ((*sessionless)->ListDevices().status().code(), absl::StatusCode::kUnauthenticated);
  options.session_policy = client::SessionPolicy::kOpen;

  client::ClientOptions missing_key = options;
  missing_key.tls_key_file.clear();
  EXPECT_EQ(client::Client::Connect(daemon->address(), missing_key).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

TEST_F(TransportSecurityTest, NonLoopbackPlaintextNeedsAllowInsecure) {
  auto refused = DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--listen=0.0.0.0:0"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("--listen=0.0.0.0:0 is not a loopback address"));

  auto allowed = StartDaemon({"--listen=0.0.0.0:0", "--allow_insecure"});
  ASSERT_NE(allowed, nullptr);
  EXPECT_THAT(allowed->Stderr(), HasSubstr("serving plaintext gRPC on non-loopback"));
  EXPECT_EQ(allowed->Stop(SIGTERM), 0);

  auto metrics =
      DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--metrics_listen=0.0.0.0:0"}});
  ASSERT_FALSE(metrics.ok());
  EXPECT_THAT(metrics.status().message(),
              HasSubstr("--metrics_listen=0.0.0.0:0 is not a loopback"));

  auto bad_tls = DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--tls_cert=" + certs_->Cert("server")}});
  ASSERT_FALSE(bad_tls.ok());
  EXPECT_THAT(bad_tls.status().message(),
              HasSubstr("--tls_cert and --tls_key must be given together"));
}

}  // namespace
}  // namespace placement

// placectl against a secured daemon (docs/security.md): TLS with the right and
// a wrong CA, mutual TLS with a client certificate, bearer tokens from
// --token, --token_file and $PLACEMENT_TOKEN (good, bad, missing), --session
// joining a session opened by the client library; and the flag checks that
// fail before any connection. Certificates come from `openssl`
// (TestCertificates), the daemon is the real binary.
#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/session.h"
#include "placement/client/tensors.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/auth_tokens.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/test_certificates.h"
#include "tests/tools/placectl_fixture.h"

namespace placement {
namespace {

using testing::CommandResult;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PlacectlBinary;
using testing::RunCommand;
using testing::TestCertificates;

constexpr char kToken[] = "alpha-token-0123456789";

using testing::Sha256Hex;

// A daemon with TLS (--tls_client_ca too when `mutual`) and a credentials
// file that maps kToken and the test client certificate to tenant team-a.
class PlacectlSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = TestCertificates::Create();
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = std::move(*certs);
    creds_ = certs_->dir() + "/creds";
    std::ofstream(creds_) << "token sha256:" << Sha256Hex(kToken) << " team-a user alice\n"
                          << "cert trainer-1.team-a.example team-a user\n";
    token_file_ = certs_->dir() + "/token";
    std::ofstream(token_file_) << kToken << "\n";  // a trailing newline, as `echo` writes
    unsetenv("PLACEMENT_TOKEN");
  }
  void TearDown() override { unsetenv("PLACEMENT_TOKEN"); }

  void StartDaemon(bool mutual) {
    std::vector<std::string> flags = {
        "--backend=cpu", "--cpu_devices=2", "--tls_cert=" + certs_->Cert("server"),
        "--tls_key=" + certs_->Key("server"), "--auth_file=" + creds_};
    if (mutual) flags.push_back("--tls_client_ca=" + certs_->Cert("ca"));
    auto daemon = DaemonProcess::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=" + daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  std::string CaFlag(const std::string& ca = "ca") const { return "--tls_ca=" + certs_->Cert(ca); }

  std::unique_ptr<TestCertificates> certs_;
  std::string creds_;
  std::string token_file_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(PlacectlSecurityTest, GoodTokenOverTlsWorksFromEverySource) {
  StartDaemon(/*mutual=*/false);
  for (const std::string& token_flag :
       {std::string("--token=") + kToken, "--token_file=" + token_file_}) {
    CommandResult r = Run({CaFlag(), token_flag, "devices"});
    EXPECT_EQ(r.exit_code, 0) << token_flag << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("cpu")) << token_flag;
  }
  setenv("PLACEMENT_TOKEN", kToken, 1);
  CommandResult env = Run({CaFlag(), "--json", "status"});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("\"num_devices\":\"2\""));
  // --tls_server_name names what the certificate must carry: "localhost" is in
  // its SAN, another name is not.
  CommandResult named = Run({CaFlag(), "--tls_server_name=localhost", "devices"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  CommandResult misnamed =
      Run({CaFlag(), "--tls_server_name=other.example", "--connect_timeout=500ms", "devices"});
  EXPECT_EQ(misnamed.exit_code, 1);
  EXPECT_THAT(misnamed.err, HasSubstr("TLS handshake failed"));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(PlacectlSecurityTest, BadOrMissingTokenIsUnauthenticated) {
  StartDaemon(/*mutual=*/false);
  CommandResult bad = Run({CaFlag(), "--token=not-the-token", "devices"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("placectl: UNAUTHENTICATED"));
  EXPECT_THAT(bad.err, Not(HasSubstr("not-the-token")));
  CommandResult missing = Run({CaFlag(), "tensor", "ls"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("placectl: UNAUTHENTICATED"));
  // A bad $PLACEMENT_TOKEN is no different; --token wins over it.
  setenv("PLACEMENT_TOKEN", "stale", 1);
  EXPECT_THAT(Run({CaFlag(), "devices"}).err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_EQ(Run({CaFlag(), std::string("--token=") + kToken, "devices"}).exit_code, 0);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(PlacectlSecurityTest, WrongCaOrPlaintextFailsTheConnection) {
  StartDaemon(/*mutual=*/false);
  CommandResult wrong = Run(
      {CaFlag("other_ca"), std::string("--token=") + kToken, "--connect_timeout=500ms", "devices"});
  EXPECT_EQ(wrong.exit_code, 1);
  // A failed handshake is a failed connection: reported at once, with the TLS hint.
  EXPECT_THAT(wrong.err, HasSubstr("UNAVAILABLE: cannot reach placementd at " + daemon_->address() +
                                   ": the connection failed"));
  EXPECT_THAT(wrong.err, HasSubstr("over TLS (or the TLS handshake failed"));
  CommandResult plaintext =
      Run({std::string("--token=") + kToken, "--connect_timeout=500ms", "devices"});
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE: cannot reach placementd"));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(PlacectlSecurityTest, MutualTlsWithAClientCertificate) {
  StartDaemon(/*mutual=*/true);
  // The certificate's SAN maps to team-a: no token needed.
  CommandResult ok = Run({CaFlag(), "--tls_cert=" + certs_->Cert("client"),
                          "--tls_key=" + certs_->Key("client"), "tensor", "ls"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  // Without a certificate, or with one from a CA the daemon does not trust,
  // the handshake fails.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{},
        std::vector<std::string>{"--tls_cert=" + certs_->Cert("stranger"),
                                 "--tls_key=" + certs_->Key("stranger")}}) {
    std::vector<std::string> args = {CaFlag(), "--connect_timeout=500ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("devices");
    CommandResult r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
  }
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(PlacectlSecurityTest, SessionFlagJoinsAnOpenSession) {
  StartDaemon(/*mutual=*/false);
  client::ClientOptions options;
  options.tls = true;
  options.tls_ca_file = certs_->Cert("ca");
  options.token = kToken;
  auto owner = client::Client::Connect(daemon_->address(), options);
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto session = client::Session::Open(**owner, absl::Seconds(60), "placectl-test");
  ASSERT_TRUE(session.ok()) << session.status();

  const std::string npy = certs_->dir() + "/x.npy";
  testing::WriteFile(npy, testing::Npy("<f4", "(2,)", testing::Bytes(std::vector<float>{1, 2})));
  CommandResult put = Run({CaFlag(), "--token_file=" + token_file_, "--json",
                           "--session=" + (*session)->id(), "tensor", "put", npy, "--device=0"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  const std::string id = testing::JsonString(put.out, "id");
  ASSERT_FALSE(id.empty()) << put.out;

  // The tensor belongs to the session: closing it deletes the tensor.
  auto closed = (*session)->Close();
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 1);
  CommandResult gone = Run({CaFlag(), "--token_file=" + token_file_, "tensor", "describe", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));

  // A session that is not open is refused by the daemon, not silently ignored.
  CommandResult ended = Run({CaFlag(), "--token_file=" + token_file_,
                             "--session=" + (*session)->id(), "tensor", "put", npy});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_THAT(ended.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(ended.err, HasSubstr("session"));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

// Checked before connecting: the target is a closed port with a long connect
// timeout, so reaching the network would show as UNAVAILABLE.
TEST(PlacectlSecurityFlagsTest, BadSecurityFlagsFailBeforeConnecting) {
  testing::TempDir dir;
  const std::string empty = dir.path() + "/empty";
  std::ofstream(empty) << "\n";
  const std::string spaced = dir.path() + "/spaced";
  std::ofstream(spaced) << "two words\n";
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls_cert=" + empty, "devices"}, 2, "--tls_cert needs --tls_key (its private key)"},
      {{"--tls_key=" + empty, "devices"}, 2, "--tls_key needs --tls_cert"},
      {{"--token=a", "--token_file=" + empty, "devices"},
       2,
       "give --token or --token_file, not both"},
      {{"--token_file=" + empty, "devices"}, 2, "the token in --token_file " + empty + " is empty"},
      {{"--token_file=" + spaced, "devices"}, 2, "must be visible ASCII without spaces"},
      {{"--session=" + std::string(65, 's'), "devices"},
       2,
       "--session is 65 bytes, longer than 64"},
      {{"--session=a b", "devices"}, 2, "--session must be visible ASCII"},
      {{"--token_file=/nonexistent/token", "devices"},
       1,
       "NOT_FOUND: --token_file: cannot open /nonexistent/token"},
      {{"--tls_ca=/nonexistent/ca.pem", "devices"},
       1,
       "NOT_FOUND: --tls_ca: cannot open /nonexistent/ca.pem"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=127.0.0.1:1",
                                     "--connect_timeout=60s"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = RunCommand(argv);
    const std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << what << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << what;
    EXPECT_THAT(r.err, Not(HasSubstr("UNAVAILABLE"))) << what;
  }
  // A token to a remote host without TLS is sent, with a warning (the
  // address is unroutable, so the call itself fails after the timeout).
  CommandResult remote = RunCommand({PlacectlBinary(), "--target=192.0.2.1:50051",
                                     "--connect_timeout=100ms", "--token=t", "devices"});
  EXPECT_EQ(remote.exit_code, 1);
  EXPECT_THAT(remote.err, HasSubstr("warning: sending the token to 192.0.2.1:50051 without TLS"));
}

}  // namespace
}  // namespace placement

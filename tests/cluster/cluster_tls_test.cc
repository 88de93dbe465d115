// Daemon-to-daemon security (docs/cluster.md, "Security between daemons"),
// with certificates made by `openssl` in the test: daemons of one CA, each
// mapped to role `peer` by --auth_file, form their cluster over mutual TLS
// and serve a trainer whose certificate maps to a user tenant; a daemon
// whose certificate comes from another CA cannot join (its start fails,
// saying why); a daemon of the right CA whose certificate maps to role
// `user` is refused by the peer services (PERMISSION_DENIED naming it, and
// it exits with that message); and where the daemons ask for no client
// certificate, a --peer_token_file token mapped to role peer admits them.
// In every refusal the cluster is unharmed: the slot stays free and the
// genuine daemon rejoins.
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/cluster_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/testing/test_certificates.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Sha256Hex(const std::string& token) {
  const server::TokenDigest digest = server::DigestToken(token);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = TestCertificates::Create();
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *std::move(certs);
    // A daemon's certificate serves its ports and is its client
    // certificate towards the others, so it carries both usages; the
    // others dial it by IP.
    const std::string both = "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n";
    auto daemon_ext = [&](const std::string& dns) {
      return absl::StrCat(both, "subjectAltName=DNS:", dns, ",IP:127.0.0.1\n");
    };
    for (int i = 0; i < 2; ++i) {
      const std::string name = absl::StrCat("daemon-", i);
      ASSERT_TRUE(
          certs_->Issue(name, name, "ca", daemon_ext(absl::StrCat(name, ".cluster.example"))).ok());
    }
    // Same names as daemon-1, from a CA the cluster does not trust.
    ASSERT_TRUE(
        certs_->Issue("impostor", "daemon-1", "other_ca", daemon_ext("daemon-1.cluster.example"))
            .ok());
    // The cluster's CA, but --auth_file makes it a user, not a peer.
    ASSERT_TRUE(
        certs_->Issue("intruder", "intruder", "ca", daemon_ext("intruder.cluster.example")).ok());
    auth_file_ = certs_->dir() + "/credentials";
    std::ofstream(auth_file_) << "# kind credential tenant role\n"
                              << "cert daemon-0.cluster.example cluster peer\n"
                              << "cert daemon-1.cluster.example cluster peer\n"
                              << "cert intruder.cluster.example cluster user\n"
                              << "cert trainer-1.team-a.example team-a user\n";
  }

  // Two daemons on loopback, each with its own certificate, requiring
  // client certificates of the cluster's CA and --auth_file.
  ClusterOptions MutualTlsCluster() const {
    ClusterOptions options;
    options.devices_per_process = 2;
    options.extra_flags = {"--tls_client_ca=" + certs_->Cert("ca"), "--auth_file=" + auth_file_};
    for (int i = 0; i < 2; ++i) {
      const std::string name = absl::StrCat("daemon-", i);
      options.per_process.push_back(
          {"--tls_cert=" + certs_->Cert(name), "--tls_key=" + certs_->Key(name)});
    }
    return options;
  }

  // The trainer: mutual TLS with its own certificate (tenant team-a).
  client::ClientOptions Trainer() const {
    client::ClientOptions options;
    options.tls = true;
    options.tls_ca_file = certs_->Cert("ca");
    options.tls_cert_file = certs_->Cert("client");
    options.tls_key_file = certs_->Key("client");
    return options;
  }

  // Kills daemon 1 and waits until daemon 0 (through `c0`) counts it lost:
  // its slot is free for whoever joins next. Returns that status.
  client::DaemonStatus FreeSlotOne(ClusterProcesses& cluster, const client::Client& c0) {
    cluster.Kill(1);
    auto lost = WaitForStatus(c0, [](const client::DaemonStatus& s) {
      return ProcessIs(s, 1, client::ProcessState::kLost);
    });
    EXPECT_TRUE(lost.ok() && ProcessIs(*lost, 1, client::ProcessState::kLost));
    return lost.ok() ? *lost : client::DaemonStatus{};
  }

  // After a refused join: daemon 0 still has slot 1 lost, nothing joined
  // (same epoch), and the genuine daemon 1 rejoins.
  void ExpectUnharmed(ClusterProcesses& cluster, const client::Client& c0,
                      const client::DaemonStatus& after_loss) {
    auto now = c0.GetStatus();
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_EQ(now->cluster.epoch, after_loss.cluster.epoch);
    EXPECT_TRUE(ProcessIs(*now, 1, client::ProcessState::kLost));
    EXPECT_EQ(now->cluster.processes[1].joins, 1);
    ASSERT_TRUE(cluster.Restart(1).ok()) << cluster.daemon(1).Stderr();
    auto formed = WaitForStatus(c0, [](const client::DaemonStatus& s) {
      return s.cluster.state == client::ClusterState::kFormed;
    });
    ASSERT_TRUE(formed.ok()) << formed.status();
    EXPECT_EQ(formed->cluster.state, client::ClusterState::kFormed);
    EXPECT_EQ(formed->cluster.processes[1].joins, 2);
  }

  // Daemon 1's flags with another certificate and a short init timeout.
  DaemonOptions WithCertificate(const ClusterProcesses& cluster, const std::string& name) const {
    DaemonOptions d = cluster.OptionsFor(1);
    // Later flags win over the harness's.
    d.extra_flags.push_back("--tls_cert=" + certs_->Cert(name));
    d.extra_flags.push_back("--tls_key=" + certs_->Key(name));
    d.extra_flags.push_back("--cluster_init_timeout=3s");
    return d;
  }

  std::unique_ptr<TestCertificates> certs_;
  std::string auth_file_;
};

TEST_F(ClusterTlsTest, ClusterFormsOverMutualTls) {
  auto cluster = ClusterProcesses::Start(MutualTlsCluster());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (int d = 0; d < 2; ++d) {
    const std::string log = (*cluster)->daemon(d).Stderr();
    EXPECT_THAT(log, HasSubstr("transport: mutual TLS"));
    // Said once: TLS does not cover Gloo's connections between daemons.
    const std::string plaintext =
        "TLS (--tls_*) protects the gRPC and peer ports, not the gloo connections between daemons";
    EXPECT_THAT(log, HasSubstr(plaintext));
    EXPECT_EQ(log.find(plaintext), log.rfind(plaintext)) << log;
    auto client = (*cluster)->Connect(d, Trainer());
    ASSERT_TRUE(client.ok()) << client.status();
    auto status = (*client)->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed);
    EXPECT_EQ(status->num_devices, 4);
    auto devices = (*client)->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_EQ(devices->size(), 4u);
    EXPECT_EQ((*devices)[3].process_index, 1);
  }
  // The trainer gets through the handshake, but its role is user: the
  // coordinator's ClusterService refuses it, naming it.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = certs_->Read(certs_->Cert("ca"));
  ssl.pem_cert_chain = certs_->Read(certs_->Cert("client"));
  ssl.pem_private_key = certs_->Read(certs_->Key("client"));
  auto stub = v1::ClusterService::NewStub(
      grpc::CreateChannel((*cluster)->coordinator(), grpc::SslCredentials(ssl)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::Topology topology;
  grpc::Status refused = stub->GetTopology(&context, {}, &topology);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("cert:trainer-1.team-a.example may not call the daemon-to-daemon"));
}

TEST_F(ClusterTlsTest, DaemonWithACertificateFromAnotherCaCannotJoin) {
  auto cluster = ClusterProcesses::Start(MutualTlsCluster());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c0 = (*cluster)->Connect(0, Trainer());
  ASSERT_TRUE(c0.ok()) << c0.status();
  const client::DaemonStatus after_loss = FreeSlotOne(**cluster, **c0);

  // It trusts the cluster's CA and carries daemon-1's names, but its
  // certificate is signed by another CA: the coordinator's handshake
  // refuses it, it never joins and gives up after --cluster_init_timeout.
  auto impostor = DaemonProcess::Launch(WithCertificate(**cluster, "impostor"));
  ASSERT_TRUE(impostor.ok());
  EXPECT_EQ((*impostor)->WaitExit(absl::Seconds(30)), 1) << (*impostor)->Stderr();
  const std::string said = (*impostor)->Stderr();
  EXPECT_THAT(said, HasSubstr("could not join the cluster through the coordinator at " +
                              (*cluster)->coordinator()));
  EXPECT_THAT(said, HasSubstr("--tls_client_ca"));
  EXPECT_THAT(said, Not(HasSubstr("already held")));
  ExpectUnharmed(**cluster, **c0, after_loss);
}

TEST_F(ClusterTlsTest, DaemonMappedToRoleUserIsRefusedByThePeerServices) {
  auto cluster = ClusterProcesses::Start(MutualTlsCluster());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c0 = (*cluster)->Connect(0, Trainer());
  ASSERT_TRUE(c0.ok()) << c0.status();
  const client::DaemonStatus after_loss = FreeSlotOne(**cluster, **c0);

  // Its certificate is the cluster CA's, so the handshake succeeds; its
  // role is user, so the coordinator refuses the join and the daemon exits
  // at once with the coordinator's answer.
  auto intruder = DaemonProcess::Launch(WithCertificate(**cluster, "intruder"));
  ASSERT_TRUE(intruder.ok());
  EXPECT_EQ((*intruder)->WaitExit(absl::Seconds(30)), 1) << (*intruder)->Stderr();
  const std::string said = (*intruder)->Stderr();
  EXPECT_THAT(said, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(said, HasSubstr("cert:intruder.cluster.example may not call the daemon-to-daemon "
                              "services; they need role peer or admin in --auth_file"));
  ExpectUnharmed(**cluster, **c0, after_loss);
}

TEST_F(ClusterTlsTest, PeerTokenAdmitsDaemonsWhenNoClientCertificateIsAsked) {
  // TLS on every port but no --tls_client_ca: nobody is asked for a client
  // certificate (these certificates could not be one: server use only).
  // Daemons authenticate to each other with the token in
  // --peer_token_file, which --auth_file maps to role peer, and verify each
  // other's server certificates against the default roots, pointed here at
  // the cluster's CA.
  const std::string server_only =
      "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n";
  ClusterOptions options;
  options.devices_per_process = 2;
  const std::string peer_token = "peer-token-4f0c2a91d7e3b8a6";
  const std::string token_file = certs_->dir() + "/peer-token";
  std::ofstream(token_file) << peer_token << "\n";
  const std::string credentials = certs_->dir() + "/token-credentials";
  std::ofstream(credentials) << "token sha256:" << Sha256Hex(peer_token)
                             << " cluster peer cluster-peers\n"
                             << "token sha256:" << Sha256Hex("trainer-token")
                             << " team-a user trainer\n";
  options.extra_flags = {"--auth_file=" + credentials, "--peer_token_file=" + token_file};
  options.environment = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=" + certs_->Cert("ca")};
  for (int i = 0; i < 2; ++i) {
    const std::string name = absl::StrCat("node-", i);
    ASSERT_TRUE(certs_->Issue(name, name, "ca", server_only).ok());
    options.per_process.push_back(
        {"--tls_cert=" + certs_->Cert(name), "--tls_key=" + certs_->Key(name)});
  }
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  client::ClientOptions trainer;
  trainer.tls = true;
  trainer.tls_ca_file = certs_->Cert("ca");
  trainer.token = "trainer-token";
  auto c0 = (*cluster)->Connect(0, trainer);
  ASSERT_TRUE(c0.ok()) << c0.status();
  auto status = (*c0)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed);
  EXPECT_THAT((*cluster)->daemon(0).Stderr(), HasSubstr("transport: TLS"));
  const client::DaemonStatus after_loss = FreeSlotOne(**cluster, **c0);

  // Without the token a daemon is a stranger to the others.
  DaemonOptions tokenless = (*cluster)->OptionsFor(1);
  tokenless.extra_flags.push_back("--peer_token_file=");
  tokenless.extra_flags.push_back("--cluster_init_timeout=3s");
  auto stranger = DaemonProcess::Launch(tokenless);
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ((*stranger)->WaitExit(absl::Seconds(30)), 1) << (*stranger)->Stderr();
  EXPECT_THAT((*stranger)->Stderr(), HasSubstr("UNAUTHENTICATED"));
  ExpectUnharmed(**cluster, **c0, after_loss);
}

}  // namespace
}  // namespace placement::testing

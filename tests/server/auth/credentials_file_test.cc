// CredentialsFile: parsing (every malformed line named by file:line), token
// digests, certificate names; and the loopback / plaintext policy of
// transport_security.h.
#include "server/auth/credentials_file.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/transport_security.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

std::string Sha256Hex(absl::string_view token) {
  TokenDigest d = DigestToken(token);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

TEST(CredentialsFileTest, DigestIsSha256) {
  // printf %s test | sha256sum
  EXPECT_EQ(Sha256Hex("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

TEST(CredentialsFileTest, MapsTokensAndCertificatesToTenantsAndRoles) {
  const std::string text = absl::StrCat(
      "# comment line\n"
      "token sha256:",
      Sha256Hex("alpha-secret"), " team-a user ci-bot\n",
      "token  sha256:", Sha256Hex("root-secret"), "\tops admin   # trailing comment\n",
      "\n"
      "cert trainer-1.team-b.example team-b user\n");
  auto file = CredentialsFile::Parse(text, "creds");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 3u);

  auto a = file->FindToken("alpha-secret");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->tenant, "team-a");
  EXPECT_FALSE(a->admin());
  EXPECT_EQ(a->identity, "token:ci-bot");
  auto root = file->FindToken("root-secret");
  ASSERT_TRUE(root.has_value());
  EXPECT_TRUE(root->admin());
  EXPECT_TRUE(root->Sees("team-a"));
  EXPECT_FALSE(a->Sees("team-b"));
  EXPECT_FALSE(file->FindToken("alpha-secreT").has_value());
  EXPECT_FALSE(file->FindToken("").has_value());

  auto b = file->FindCertificate({"unknown.example", "trainer-1.team-b.example"});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->tenant, "team-b");
  EXPECT_FALSE(file->FindCertificate({"trainer-2.team-b.example"}).has_value());
}

TEST(CredentialsFileTest, MalformedLinesNameFileLineAndField) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::string digest = absl::StrCat("sha256:", Sha256Hex("x"));
  const Case cases[] = {
      {"token abc team user\n", "creds:1: a token credential is 'sha256:' and 64 hex digits"},
      {"\nbearer " + digest + " team user\n",
       "creds:2: kind must be 'token' or 'cert', got 'bearer'"},
      {"token " + digest + " team root\n", "creds:1: role must be 'user', 'admin' or 'peer', got 'root'"},
      {"token " + digest + " te/am user\n", "creds:1: tenant must be 1-63 characters"},
      {"token " + digest + " team\n",
       "creds:1: expected 'KIND CREDENTIAL TENANT ROLE [NAME]', got 3"},
      {"token " + digest + " a user\ntoken " + digest + " b user\n",
       "creds:2: this token digest is listed twice"},
      {"cert n a user\ncert n b user\n", "creds:2: certificate name 'n' is listed twice"},
  };
  for (const Case& c : cases) {
    auto file = CredentialsFile::Parse(c.text, "creds");
    ASSERT_FALSE(file.ok()) << c.text;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr(c.message));
  }
  EXPECT_EQ(CredentialsFile::Load("/nonexistent/creds").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TransportSecurityTest, PlaintextOnlyOnLoopbackUnlessAllowed) {
  auto address = [](const char* text) { return *ParseListenAddress(text); };
  EXPECT_TRUE(IsLoopback(address("127.0.0.1:1")));
  EXPECT_TRUE(IsLoopback(address("127.3.2.1:1")));
  EXPECT_TRUE(IsLoopback(address("[::1]:1")));
  EXPECT_TRUE(IsLoopback(address("localhost:1")));
  EXPECT_TRUE(IsLoopback(address("unix:/tmp/x.sock")));
  EXPECT_FALSE(IsLoopback(address("0.0.0.0:1")));
  EXPECT_FALSE(IsLoopback(address("[::]:1")));
  EXPECT_FALSE(IsLoopback(address("10.1.2.3:1")));
  EXPECT_FALSE(IsLoopback(address("node-7:1")));

  TransportSecurityConfig plain;
  EXPECT_TRUE(ValidateTransportSecurity(plain, address("127.0.0.1:0")).ok());
  absl::Status refused = ValidateTransportSecurity(plain, address("0.0.0.0:50051"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("--listen=0.0.0.0:50051 is not a loopback address"));
  EXPECT_THAT(refused.message(), HasSubstr("--allow_insecure"));
  plain.allow_insecure = true;
  EXPECT_TRUE(ValidateTransportSecurity(plain, address("0.0.0.0:50051")).ok());

  TransportSecurityConfig half;
  half.tls_cert = "/nonexistent/cert.pem";
  EXPECT_THAT(ValidateTransportSecurity(half, address("127.0.0.1:0")).message(),
              HasSubstr("--tls_cert and --tls_key must be given together"));
  half.tls_key = "/nonexistent/key.pem";
  EXPECT_THAT(ValidateTransportSecurity(half, address("127.0.0.1:0")).message(),
              HasSubstr("--tls_cert='/nonexistent/cert.pem' cannot be read"));
  TransportSecurityConfig ca_only;
  ca_only.tls_client_ca = "/nonexistent/ca.pem";
  EXPECT_THAT(ValidateTransportSecurity(ca_only, address("127.0.0.1:0")).message(),
              HasSubstr("--tls_client_ca needs --tls_cert and --tls_key"));
}

}  // namespace
}  // namespace placement::server

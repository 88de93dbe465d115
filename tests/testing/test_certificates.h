// TestCertificates: a throw-away PKI made with the `openssl` command line in a
// temp dir, for tests of TLS and mutual TLS against a real daemon:
//   ca          the CA the daemon trusts for clients and that signed `server`
//   server      CN=placementd, SAN DNS:localhost, IP:127.0.0.1
//   client      CN=trainer-1 (SAN DNS:trainer-1.team-a.example), signed by ca
//   stranger    CN=stranger, signed by other_ca (a CA the daemon does not trust)
//   expired     CN=trainer-1, signed by ca, valid only in January 2020
// Each is a .pem certificate and a .key private key under dir().
//
// Not thread-safe; one owner.
#ifndef PLACEMENT_TESTS_TESTING_TEST_CERTIFICATES_H_
#define PLACEMENT_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/testing/daemon_process.h"

namespace placement::testing {

class TestCertificates {
 public:
  // INTERNAL with openssl's stderr when a command fails.
  static absl::StatusOr<std::unique_ptr<TestCertificates>> Create();

  const std::string& dir() const { return dir_.path(); }
  // "<dir>/<name>.pem" and "<dir>/<name>.key".
  std::string Cert(const std::string& name) const { return dir() + "/" + name + ".pem"; }
  std::string Key(const std::string& name) const { return dir() + "/" + name + ".key"; }
  // The file's contents.
  std::string Read(const std::string& path) const;

  // Makes one more key and certificate, `name`.pem / `name`.key, with
  // subject CN=`common_name`, signed by the CA `signer` ("ca" or
  // "other_ca") with the openssl x509v3 `extensions` (one per line, e.g.
  // "subjectAltName=DNS:node-1,IP:10.0.0.1\nextendedKeyUsage=serverAuth").
  absl::Status Issue(const std::string& name, const std::string& common_name,
                     const std::string& signer, const std::string& extensions) const;

 private:
  TempDir dir_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_TEST_CERTIFICATES_H_

#include "server/auth/tls_key_pair.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Bio MemoryBio(absl::string_view text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The reason of OpenSSL's last error, and clears its queue (errors left there
// would surface in an unrelated later call).
std::string TakeOpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  std::string reason = code != 0 ? ERR_reason_error_string(code) != nullptr
                                       ? ERR_reason_error_string(code)
                                       : absl::StrCat("error ", code)
                                 : "no PEM block of that kind";
  ERR_clear_error();
  return reason;
}

// Every certificate of a PEM bundle, in order; empty when none parses.
// `*trailing_error` is set when a certificate block after the first fails.
std::vector<Cert> ReadCertificates(absl::string_view pem, std::string* trailing_error) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  if (bio == nullptr) return certs;
  while (true) {
    Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) {
      const unsigned long code = ERR_peek_last_error();
      // Running out of PEM blocks is the normal end of the bundle.
      if (!certs.empty() && ERR_GET_REASON(code) != PEM_R_NO_START_LINE) {
        *trailing_error = TakeOpenSslError();
      }
      ERR_clear_error();
      break;
    }
    certs.push_back(std::move(cert));
  }
  return certs;
}

// The certificates of `pem`, all of which must parse, at least one.
// INVALID_ARGUMENT naming `name` and `what` ("certificate", "CA
// certificate") otherwise.
absl::StatusOr<std::vector<Cert>> CertificatesOf(absl::string_view pem, absl::string_view name,
                                                 absl::string_view what) {
  std::string trailing;
  std::vector<Cert> certs = ReadCertificates(pem, &trailing);
  if (certs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " holds no ", what, " that parses (",
                                                   pem.size(),
                                                   " bytes; OpenSSL: ", TakeOpenSslError(), ")"));
  }
  if (!trailing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": certificate ", certs.size() + 1,
                                                   " does not parse (OpenSSL: ", trailing, ")"));
  }
  return certs;
}

}  // namespace

absl::Status CheckKeyCertPair(absl::string_view cert_pem, absl::string_view key_pem,
                              absl::string_view cert_name, absl::string_view key_name) {
  absl::StatusOr<std::vector<Cert>> chain = CertificatesOf(cert_pem, cert_name, "certificate");
  if (!chain.ok()) return chain.status();
  Bio key_bio = MemoryBio(key_pem);
  Pkey key(key_bio != nullptr ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr)
                              : nullptr);
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(key_name, " holds no private key that parses (",
                                                   key_pem.size(),
                                                   " bytes; OpenSSL: ", TakeOpenSslError(), ")"));
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(key_name, " is not the private key of the certificate in ", cert_name,
                     " (X509_check_private_key failed): a certificate and key from different "
                     "pairs, e.g. a rotation that replaced one file but not yet the other"));
  }
  return absl::OkStatus();
}

absl::Status CheckCaBundle(absl::string_view ca_pem, absl::string_view name) {
  return CertificatesOf(ca_pem, name, "CA certificate").status();
}

}  // namespace placement::server

// CredentialsFile: the table of identities that --auth_file maps to tenants
// and roles. One entry a line; '#' starts a comment; fields are separated by
// blanks:
//
//   # kind  credential                 tenant   role    [name]
//   token   sha256:9f86d081884c7d65... team-a   user    ci-bot
//   cert    trainer-1.team-a.example   team-a   user
//   cert    ops-console                ops      admin
//
// `token` entries hold the SHA-256 (64 hex digits) of a bearer token, never
// the token itself: `printf %s "$TOKEN" | sha256sum`. `cert` entries name a
// client certificate's subject alternative name (DNS, URI, email or IP, as
// gRPC reports it) or, when it has none that match, its subject common name.
// Tenants are 1-63 characters of [A-Za-z0-9._-]; roles are user, admin or
// peer (another daemon of the cluster, docs/cluster.md).
//
// Immutable after Parse; thread-safe.
#ifndef PLACEMENT_SERVER_AUTH_CREDENTIALS_FILE_H_
#define PLACEMENT_SERVER_AUTH_CREDENTIALS_FILE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/caller.h"

namespace placement::server {

using TokenDigest = std::array<uint8_t, 32>;

// SHA-256 of `token`.
TokenDigest DigestToken(absl::string_view token);

class CredentialsFile {
 public:
  // INVALID_ARGUMENT naming the file, line number and field for a malformed
  // line (unknown kind, bad digest, bad tenant, unknown role), and for a
  // credential listed twice.
  static absl::StatusOr<CredentialsFile> Parse(absl::string_view text, absl::string_view path);
  // Reads and parses `path`; NOT_FOUND when it cannot be read.
  static absl::StatusOr<CredentialsFile> Load(const std::string& path);

  // The caller a bearer token maps to. Compares the token's digest with every
  // entry in constant time (no early exit, CRYPTO_memcmp), so the time taken
  // does not tell which entry, or how much of one, matched.
  std::optional<Caller> FindToken(absl::string_view token) const;
  // The caller the first of `names` that has a cert entry maps to.
  std::optional<Caller> FindCertificate(const std::vector<std::string>& names) const;

  size_t size() const { return tokens_.size() + certs_.size(); }

 private:
  struct TokenEntry {
    TokenDigest digest;
    Caller caller;
  };
  struct CertEntry {
    std::string name;
    Caller caller;
  };
  std::vector<TokenEntry> tokens_;
  std::vector<CertEntry> certs_;
};

// A valid tenant name: 1-63 characters of [A-Za-z0-9._-].
bool IsValidTenant(absl::string_view tenant);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_CREDENTIALS_FILE_H_

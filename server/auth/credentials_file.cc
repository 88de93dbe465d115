#include "server/auth/credentials_file.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace placement::server {

TokenDigest DigestToken(absl::string_view token) {
  TokenDigest digest{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  return digest;
}

bool IsValidTenant(absl::string_view tenant) {
  if (tenant.empty() || tenant.size() > 63) return false;
  for (char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<CredentialsFile> CredentialsFile::Parse(absl::string_view text,
                                                       absl::string_view path) {
  CredentialsFile out;
  absl::flat_hash_set<std::string> seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", why));
    };
    if (fields.size() < 4 || fields.size() > 5) {
      return bad(absl::StrCat("expected 'KIND CREDENTIAL TENANT ROLE [NAME]', got ", fields.size(),
                              " field(s)"));
    }
    Caller caller;
    caller.tenant = std::string(fields[2]);
    if (!IsValidTenant(caller.tenant)) {
      return bad("tenant must be 1-63 characters of [A-Za-z0-9._-]");
    }
    if (fields[3] == "user") {
      caller.role = Role::kUser;
    } else if (fields[3] == "admin") {
      caller.role = Role::kAdmin;
    } else if (fields[3] == "peer") {
      caller.role = Role::kPeer;
    } else {
      return bad(absl::StrCat("role must be 'user', 'admin' or 'peer', got '",
                              fields[3].substr(0, 32), "'"));
    }
    const absl::string_view name = fields.size() == 5 ? fields[4] : fields[2];
    if (fields[0] == "token") {
      absl::string_view hex = fields[1];
      if (!absl::ConsumePrefix(&hex, "sha256:") || hex.size() != 64 ||
          hex.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
        return bad(
            "a token credential is 'sha256:' and 64 hex digits (printf %s TOKEN | sha256sum)");
      }
      if (!seen.insert(absl::StrCat("token:", absl::AsciiStrToLower(hex))).second) {
        return bad("this token digest is listed twice");
      }
      TokenEntry entry;
      std::string bytes = absl::HexStringToBytes(hex);
      std::copy(bytes.begin(), bytes.end(), entry.digest.begin());
      caller.identity = absl::StrCat("token:", name);
      entry.caller = std::move(caller);
      out.tokens_.push_back(std::move(entry));
    } else if (fields[0] == "cert") {
      if (!seen.insert(absl::StrCat("cert:", fields[1])).second) {
        return bad(
            absl::StrCat("certificate name '", fields[1].substr(0, 64), "' is listed twice"));
      }
      caller.identity = absl::StrCat("cert:", fields.size() == 5 ? fields[4] : fields[1]);
      out.certs_.push_back({std::string(fields[1]), std::move(caller)});
    } else {
      return bad(
          absl::StrCat("kind must be 'token' or 'cert', got '", fields[0].substr(0, 32), "'"));
    }
  }
  return out;
}

absl::StatusOr<CredentialsFile> CredentialsFile::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in.good())
    return absl::NotFoundError(absl::StrCat("--auth_file '", path, "' cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

std::optional<Caller> CredentialsFile::FindToken(absl::string_view token) const {
  const TokenDigest digest = DigestToken(token);
  const TokenEntry* match = nullptr;
  for (const TokenEntry& entry : tokens_) {
    // Every entry is compared; the branch depends only on the final result.
    const bool equal = CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
    if (equal) match = &entry;
  }
  if (match == nullptr) return std::nullopt;
  return match->caller;
}

std::optional<Caller> CredentialsFile::FindCertificate(
    const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    for (const CertEntry& entry : certs_) {
      if (entry.name == name) return entry.caller;
    }
  }
  return std::nullopt;
}

}  // namespace placement::server

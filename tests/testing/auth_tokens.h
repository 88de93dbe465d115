// Bearer tokens for the tests that start daemons with --auth_file: the
// "sha256:<hex>" digest form the credentials file takes
// (server/auth/credentials_file.h). Header-only; the test links
// placement_server for DigestToken.
#ifndef PLACEMENT_TESTS_TESTING_AUTH_TOKENS_H_
#define PLACEMENT_TESTS_TESTING_AUTH_TOKENS_H_

#include <cstdint>
#include <string>

#include "server/auth/credentials_file.h"

namespace placement::testing {

// The lowercase hex SHA-256 of `token`, as "token sha256:<hex> ..." lines want.
inline std::string Sha256Hex(const std::string& token) {
  server::TokenDigest d = server::DigestToken(token);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_AUTH_TOKENS_H_

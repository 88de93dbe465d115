#include "tools/placectl/security_options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(bool, tls, false,
          "Speak TLS to the daemon (implied by every --tls_* flag); its certificate is checked "
          "against --tls_ca, or the system roots without it.");
ABSL_FLAG(std::string, tls_ca, "", "PEM file of the CA(s) the daemon's certificate must chain to.");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate for mutual TLS (needs --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check in the daemon's certificate instead of the target's host.");
ABSL_FLAG(std::string, token, "",
          "Bearer token sent on every call (visible in `ps`: prefer --token_file or "
          "$PLACEMENT_TOKEN).");
ABSL_FLAG(std::string, token_file, "",
          "File whose content (trailing whitespace dropped) is the bearer token.");
ABSL_FLAG(std::string, session, "",
          "Session id to join (SessionService): what the command creates belongs to that "
          "session and is freed when it ends.");

namespace placement::placectl {
namespace {

// Longest token accepted; tokens are random strings (64 hex digits from
// `openssl rand -hex 32`), far shorter.
constexpr size_t kMaxTokenLength = 4096;
// The daemon's limit for session ids (server/session/session_manager.h).
constexpr size_t kMaxSessionIdLength = 64;

// A non-empty string of visible ASCII (no spaces, no control bytes): what a
// gRPC ASCII metadata value may carry unchanged.
bool IsVisibleAscii(absl::string_view text) {
  for (char c : text) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return !text.empty();
}

absl::Status Readable(absl::string_view flag, const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    return absl::NotFoundError(
        absl::StrCat("--", flag, ": cannot open ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    return absl::NotFoundError(
        absl::StrCat("--token_file: cannot open ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripTrailingAsciiWhitespace(text.str()));
}

absl::Status CheckToken(absl::string_view source, absl::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(source, " is empty"));
  if (token.size() > kMaxTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is ", token.size(), " bytes, longer than ", kMaxTokenLength));
  }
  if (!IsVisibleAscii(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " must be visible ASCII without spaces (it travels as gRPC metadata)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLocalTarget(absl::string_view target) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) return true;
  absl::string_view host = target;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(
        1, host.find(']') == absl::string_view::npos ? host.size() - 1 : host.find(']') - 1);
  } else if (host.find(':') != absl::string_view::npos) {
    host = host.substr(0, host.rfind(':'));
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::Status ApplySecurityFlags(client::ClientOptions& options) {
  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.tls = absl::GetFlag(FLAGS_tls) || !options.tls_ca_file.empty() ||
                !options.tls_cert_file.empty() || !options.tls_key_file.empty() ||
                !options.tls_server_name.empty();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(options.tls_cert_file.empty()
                                          ? "--tls_key needs --tls_cert (the client certificate)"
                                          : "--tls_cert needs --tls_key (its private key)");
  }
  const std::string token_flag = absl::GetFlag(FLAGS_token);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token_flag.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("give --token or --token_file, not both");
  }
  const std::string session = absl::GetFlag(FLAGS_session);
  if (!session.empty()) {
    if (session.size() > kMaxSessionIdLength) {
      return absl::InvalidArgumentError(absl::StrCat("--session is ", session.size(),
                                                     " bytes, longer than ", kMaxSessionIdLength));
    }
    if (!IsVisibleAscii(session)) {
      return absl::InvalidArgumentError("--session must be visible ASCII without spaces");
    }
  }
  // Files: readable now, so a typo fails before a connection is attempted.
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"tls_ca", options.tls_ca_file},
        {"tls_cert", options.tls_cert_file},
        {"tls_key", options.tls_key_file}}) {
    if (path.empty()) continue;
    absl::Status readable = Readable(flag, path);
    if (!readable.ok()) return readable;
  }
  std::string token;
  if (!token_flag.empty()) {
    absl::Status ok = CheckToken("--token", token_flag);
    if (!ok.ok()) return ok;
    token = token_flag;
  } else if (!token_file.empty()) {
    absl::StatusOr<std::string> read = ReadToken(token_file);
    if (!read.ok()) return read.status();
    absl::Status ok = CheckToken(absl::StrCat("the token in --token_file ", token_file), *read);
    if (!ok.ok()) return ok;
    token = *std::move(read);
  } else if (const char* env = std::getenv("PLACEMENT_TOKEN"); env != nullptr && *env != '\0') {
    absl::Status ok = CheckToken("$PLACEMENT_TOKEN", env);
    if (!ok.ok()) return ok;
    token = env;
  }
  options.token = std::move(token);
  // What placectl creates is durable unless --session joins a session: a
  // command's results must outlive the command.
  options.session_id = session;
  options.session_policy = client::SessionPolicy::kNone;
  return absl::OkStatus();
}

}  // namespace placement::placectl

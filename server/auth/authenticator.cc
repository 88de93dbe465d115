#include "server/auth/authenticator.h"

#include <sys/stat.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {
namespace {

constexpr absl::Duration kRecheckInterval = absl::Seconds(1);

// The certificate names to look up, most specific first: every subject
// alternative name gRPC verified, then the subject common name.
std::vector<std::string> PeerCertificateNames(const grpc::AuthContext& auth) {
  std::vector<std::string> names;
  for (const char* property : {"x509_subject_alternative_name", "x509_common_name"}) {
    for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
      names.emplace_back(value.data(), value.size());
    }
  }
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromFile(const std::string& path) {
  auto out = std::make_unique<Authenticator>();
  out->path_ = path;
  absl::StatusOr<CredentialsFile> table = CredentialsFile::Load(path);
  if (!table.ok()) return table.status();
  absl::MutexLock lock(&out->mu_);
  out->table_ = std::make_shared<const CredentialsFile>(*std::move(table));
  out->stamp_ = StampOf(path);
  out->last_check_ = absl::Now();
  return out;
}

Authenticator::FileStamp Authenticator::StampOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

absl::Status Authenticator::Reload() const {
  if (!enabled()) return absl::OkStatus();
  FileStamp stamp = StampOf(path_);
  absl::StatusOr<CredentialsFile> table = CredentialsFile::Load(path_);
  absl::MutexLock lock(&mu_);
  stamp_ = stamp;  // a broken file is reported once, not on every call
  last_check_ = absl::Now();
  if (!table.ok()) {
    LogWarning("--auth_file not reloaded, keeping the previous ", table_->size(),
               " credential(s): ", table.status().message());
    return table.status();
  }
  table_ = std::make_shared<const CredentialsFile>(*std::move(table));
  LogInfo("--auth_file reloaded: ", table_->size(), " credential(s)");
  return absl::OkStatus();
}

void Authenticator::MaybeReload() const {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now - last_check_ < kRecheckInterval) return;
    last_check_ = now;
    if (StampOf(path_) == stamp_) return;
  }
  (void)Reload();
}

absl::StatusOr<Caller> Authenticator::Authenticate(const grpc::ServerContextBase& context) const {
  if (!enabled()) return Caller{};
  MaybeReload();
  std::shared_ptr<const CredentialsFile> table;
  {
    absl::MutexLock lock(&mu_);
    table = table_;
  }
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) {
      return absl::UnauthenticatedError("the authorization metadata must be 'Bearer TOKEN'");
    }
    std::optional<Caller> caller = table->FindToken(absl::StripAsciiWhitespace(value.substr(7)));
    if (!caller) return absl::UnauthenticatedError("the bearer token is not recognised");
    return *caller;
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    std::vector<std::string> names = PeerCertificateNames(*auth);
    std::optional<Caller> caller = table->FindCertificate(names);
    if (!caller) {
      std::string shown = names.empty() ? std::string("(no names)") : names.front().substr(0, 64);
      return absl::PermissionDeniedError(absl::StrCat(
          "client certificate '", shown, "' is not mapped to a tenant by --auth_file"));
    }
    return *caller;
  }
  return absl::UnauthenticatedError(
      "placementd requires credentials: a bearer token (authorization: Bearer TOKEN) or a "
      "client certificate over mutual TLS");
}

}  // namespace placement::server

// Authenticator: turns a call's credentials into a Caller (tenant + role).
//
// With --auth_file set, every call of the placement services must carry a
// bearer token (metadata "authorization: Bearer TOKEN") listed in the file,
// or arrive over mutual TLS with a client certificate the file maps:
//   - no credentials, a malformed authorization header, or an unknown token:
//     UNAUTHENTICATED;
//   - a verified client certificate that no cert entry names:
//     PERMISSION_DENIED (the peer is known, but not allowed in).
// A token wins over the certificate when both are present. gRPC's health
// service and server reflection do not pass through here (they stay open).
//
// Without --auth_file every call is the implicit tenant "" (see caller.h).
//
// Reload: the file is re-read when its modification time or size changes
// (checked at most once a second, on the next call) and on Reload() (SIGHUP).
// A file that fails to parse on reload is logged and the previous table kept.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_AUTH_AUTHENTICATOR_H_
#define PLACEMENT_SERVER_AUTH_AUTHENTICATOR_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "server/auth/caller.h"
#include "server/auth/credentials_file.h"

namespace placement::server {

class Authenticator {
 public:
  // Authentication off: every call is the implicit tenant.
  Authenticator() = default;
  // Authentication on from `path`; the errors of CredentialsFile::Load.
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromFile(const std::string& path);

  bool enabled() const { return !path_.empty(); }

  // The caller of the call `context` belongs to (see the header comment).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context) const;

  // Re-reads the file now. The parse error, with the old table kept.
  absl::Status Reload() const;

 private:
  struct FileStamp {
    int64_t mtime_ns = 0;
    int64_t size = -1;
    bool operator==(const FileStamp&) const = default;
  };
  static FileStamp StampOf(const std::string& path);
  void MaybeReload() const;

  std::string path_;
  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const CredentialsFile> table_ ABSL_GUARDED_BY(mu_);
  mutable FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  mutable absl::Time last_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_AUTHENTICATOR_H_

// ServedTlsFiles: the checked copies of the operator's TLS files that gRPC
// actually serves.
//
// gRPC's file watcher (FileWatcherCertificateProvider) takes whatever the
// files hold at each refresh, so a certificate that does not parse, or a key
// and certificate from different pairs (a rotation that replaced one file
// before the other), made every new TLS connection fail until good files
// returned. This class watches the operator's files instead, checks every
// new set (tls_key_pair.h: the chain parses, the key is the leaf's, the CA
// bundle parses) and only then publishes it where gRPC looks. A set that
// fails is logged and counted (placementd_tls_reload_failures_total, once per
// distinct set of contents) and the last good set stays served.
//
// Publication is atomic for the whole set: each generation is a directory
// gen-N/{cert,key,ca}.pem (files 0600 in a 0700 directory under /dev/shm,
// else $TMPDIR, else /tmp) and the symlink `current` is swapped with
// rename(2), as Kubernetes updates Secret volumes. Each generation's files
// carry their own modification time (gRPC compares the files' mtimes, in
// whole seconds, before and after reading them), so a gRPC refresh that
// straddles a swap is retried rather than pairing one generation's key with
// another's certificate. The previous generation is kept until the next
// publication, for a read in progress.
//
// Thread-safe. A background thread checks the files every refresh interval
// until destruction, which removes the directory.
#ifndef PLACEMENT_SERVER_AUTH_SERVED_TLS_FILES_H_
#define PLACEMENT_SERVER_AUTH_SERVED_TLS_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/auth/transport_security.h"
#include "server/metrics/metrics.h"

namespace placement::server {

class ServedTlsFiles {
 public:
  // Checks the files `config` names and publishes the first generation.
  // INVALID_ARGUMENT naming the flag when they cannot be read or do not
  // pass; INTERNAL when the private directory cannot be made. `metrics`
  // (nullable) outlives this object. REQUIRES: config.tls().
  static absl::StatusOr<std::unique_ptr<ServedTlsFiles>> Create(
      const TransportSecurityConfig& config, Metrics* metrics);
  ~ServedTlsFiles();
  ServedTlsFiles(const ServedTlsFiles&) = delete;
  ServedTlsFiles& operator=(const ServedTlsFiles&) = delete;

  // `config` with tls_cert, tls_key and tls_client_ca replaced by the
  // published copies: what MakeServerCredentials and the peer channels use.
  const TransportSecurityConfig& served() const { return served_; }

  // Reads the operator's files now and publishes them when they changed and
  // pass. OK when unchanged or published; the refusal otherwise (logged and
  // counted once per distinct contents).
  absl::Status Refresh();

  // Sets published since start, the first included.
  int64_t generation() const;

 private:
  struct Contents {
    std::string cert, key, ca;
    bool operator==(const Contents& o) const {
      return cert == o.cert && key == o.key && ca == o.ca;
    }
  };
  ServedTlsFiles(TransportSecurityConfig source, std::string dir, Metrics* metrics);
  absl::StatusOr<Contents> ReadSource() const;
  absl::Status Check(const Contents& contents) const;
  absl::Status PublishLocked(const Contents& contents) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchLoop();

  const TransportSecurityConfig source_;
  const std::string dir_;
  Metrics* const metrics_;
  TransportSecurityConfig served_;
  const int64_t base_mtime_;
  mutable absl::Mutex mu_;
  Contents published_ ABSL_GUARDED_BY(mu_);
  // The refused state of the files last logged and counted ("" = none).
  std::string last_refused_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_SERVED_TLS_FILES_H_

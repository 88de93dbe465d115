// placement::client::Client -- a connection to one placementd.
//
// Connect() dials the daemon (host:port or unix:/path) over one gRPC
// channel shared by every typed call. Typed calls return absl::Status /
// absl::StatusOr and keep the daemon's gRPC code and message unchanged
// (NOT_FOUND stays NOT_FOUND, INVALID_ARGUMENT keeps its text).
//
// The gRPC channel lives behind a pimpl (Client::Impl): no gRPC or generated
// header is part of the public API, and results are the value types of
// types.h.
//
// Lifetime of what the client creates: by default Connect opens a session
// (SessionService, docs/api/sessions.md) that every call joins, renews its
// lease in the background, and closes when the Client is destroyed -- so the
// tensors, regions and meshes the client's calls create are freed when the
// client goes away, and within the session's ttl when its process dies.
// SessionPolicy::kNone makes them durable (they stay until deleted), as
// placectl does; ClientOptions::session_id joins a session opened elsewhere.
//
// Thread-safe: one Client may be used from many threads at once.
#ifndef PLACEMENT_CLIENT_CLIENT_H_
#define PLACEMENT_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/client/types.h"

namespace placement::client {

// Whether Connect opens a session for the client's calls (above).
enum class SessionPolicy {
  // Open one on connect, close it on destruction (the default): results
  // are freed when the client goes away or dies.
  kOpen,
  // No session of its own: what the calls create is durable (or belongs to
  // `session_id` when that is set).
  kNone,
};

struct ClientOptions {
  // Deadline applied to every unary call (streams: per call, see each API).
  absl::Duration default_deadline = absl::Seconds(30);
  // HTTP/2 keep-alive ping interval; zero disables.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Message size caps. Tensor bytes travel in chunks, so the defaults are
  // never a ceiling on tensor size.
  int max_receive_message_bytes = 16 << 20;
  int max_send_message_bytes = 16 << 20;
  // How long Connect waits for the daemon to accept the connection; zero =
  // don't wait. A refused connection (nothing listens at the target) fails
  // at once, UNAVAILABLE, without waiting for the timeout; a failed attempt
  // where something listens (a TLS handshake, a one-off failure) fails once
  // gRPC's reconnection has not connected within 5 s.
  absl::Duration connect_timeout = absl::Seconds(10);

  // Transport security (docs/security.md). With `tls`, the daemon's
  // certificate is verified against `tls_ca_file` (PEM; empty = the system
  // roots); `tls_cert_file` + `tls_key_file` present a client certificate
  // (mutual TLS). `tls_server_name` overrides the name checked in the
  // daemon's certificate (empty = the target's host).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // Sent on every call as "authorization: Bearer <token>"; empty = none.
  std::string token;
  // Sent on every call as "placement-session: <id>" (SessionService): what
  // the calls create belongs to that session, opened elsewhere (a
  // client::Session). Empty: see session_policy.
  std::string session_id;
  // With an empty session_id: kOpen opens a session of this client's own
  // (the default), kNone sends none (results are durable). A session needs
  // the daemon: with connect_timeout zero (do not wait) none is opened. If
  // the daemon restarts, it no longer knows the session: calls then fail
  // NOT_FOUND naming it, and a new Client is needed.
  SessionPolicy session_policy = SessionPolicy::kOpen;
  // Lease of the client's own session: renewed every ttl / 3 while the
  // Client lives; when its process dies, what it created is freed within
  // this time. Zero = the daemon's default (60 s).
  absl::Duration session_ttl = absl::ZeroDuration();
};

class Client {
 public:
  // Dials `target` ("127.0.0.1:50051", "unix:/run/placementd/placementd.sock")
  // and, with SessionPolicy::kOpen, opens the client's session. UNAVAILABLE
  // when the daemon refuses the connection or cannot be reached within
  // connect_timeout; INVALID_ARGUMENT for an empty target; the daemon's error
  // when it refuses the session (a ttl outside 1 s .. 1 h, too many
  // sessions).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         const ClientOptions& options = {});
  // Closes the client's own session (freeing what its calls created), if it
  // opened one.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& target() const;
  const ClientOptions& options() const;
  // The session every call carries: the client's own (SessionPolicy::kOpen),
  // options().session_id, or empty when results are durable.
  const std::string& session_id() const;

  // --- DeviceService ---------------------------------------------------------
  absl::StatusOr<std::vector<Device>> ListDevices() const;
  // get_device_info().
  absl::StatusOr<DeviceInfo> GetDeviceInfo() const;
  // The seed's table row; nullopt = the daemon's detected type.
  absl::StatusOr<BatchSizeRecommendation> GetBatchSizeRecommendation(
      std::optional<HardwareType> hardware = std::nullopt) const;
  // validate_batch_size(batch_size, warn_suboptimal) for `hardware` (nullopt
  // = the detected type; only then does the daemon add advice about its own
  // device count to `warnings`).
  absl::StatusOr<BatchSizeValidation> ValidateBatchSize(
      int64_t batch_size, SuboptimalWarning warn_suboptimal = SuboptimalWarning::kWarn,
      std::optional<HardwareType> hardware = std::nullopt) const;

  // --- DaemonService ---------------------------------------------------------
  absl::StatusOr<DaemonStatus> GetStatus() const;
  // The uploads, downloads and prefetch streams open on the daemon now, with
  // the bytes each moved so far (this tenant's; an admin's: everyone's).
  absl::StatusOr<std::vector<StreamStatus>> ListStreams() const;
  // Gives the daemon's cached device blocks and malloc's free pages back to
  // the system now: every tenant's when `tenant` is empty (admins only with
  // authentication on), else only that tenant's cached blocks (a user may
  // name its own tenant). PERMISSION_DENIED / NOT_FOUND (a tenant that never
  // held memory there) as the daemon says.
  absl::StatusOr<MemoryTrim> TrimMemory(const std::string& tenant = "") const;

  // The connection's internals (channel, deadlines). Defined in
  // client/src/client_impl.h for the library's own sources; an incomplete
  // type everywhere else.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Client(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_CLIENT_H_

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
  // How long Connect waits for the channel to become ready; zero = don't wait.
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
  // the calls create belongs to that session; empty = durable.
  std::string session_id;
};

class Client {
 public:
  // Dials `target` ("127.0.0.1:50051", "unix:/run/placementd/placementd.sock").
  // UNAVAILABLE when the daemon cannot be reached within connect_timeout;
  // INVALID_ARGUMENT for an empty target.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& target() const;
  const ClientOptions& options() const;

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
      int64_t batch_size, bool warn_suboptimal = true,
      std::optional<HardwareType> hardware = std::nullopt) const;

  // --- DaemonService ---------------------------------------------------------
  absl::StatusOr<DaemonStatus> GetStatus() const;

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

#include "server/peer/peer_channels.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace placement::server {

std::shared_ptr<grpc::ChannelCredentials> PeerChannels::Credentials() const {
  const TransportSecurityConfig& t = security_.transport;
  if (!t.tls()) return grpc::InsecureChannelCredentials();
  const auto refresh = static_cast<unsigned int>(absl::ToInt64Seconds(t.refresh_interval));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      t.tls_key, t.tls_cert, t.tls_client_ca, std::max(refresh, 1u));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_identity_key_cert_pairs();
  if (t.mutual_tls()) options.watch_root_certs();
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> PeerChannels::Get(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    // Daemons talk often and in bursts: keep connections warm, and notice a
    // dead peer quickly even when no call is waiting.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Several channels to one peer must not share one connection: each
    // address gets its own subchannel pool.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (!security_.server_name_override.empty()) {
      args.SetSslTargetNameOverride(security_.server_name_override);
    }
    channel = grpc::CreateCustomChannel(address, Credentials(), args);
  }
  return channel;
}

void PeerChannels::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  if (!security_.token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", security_.token));
  }
  if (timeout < absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

}  // namespace placement::server

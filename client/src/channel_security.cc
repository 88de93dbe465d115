#include "client/src/channel_security.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::client {
namespace {

absl::StatusOr<std::string> ReadPem(const char* option, const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions::", option, " '", path, "' cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void CallMetadata::Set(const std::string& key, std::string value) {
  absl::MutexLock lock(&mu_);
  auto next = std::make_shared<Entries>(*entries_);
  auto it = std::find_if(next->begin(), next->end(), [&](const auto& e) { return e.first == key; });
  if (it != next->end()) {
    it->second = std::move(value);
  } else {
    next->emplace_back(key, std::move(value));
  }
  entries_ = std::move(next);
}

std::shared_ptr<const CallMetadata::Entries> CallMetadata::Get() const {
  absl::MutexLock lock(&mu_);
  return entries_;
}

std::shared_ptr<CallMetadata> MetadataOf(const ClientOptions& options) {
  auto metadata = std::make_shared<CallMetadata>();
  if (!options.token.empty()) metadata->Set("authorization", "Bearer " + options.token);
  if (!options.session_id.empty()) metadata->Set("placement-session", options.session_id);
  return metadata;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const ClientOptions& options,
                                                           grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls) {
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "ClientOptions::tls_cert_file and tls_key_file must be given together");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadPem("tls_ca_file", options.tls_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPem("tls_cert_file", options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem("tls_key_file", options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to '", target, "'"));
  }
  return channel;
}

}  // namespace placement::client

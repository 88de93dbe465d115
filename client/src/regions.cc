// RegionClient (RegionService calls, same-host detection) and SharedRegion.
#include "placement/client/regions.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/region_fd.h"
#include "common/grpc_status.h"
#include "common/host_identity.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/region_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// A unix socket, or a loopback host: the only targets whose daemon can share
// memory with this process (a same-host daemon reached through another
// address is probably behind NAT or a proxy; use the stream there).
bool LocalTarget(absl::string_view target) {
  if (absl::StartsWith(target, "unix:") || absl::StartsWith(target, "unix-abstract:")) return true;
  absl::ConsumePrefix(&target, "dns:///");
  absl::ConsumePrefix(&target, "ipv4:");
  absl::ConsumePrefix(&target, "ipv6:");
  return absl::StartsWith(target, "127.") || absl::StartsWith(target, "localhost:") ||
         absl::StartsWith(target, "[::1]:") || target == "localhost";
}

absl::StatusOr<RegionInfo> Register(const Client& client,
                                    const pb::RegisterRegionRequest& request) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::RegisterRegionResponse response;
  grpc::Status status = pb::RegionService::NewStub(client.impl().channel)
                            ->RegisterRegion(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response.region());
}

}  // namespace

absl::StatusOr<bool> RegionClient::SameHost() const {
  if (!LocalTarget(client_.target())) return false;
  absl::StatusOr<DaemonStatus> status = client_.GetStatus();
  if (!status.ok()) return status.status();
  return !status->region_socket.empty() && !status->host_id.empty() &&
         status->host_id == HostId() && status->boot_id == BootId();
}

absl::StatusOr<RegionInfo> RegionClient::RegisterFd(int fd, int64_t size_bytes,
                                                    const std::string& name) const {
  absl::StatusOr<DaemonStatus> status = client_.GetStatus();
  if (!status.ok()) return status.status();
  if (status->region_socket.empty()) {
    return absl::FailedPreconditionError(
        "the daemon has no region socket (--region_socket is off); use the gRPC stream");
  }
  absl::StatusOr<std::string> token = PassFd(status->region_socket, fd);
  if (!token.ok()) return token.status();
  pb::RegisterRegionRequest request;
  request.set_name(name);
  request.set_size_bytes(size_bytes);
  request.set_fd_token(*token);
  return Register(client_, request);
}

absl::StatusOr<RegionInfo> RegionClient::RegisterShmName(const std::string& shm_name,
                                                         int64_t size_bytes,
                                                         const std::string& name) const {
  pb::RegisterRegionRequest request;
  request.set_name(name);
  request.set_size_bytes(size_bytes);
  request.set_shm_name(shm_name);
  return Register(client_, request);
}

absl::Status RegionClient::Unregister(const std::string& region_id) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::UnregisterRegionRequest request;
  request.set_region_id(region_id);
  pb::UnregisterRegionResponse response;
  return FromGrpcStatus(pb::RegionService::NewStub(client_.impl().channel)
                            ->UnregisterRegion(&context, request, &response));
}

absl::StatusOr<std::vector<RegionInfo>> RegionClient::List() const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::ListRegionsResponse response;
  grpc::Status status =
      pb::RegionService::NewStub(client_.impl().channel)->ListRegions(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<RegionInfo> out;
  for (const pb::RegionInfo& region : response.regions()) out.push_back(FromProto(region));
  return out;
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(const Client& client,
                                                                   int64_t size_bytes,
                                                                   const std::string& name) {
  if (size_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes must be >= 1, got ", size_bytes));
  }
  RegionClient regions(client);
  absl::StatusOr<bool> same_host = regions.SameHost();
  if (!same_host.ok()) return same_host.status();
  if (!*same_host) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the daemon at ", client.target(),
        " does not share this host (host/boot id, a unix or loopback target, a region socket); "
        "shared-memory regions need a same-host daemon"));
  }
  absl::StatusOr<int> fd = CreateSealedMemfd(name, size_bytes);
  if (!fd.ok()) return fd.status();
  void* data =
      mmap(nullptr, static_cast<size_t>(size_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(*fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map a ", size_bytes, "-byte region: ", std::strerror(error)));
  }
  absl::StatusOr<RegionInfo> info = regions.RegisterFd(*fd, size_bytes, name);
  close(*fd);  // both mappings keep the memory
  if (!info.ok()) {
    munmap(data, static_cast<size_t>(size_bytes));
    return info.status();
  }
  return std::unique_ptr<SharedRegion>(
      new SharedRegion(client, static_cast<uint8_t*>(data), size_bytes, *std::move(info)));
}

SharedRegion::~SharedRegion() {
  (void)Unregister();
  munmap(data_, static_cast<size_t>(size_));
}

absl::Status SharedRegion::Unregister() {
  if (!registered_) return absl::OkStatus();
  registered_ = false;
  return RegionClient(client_).Unregister(id());
}

}  // namespace placement::client

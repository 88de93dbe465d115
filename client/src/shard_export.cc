#include "client/src/shard_export.h"

#include <utility>

#include "client/src/client_impl.h"
#include "client/src/region_fd.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/views.h"
#include "placement/v1/view_service.grpc.pb.h"

namespace placement::client {

absl::StatusOr<RedeemedExport> ExportAndRedeem(const Client& client, const std::string& socket,
                                               const placement::v1::ExportShardsRequest& request) {
  RedeemedExport out;
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  grpc::Status status = placement::v1::ViewService::NewStub(client.impl().channel)
                            ->ExportShards(&context, request, &out.response);
  if (!status.ok()) return FromGrpcStatus(status);
  absl::StatusOr<std::vector<int>> fds = RedeemViewToken(socket, out.response.fd_token());
  if (!fds.ok()) {
    Unexport(client, out.response.export_().export_id()).IgnoreError();
    return fds.status();
  }
  out.fds = *std::move(fds);
  return out;
}

}  // namespace placement::client

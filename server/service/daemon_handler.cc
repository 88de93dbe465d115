#include "server/service/daemon_handler.h"

#include "absl/time/clock.h"
#include "server/service/unary.h"

namespace placement::server {

grpc::ServerUnaryReactor* DaemonHandler::GetStatus(grpc::CallbackServerContext* context,
                                                   const placement::v1::GetStatusRequest*,
                                                   placement::v1::GetStatusResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    response->set_version(identity_->version);
    response->set_backend(identity_->backend);
    response->set_backend_note(identity_->backend_note);
    response->set_instance_id(identity_->instance_id);
    response->set_listen_address(identity_->listen_address);
    response->set_process_index(identity_->process_index);
    absl::Duration up = absl::Now() - identity_->start_time;
    int64_t nanos = absl::ToInt64Nanoseconds(up);
    response->mutable_uptime()->set_seconds(nanos / 1000000000);
    response->mutable_uptime()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
    timespec ts = absl::ToTimespec(identity_->start_time);
    response->mutable_start_time()->set_seconds(ts.tv_sec);
    response->mutable_start_time()->set_nanos(static_cast<int32_t>(ts.tv_nsec));
    response->set_num_devices(inventory_->num_devices());
    response->set_num_meshes(counts_.meshes ? counts_.meshes() : 0);
    response->set_num_tensors(counts_.tensors ? counts_.tensors() : 0);
    response->set_num_prefetch_streams(counts_.prefetch_streams ? counts_.prefetch_streams() : 0);
    response->set_num_sessions(counts_.sessions ? counts_.sessions() : 0);
    response->set_num_session_tensors(counts_.session_tensors ? counts_.session_tensors() : 0);
    response->set_num_open_streams(counts_.open_streams ? counts_.open_streams() : 0);
    response->set_device_bytes_in_use(inventory_->TotalMemoryInUse());
    response->set_serving(!gate_->draining());
    return absl::OkStatus();
  });
}

}  // namespace placement::server

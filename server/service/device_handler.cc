#include "server/service/device_handler.h"

#include "common/status_macros.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

// The hardware a request names (either oneof form), or the detected type.
template <typename Request>
absl::StatusOr<HardwareType> RequestedHardware(const Request& request,
                                               const DeviceInventory& inventory, bool* detected) {
  *detected = false;
  switch (request.hardware_case()) {
    case Request::kHardwareType:
      if (request.hardware_type() != pb::HARDWARE_TYPE_UNSPECIFIED) {
        return HardwareTypeFromProtoValue(request.hardware_type());
      }
      break;
    case Request::kHardwareName:
      // ParseHardwareType echoes at most 64 bytes of an unknown name, so the
      // error stays INVALID_ARGUMENT however long the name.
      if (!request.hardware_name().empty()) return ParseHardwareType(request.hardware_name());
      break;
    default:
      break;
  }
  *detected = true;
  return inventory.hardware_type();
}

}  // namespace

grpc::ServerUnaryReactor* DeviceHandler::ListDevices(grpc::CallbackServerContext* context,
                                                     const pb::ListDevicesRequest* /*request*/,
                                                     pb::ListDevicesResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    const bool own_only = tenant_use_ && !gate_->SeesDaemonWide(caller);
    absl::flat_hash_map<int64_t, TensorStore::DeviceUse> use;
    if (own_only) use = tenant_use_(caller.tenant);
    for (DeviceState d : inventory_->List()) {
      if (own_only) {
        const TensorStore::DeviceUse mine = use[d.description.id];
        d.memory_in_use_bytes = mine.in_use;
        d.memory_charged_bytes = mine.charged;
        d.memory_cached_bytes = 0;
      }
      DeviceToProto(d, response->add_devices());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* DeviceHandler::GetDeviceInfo(grpc::CallbackServerContext* context,
                                                       const pb::GetDeviceInfoRequest* /*request*/,
                                                       pb::GetDeviceInfoResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    DeviceInfoSummary info = inventory_->Info();
    response->set_num_devices(info.num_devices);
    response->set_hardware_type(HardwareTypeToProto(info.hardware_type));
    response->set_hardware_type_name(std::string(HardwareTypeName(info.hardware_type)));
    for (const auto& p : info.platforms) response->add_platforms(p);
    for (const auto& k : info.device_kinds) response->add_device_kinds(k);
    for (const auto& d : info.devices) {
      pb::DeviceSummary* s = response->add_devices();
      s->set_id(d.id);
      s->set_platform(d.platform);
      s->set_device_kind(d.device_kind);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* DeviceHandler::GetBatchSizeRecommendation(
    grpc::CallbackServerContext* context, const pb::GetBatchSizeRecommendationRequest* request,
    pb::GetBatchSizeRecommendationResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    bool detected = false;
    ASSIGN_OR_RETURN(HardwareType type, RequestedHardware(*request, *inventory_, &detected));
    BatchSizeRecommendation rec = placement::GetBatchSizeRecommendation(type);
    pb::BatchSizeRecommendation* out = response->mutable_recommendation();
    out->set_hardware_type(HardwareTypeToProto(rec.hardware_type));
    out->set_hardware_type_name(std::string(HardwareTypeName(rec.hardware_type)));
    out->set_min_batch_size(rec.min_batch_size);
    out->set_optimal_batch_size(rec.optimal_batch_size);
    out->set_critical_batch_size(rec.critical_batch_size);
    if (rec.max_memory_batch_size) out->set_max_memory_batch_size(*rec.max_memory_batch_size);
    out->set_notes(rec.notes);
    if (rec.roofline) {
      pb::Roofline* r = out->mutable_roofline();
      r->set_peak_flops_per_second(rec.roofline->peak_flops_per_second);
      r->set_memory_bytes_per_second(rec.roofline->memory_bytes_per_second);
      r->set_critical_batch_size(rec.roofline->critical_batch_size);
      r->set_source(rec.roofline->source);
    }
    response->set_hardware_detected(detected);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* DeviceHandler::ValidateBatchSize(
    grpc::CallbackServerContext* context, const pb::ValidateBatchSizeRequest* request,
    pb::ValidateBatchSizeResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    bool detected = false;
    ASSIGN_OR_RETURN(HardwareType type, RequestedHardware(*request, *inventory_, &detected));
    const bool warn = request->has_warn_suboptimal() ? request->warn_suboptimal() : true;
    // The "not divisible by N devices" advice is about this host's devices, so
    // it applies only when the answer is for the hardware detected here.
    const bool this_host = detected || type == inventory_->hardware_type();
    BatchSizeValidation v = placement::ValidateBatchSize(request->batch_size(), warn, type,
                                                         this_host ? inventory_->num_devices() : 0);
    response->set_valid(v.valid);
    response->set_message(v.message);
    for (const auto& w : v.warnings) response->add_warnings(w);
    response->set_hardware_type(HardwareTypeToProto(type));
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
DeviceHandler::DeviceHandler(const DeviceInventory* inventory, CallGate* gate,
                             TenantUseFn tenant_use)
    : inventory_(inventory), gate_(gate), tenant_use_(std::move(tenant_use)) {}
DeviceHandler::~DeviceHandler() = default;

}  // namespace placement::server

#include "client/src/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hardware.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// ProcessLocal.global_name's limit (tensor_service.proto).
constexpr size_t kMaxGlobalNameBytes = 256;

absl::Duration DurationFromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::Time TimeFromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

google::protobuf::Duration DurationToProto(absl::Duration d) {
  google::protobuf::Duration out;
  int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

google::protobuf::Timestamp TimeToProto(absl::Time t) {
  google::protobuf::Timestamp out;
  int64_t seconds = absl::ToUnixSeconds(t);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return out;
}

template <typename T>
std::vector<T> ToVector(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

std::vector<std::string> ToVector(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return std::vector<std::string>(field.begin(), field.end());
}

}  // namespace

pb::DType ToProto(DType dtype) { return static_cast<pb::DType>(static_cast<int>(dtype)); }

DType FromProto(pb::DType dtype) {
  int v = static_cast<int>(dtype);
  return v >= 1 && v <= 10 ? static_cast<DType>(v) : DType::kUnspecified;
}

pb::HardwareType ToProto(HardwareType type) {
  return static_cast<pb::HardwareType>(static_cast<int>(type));
}

HardwareType FromProto(pb::HardwareType type) {
  auto known = HardwareTypeFromProtoValue(static_cast<int>(type));
  return known.ok() ? static_cast<HardwareType>(static_cast<int>(*known)) : HardwareType::kUnknown;
}

pb::ReduceOp ToProto(ReduceOp op) { return static_cast<pb::ReduceOp>(static_cast<int>(op)); }

ReduceOp FromProto(pb::ReduceOp op) {
  int v = static_cast<int>(op);
  return v >= 1 && v <= 5 ? static_cast<ReduceOp>(v) : ReduceOp::kUnspecified;
}

pb::SourceHandling ToProto(SourceHandling source) {
  return source == SourceHandling::kDonate ? pb::SOURCE_HANDLING_DONATE : pb::SOURCE_HANDLING_KEEP;
}

pb::DataPartition ToProto(DataPartition partition) {
  return partition == DataPartition::kReplicated ? pb::DATA_PARTITION_REPLICATED
                                                 : pb::DATA_PARTITION_FULL;
}

pb::Controller ToProto(Controller controller) {
  return controller == Controller::kMulti ? pb::CONTROLLER_MULTI : pb::CONTROLLER_SINGLE;
}

absl::Status ValidateProcessLocal(const ProcessLocal& local) {
  if (local.global_name.empty()) {
    return absl::InvalidArgumentError("process_local.global_name must not be empty");
  }
  if (local.global_name.size() > kMaxGlobalNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("process_local.global_name is ",
                                                   local.global_name.size(), " bytes; at most ",
                                                   kMaxGlobalNameBytes, " are allowed"));
  }
  for (size_t i = 0; i < local.global_shape.size(); ++i) {
    if (local.global_shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("process_local.global_shape[", i, "] is ",
                                                     local.global_shape[i], "; must be >= 0"));
    }
  }
  if (local.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("process_local.timeout is ",
                                                   absl::FormatDuration(local.timeout),
                                                   "; must be positive (zero: the default)"));
  }
  return absl::OkStatus();
}

pb::ProcessLocal ToProto(const ProcessLocal& local) {
  pb::ProcessLocal out;
  out.set_global_name(local.global_name);
  for (int64_t d : local.global_shape) out.add_global_shape(d);
  if (local.timeout > absl::ZeroDuration()) *out.mutable_timeout() = DurationToProto(local.timeout);
  return out;
}

absl::Status ValidateUploadOptions(const UploadOptions& options) {
  if (!options.process_local.has_value()) return absl::OkStatus();
  if (!options.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadOptions: name '", options.name,
                     "' and process_local are both set; a process-local upload is named by "
                     "process_local.global_name"));
  }
  return ValidateProcessLocal(*options.process_local);
}

absl::Status FillUploadHeader(DType dtype, absl::Span<const int64_t> shape, const Rule& rule,
                              const UploadOptions& options, pb::UploadHeader* header) {
  absl::Status valid = ValidateUploadOptions(options);
  if (!valid.ok()) return valid;
  header->set_dtype(ToProto(dtype));
  for (int64_t d : shape) header->add_shape(d);
  header->set_name(options.name);
  header->set_owner(options.owner);
  if (!rule.is_default()) *header->mutable_rule() = ToProto(rule);
  if (options.process_local.has_value()) {
    *header->mutable_process_local() = ToProto(*options.process_local);
  }
  return absl::OkStatus();
}

absl::Status FillBatchHeader(const Rule& rule, const UploadOptions& options,
                             pb::BatchHeader* header) {
  absl::Status valid = ValidateUploadOptions(options);
  if (!valid.ok()) return valid;
  if (!rule.is_default()) *header->mutable_rule() = ToProto(rule);
  header->set_name(options.name);
  header->set_owner(options.owner);
  if (options.process_local.has_value()) {
    *header->mutable_process_local() = ToProto(*options.process_local);
  }
  return absl::OkStatus();
}

pb::Sharding ToProto(const Sharding& sharding) {
  pb::Sharding out;
  out.set_mesh_id(sharding.mesh_id);
  for (const auto& dim : sharding.spec) {
    auto* d = out.mutable_spec()->add_dims();
    for (const auto& axis : dim) d->add_axes(axis);
  }
  for (const auto& axis : sharding.partial_axes) out.add_partial_axes(axis);
  out.set_partial_op(ToProto(sharding.partial_op));
  if (sharding.mode == ShardingMode::kPadded) out.set_mode(pb::SHARDING_MODE_PADDED);
  return out;
}

Sharding FromProto(const pb::Sharding& sharding) {
  Sharding out;
  out.mesh_id = sharding.mesh_id();
  for (const auto& d : sharding.spec().dims()) out.spec.push_back(ToVector(d.axes()));
  out.partial_axes = ToVector(sharding.partial_axes());
  out.partial_op = FromProto(sharding.partial_op());
  out.mode =
      sharding.mode() == pb::SHARDING_MODE_PADDED ? ShardingMode::kPadded : ShardingMode::kEven;
  return out;
}

pb::Placement ToProto(const Placement& placement) {
  pb::Placement out;
  switch (placement.kind()) {
    case Placement::Kind::kDevice:
      out.set_device_id(placement.device_id());
      break;
    case Placement::Kind::kSharded:
      *out.mutable_sharding() = ToProto(placement.sharding());
      break;
    case Placement::Kind::kReplicated:
      out.set_replicated_mesh_id(placement.mesh_id());
      break;
    case Placement::Kind::kDefault:
      break;
  }
  return out;
}

Placement FromProto(const pb::Placement& placement) {
  switch (placement.target_case()) {
    case pb::Placement::kDeviceId:
      return Placement::Device(placement.device_id());
    case pb::Placement::kSharding:
      return Placement::Sharded(FromProto(placement.sharding()));
    case pb::Placement::kReplicatedMeshId:
      return Placement::Replicated(placement.replicated_mesh_id());
    case pb::Placement::TARGET_NOT_SET:
      break;
  }
  return Placement();
}

pb::PlacementRule ToProto(const Rule& rule) {
  pb::PlacementRule out;
  switch (rule.kind()) {
    case Rule::Kind::kPlacement:
      *out.mutable_placement() = ToProto(rule.placement());
      break;
    case Rule::Kind::kShardBatchDim: {
      auto* r = out.mutable_shard_batch_dim();
      r->set_mesh_id(rule.mesh_id());
      r->set_batch_axis(rule.batch_axis());
      r->set_mesh_axis(rule.mesh_axis());
      break;
    }
    case Rule::Kind::kReplicate: {
      auto* r = out.mutable_replicate();
      r->set_mesh_id(rule.mesh_id());
      for (int64_t d : rule.device_ids()) r->add_device_ids(d);
      break;
    }
    case Rule::Kind::kModelState: {
      auto* r = out.mutable_model_state();
      r->set_mesh_id(rule.mesh_id());
      r->set_param_sharding(rule.param_sharding());
      break;
    }
    case Rule::Kind::kDataPartition: {
      auto* r = out.mutable_data_partition();
      r->set_mesh_id(rule.mesh_id());
      r->set_partition(ToProto(rule.partition()));
      break;
    }
    case Rule::Kind::kDefault:
      break;
  }
  return out;
}

Device FromProto(const pb::Device& device) {
  Device out;
  out.id = device.id();
  out.process_index = device.process_index();
  out.local_index = device.local_index();
  out.platform = device.platform();
  out.device_kind = device.device_kind();
  out.hardware_type = FromProto(device.hardware_type());
  out.memory_total_bytes = device.memory_total_bytes();
  out.memory_in_use_bytes = device.memory_in_use_bytes();
  out.memory_limit_bytes = device.memory_limit_bytes();
  out.memory_cached_bytes = device.memory_cached_bytes();
  out.memory_charged_bytes = device.memory_charged_bytes();
  out.compute_capability = device.compute_capability();
  out.pci_bus_id = device.pci_bus_id();
  out.numa_node = device.numa_node();
  out.multiprocessor_count = device.multiprocessor_count();
  return out;
}

DeviceInfo FromProto(const pb::GetDeviceInfoResponse& info) {
  DeviceInfo out;
  out.num_devices = info.num_devices();
  out.hardware_type = FromProto(info.hardware_type());
  out.platforms = ToVector(info.platforms());
  out.device_kinds = ToVector(info.device_kinds());
  for (const auto& d : info.devices()) {
    out.devices.push_back({d.id(), d.platform(), d.device_kind()});
  }
  return out;
}

BatchSizeRecommendation FromProto(const pb::BatchSizeRecommendation& recommendation) {
  BatchSizeRecommendation out;
  out.hardware_type = FromProto(recommendation.hardware_type());
  out.min_batch_size = recommendation.min_batch_size();
  out.optimal_batch_size = recommendation.optimal_batch_size();
  out.critical_batch_size = recommendation.critical_batch_size();
  if (recommendation.has_max_memory_batch_size()) {
    out.max_memory_batch_size = recommendation.max_memory_batch_size();
  }
  out.notes = recommendation.notes();
  if (recommendation.has_roofline()) {
    const pb::Roofline& r = recommendation.roofline();
    out.roofline = Roofline{r.peak_flops_per_second(), r.memory_bytes_per_second(),
                            r.critical_batch_size(), r.source()};
  }
  return out;
}

BatchSizeValidation FromProto(const pb::ValidateBatchSizeResponse& validation) {
  BatchSizeValidation out;
  out.valid = validation.valid();
  out.message = validation.message();
  out.warnings = ToVector(validation.warnings());
  out.hardware_type = FromProto(validation.hardware_type());
  return out;
}

DaemonStatus FromProto(const pb::GetStatusResponse& status) {
  DaemonStatus out;
  out.version = status.version();
  out.backend = status.backend();
  out.backend_note = status.backend_note();
  out.instance_id = status.instance_id();
  out.uptime = DurationFromProto(status.uptime());
  out.start_time = TimeFromProto(status.start_time());
  out.listen_address = status.listen_address();
  out.num_devices = status.num_devices();
  out.num_meshes = status.num_meshes();
  out.num_tensors = status.num_tensors();
  out.device_bytes_in_use = status.device_bytes_in_use();
  out.num_prefetch_streams = status.num_prefetch_streams();
  out.serving = status.serving();
  out.process_index = status.process_index();
  out.host_id = status.host_id();
  out.boot_id = status.boot_id();
  out.region_socket = status.region_socket();
  out.num_regions = status.num_regions();
  const pb::ClusterStatus& c = status.cluster();
  out.cluster.state = static_cast<ClusterState>(c.state());
  out.cluster.epoch = c.epoch();
  out.cluster.num_processes = c.num_processes();
  out.cluster.coordinator_address = c.coordinator_address();
  out.cluster.peer_address = c.peer_address();
  for (const pb::ProcessStatus& p : c.processes()) {
    out.cluster.processes.push_back(
        ProcessStatus{p.process_index(), static_cast<ProcessState>(p.state()), p.peer_address(),
                      p.num_devices(), p.first_device_id(), p.joins()});
  }
  return out;
}

Mesh FromProto(const pb::Mesh& mesh) {
  Mesh out;
  out.id = mesh.id();
  for (const auto& a : mesh.axes()) out.axes.push_back({a.name(), a.size()});
  out.device_ids = ToVector(mesh.device_ids());
  out.total_devices = mesh.total_devices();
  out.tensor_count = mesh.tensor_count();
  return out;
}

ShardInfo FromProto(const pb::ShardInfo& shard) {
  ShardInfo out;
  out.device_id = shard.device_id();
  for (const auto& r : shard.ranges()) out.ranges.push_back({r.begin(), r.end()});
  out.shape = ToVector(shard.shape());
  out.replica_id = shard.replica_id();
  out.size_bytes = shard.size_bytes();
  out.process_index = shard.process_index();
  return out;
}

TensorInfo FromProto(const pb::TensorInfo& info) {
  TensorInfo out;
  out.id = info.id();
  out.name = info.name();
  out.owner = info.owner();
  out.tenant = info.tenant();
  out.dtype = FromProto(info.dtype());
  out.shape = ToVector(info.shape());
  out.placement = FromProto(info.placement());
  out.sharding = FromProto(info.sharding());
  out.shards.reserve(info.shards_size());
  for (const auto& s : info.shards()) out.shards.push_back(FromProto(s));
  out.size_bytes = info.size_bytes();
  out.device_bytes = info.device_bytes();
  return out;
}

NamedTensor FromProto(const pb::NamedTensor& named) {
  return NamedTensor{named.key(), FromProto(named.tensor())};
}

DownloadHeader FromProto(const pb::DownloadHeader& header) {
  DownloadHeader out;
  out.dtype = FromProto(header.dtype());
  out.shape = ToVector(header.shape());
  out.total_bytes = header.total_bytes();
  for (const auto& p : header.pieces()) out.pieces.push_back(FromProto(p));
  return out;
}

PrefetchStats FromProto(const pb::PrefetchStats& stats) {
  PrefetchStats out;
  out.batches_staged = stats.batches_staged();
  out.bytes_staged = stats.bytes_staged();
  out.consumer_stall = DurationFromProto(stats.consumer_stall());
  out.producer_blocked = DurationFromProto(stats.producer_blocked());
  out.max_batches_held = stats.max_batches_held();
  return out;
}

pb::Device ToProto(const Device& device) {
  pb::Device out;
  out.set_id(device.id);
  out.set_process_index(device.process_index);
  out.set_local_index(device.local_index);
  out.set_platform(device.platform);
  out.set_device_kind(device.device_kind);
  out.set_hardware_type(ToProto(device.hardware_type));
  out.set_memory_total_bytes(device.memory_total_bytes);
  out.set_memory_in_use_bytes(device.memory_in_use_bytes);
  out.set_memory_limit_bytes(device.memory_limit_bytes);
  out.set_memory_cached_bytes(device.memory_cached_bytes);
  out.set_memory_charged_bytes(device.memory_charged_bytes);
  out.set_compute_capability(device.compute_capability);
  out.set_pci_bus_id(device.pci_bus_id);
  out.set_numa_node(device.numa_node);
  out.set_multiprocessor_count(device.multiprocessor_count);
  return out;
}

pb::GetDeviceInfoResponse ToProto(const DeviceInfo& info) {
  pb::GetDeviceInfoResponse out;
  out.set_num_devices(info.num_devices);
  out.set_hardware_type(ToProto(info.hardware_type));
  out.set_hardware_type_name(std::string(HardwareTypeName(info.hardware_type)));
  for (const auto& p : info.platforms) out.add_platforms(p);
  for (const auto& k : info.device_kinds) out.add_device_kinds(k);
  for (const auto& d : info.devices) {
    pb::DeviceSummary* s = out.add_devices();
    s->set_id(d.id);
    s->set_platform(d.platform);
    s->set_device_kind(d.device_kind);
  }
  return out;
}

pb::BatchSizeRecommendation ToProto(const BatchSizeRecommendation& recommendation) {
  pb::BatchSizeRecommendation out;
  out.set_hardware_type(ToProto(recommendation.hardware_type));
  out.set_hardware_type_name(std::string(HardwareTypeName(recommendation.hardware_type)));
  out.set_min_batch_size(recommendation.min_batch_size);
  out.set_optimal_batch_size(recommendation.optimal_batch_size);
  out.set_critical_batch_size(recommendation.critical_batch_size);
  if (recommendation.max_memory_batch_size.has_value()) {
    out.set_max_memory_batch_size(*recommendation.max_memory_batch_size);
  }
  out.set_notes(recommendation.notes);
  if (recommendation.roofline.has_value()) {
    pb::Roofline* r = out.mutable_roofline();
    r->set_peak_flops_per_second(recommendation.roofline->peak_flops_per_second);
    r->set_memory_bytes_per_second(recommendation.roofline->memory_bytes_per_second);
    r->set_critical_batch_size(recommendation.roofline->critical_batch_size);
    r->set_source(recommendation.roofline->source);
  }
  return out;
}

pb::ValidateBatchSizeResponse ToProto(const BatchSizeValidation& validation) {
  pb::ValidateBatchSizeResponse out;
  out.set_valid(validation.valid);
  out.set_message(validation.message);
  for (const auto& w : validation.warnings) out.add_warnings(w);
  out.set_hardware_type(ToProto(validation.hardware_type));
  return out;
}

pb::GetStatusResponse ToProto(const DaemonStatus& status) {
  pb::GetStatusResponse out;
  out.set_version(status.version);
  out.set_backend(status.backend);
  out.set_backend_note(status.backend_note);
  out.set_instance_id(status.instance_id);
  *out.mutable_uptime() = DurationToProto(status.uptime);
  *out.mutable_start_time() = TimeToProto(status.start_time);
  out.set_listen_address(status.listen_address);
  out.set_num_devices(status.num_devices);
  out.set_num_meshes(status.num_meshes);
  out.set_num_tensors(status.num_tensors);
  out.set_device_bytes_in_use(status.device_bytes_in_use);
  out.set_num_prefetch_streams(status.num_prefetch_streams);
  out.set_serving(status.serving);
  out.set_process_index(status.process_index);
  out.set_host_id(status.host_id);
  out.set_boot_id(status.boot_id);
  out.set_region_socket(status.region_socket);
  out.set_num_regions(status.num_regions);
  pb::ClusterStatus* c = out.mutable_cluster();
  c->set_state(static_cast<pb::ClusterState>(status.cluster.state));
  c->set_epoch(status.cluster.epoch);
  c->set_num_processes(status.cluster.num_processes);
  c->set_coordinator_address(status.cluster.coordinator_address);
  c->set_peer_address(status.cluster.peer_address);
  for (const ProcessStatus& p : status.cluster.processes) {
    pb::ProcessStatus* o = c->add_processes();
    o->set_process_index(p.process_index);
    o->set_state(static_cast<pb::ProcessState>(p.state));
    o->set_peer_address(p.peer_address);
    o->set_num_devices(p.num_devices);
    o->set_first_device_id(p.first_device_id);
    o->set_joins(p.joins);
  }
  return out;
}

pb::Mesh ToProto(const Mesh& mesh) {
  pb::Mesh out;
  out.set_id(mesh.id);
  for (const MeshAxis& a : mesh.axes) {
    pb::MeshAxis* axis = out.add_axes();
    axis->set_name(a.name);
    axis->set_size(a.size);
  }
  for (int64_t d : mesh.device_ids) out.add_device_ids(d);
  out.set_total_devices(mesh.total_devices);
  out.set_tensor_count(mesh.tensor_count);
  return out;
}

pb::ShardInfo ToProto(const ShardInfo& shard) {
  pb::ShardInfo out;
  out.set_device_id(shard.device_id);
  for (const IndexRange& r : shard.ranges) {
    pb::IndexRange* range = out.add_ranges();
    range->set_begin(r.begin);
    range->set_end(r.end);
  }
  for (int64_t d : shard.shape) out.add_shape(d);
  out.set_replica_id(shard.replica_id);
  out.set_size_bytes(shard.size_bytes);
  out.set_process_index(shard.process_index);
  return out;
}

pb::TensorInfo ToProto(const TensorInfo& info) {
  pb::TensorInfo out;
  out.set_id(info.id);
  out.set_name(info.name);
  out.set_owner(info.owner);
  out.set_tenant(info.tenant);
  out.set_dtype(ToProto(info.dtype));
  for (int64_t d : info.shape) out.add_shape(d);
  *out.mutable_placement() = ToProto(info.placement);
  *out.mutable_sharding() = ToProto(info.sharding);
  for (const ShardInfo& s : info.shards) *out.add_shards() = ToProto(s);
  out.set_size_bytes(info.size_bytes);
  out.set_device_bytes(info.device_bytes);
  return out;
}

pb::DownloadHeader ToProto(const DownloadHeader& header) {
  pb::DownloadHeader out;
  out.set_dtype(ToProto(header.dtype));
  for (int64_t d : header.shape) out.add_shape(d);
  out.set_total_bytes(header.total_bytes);
  for (const ShardInfo& s : header.pieces) *out.add_pieces() = ToProto(s);
  return out;
}

pb::NamedTensor ToProto(const NamedTensor& named) {
  pb::NamedTensor out;
  out.set_key(named.key);
  *out.mutable_tensor() = ToProto(named.tensor);
  return out;
}

pb::PrefetchStats ToProto(const PrefetchStats& stats) {
  pb::PrefetchStats out;
  out.set_batches_staged(stats.batches_staged);
  out.set_bytes_staged(stats.bytes_staged);
  *out.mutable_consumer_stall() = DurationToProto(stats.consumer_stall);
  *out.mutable_producer_blocked() = DurationToProto(stats.producer_blocked);
  out.set_max_batches_held(stats.max_batches_held);
  return out;
}

RegionInfo FromProto(const pb::RegionInfo& region) {
  RegionInfo out;
  out.id = region.region_id();
  out.name = region.name();
  out.size_bytes = region.size_bytes();
  out.session_id = region.session_id();
  out.tenant = region.tenant();
  out.pinned = region.pinned();
  return out;
}

pb::RegionInfo ToProto(const RegionInfo& region) {
  pb::RegionInfo out;
  out.set_region_id(region.id);
  out.set_name(region.name);
  out.set_size_bytes(region.size_bytes);
  out.set_session_id(region.session_id);
  out.set_tenant(region.tenant);
  out.set_pinned(region.pinned);
  return out;
}

StreamStatus FromProto(const pb::StreamStatus& stream) {
  StreamStatus out;
  out.id = stream.id();
  switch (stream.kind()) {
    case pb::STREAM_KIND_UPLOAD:
      out.kind = StreamKind::kUpload;
      break;
    case pb::STREAM_KIND_UPLOAD_BATCH:
      out.kind = StreamKind::kUploadBatch;
      break;
    case pb::STREAM_KIND_DOWNLOAD:
      out.kind = StreamKind::kDownload;
      break;
    case pb::STREAM_KIND_PREFETCH:
      out.kind = StreamKind::kPrefetch;
      break;
    default:
      out.kind = StreamKind::kUnspecified;
  }
  out.tenant = stream.tenant();
  out.what = stream.what();
  out.bytes = stream.bytes();
  out.total_bytes = stream.total_bytes();
  out.opened = TimeFromProto(stream.opened());
  return out;
}

MemoryTrim FromProto(const pb::TrimMemoryResponse& trim) {
  return MemoryTrim{.cache_bytes_released = trim.cache_bytes_released(),
                    .resident_bytes_before = trim.resident_bytes_before(),
                    .resident_bytes_after = trim.resident_bytes_after()};
}

pb::TrimMemoryResponse ToProto(const MemoryTrim& trim) {
  pb::TrimMemoryResponse out;
  out.set_cache_bytes_released(trim.cache_bytes_released);
  out.set_resident_bytes_before(trim.resident_bytes_before);
  out.set_resident_bytes_after(trim.resident_bytes_after);
  return out;
}

pb::StreamStatus ToProto(const StreamStatus& stream) {
  pb::StreamStatus out;
  out.set_id(stream.id);
  out.set_kind(static_cast<pb::StreamKind>(static_cast<int>(stream.kind)));
  out.set_tenant(stream.tenant);
  out.set_what(stream.what);
  out.set_bytes(stream.bytes);
  out.set_total_bytes(stream.total_bytes);
  *out.mutable_opened() = TimeToProto(stream.opened);
  return out;
}

}  // namespace placement::client

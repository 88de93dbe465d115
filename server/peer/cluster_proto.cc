#include "server/peer/cluster_proto.h"

namespace placement::server {

namespace pb = placement::v1;

absl::Duration DurationFromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void DurationToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

void DescriptionToProto(const DeviceDescription& d, pb::Device* out) {
  out->set_id(d.id);
  out->set_process_index(d.process_index);
  out->set_local_index(d.local_index);
  out->set_platform(d.platform);
  out->set_device_kind(d.device_kind);
  out->set_hardware_type(static_cast<pb::HardwareType>(d.hardware_type));
  out->set_memory_total_bytes(d.memory_total_bytes);
  out->set_memory_limit_bytes(d.memory_limit_bytes);
  out->set_compute_capability(d.compute_capability);
  out->set_pci_bus_id(d.pci_bus_id);
  out->set_numa_node(d.numa_node);
  out->set_multiprocessor_count(d.multiprocessor_count);
}

DeviceDescription DescriptionFromProto(const pb::Device& p) {
  DeviceDescription d;
  d.id = p.id();
  d.process_index = p.process_index();
  d.local_index = p.local_index();
  d.platform = p.platform();
  d.device_kind = p.device_kind();
  d.hardware_type = static_cast<HardwareType>(p.hardware_type());
  d.memory_total_bytes = p.memory_total_bytes();
  d.memory_limit_bytes = p.memory_limit_bytes();
  d.compute_capability = p.compute_capability();
  d.pci_bus_id = p.pci_bus_id();
  d.numa_node = p.numa_node();
  d.multiprocessor_count = p.multiprocessor_count();
  return d;
}

// The core enums carry the proto values (common/cluster_state.h).
pb::ProcessState ProcessStateToProto(ProcessState state) {
  return static_cast<pb::ProcessState>(state);
}

pb::ClusterState ClusterStateToProto(ClusterState state) {
  return static_cast<pb::ClusterState>(state);
}

namespace {

ProcessState ProcessStateFromProto(pb::ProcessState state) {
  return static_cast<ProcessState>(state);
}

ClusterState ClusterStateFromProto(pb::ClusterState state) {
  return static_cast<ClusterState>(state);
}

}  // namespace

void ViewToProto(const ClusterView& view, pb::Topology* out) {
  out->set_num_processes(view.num_processes);
  out->set_epoch(view.epoch);
  out->set_state(ClusterStateToProto(view.state));
  out->set_coordinator_instance_id(view.coordinator_instance_id);
  for (const ProcessRecord& p : view.processes) {
    pb::ProcessInfo* info = out->add_processes();
    info->set_process_index(p.process_index);
    info->set_state(ProcessStateToProto(p.state));
    info->set_instance_id(p.instance_id);
    info->set_peer_address(p.peer_address);
    info->set_gloo_hostname(p.gloo_hostname);
    info->set_first_device_id(p.first_device_id);
    info->set_joins(p.joins);
    for (const DeviceDescription& d : p.devices) DescriptionToProto(d, info->add_devices());
  }
}

ClusterView ViewFromProto(const pb::Topology& topology) {
  ClusterView view;
  view.num_processes = topology.num_processes();
  view.epoch = topology.epoch();
  view.state = ClusterStateFromProto(topology.state());
  view.coordinator_instance_id = topology.coordinator_instance_id();
  for (const pb::ProcessInfo& info : topology.processes()) {
    ProcessRecord p;
    p.process_index = info.process_index();
    p.state = ProcessStateFromProto(info.state());
    p.instance_id = info.instance_id();
    p.peer_address = info.peer_address();
    p.gloo_hostname = info.gloo_hostname();
    p.first_device_id = info.first_device_id();
    p.joins = info.joins();
    for (const pb::Device& d : info.devices()) p.devices.push_back(DescriptionFromProto(d));
    view.processes.push_back(std::move(p));
  }
  return view;
}

void JoinInfoToProto(const JoinInfo& info, pb::JoinRequest* out) {
  out->set_process_index(info.process_index);
  out->set_num_processes(info.num_processes);
  out->set_instance_id(info.instance_id);
  out->set_peer_address(info.peer_address);
  out->set_gloo_hostname(info.gloo_hostname);
  out->set_last_epoch(info.last_epoch);
  for (const DeviceDescription& d : info.devices) DescriptionToProto(d, out->add_devices());
}

JoinInfo JoinInfoFromProto(const pb::JoinRequest& request) {
  JoinInfo info;
  info.process_index = request.process_index();
  info.num_processes = request.num_processes();
  info.instance_id = request.instance_id();
  info.peer_address = request.peer_address();
  info.gloo_hostname = request.gloo_hostname();
  info.last_epoch = request.last_epoch();
  for (const pb::Device& d : request.devices()) info.devices.push_back(DescriptionFromProto(d));
  return info;
}

}  // namespace placement::server

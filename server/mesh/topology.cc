#include "server/mesh/topology.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "absl/strings/ascii.h"

namespace placement::server {
namespace {

struct SortKey {
  int unknown_numa;  // 0 when the NUMA node is known, 1 otherwise
  int32_t numa_node;
  std::string pci_bus_id;  // lower-cased; empty when unknown
  int32_t local_index;
  size_t input_index;

  bool operator<(const SortKey& other) const {
    return std::tie(unknown_numa, numa_node, pci_bus_id, local_index, input_index) <
           std::tie(other.unknown_numa, other.numa_node, other.pci_bus_id, other.local_index,
                    other.input_index);
  }
};

}  // namespace

std::vector<int64_t> TopologyOrder(const std::vector<DeviceDescription>& devices) {
  std::vector<SortKey> keys;
  keys.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceDescription& d = devices[i];
    SortKey key{0, 0, "", d.local_index, i};
    if (d.platform == "gpu") {
      key.unknown_numa = d.numa_node < 0 ? 1 : 0;
      key.numa_node = d.numa_node < 0 ? 0 : d.numa_node;
      key.pci_bus_id = absl::AsciiStrToLower(d.pci_bus_id);
    }
    keys.push_back(std::move(key));
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> ids;
  ids.reserve(keys.size());
  for (const SortKey& key : keys) ids.push_back(devices[key.input_index].id);
  return ids;
}

}  // namespace placement::server

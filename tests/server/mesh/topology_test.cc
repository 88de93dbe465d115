#include "server/mesh/topology.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

DeviceDescription Gpu(int64_t id, int numa, const std::string& pci) {
  DeviceDescription d;
  d.id = id;
  d.local_index = static_cast<int32_t>(id);
  d.platform = "gpu";
  d.numa_node = numa;
  d.pci_bus_id = pci;
  return d;
}

DeviceDescription Cpu(int64_t id, int32_t local) {
  DeviceDescription d;
  d.id = id;
  d.local_index = local;
  d.platform = "cpu";
  d.numa_node = 1 - local % 2;  // ignored for CPU virtual devices
  return d;
}

TEST(TopologyOrderTest, CpuDevicesKeepLocalIndexOrder) {
  EXPECT_EQ(TopologyOrder({Cpu(2048, 0), Cpu(2049, 1), Cpu(2050, 2)}),
            (std::vector<int64_t>{2048, 2049, 2050}));
  EXPECT_EQ(TopologyOrder({Cpu(5, 1), Cpu(4, 0)}), (std::vector<int64_t>{4, 5}));
  EXPECT_TRUE(TopologyOrder({}).empty());
}

TEST(TopologyOrderTest, GpusGroupByNumaNodeThenPciBusId) {
  // Enumeration order interleaves two sockets; the topology order keeps each
  // socket's GPUs together and, inside it, the PCIe neighbours adjacent.
  std::vector<DeviceDescription> devices = {
      Gpu(0, 1, "0000:9A:00.0"), Gpu(1, 0, "0000:1B:00.0"), Gpu(2, 1, "0000:88:00.0"),
      Gpu(3, 0, "0000:18:00.0"), Gpu(4, 1, "0000:8a:00.0"), Gpu(5, 0, "0000:2a:00.0"),
  };
  EXPECT_EQ(TopologyOrder(devices), (std::vector<int64_t>{3, 1, 5, 2, 4, 0}));
}

TEST(TopologyOrderTest, UnknownNumaNodesGoLastAndTiesKeepLocalOrder) {
  std::vector<DeviceDescription> devices = {Gpu(0, -1, ""), Gpu(1, 0, "0000:02:00.0"),
                                            Gpu(2, -1, ""), Gpu(3, 0, "0000:01:00.0")};
  EXPECT_EQ(TopologyOrder(devices), (std::vector<int64_t>{3, 1, 0, 2}));
}

}  // namespace
}  // namespace placement::server

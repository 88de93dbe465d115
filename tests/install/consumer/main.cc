// Lists the devices of the daemon named on the command line, using only the
// installed client library and headers.
#include <cstdio>
#include <string>

#include "placement/client/client.h"
#include "placement/client/device_placement.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto client = placement::client::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  auto placement = placement::client::DevicePlacement::Create(**client);
  if (!placement.ok()) {
    std::fprintf(stderr, "%s\n", placement.status().ToString().c_str());
    return 1;
  }
  std::printf("devices=%lld hardware=%s\n", static_cast<long long>(placement->num_devices()),
              std::string(placement::client::HardwareTypeName(placement->hardware_type())).c_str());
  return 0;
}

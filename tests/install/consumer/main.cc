// Lists the devices of the daemon named on the command line, using only the
// installed client library and headers. The umbrella header pulls in every
// public header, so this also proves that none of them needs a generated or
// gRPC header; ParseSpec and ToJson run code the installed archive carries
// (common/ and the wire messages).
#include <cstdio>
#include <string>

#include "placement/client/placement.h"

static_assert(__cplusplus >= 202002L, "placement::client should have asked for C++20");

int main(int argc, char** argv) {
  namespace pc = placement::client;
  if (argc != 2) return 2;
  auto client = pc::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  auto placement = pc::DevicePlacement::Create(**client);
  if (!placement.ok()) {
    std::fprintf(stderr, "%s\n", placement.status().ToString().c_str());
    return 1;
  }
  auto spec = pc::ParseSpec("data,None");
  if (!spec.ok() || pc::SpecToString(*spec) != "P('data', None)") return 3;
  auto devices = (*client)->ListDevices();
  if (!devices.ok() || pc::ToJson(*devices).find("\"devices\"") == std::string::npos) return 4;
  std::printf("devices=%lld hardware=%s\n", static_cast<long long>(placement->num_devices()),
              std::string(pc::HardwareTypeName(placement->hardware_type())).c_str());
  return 0;
}

// A trainer that dies: connects to the daemon named by argv[1] with the
// client's default session (lease argv[2] seconds), uploads 4 MiB to device
// 3, prints the tensor id and sleeps until it is killed.
// Used by client_api_itest.cc (a killed client's results are freed).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "placement/client/tensors.h"

int main(int argc, char** argv) {
  namespace pc = placement::client;
  if (argc != 3) return 2;
  pc::ClientOptions options;
  options.session_ttl = absl::Seconds(std::atoi(argv[2]));
  auto client = pc::Client::Connect(argv[1], options);
  if (!client.ok()) return 1;
  std::vector<float> data(1 << 20, 1.0f);
  auto info = pc::TensorClient(**client).Upload(pc::HostArray::Of(data, {1 << 20}),
                                                pc::Placement::Device(3));
  if (!info.ok()) return 1;
  std::printf("%s\n", info->id.c_str());
  std::fflush(stdout);
  for (;;) pause();
}

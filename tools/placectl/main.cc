// placectl [--target=ADDR] [--json] COMMAND [ARGS]
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/output.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "placementd address: host:port or unix:/path.");
ABSL_FLAG(bool, json, false, "Print JSON instead of tables.");
ABSL_FLAG(int32_t, timeout_seconds, 30, "Deadline of each call, in seconds.");

namespace {

constexpr char kUsage[] =
    "placectl [--target=ADDR] [--json] COMMAND [ARGS]\n"
    "commands:\n"
    "  devices                         list devices with memory in use\n"
    "  info                            get_device_info()\n"
    "  status                          daemon version, backend, uptime\n"
    "  batch-size [--hardware=h100]    batch-size recommendation\n"
    "  validate-batch-size N           validate_batch_size(N)\n"
    "  mesh create NAME=SIZE[,...]     create a mesh [--mesh_id=ID] [--devices=0,1,...]\n"
    "  mesh create --preset=data|model|hybrid   preset meshes (see docs/placectl.md)\n"
    "  mesh ls | info ID | rm ID [--force]\n"
    "  tensor put FILE.npy             upload [--name=N] [--device=D | --mesh=ID --spec=S |\n"
    "                                  --replicated=MESH]\n"
    "  tensor get ID FILE.npy          download [--device=D: one shard]\n"
    "  tensor ls | describe ID | rm ID...\n"
    "  tensor place ID                 (--device=D | --mesh=ID --spec=S | --replicated=MESH)\n"
    "                                  [--donate] [--name=N]\n";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  using namespace placement::placectl;  // NOLINT(build/namespaces): main only
  if (positional.size() < 2) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  std::string command = positional[1];
  Args args(positional.begin() + 2, positional.end());
  using Runner =
      std::function<int(const placement::client::Client&, const GlobalOptions&, const Args&)>;
  const std::map<std::string, Runner> commands = {
      {"devices", RunDevices},
      {"info", RunInfo},
      {"status", RunStatus},
      {"batch-size", RunBatchSize},
      {"validate-batch-size", RunValidateBatchSize},
      {"mesh", RunMesh},
      {"tensor", RunTensor},
  };
  auto it = commands.find(command);
  if (it == commands.end()) {
    std::fprintf(stderr, "placectl: unknown command '%s'\n%s", command.c_str(), kUsage);
    return 2;
  }
  placement::client::ClientOptions client_options;
  client_options.default_deadline = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  client_options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  auto client = placement::client::Client::Connect(absl::GetFlag(FLAGS_target), client_options);
  if (!client.ok()) return ReportError(client.status());
  GlobalOptions options;
  options.json = absl::GetFlag(FLAGS_json);
  return it->second(**client, options, args);
}

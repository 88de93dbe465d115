// placectl tensor put | get | ls | describe | rm | place.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/client/placements.h"
#include "placement/client/tensors.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/npy.h"
#include "tools/placectl/output.h"

ABSL_FLAG(std::string, name, "", "tensor put / place: name for the new tensor.");
ABSL_FLAG(int64_t, device, -1,
          "tensor put / place: put the whole tensor on this device; tensor get: download only "
          "this device's shard.");
ABSL_FLAG(std::string, mesh, "",
          "tensor put / place: shard over this mesh with --spec; tensor ls: only tensors on it.");
ABSL_FLAG(std::string, spec, "",
          "tensor put / place with --mesh: PartitionSpec such as \"data,None\", \"(x,y)\", "
          "\"None,model\"; empty = replicated on the mesh.");
ABSL_FLAG(bool, padded, false,
          "tensor put / place with --mesh: allow dimensions that do not divide (padded shards).");
ABSL_FLAG(std::string, replicated, "",
          "tensor put / place: replicate on every device of this mesh.");
ABSL_FLAG(bool, donate, false, "tensor place: delete the source once the result exists.");
ABSL_FLAG(std::string, name_prefix, "", "tensor ls: only tensors whose name starts with this.");
ABSL_FLAG(int64_t, chunk_bytes, int64_t{1} << 20, "tensor put / get: bytes per stream message.");

namespace placement::placectl {
namespace {

constexpr char kTensorUsage[] =
    "usage: placectl tensor put FILE.npy [--name=N] [--device=D | --mesh=ID --spec=\"data,None\" "
    "|\n"
    "                                     --replicated=MESH]\n"
    "       placectl tensor get ID FILE.npy [--device=D]\n"
    "       placectl tensor ls [--name_prefix=P] [--mesh=ID]\n"
    "       placectl tensor describe ID\n"
    "       placectl tensor rm ID...\n"
    "       placectl tensor place ID (--device=D | --mesh=ID --spec=S | --replicated=MESH)\n"
    "                                [--donate] [--name=N]\n";

int Usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "placectl: %s\n", why.c_str());
  std::fprintf(stderr, "%s", kTensorUsage);
  return 2;
}

// The placement the flags ask for; nullopt when none is given. Sets `error`
// when the flags conflict or the spec does not parse.
std::optional<client::Placement> PlacementFromFlags(std::string* error) {
  int64_t device = absl::GetFlag(FLAGS_device);
  std::string mesh = absl::GetFlag(FLAGS_mesh);
  std::string replicated = absl::GetFlag(FLAGS_replicated);
  int given = (device >= 0) + !mesh.empty() + !replicated.empty();
  if (given > 1) {
    *error = "give only one of --device, --mesh (with --spec) and --replicated";
    return std::nullopt;
  }
  if (!absl::GetFlag(FLAGS_spec).empty() && mesh.empty()) {
    *error = "--spec needs --mesh";
    return std::nullopt;
  }
  if (device >= 0) return client::Placement::Device(device);
  if (!replicated.empty()) return client::Placement::Replicated(replicated);
  if (mesh.empty()) return std::nullopt;
  auto spec = client::ParseSpec(absl::GetFlag(FLAGS_spec));
  if (!spec.ok()) {
    *error = std::string(spec.status().message());
    return std::nullopt;
  }
  client::Placement p = client::Placement::Sharded(mesh, *std::move(spec));
  return absl::GetFlag(FLAGS_padded) ? p.Padded() : p;
}

std::string PlacementText(const client::TensorInfo& info) {
  if (info.placement.kind() != client::Placement::Kind::kDefault) {
    return info.placement.ToString();
  }
  if (info.shards.size() == 1) return absl::StrCat("device ", info.shards[0].device_id);
  return "default device";
}

absl::Span<const int64_t> Dims(const std::vector<int64_t>& dims) { return dims; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

void PrintTensorTable(const std::vector<client::TensorInfo>& tensors) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "ARRAY", "PLACEMENT", "SHARDS", "BYTES", "DEVICE BYTES"}};
  for (const auto& t : tensors) {
    rows.push_back({t.id, t.name, client::DescribeArray(t.dtype, Dims(t.shape)), PlacementText(t),
                    absl::StrCat(t.shards.size()), HumanBytes(t.size_bytes),
                    HumanBytes(t.device_bytes)});
  }
  std::printf("%s", FormatTable(rows).c_str());
}

void PrintTensor(const client::TensorInfo& info, bool json) {
  if (json) {
    std::printf("%s\n", ToJson(info).c_str());
  } else {
    PrintTensorTable({info});
  }
}

int RunPut(const client::TensorClient& tensors, const GlobalOptions& options, const Args& args) {
  if (args.size() != 2) return Usage("tensor put needs one FILE.npy");
  std::string error;
  std::optional<client::Placement> placement = PlacementFromFlags(&error);
  if (!error.empty()) return Usage(error);
  auto reader = NpyReader::Open(args[1]);
  if (!reader.ok()) return ReportError(reader.status());
  client::UploadOptions upload;
  upload.name = absl::GetFlag(FLAGS_name);
  upload.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  client::Rule rule = placement.has_value() ? client::Rule(*placement) : client::Rule();
  NpyReader* r = reader->get();
  auto info = tensors.UploadFrom(
      r->header().dtype, r->header().shape,
      [r](absl::Span<uint8_t> buffer) { return r->Read(buffer); }, rule, upload);
  if (!info.ok()) return ReportError(info.status());
  PrintTensor(*info, options.json);
  return 0;
}

int RunGet(const client::TensorClient& tensors, const GlobalOptions& options, const Args& args) {
  if (args.size() != 3) return Usage("tensor get needs ID and FILE.npy");
  const std::string& path = args[2];
  client::DownloadSelection selection = client::DownloadSelection::Whole();
  if (absl::GetFlag(FLAGS_device) >= 0) {
    selection = client::DownloadSelection::Device(absl::GetFlag(FLAGS_device));
  }
  client::DownloadOptions download;
  download.chunk_bytes = std::min<int64_t>(absl::GetFlag(FLAGS_chunk_bytes), int64_t{4} << 20);
  std::unique_ptr<NpyWriter> writer;
  auto header = tensors.Download(
      args[1],
      [&](const client::DownloadHeader& h) -> absl::Status {
        auto created = NpyWriter::Create(path, h.dtype, Dims(h.shape));
        if (!created.ok()) return created.status();
        writer = *std::move(created);
        return absl::OkStatus();
      },
      [&](absl::Span<const uint8_t> chunk) { return writer->Write(chunk); }, selection, download);
  if (!header.ok()) return ReportError(header.status());
  absl::Status finished = writer->Finish();
  if (!finished.ok()) return ReportError(finished);
  if (options.json) {
    std::printf("%s\n", ToJson(*header).c_str());
  } else {
    std::printf("wrote %s: %s, %s\n", path.c_str(),
                client::DescribeArray(header->dtype, Dims(header->shape)).c_str(),
                HumanBytes(header->total_bytes).c_str());
  }
  return 0;
}

int RunList(const client::TensorClient& tensors, const GlobalOptions& options, const Args& args) {
  if (args.size() != 1) return Usage("tensor ls takes no arguments");
  auto list = tensors.List(absl::GetFlag(FLAGS_name_prefix), absl::GetFlag(FLAGS_mesh));
  if (!list.ok()) return ReportError(list.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*list).c_str());
  } else {
    PrintTensorTable(*list);
  }
  return 0;
}

int RunDescribe(const client::TensorClient& tensors, const GlobalOptions& options,
                const Args& args) {
  if (args.size() != 2) return Usage("tensor describe needs one tensor id");
  auto info = tensors.Describe(args[1]);
  if (!info.ok()) return ReportError(info.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*info).c_str());
    return 0;
  }
  const client::Spec& spec = info->sharding.spec;
  std::printf(
      "id:        %s\nname:      %s\narray:     %s\nplacement: %s\nsharding:  %s %s\nbytes:     "
      "%s (on devices: %s)\n",
      info->id.c_str(), info->name.c_str(),
      client::DescribeArray(info->dtype, Dims(info->shape)).c_str(), PlacementText(*info).c_str(),
      info->sharding.mesh_id.empty() ? "(implicit mesh)" : info->sharding.mesh_id.c_str(),
      client::SpecToString(spec).c_str(), HumanBytes(info->size_bytes).c_str(),
      HumanBytes(info->device_bytes).c_str());
  std::vector<std::vector<std::string>> rows = {{"DEVICE", "INDEX", "SHAPE", "REPLICA", "BYTES"}};
  for (const auto& s : info->shards) {
    std::vector<std::string> ranges;
    for (const auto& r : s.ranges) ranges.push_back(absl::StrCat(r.begin, ":", r.end));
    rows.push_back({absl::StrCat(s.device_id), absl::StrCat("[", absl::StrJoin(ranges, ", "), "]"),
                    ShapeText(s.shape), absl::StrCat(s.replica_id), HumanBytes(s.size_bytes)});
  }
  std::printf("%s", FormatTable(rows).c_str());
  return 0;
}

int RunRemove(const client::TensorClient& tensors, const GlobalOptions& options, const Args& args) {
  if (args.size() < 2) return Usage("tensor rm needs at least one tensor id");
  auto freed = tensors.Delete(Args(args.begin() + 1, args.end()));
  if (!freed.ok()) return ReportError(freed.status());
  if (options.json) {
    std::printf("{\"freed_bytes\":\"%lld\"}\n", static_cast<long long>(*freed));
  } else {
    std::printf("deleted %zu tensors, freed %s\n", args.size() - 1, HumanBytes(*freed).c_str());
  }
  return 0;
}

int RunPlace(const client::TensorClient& tensors, const GlobalOptions& options, const Args& args) {
  if (args.size() != 2) return Usage("tensor place needs one tensor id");
  std::string error;
  std::optional<client::Placement> placement = PlacementFromFlags(&error);
  if (!error.empty()) return Usage(error);
  if (!placement.has_value()) return Usage("tensor place needs --device, --mesh or --replicated");
  auto info = tensors.Place(
      args[1], *placement,
      absl::GetFlag(FLAGS_donate) ? client::SourceHandling::kDonate : client::SourceHandling::kKeep,
      absl::GetFlag(FLAGS_name));
  if (!info.ok()) return ReportError(info.status());
  PrintTensor(*info, options.json);
  return 0;
}

}  // namespace

int RunTensor(const client::Client& client, const GlobalOptions& options, const Args& args) {
  if (args.empty()) return Usage("");
  client::TensorClient tensors(client);
  const std::string& sub = args[0];
  if (sub == "put") return RunPut(tensors, options, args);
  if (sub == "get") return RunGet(tensors, options, args);
  if (sub == "ls" || sub == "list") return RunList(tensors, options, args);
  if (sub == "describe") return RunDescribe(tensors, options, args);
  if (sub == "rm" || sub == "delete") return RunRemove(tensors, options, args);
  if (sub == "place") return RunPlace(tensors, options, args);
  return Usage(absl::StrCat("unknown tensor command '", sub, "'"));
}

}  // namespace placement::placectl

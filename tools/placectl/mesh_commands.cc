// placectl mesh create | ls | info | rm.
#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "placement/client/meshes.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/output.h"

ABSL_FLAG(std::string, mesh_id, "", "mesh create: id for the new mesh; default: generated.");
ABSL_FLAG(std::string, devices, "",
          "Comma-separated device ids. mesh create: in row-major mesh order (default: the first "
          "devices in topology order); --rule=replicate: the devices to replicate on (default: "
          "all); tensor get-shards: the devices whose shards to download (default: one per "
          "distinct shard).");
ABSL_FLAG(std::string, preset, "", "mesh create: data | model | hybrid instead of NAME=SIZE axes.");
ABSL_FLAG(int64_t, num_devices, 0, "mesh create --preset=data|model: number of devices; 0 = all.");
ABSL_FLAG(std::string, axis_name, "",
          "mesh create --preset=data|model: axis name; default \"data\" / \"model\".");
ABSL_FLAG(int64_t, data_parallel, 1, "mesh create --preset=hybrid: data-parallel size.");
ABSL_FLAG(int64_t, model_parallel, 1, "mesh create --preset=hybrid: model-parallel size.");
ABSL_FLAG(std::string, data_axis, "data", "mesh create --preset=hybrid: data axis name.");
ABSL_FLAG(std::string, model_axis, "model", "mesh create --preset=hybrid: model axis name.");
ABSL_FLAG(bool, force, false, "mesh rm: also delete the tensors that use the mesh.");

namespace placement::placectl {
namespace {

std::string AxesText(const client::Mesh& mesh) {
  std::vector<std::string> axes;
  for (const auto& a : mesh.axes) axes.push_back(absl::StrCat(a.name, "=", a.size));
  return absl::StrJoin(axes, ",");
}

void PrintMeshTable(const std::vector<client::Mesh>& meshes) {
  std::vector<std::vector<std::string>> rows = {{"ID", "AXES", "DEVICES", "TENSORS"}};
  for (const auto& m : meshes) {
    rows.push_back(
        {m.id, AxesText(m), absl::StrJoin(m.device_ids, ","), absl::StrCat(m.tensor_count)});
  }
  std::printf("%s", FormatTable(rows).c_str());
}

// "data=4,model=2" -> {{"data", 4}, {"model", 2}}.
bool ParseAxes(const std::string& text, client::MeshAxes* axes, std::string* error) {
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(piece, '=');
    int64_t size = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtoi(kv[1], &size)) {
      *error = absl::StrCat("axis '", piece, "' is not NAME=SIZE");
      return false;
    }
    axes->push_back({kv[0], size});
  }
  if (axes->empty()) {
    *error = "no axes given";
    return false;
  }
  return true;
}

bool ParseDeviceIds(const std::string& text, std::vector<int64_t>* ids, std::string* error) {
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(piece, &id)) {
      *error = absl::StrCat("--devices entry '", piece, "' is not a device id");
      return false;
    }
    ids->push_back(id);
  }
  return true;
}

}  // namespace

int RunMeshCreate(Session& session, const Args& args) {
  client::CreateMeshOptions create;
  create.mesh_id = absl::GetFlag(FLAGS_mesh_id);
  std::string error;
  if (!ParseDeviceIds(absl::GetFlag(FLAGS_devices), &create.device_ids, &error)) {
    return session.UsageError(error);
  }
  std::string preset = absl::GetFlag(FLAGS_preset);
  for (const char* flag :
       {"num_devices", "axis_name", "data_parallel", "model_parallel", "data_axis", "model_axis"}) {
    if (session.Given(flag) && preset.empty()) {
      return session.UsageError(absl::StrCat("--", flag, " applies only with --preset"));
    }
  }
  client::MeshAxes axes;
  if (preset.empty()) {
    if (args.size() != 1) {
      return session.UsageError("mesh create needs NAME=SIZE[,NAME=SIZE...] or --preset");
    }
    if (!ParseAxes(args[0], &axes, &error)) return session.UsageError(error);
  } else {
    if (!args.empty()) return session.UsageError("mesh create --preset takes no axes");
    if (preset != "data" && preset != "model" && preset != "hybrid") {
      return session.UsageError(
          absl::StrCat("--preset must be data, model or hybrid, got '", preset, "'"));
    }
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  client::MeshClient meshes(*client);
  absl::StatusOr<client::Mesh> mesh;
  if (preset.empty()) {
    mesh = meshes.Create(axes, create);
  } else {
    std::optional<int64_t> n;
    if (absl::GetFlag(FLAGS_num_devices) != 0) n = absl::GetFlag(FLAGS_num_devices);
    std::string axis = absl::GetFlag(FLAGS_axis_name);
    if (preset == "data") {
      mesh = meshes.CreateDataParallel(n, axis.empty() ? "data" : axis, create);
    } else if (preset == "model") {
      mesh = meshes.CreateModelParallel(n, axis.empty() ? "model" : axis, create);
    } else if (preset == "hybrid") {
      mesh = meshes.CreateHybrid(
          absl::GetFlag(FLAGS_data_parallel), absl::GetFlag(FLAGS_model_parallel),
          absl::GetFlag(FLAGS_data_axis), absl::GetFlag(FLAGS_model_axis), create);
    }
  }
  if (!mesh.ok()) return ReportError(mesh.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*mesh).c_str());
  } else {
    PrintMeshTable({*mesh});
  }
  return 0;
}

int RunMeshList(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto list = client::MeshClient(*client).List();
  if (!list.ok()) return ReportError(list.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*list).c_str());
  } else {
    PrintMeshTable(*list);
  }
  return 0;
}

int RunMeshInfo(Session& session, const Args& args) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto info = client::MeshClient(*client).Get(args[0]);
  if (!info.ok()) return ReportError(info.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*info).c_str());
    return 0;
  }
  std::vector<std::string> axes;
  for (const auto& [name, size] : info->axes) axes.push_back(absl::StrCat(name, ": ", size));
  std::printf("id:            %s\ntotal_devices: %lld\naxes:          {%s}\ntensors:       %lld\n",
              info->mesh.id.c_str(), static_cast<long long>(info->total_devices),
              absl::StrJoin(axes, ", ").c_str(), static_cast<long long>(info->mesh.tensor_count));
  // The device grid: one line per index of all but the last axis.
  int64_t row = info->axes.empty() ? 1 : info->axes.back().size;
  std::printf("devices:\n");
  const auto& ids = info->mesh.device_ids;
  const int64_t count = static_cast<int64_t>(ids.size());
  for (int64_t i = 0; row > 0 && i < count; i += row) {
    std::vector<int64_t> line(ids.begin() + i, ids.begin() + std::min<int64_t>(count, i + row));
    std::printf("  [%s]\n", absl::StrJoin(line, " ").c_str());
  }
  return 0;
}

int RunMeshRemove(Session& session, const Args& args) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto deleted = client::MeshClient(*client).Delete(args[0], absl::GetFlag(FLAGS_force)
                                                                 ? client::TensorsOnMesh::kDelete
                                                                 : client::TensorsOnMesh::kRefuse);
  if (!deleted.ok()) return ReportError(deleted.status());
  if (session.json()) {
    // DeleteMeshResponse's proto JSON (int64 as a string).
    std::printf("{\"deleted_tensors\":\"%lld\"}\n", static_cast<long long>(*deleted));
  } else {
    std::printf("deleted mesh %s (%lld tensors deleted)\n", args[0].c_str(),
                static_cast<long long>(*deleted));
  }
  return 0;
}

}  // namespace placement::placectl

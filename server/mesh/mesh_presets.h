// Mesh presets of the seed's DeviceMeshManager, expressed as ordered axes:
//
//   create_data_parallel_mesh(num_devices=None, axis_name="data")
//       -> (axis_name = num_devices)            unset num_devices = all devices
//   create_model_parallel_mesh(num_devices=None, axis_name="model")
//       -> (axis_name = num_devices)
//   create_hybrid_mesh(data_parallel_size=1, model_parallel_size=1,
//                      data_axis="data", model_axis="model")
//       -> (data_axis = dp, model_axis = mp)    shape (dp, mp), row-major
//
// "All devices" means the devices the mesh may use: the explicit device ids
// when the request names them, otherwise every device of the daemon.
//
// Pure value helpers; thread-safe.
#ifndef PLACEMENT_SERVER_MESH_MESH_PRESETS_H_
#define PLACEMENT_SERVER_MESH_MESH_PRESETS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mesh.h"

namespace placement::server {

enum class MeshPresetKind { kDataParallel, kModelParallel, kHybrid };

struct MeshPreset {
  MeshPresetKind kind = MeshPresetKind::kDataParallel;
  // One-axis presets.
  std::optional<int64_t> num_devices;  // unset = all available devices
  std::string axis_name;               // empty = "data" / "model"
  // Hybrid preset.
  std::optional<int64_t> data_parallel_size;   // unset = 1
  std::optional<int64_t> model_parallel_size;  // unset = 1
  std::string data_axis;                       // empty = "data"
  std::string model_axis;                      // empty = "model"
};

// The preset's axes. `available_devices` is what "all devices" means.
// INVALID_ARGUMENT when a size is < 1 ("data_parallel.num_devices is 0; it
// must be >= 1"), or for a malformed or duplicated axis name. Whether enough
// devices exist is checked by MeshRegistry::Create.
absl::StatusOr<std::vector<MeshAxis>> PresetAxes(const MeshPreset& preset,
                                                 int64_t available_devices);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_MESH_MESH_PRESETS_H_

// Prints common/'s tables of dtypes, hardware types and reduce ops as JSON,
// for tests/python/placement/test_tables.py to check the Python client's
// copies against (the Python package cannot link common/).
//   {"dtypes": [{"value": 1, "name": "f32", "numpy": "float32", "size": 4}, ...],
//    "hardware_types": [{"value": 1, "name": "tpu_v5e"}, ...],
//    "reduce_ops": [{"value": 1, "name": "sum"}, ...]}
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/hardware.h"
#include "common/reduce_op.h"

int main() {
  using namespace placement;  // NOLINT(build/namespaces)
  std::vector<std::string> dtypes;
  for (DType d : AllDTypes()) {
    dtypes.push_back(absl::StrCat("{\"value\": ", static_cast<int>(d), ", \"name\": \"",
                                  DTypeName(d), "\", \"numpy\": \"", DTypeNumpyName(d),
                                  "\", \"size\": ", DTypeSize(d), "}"));
  }
  std::vector<std::string> hardware;
  std::vector<std::string> ops;
  for (int v = 0; v < 64; ++v) {
    if (auto h = HardwareTypeFromProtoValue(v); h.ok()) {
      hardware.push_back(
          absl::StrCat("{\"value\": ", v, ", \"name\": \"", HardwareTypeName(*h), "\"}"));
    }
    if (auto op = ReduceOpFromProtoValue(v); op.ok()) {
      ops.push_back(absl::StrCat("{\"value\": ", v, ", \"name\": \"", ReduceOpName(*op), "\"}"));
    }
  }
  std::printf("{\"dtypes\": [%s],\n \"hardware_types\": [%s],\n \"reduce_ops\": [%s]}\n",
              absl::StrJoin(dtypes, ", ").c_str(), absl::StrJoin(hardware, ", ").c_str(),
              absl::StrJoin(ops, ", ").c_str());
  return 0;
}

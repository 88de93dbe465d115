#include "tools/placectl/tensor_output.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/client/rules.h"
#include "placement/client/tensors.h"
#include "tools/placectl/output.h"

namespace placement::placectl {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string PlacementText(const client::TensorInfo& info) {
  if (info.placement.kind() != client::Placement::Kind::kDefault) {
    return info.placement.ToString();
  }
  if (info.shards.size() == 1) return absl::StrCat("device ", info.shards[0].device_id);
  return "default device";
}

std::string IndexText(const client::ShardInfo& shard) {
  std::vector<std::string> ranges;
  for (const auto& r : shard.ranges) ranges.push_back(absl::StrCat(r.begin, ":", r.end));
  return absl::StrCat("[", absl::StrJoin(ranges, ", "), "]");
}

void PrintTensorTable(const std::vector<client::TensorInfo>& tensors,
                      const std::vector<std::string>& keys) {
  std::vector<std::string> header = {"ID",     "NAME",  "ARRAY",       "PLACEMENT",
                                     "SHARDS", "BYTES", "DEVICE BYTES"};
  if (!keys.empty()) header.insert(header.begin(), "KEY");
  std::vector<std::vector<std::string>> rows = {header};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const client::TensorInfo& t = tensors[i];
    std::vector<std::string> row = {t.id,
                                    t.name,
                                    client::DescribeArray(t.dtype, t.shape),
                                    PlacementText(t),
                                    absl::StrCat(t.shards.size()),
                                    HumanBytes(t.size_bytes),
                                    HumanBytes(t.device_bytes)};
    if (!keys.empty()) row.insert(row.begin(), i < keys.size() ? keys[i] : "");
    rows.push_back(std::move(row));
  }
  std::printf("%s", FormatTable(rows).c_str());
}

void PrintTensors(const std::vector<client::TensorInfo>& tensors, bool json, bool single) {
  if (!json) {
    PrintTensorTable(tensors);
  } else if (single && tensors.size() == 1) {
    std::printf("%s\n", ToJson(tensors[0]).c_str());
  } else {
    std::printf("%s\n", ToJson(tensors).c_str());
  }
}

}  // namespace placement::placectl

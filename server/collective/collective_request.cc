#include "server/collective/collective_request.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement::server {

absl::string_view CollectiveRequest::KindName() const {
  switch (kind) {
    case CollectiveRequestKind::kAllReduce:
      return "all_reduce";
    case CollectiveRequestKind::kAllReduceBatch:
      return "all_reduce_batch";
    case CollectiveRequestKind::kAllGather:
      return "all_gather";
    case CollectiveRequestKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveRequestKind::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

std::string CollectiveRequest::Encode() const {
  // Lengths first, so no id or name can run into the next field.
  auto list = [](const std::vector<std::string>& items) {
    std::string out = absl::StrCat(items.size());
    for (const std::string& item : items) absl::StrAppend(&out, ":", item.size(), ":", item);
    return out;
  };
  return absl::StrCat(KindName(), "|", list(tensor_ids), "|", list(axes), "|",
                      op.has_value() ? ReduceOpName(*op) : "default", "|",
                      source == SourceHandling::kDonate ? "donate" : "keep", "|", name.size(), ":",
                      name, "|", dim, "|", root_device_id, "|",
                      controller == Controller::kMulti ? "multi" : "single");
}

}  // namespace placement::server

#include "server/collective/collective_engine.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::server {

absl::Status CollectiveContext::Check() const {
  if (cancelled && cancelled()) return absl::CancelledError("collective cancelled by the caller");
  if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) {
    return absl::DeadlineExceededError("collective deadline exceeded");
  }
  return absl::OkStatus();
}

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kBroadcast:
      return "broadcast";
  }
  return "collective";
}

CollectiveItem AllLocalItem(DType dtype, ReduceOp op, std::vector<const DeviceBuffer*> send,
                            std::vector<DeviceBuffer*> recv, int32_t root) {
  CollectiveItem item;
  item.dtype = dtype;
  item.op = op;
  item.root = root;
  item.group.reserve(recv.size());
  item.local.reserve(recv.size());
  for (size_t r = 0; r < recv.size(); ++r) {
    item.group.push_back(recv[r] != nullptr ? recv[r]->device_id() : -1);
    item.local.push_back(RankBuffers{static_cast<int32_t>(r), send[r], recv[r]});
  }
  return item;
}

namespace {

bool InRankOrder(const CollectiveItem& item) {
  for (size_t r = 0; r < item.local.size(); ++r) {
    if (item.local[r].rank != static_cast<int32_t>(r)) return false;
  }
  return true;
}

// REQUIRES: item.local in rank order.
// `index` names the item in errors; the words are built only on an error
// (this runs on every collective).
absl::Status ValidateItem(CollectiveKind kind, const CollectiveItem& item, size_t index) {
  const auto where = [kind, index] {
    return absl::StrCat(CollectiveKindName(kind), " item ", index);
  };
  const size_t n = item.group.size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where(), ": no ranks"));
  if (item.local.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": ", item.local.size(), " local contributions for a group of ", n,
                     " ranks; this engine serves groups whose every rank is in this process"));
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t rank = item.local[i].rank;
    if (rank != static_cast<int32_t>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": rank ", rank, " outside [0, ", n, ") or listed twice"));
    }
  }
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  if (reduces && item.dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": dtype bool cannot be reduced with ", ReduceOpName(item.op)));
  }
  if (kind == CollectiveKind::kBroadcast &&
      (item.root < 0 || static_cast<size_t>(item.root) >= n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": root rank ", item.root, " outside [0, ", n, ")"));
  }
  for (size_t i = 0; i < n; ++i) {
    const RankBuffers& rank = item.local[i];
    if (rank.recv == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": recv[", i, "] is null"));
    }
    if (rank.recv->device_id() != item.group[i]) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": recv[", i, "] is on device ",
                                                     rank.recv->device_id(), " but rank ", i,
                                                     " of the group is device ", item.group[i]));
    }
    const bool needs_send = kind != CollectiveKind::kBroadcast || static_cast<int>(i) == item.root;
    if (needs_send && rank.send == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": send[", i, "] is null"));
    }
  }
  const int64_t elem = DTypeSize(item.dtype);
  const int64_t ranks = static_cast<int64_t>(n);
  // Block size B per the table in the header.
  int64_t block = 0;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
      block = item.local[0].send->size();
      break;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      block = item.local[0].recv->size();
      break;
  }
  if (block % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": ", block,
                                                   " bytes is not a multiple of ",
                                                   DTypeName(item.dtype), "'s ", elem, " bytes"));
  }
  const int64_t send_size = kind == CollectiveKind::kReduceScatter ? ranks * block : block;
  const int64_t recv_size = kind == CollectiveKind::kAllGather ? ranks * block : block;
  for (size_t i = 0; i < n; ++i) {
    const RankBuffers& rank = item.local[i];
    if (rank.send != nullptr && rank.send->size() != send_size &&
        (kind != CollectiveKind::kBroadcast || static_cast<int>(i) == item.root)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": send[", i, "] is ", rank.send->size(), " bytes, expected ", send_size));
    }
    if (rank.recv->size() != recv_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": recv[", i, "] is ", rank.recv->size(), " bytes, expected ", recv_size));
    }
  }
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (item.local[i].recv == item.local[j].send) {
          return absl::InvalidArgumentError(absl::StrCat(where(), ": recv[", i, "] is send[", j,
                                                         "]; ", CollectiveKindName(kind),
                                                         " cannot run in place"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Span<const CollectiveItem>> ValidateLocalItems(
    CollectiveKind kind, absl::Span<const CollectiveItem> items,
    std::vector<CollectiveItem>* storage) {
  absl::Span<const CollectiveItem> ordered = items;
  if (!std::all_of(items.begin(), items.end(), InRankOrder)) {
    storage->assign(items.begin(), items.end());
    for (CollectiveItem& item : *storage) {
      std::sort(item.local.begin(), item.local.end(),
                [](const RankBuffers& a, const RankBuffers& b) { return a.rank < b.rank; });
    }
    ordered = *storage;
  }
  for (size_t i = 0; i < ordered.size(); ++i) {
    absl::Status status = ValidateItem(kind, ordered[i], i);
    if (!status.ok()) return status;
  }
  return ordered;
}

}  // namespace placement::server

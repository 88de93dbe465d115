#include "server/collective/collective_engine.h"

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

namespace {

absl::Status ValidateItem(CollectiveKind kind, const CollectiveItem& item,
                          const std::string& where) {
  const size_t n = item.recv.size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": no ranks"));
  if (item.send.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", item.send.size(), " send buffers for ", n, " recv buffers"));
  }
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  if (reduces && item.dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": dtype bool cannot be reduced with ", ReduceOpName(item.op)));
  }
  if (kind == CollectiveKind::kBroadcast &&
      (item.root < 0 || static_cast<size_t>(item.root) >= n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": root rank ", item.root, " outside [0, ", n, ")"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (item.recv[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", i, "] is null"));
    }
    const bool needs_send = kind != CollectiveKind::kBroadcast || static_cast<int>(i) == item.root;
    if (needs_send && item.send[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": send[", i, "] is null"));
    }
  }
  const int64_t elem = DTypeSize(item.dtype);
  const int64_t ranks = static_cast<int64_t>(n);
  // Block size B per the table in the header.
  int64_t block = 0;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
      block = item.send[0]->size();
      break;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      block = item.recv[0]->size();
      break;
  }
  if (block % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", block,
                                                   " bytes is not a multiple of ",
                                                   DTypeName(item.dtype), "'s ", elem, " bytes"));
  }
  const int64_t send_size = kind == CollectiveKind::kReduceScatter ? ranks * block : block;
  const int64_t recv_size = kind == CollectiveKind::kAllGather ? ranks * block : block;
  for (size_t i = 0; i < n; ++i) {
    if (item.send[i] != nullptr && item.send[i]->size() != send_size &&
        (kind != CollectiveKind::kBroadcast || static_cast<int>(i) == item.root)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": send[", i, "] is ", item.send[i]->size(), " bytes, expected ", send_size));
    }
    if (item.recv[i]->size() != recv_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": recv[", i, "] is ", item.recv[i]->size(), " bytes, expected ", recv_size));
    }
  }
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (item.recv[i] == item.send[j]) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", i, "] is send[", j,
                                                         "]; ", CollectiveKindName(kind),
                                                         " cannot run in place"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLocalItems(CollectiveKind kind, absl::Span<const CollectiveItem> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    absl::Status status =
        ValidateItem(kind, items[i], absl::StrCat(CollectiveKindName(kind), " item ", i));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status RunCollective(CollectiveEngine& engine, CollectiveKind kind,
                           absl::Span<const CollectiveItem> items,
                           const CollectiveContext& context) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return engine.AllReduce(items, context);
    case CollectiveKind::kAllGather:
      return engine.AllGather(items, context);
    case CollectiveKind::kReduceScatter:
      return engine.ReduceScatter(items, context);
    case CollectiveKind::kBroadcast:
      return engine.Broadcast(items, context);
  }
  return absl::InvalidArgumentError("unknown collective kind");
}

}  // namespace placement::server

#include "server/collective/cluster/cluster_item.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement::server {
namespace {

bool Reduces(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
}

// Fills processes, position, ranks_by_position and root_position from the
// group; checks that every device has a process and this process holds a
// rank. `process_by_rank` receives each rank's process.
absl::Status PlanProcesses(CollectiveKind kind, const CollectiveItem& item, int32_t process_index,
                           const ProcessOfDevice& process_of, absl::string_view where,
                           ClusterItemPlan& plan, std::vector<int32_t>& process_by_rank) {
  const int64_t n = static_cast<int64_t>(item.group.size());
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": no ranks"));
  process_by_rank.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const int32_t p = process_of(item.group[r]);
    if (p < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", r, " is device ",
                                                     item.group[r], ", which no process owns"));
    }
    process_by_rank[r] = p;
  }
  plan.processes = process_by_rank;
  std::sort(plan.processes.begin(), plan.processes.end());
  plan.processes.erase(std::unique(plan.processes.begin(), plan.processes.end()),
                       plan.processes.end());
  auto mine = std::lower_bound(plan.processes.begin(), plan.processes.end(), process_index);
  if (mine == plan.processes.end() || *mine != process_index) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the group spans processes ", ProcessListKey(plan.processes),
                     " but none of its ranks is on this process (", process_index, ")"));
  }
  plan.position = static_cast<int32_t>(mine - plan.processes.begin());
  plan.ranks_by_position.assign(plan.processes.size(), {});
  for (int64_t r = 0; r < n; ++r) {
    const auto q =
        std::lower_bound(plan.processes.begin(), plan.processes.end(), process_by_rank[r]) -
        plan.processes.begin();
    plan.ranks_by_position[q].push_back(static_cast<int32_t>(r));
  }
  if (kind == CollectiveKind::kBroadcast) {
    if (item.root < 0 || item.root >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": root rank ", item.root, " outside [0, ", n, ")"));
    }
    plan.root_position = static_cast<int32_t>(
        std::lower_bound(plan.processes.begin(), plan.processes.end(), process_by_rank[item.root]) -
        plan.processes.begin());
  }
  return absl::OkStatus();
}

// Fills plan.local (rank order) from item.local: every rank of this process
// exactly once, each recv on its rank's device, sends where needed.
absl::Status PlanContributions(CollectiveKind kind, const CollectiveItem& item,
                               int32_t process_index, absl::string_view where,
                               const std::vector<int32_t>& process_by_rank, ClusterItemPlan& plan) {
  const int64_t n = static_cast<int64_t>(item.group.size());
  std::vector<const RankBuffers*> by_rank(static_cast<size_t>(n), nullptr);
  for (const RankBuffers& r : item.local) {
    if (r.rank < 0 || r.rank >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rank ", r.rank, " outside [0, ", n, ")"));
    }
    if (by_rank[r.rank] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", r.rank, " listed twice"));
    }
    if (process_by_rank[r.rank] != process_index) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rank ", r.rank, " is device ", item.group[r.rank], " on process ",
                       process_by_rank[r.rank], ", not on this process (", process_index, ")"));
    }
    by_rank[r.rank] = &r;
  }
  for (int32_t rank : plan.ranks_by_position[plan.position]) {
    const RankBuffers* r = by_rank[rank];
    if (r == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", rank, " is device ",
                                                     item.group[rank],
                                                     " on this process but has no contribution"));
    }
    if (r->recv == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", rank, "] is null"));
    }
    if (r->recv->device_id() != item.group[rank]) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", rank, "] is on device ",
                                                     r->recv->device_id(), " but rank ", rank,
                                                     " of the group is device ", item.group[rank]));
    }
    const bool needs_send = kind != CollectiveKind::kBroadcast || rank == item.root;
    if (needs_send && r->send == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": send[", rank, "] is null"));
    }
    plan.local.push_back(*r);
  }
  return absl::OkStatus();
}

// Checks every contribution against the size table; sets plan.block.
absl::Status CheckSizes(CollectiveKind kind, const CollectiveItem& item, absl::string_view where,
                        ClusterItemPlan& plan) {
  const RankBuffers& first = plan.local.front();
  const bool block_from_send =
      kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather;
  plan.block = block_from_send ? first.send->size() : first.recv->size();
  const int64_t elem = DTypeSize(item.dtype);
  if (plan.block % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", plan.block,
                                                   " bytes is not a multiple of ",
                                                   DTypeName(item.dtype), "'s ", elem, " bytes"));
  }
  const int64_t send_size =
      kind == CollectiveKind::kReduceScatter ? plan.ranks * plan.block : plan.block;
  const int64_t recv_size =
      kind == CollectiveKind::kAllGather ? plan.ranks * plan.block : plan.block;
  for (const RankBuffers& r : plan.local) {
    const bool needs_send = kind != CollectiveKind::kBroadcast || r.rank == item.root;
    if (needs_send && r.send->size() != send_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": send[", r.rank, "] is ", r.send->size(), " bytes, expected ", send_size));
    }
    if (r.recv->size() != recv_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": recv[", r.rank, "] is ", r.recv->size(), " bytes, expected ", recv_size));
    }
  }
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
    for (const RankBuffers& a : plan.local) {
      for (const RankBuffers& b : plan.local) {
        if (a.recv == b.send) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", a.rank, "] is send[",
                                                         b.rank, "]; ", CollectiveKindName(kind),
                                                         " cannot run in place"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterItemPlan> PlanClusterItem(CollectiveKind kind, const CollectiveItem& item,
                                                int32_t process_index,
                                                const ProcessOfDevice& process_of,
                                                absl::string_view where) {
  ClusterItemPlan plan;
  plan.ranks = static_cast<int64_t>(item.group.size());
  std::vector<int32_t> process_by_rank;
  absl::Status s =
      PlanProcesses(kind, item, process_index, process_of, where, plan, process_by_rank);
  if (!s.ok()) return s;
  if (Reduces(kind) && item.dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": dtype bool cannot be reduced with ", ReduceOpName(item.op)));
  }
  s = PlanContributions(kind, item, process_index, where, process_by_rank, plan);
  if (!s.ok()) return s;
  s = CheckSizes(kind, item, where, plan);
  if (!s.ok()) return s;
  return plan;
}

std::string ProcessListKey(absl::Span<const int32_t> processes) {
  return absl::StrJoin(processes, ",");
}

}  // namespace placement::server

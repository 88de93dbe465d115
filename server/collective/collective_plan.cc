#include "server/collective/collective_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

std::string AxesString(const std::vector<std::string>& axes) {
  return absl::StrCat("(",
                      absl::StrJoin(axes, ", ",
                                    [](std::string* out, const std::string& a) {
                                      absl::StrAppend(out, "'", a, "'");
                                    }),
                      ")");
}

std::string Describe(const TensorLayout& in) {
  return absl::StrCat(TypedShapeToString(in.dtype, in.shape), " with ", in.sharding.ToString());
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool SameSet(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return std::set<std::string>(a.begin(), a.end()) == std::set<std::string>(b.begin(), b.end());
}

// The tensor dimension `axis` shards, or -1.
int ShardedDim(const NamedSharding& s, const std::string& axis) {
  const auto& dims = s.spec().dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (Contains(dims[d], axis)) return static_cast<int>(d);
  }
  return -1;
}

bool IsPartial(const NamedSharding& s, const std::string& axis) {
  return Contains(s.partial_axes(), axis);
}

// "'x' is a partial axis" / "'x' shards dimension 1" / "the tensor is
// replicated over 'x'".
std::string UseOf(const NamedSharding& s, const std::string& axis) {
  if (IsPartial(s, axis)) return absl::StrCat("'", axis, "' is a partial axis");
  const int d = ShardedDim(s, axis);
  if (d >= 0) return absl::StrCat("'", axis, "' shards dimension ", d);
  return absl::StrCat("the tensor is replicated over '", axis, "'");
}

// `requested`, or `fallback` when empty; INVALID_ARGUMENT for axes the mesh
// lacks and repeated axes.
absl::StatusOr<std::vector<std::string>> ResolveAxes(const TensorLayout& in,
                                                     const std::vector<std::string>& requested,
                                                     const std::vector<std::string>& fallback,
                                                     CollectiveKind kind) {
  const Mesh& mesh = in.sharding.mesh();
  std::vector<std::string> axes = requested.empty() ? fallback : requested;
  std::set<std::string> seen;
  for (const std::string& axis : axes) {
    if (mesh.AxisIndex(axis) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          CollectiveKindName(kind), ": axis '", axis, "' is not an axis of the tensor's mesh ",
          mesh.ToString(), "; its axes are ", AxesString(mesh.AxisNames())));
    }
    if (!seen.insert(axis).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(CollectiveKindName(kind), ": axis '", axis, "' is listed twice"));
    }
  }
  return axes;
}

int64_t NormalizeDim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
}

absl::StatusOr<int> CheckDim(const TensorLayout& in, int64_t dim, CollectiveKind kind,
                             absl::string_view field) {
  const int64_t d = NormalizeDim(dim, in.shape.size());
  if (d < 0 || d >= static_cast<int64_t>(in.shape.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(CollectiveKindName(kind), ": ", field, " ", dim, " is out of range for ",
                     TypedShapeToString(in.dtype, in.shape), " (rank ", in.shape.size(), ")"));
  }
  return static_cast<int>(d);
}

PartitionSpec TrimSpec(PartitionSpec spec) {
  while (!spec.dims.empty() && spec.dims.back().empty()) spec.dims.pop_back();
  return spec;
}

std::vector<std::string> Without(const std::vector<std::string>& v,
                                 const std::vector<std::string>& remove) {
  std::vector<std::string> out;
  for (const std::string& x : v) {
    if (!Contains(remove, x)) out.push_back(x);
  }
  return out;
}

// Shared by AllReduce and Broadcast: axes that are partial (dropped from the
// partial axes), the complete set of dimension-0 axes (block semantics),
// and -- for Broadcast only -- replicated axes.
absl::Status PlanReplicatingResult(const TensorLayout& in, const std::vector<std::string>& axes,
                                   bool allow_replicated, CollectivePlan* plan) {
  const NamedSharding& s = in.sharding;
  const std::vector<std::string> dim0_axes =
      s.spec().dims.empty() ? std::vector<std::string>{} : s.spec().dims[0];
  std::vector<std::string> named_dim0;
  const char* needs = allow_replicated
                          ? "broadcast needs partial or replicated axes, or all the axes sharding "
                            "dimension 0"
                          : "all_reduce needs partial axes or the axes sharding dimension 0";
  for (const std::string& axis : axes) {
    if (IsPartial(s, axis)) continue;
    const int d = ShardedDim(s, axis);
    if (d == 0) {
      named_dim0.push_back(axis);
    } else if (d > 0 || !allow_replicated) {
      return absl::FailedPreconditionError(absl::StrCat(CollectiveKindName(plan->kind), " over ",
                                                        AxesString(axes), " of ", Describe(in),
                                                        ": ", UseOf(s, axis), "; ", needs));
    }
  }
  plan->result_shape = in.shape;
  PartitionSpec spec = s.spec();
  if (!named_dim0.empty()) {
    if (!SameSet(named_dim0, dim0_axes)) {
      return absl::FailedPreconditionError(
          absl::StrCat(CollectiveKindName(plan->kind), " of ", Describe(in),
                       ": dimension 0 is sharded over ", AxesString(dim0_axes),
                       "; name all of them to combine its blocks, got ", AxesString(named_dim0)));
    }
    const int64_t n = s.NumShardsAlong(0);
    if (in.shape[0] % n != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(CollectiveKindName(plan->kind), " of ", Describe(in), ": dimension 0 (",
                       in.shape[0], ") is not divisible by its ", n,
                       " shards; uneven (padded) blocks cannot be combined "
                       "element-wise"));
    }
    plan->result_shape[0] = in.shape[0] / n;
    spec.dims[0].clear();
  }
  ASSIGN_OR_RETURN(plan->result_sharding,
                   NamedSharding::Create(s.mesh(), TrimSpec(std::move(spec)),
                                         Without(s.partial_axes(), axes), s.mode()));
  RETURN_IF_ERROR(plan->result_sharding.ValidateFor(plan->result_shape));
  ASSIGN_OR_RETURN(plan->result_domains, plan->result_sharding.IndexDomains(plan->result_shape));
  plan->axes = axes;
  ASSIGN_OR_RETURN(plan->groups, s.mesh().AxisGroups(axes));
  return absl::OkStatus();
}

// Product of the extents of dimensions [0, dim) of `box`.
int64_t OuterExtent(const Box& box, int dim) {
  int64_t outer = 1;
  for (int d = 0; d < dim; ++d) outer *= box[d].size();
  return outer;
}

// Checks that, in every group, the ranks' `blocked` boxes are consecutive
// equal blocks along `dim` (rank order) and identical elsewhere, and that
// every `whole` box is their union -- the layout AllGather and
// ReduceScatter move bytes for. FAILED_PRECONDITION otherwise (only padded
// shardings can break it).
absl::Status CheckBlocks(const CollectivePlan& plan, const std::vector<ShardDomain>& blocked,
                         const std::vector<ShardDomain>& whole, const TensorLayout& in) {
  for (const std::vector<int64_t>& group : plan.groups) {
    const Box& first = blocked[group[0]].box;
    const int64_t block = first[plan.dim].size();
    Box united = first;
    united[plan.dim].end = first[plan.dim].begin + block * static_cast<int64_t>(group.size());
    for (size_t r = 0; r < group.size(); ++r) {
      Box expected = first;
      expected[plan.dim].begin = first[plan.dim].begin + block * static_cast<int64_t>(r);
      expected[plan.dim].end = expected[plan.dim].begin + block;
      if (blocked[group[r]].box != expected || whole[group[r]].box != united) {
        return absl::FailedPreconditionError(absl::StrCat(
            CollectiveKindName(plan.kind), " over ", AxesString(plan.axes), " of ", Describe(in),
            ": device ", blocked[group[r]].device_id, " holds ", BoxToString(blocked[group[r]].box),
            ", not an equal block of ", BoxToString(united),
            "; uneven (padded) shards cannot be gathered or scattered"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CollectivePlan> PlanAllReduce(const TensorLayout& in,
                                             const std::vector<std::string>& axes) {
  CollectivePlan plan;
  plan.kind = CollectiveKind::kAllReduce;
  ASSIGN_OR_RETURN(std::vector<std::string> resolved,
                   ResolveAxes(in, axes, in.sharding.mesh().AxisNames(), plan.kind));
  RETURN_IF_ERROR(PlanReplicatingResult(in, resolved, /*allow_replicated=*/false, &plan));
  return plan;
}

absl::StatusOr<CollectivePlan> PlanBroadcast(const TensorLayout& in,
                                             const std::vector<std::string>& axes,
                                             int64_t root_position) {
  CollectivePlan plan;
  plan.kind = CollectiveKind::kBroadcast;
  ASSIGN_OR_RETURN(std::vector<std::string> resolved,
                   ResolveAxes(in, axes, in.sharding.mesh().AxisNames(), plan.kind));
  RETURN_IF_ERROR(PlanReplicatingResult(in, resolved, /*allow_replicated=*/true, &plan));
  for (const std::vector<int64_t>& group : plan.groups) {
    auto it = std::find(group.begin(), group.end(), root_position);
    if (it != group.end()) plan.root_rank = static_cast<int>(it - group.begin());
  }
  return plan;
}

absl::StatusOr<CollectivePlan> PlanAllGather(const TensorLayout& in,
                                             const std::vector<std::string>& axes, int64_t dim) {
  CollectivePlan plan;
  plan.kind = CollectiveKind::kAllGather;
  ASSIGN_OR_RETURN(plan.dim, CheckDim(in, dim, plan.kind, "dim"));
  const NamedSharding& s = in.sharding;
  const std::vector<std::string> dim_axes = static_cast<int>(s.spec().dims.size()) > plan.dim
                                                ? s.spec().dims[plan.dim]
                                                : std::vector<std::string>{};
  if (axes.empty() && dim_axes.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("all_gather of ", Describe(in), ": dimension ", plan.dim,
                     " is not sharded; there is nothing to gather"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> resolved, ResolveAxes(in, axes, dim_axes, plan.kind));
  for (const std::string& axis : resolved) {
    if (!Contains(dim_axes, axis)) {
      return absl::FailedPreconditionError(
          absl::StrCat("all_gather along dimension ", plan.dim, " of ", Describe(in), ": ",
                       UseOf(s, axis), "; all_gather needs axes that shard dimension ", plan.dim));
    }
  }
  const size_t k = resolved.size();
  const std::vector<std::string> suffix(dim_axes.end() - static_cast<std::ptrdiff_t>(k),
                                        dim_axes.end());
  if (!SameSet(resolved, suffix)) {
    return absl::FailedPreconditionError(
        absl::StrCat("all_gather of ", Describe(in), ": dimension ", plan.dim, " is sharded over ",
                     AxesString(dim_axes),
                     " (first listed most significant); only its minor-most axes can be "
                     "gathered (here ",
                     AxesString(suffix), "), got ", AxesString(resolved)));
  }
  PartitionSpec spec = s.spec();
  spec.dims[plan.dim].resize(dim_axes.size() - k);
  ASSIGN_OR_RETURN(plan.result_sharding, NamedSharding::Create(s.mesh(), TrimSpec(std::move(spec)),
                                                               s.partial_axes(), s.mode()));
  plan.result_shape = in.shape;
  RETURN_IF_ERROR(plan.result_sharding.ValidateFor(plan.result_shape));
  plan.axes = suffix;
  ASSIGN_OR_RETURN(plan.groups, s.mesh().AxisGroups(suffix));
  ASSIGN_OR_RETURN(std::vector<ShardDomain> in_domains, s.IndexDomains(in.shape));
  ASSIGN_OR_RETURN(plan.result_domains, plan.result_sharding.IndexDomains(plan.result_shape));
  RETURN_IF_ERROR(CheckBlocks(plan, in_domains, plan.result_domains, in));
  plan.contiguous = OuterExtent(in_domains[0].box, plan.dim) == 1;
  return plan;
}

absl::StatusOr<CollectivePlan> PlanReduceScatter(const TensorLayout& in,
                                                 const std::vector<std::string>& axes,
                                                 int64_t scatter_dim) {
  CollectivePlan plan;
  plan.kind = CollectiveKind::kReduceScatter;
  ASSIGN_OR_RETURN(plan.dim, CheckDim(in, scatter_dim, plan.kind, "scatter_dim"));
  const NamedSharding& s = in.sharding;
  if (axes.empty() && s.partial_axes().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "reduce_scatter of ", Describe(in), ": the tensor has no partial axes to reduce"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> resolved,
                   ResolveAxes(in, axes, s.partial_axes(), plan.kind));
  int64_t n = 1;
  for (const std::string& axis : resolved) {
    if (!IsPartial(s, axis)) {
      return absl::FailedPreconditionError(
          absl::StrCat("reduce_scatter over ", AxesString(resolved), " of ", Describe(in), ": ",
                       UseOf(s, axis), "; reduce_scatter needs partial axes"));
    }
    n *= s.mesh().AxisSizes()[s.mesh().AxisIndex(axis)];
  }
  ASSIGN_OR_RETURN(std::vector<ShardDomain> in_domains, s.IndexDomains(in.shape));
  const int64_t extent = in_domains[0].box[plan.dim].size();
  if (extent % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduce_scatter of ", Describe(in),
                                                   ": scatter_dim ", plan.dim, " holds ", extent,
                                                   " elements per shard, not divisible by the ", n,
                                                   " devices of axes ", AxesString(resolved)));
  }
  PartitionSpec spec = s.spec();
  if (static_cast<int>(spec.dims.size()) <= plan.dim) spec.dims.resize(plan.dim + 1);
  for (const std::string& axis : resolved) spec.dims[plan.dim].push_back(axis);
  ASSIGN_OR_RETURN(plan.result_sharding,
                   NamedSharding::Create(s.mesh(), TrimSpec(std::move(spec)),
                                         Without(s.partial_axes(), resolved), s.mode()));
  plan.result_shape = in.shape;
  RETURN_IF_ERROR(plan.result_sharding.ValidateFor(plan.result_shape));
  plan.axes = resolved;
  ASSIGN_OR_RETURN(plan.groups, s.mesh().AxisGroups(resolved));
  ASSIGN_OR_RETURN(plan.result_domains, plan.result_sharding.IndexDomains(plan.result_shape));
  RETURN_IF_ERROR(CheckBlocks(plan, plan.result_domains, in_domains, in));
  plan.contiguous = OuterExtent(in_domains[0].box, plan.dim) == 1;
  return plan;
}

}  // namespace placement::server

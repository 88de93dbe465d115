#include "common/process_local.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace placement {
namespace {

// Marks the non-uniform error (JAX's NonUniformShardingError).
constexpr absl::string_view kNonUniformPayload = "type.googleapis.com/placement.NonUniformSharding";

using Slice = std::pair<int64_t, int64_t>;  // (begin, end) along one dimension

// The process of every mesh device, checked once per call.
struct Membership {
  std::vector<int32_t> process_at;  // per mesh position
  int64_t num_local = 0;            // devices on the calling process
};

absl::StatusOr<Membership> CheckMembership(const NamedSharding& sharding,
                                           ProcessOfDevice process_of, int32_t process) {
  if (process < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("process index ", process, " is negative; processes are numbered from 0"));
  }
  if (sharding.NumPartials() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        sharding.ToString(), " has partial axes; process-local data cannot describe partial sums"));
  }
  Membership membership;
  const std::vector<int64_t>& ids = sharding.mesh().device_ids();
  membership.process_at.reserve(ids.size());
  for (int64_t id : ids) {
    const int32_t owner = process_of(id);
    if (owner < 0) {
      return absl::InvalidArgumentError(absl::StrCat("device ", id, " of ", sharding.ToString(),
                                                     " is on process ", owner,
                                                     "; processes are numbered from 0"));
    }
    membership.process_at.push_back(owner);
    if (owner == process) ++membership.num_local;
  }
  return membership;
}

absl::Status NoLocalDevices(const NamedSharding& sharding, int32_t process) {
  return absl::FailedPreconditionError(
      absl::StrCat("process ", process, " holds no device of ", sharding.ToString(), " over ",
                   sharding.mesh().DebugString(), ", so it has no process-local data to place"));
}

absl::Status NonUniformError(const NamedSharding& sharding, int dim, bool counts_differ) {
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat(sharding.ToString(), " is non-uniform on dim=", dim,
                   counts_differ ? " as some processes have different number of slices." : ""));
  status.SetPayload(kNonUniformPayload, absl::Cord());
  return status;
}

// JAX has one sharding mode (even); a padded sharding is read as the even one.
absl::StatusOr<std::vector<ShardDomain>> EvenDomains(const NamedSharding& sharding,
                                                     absl::Span<const int64_t> shape) {
  if (sharding.mode() == ShardingMode::kEven) return sharding.IndexDomains(shape);
  ASSIGN_OR_RETURN(NamedSharding even,
                   NamedSharding::Create(sharding.mesh(), sharding.spec(), sharding.partial_axes(),
                                         ShardingMode::kEven));
  absl::StatusOr<std::vector<ShardDomain>> domains = even.IndexDomains(shape);
  if (!domains.ok()) {
    return absl::Status(domains.status().code(),
                        absl::StrCat("process-local data needs even shards (JAX's rule): ",
                                     domains.status().message()));
  }
  return domains;
}

absl::Status CheckDim(int dim, int64_t rank) {
  if (dim < 0 || dim >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension ", dim, " is outside a rank-", rank, " array"));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(absl::Span<const int64_t> shape, absl::string_view name) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", d, "] is ", shape[d], "; dimensions must be >= 0"));
    }
  }
  return absl::OkStatus();
}

// Python's repr of a tuple of ints and Nones: "()", "(8,)", "(None, 4)".
std::string PythonTuple(const PartialShape& shape) {
  std::string out = absl::StrCat(
      "(", absl::StrJoin(shape, ", ", [](std::string* s, const std::optional<int64_t>& d) {
        absl::StrAppend(s, d.has_value() ? absl::StrCat(*d) : "None");
      }));
  if (shape.size() == 1) out.push_back(',');
  out.push_back(')');
  return out;
}

std::string PythonTuple(absl::Span<const int64_t> shape) {
  return PythonTuple(PartialShape(shape.begin(), shape.end()));
}

// The global shape, or JAX's error when a dimension is unknown.
absl::StatusOr<Shape> RequireKnown(const PartialShape& partial) {
  Shape global;
  global.reserve(partial.size());
  for (const std::optional<int64_t>& d : partial) {
    if (!d.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Unable to compute global_shape due to non-uniform sharding. Specify "
                       "global shape directly. Partially computed global_shape=",
                       PythonTuple(partial), "."));
    }
    global.push_back(*d);
  }
  return global;
}

// get_process_index_and_count with the membership checked; `universal`
// caches the index map over (num_devices,) * rank across dimensions.
absl::StatusOr<ProcessIndexCount> IndexAndCount(
    const NamedSharding& sharding, const Membership& membership, int32_t process, int dim, int rank,
    std::optional<std::vector<ShardDomain>>& universal) {
  const int64_t num_devices = sharding.mesh().num_devices();
  const bool fully_addressable = membership.num_local > 0 && membership.num_local == num_devices;
  if (fully_addressable || sharding.IsFullyReplicated()) return ProcessIndexCount{0, 1};
  if (!universal.has_value()) {
    ASSIGN_OR_RETURN(universal, EvenDomains(sharding, Shape(rank, num_devices)));
  }
  if (membership.num_local == 0) return NoLocalDevices(sharding, process);

  std::map<int32_t, std::set<Slice>> slices_of_process;
  std::set<Slice> all_slices;
  for (const ShardDomain& domain : *universal) {
    const Slice slice{domain.box[dim].begin, domain.box[dim].end};
    slices_of_process[membership.process_at[domain.mesh_position]].insert(slice);
    all_slices.insert(slice);
  }
  const std::set<Slice>& mine = slices_of_process[process];
  std::set<std::set<Slice>> distinct;
  for (const auto& [owner, slices] : slices_of_process) {
    if (slices.size() != mine.size()) return NonUniformError(sharding, dim, true);
    distinct.insert(slices);
  }
  size_t covered = 0;
  for (const std::set<Slice>& slices : distinct) covered += slices.size();
  if (covered != all_slices.size()) return NonUniformError(sharding, dim, false);
  // The distinct sets are now disjoint, so set order (by first, i.e. smallest,
  // slice) is the order of their smallest starts.
  const auto it = distinct.find(mine);
  return ProcessIndexCount{static_cast<int64_t>(std::distance(distinct.begin(), it)),
                           static_cast<int64_t>(distinct.size())};
}

absl::StatusOr<PartialShape> LocalToGlobal(const NamedSharding& sharding,
                                           const Membership& membership,
                                           absl::Span<const int64_t> local_shape, int32_t process) {
  RETURN_IF_ERROR(CheckNonNegative(local_shape, "local_shape"));
  const int rank = static_cast<int>(local_shape.size());
  std::optional<std::vector<ShardDomain>> universal;
  PartialShape global(rank);
  for (int d = 0; d < rank; ++d) {
    absl::StatusOr<ProcessIndexCount> ic =
        IndexAndCount(sharding, membership, process, d, rank, universal);
    if (IsNonUniformShardingError(ic.status())) continue;
    if (!ic.ok()) return ic.status();
    if (local_shape[d] > std::numeric_limits<int64_t>::max() / ic->count) {
      return absl::InvalidArgumentError(absl::StrCat("global dimension ", d, " (", local_shape[d],
                                                     " x ", ic->count, ") overflows int64"));
    }
    global[d] = local_shape[d] * ic->count;
  }
  return global;
}

// Distinct (begin, end) along `dim` among the domains on `process`.
std::set<Slice> LocalSlices(const std::vector<ShardDomain>& domains, const Membership& membership,
                            int32_t process, int dim) {
  std::set<Slice> slices;
  for (const ShardDomain& domain : domains) {
    if (membership.process_at[domain.mesh_position] != process) continue;
    slices.insert({domain.box[dim].begin, domain.box[dim].end});
  }
  return slices;
}

// num_addressable_indices with the domains of the global shape computed:
// shard extent (the sharding's shard_shape) x distinct local slices.
int64_t AddressableIndices(const NamedSharding& sharding, const std::vector<ShardDomain>& domains,
                           const Membership& membership, int32_t process, int dim,
                           absl::Span<const int64_t> global_shape) {
  const int64_t extent = global_shape[dim] / sharding.NumShardsAlong(dim);
  return extent * static_cast<int64_t>(LocalSlices(domains, membership, process, dim).size());
}

}  // namespace

bool IsNonUniformShardingError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kNonUniformPayload).has_value();
}

absl::StatusOr<ProcessIndexCount> ProcessIndexAndCount(const NamedSharding& sharding, int dim,
                                                       int rank, ProcessOfDevice process_of,
                                                       int32_t process) {
  RETURN_IF_ERROR(CheckDim(dim, rank));
  ASSIGN_OR_RETURN(Membership membership, CheckMembership(sharding, process_of, process));
  std::optional<std::vector<ShardDomain>> universal;
  return IndexAndCount(sharding, membership, process, dim, rank, universal);
}

absl::StatusOr<PartialShape> LocalToGlobalShape(const NamedSharding& sharding,
                                                absl::Span<const int64_t> local_shape,
                                                ProcessOfDevice process_of, int32_t process) {
  ASSIGN_OR_RETURN(Membership membership, CheckMembership(sharding, process_of, process));
  return LocalToGlobal(sharding, membership, local_shape, process);
}

absl::StatusOr<Shape> InferGlobalShape(const NamedSharding& sharding,
                                       absl::Span<const int64_t> local_shape,
                                       ProcessOfDevice process_of, int32_t process) {
  ASSIGN_OR_RETURN(PartialShape partial,
                   LocalToGlobalShape(sharding, local_shape, process_of, process));
  return RequireKnown(partial);
}

absl::StatusOr<int64_t> NumAddressableIndices(const NamedSharding& sharding, int dim,
                                              absl::Span<const int64_t> global_shape,
                                              ProcessOfDevice process_of, int32_t process) {
  RETURN_IF_ERROR(CheckDim(dim, static_cast<int64_t>(global_shape.size())));
  ASSIGN_OR_RETURN(Membership membership, CheckMembership(sharding, process_of, process));
  ASSIGN_OR_RETURN(std::vector<ShardDomain> domains, EvenDomains(sharding, global_shape));
  return AddressableIndices(sharding, domains, membership, process, dim, global_shape);
}

absl::StatusOr<LocalDataLayout> ProcessLocalLayout(
    const NamedSharding& sharding, std::optional<absl::Span<const int64_t>> global_shape,
    absl::Span<const int64_t> local_shape, ProcessOfDevice process_of, int32_t process) {
  ASSIGN_OR_RETURN(Membership membership, CheckMembership(sharding, process_of, process));
  RETURN_IF_ERROR(CheckNonNegative(local_shape, "local_shape"));
  LocalDataLayout layout;
  layout.local_shape.assign(local_shape.begin(), local_shape.end());
  if (global_shape.has_value()) {
    if (global_shape->size() != local_shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global_shape ", ShapeToString(*global_shape), " has rank ", global_shape->size(),
          " but the process-local data's shape ", ShapeToString(local_shape), " has rank ",
          local_shape.size(), "; they must have the same rank"));
    }
    layout.global_shape.assign(global_shape->begin(), global_shape->end());
  } else {
    ASSIGN_OR_RETURN(PartialShape partial,
                     LocalToGlobal(sharding, membership, local_shape, process));
    ASSIGN_OR_RETURN(layout.global_shape, RequireKnown(partial));
  }
  const Shape& global = layout.global_shape;
  // JAX validates the global shape against the sharding before it compares
  // any dimension (num_addressable_indices or the final index map does).
  ASSIGN_OR_RETURN(std::vector<ShardDomain> domains, EvenDomains(sharding, global));
  const int rank = static_cast<int>(global.size());
  std::vector<bool> full_dim(rank);
  for (int d = 0; d < rank; ++d) {
    full_dim[d] = local_shape[d] == global[d];
    if (full_dim[d]) continue;
    const int64_t addressable =
        AddressableIndices(sharding, domains, membership, process, d, global);
    if (addressable != local_shape[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid host data, each dimension should match either global or process shape. In "
          "dimension ",
          d, ", the process data has ", local_shape[d], " elements. Process addresses ",
          addressable, " elements and global_shape=", PythonTuple(global), "."));
    }
  }
  if (membership.num_local == 0) return NoLocalDevices(sharding, process);

  // JAX's local_slice: along a dimension the process holds part of, a shard
  // sits at (rank of its start among this process's distinct starts) x extent.
  std::vector<std::vector<int64_t>> starts(rank);
  for (int d = 0; d < rank; ++d) {
    for (const Slice& slice : LocalSlices(domains, membership, process, d)) {
      starts[d].push_back(slice.first);
    }
    starts[d].erase(std::unique(starts[d].begin(), starts[d].end()), starts[d].end());
  }
  for (const ShardDomain& domain : domains) {
    if (membership.process_at[domain.mesh_position] != process) continue;
    ProcessLocalShard& shard = layout.shards.emplace_back();
    shard.device_id = domain.device_id;
    shard.mesh_position = domain.mesh_position;
    shard.global_box = domain.box;
    shard.local_box = domain.box;
    for (int d = 0; d < rank; ++d) {
      if (full_dim[d]) continue;
      const auto at = std::lower_bound(starts[d].begin(), starts[d].end(), domain.box[d].begin);
      const int64_t begin = (at - starts[d].begin()) * domain.shard_shape[d];
      shard.local_box[d] = {begin, begin + domain.shard_shape[d]};
    }
  }
  return layout;
}

absl::StatusOr<Shape> LoadaxGlobalShape(ProcessDataPartition partition,
                                        absl::Span<const int64_t> local_shape,
                                        int64_t num_processes, int64_t local_device_count) {
  if (partition != ProcessDataPartition::kFull && partition != ProcessDataPartition::kReplicated) {
    return absl::InvalidArgumentError(
        absl::StrCat("Unsupported partition: ", static_cast<int>(partition)));
  }
  if (num_processes < 1 || local_device_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_processes (", num_processes,
                                                   ") and local_device_count (", local_device_count,
                                                   ") must be >= 1"));
  }
  RETURN_IF_ERROR(CheckNonNegative(local_shape, "local_shape"));
  Shape global(local_shape.begin(), local_shape.end());
  if (partition == ProcessDataPartition::kReplicated) return global;
  if (local_shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "([]) cannot be sharded across ", local_device_count,
        " devices: FULL splits dimension 0 and a rank-0 array has none; use REPLICATED"));
  }
  if (local_shape[0] % local_device_count != 0) {
    return absl::InvalidArgumentError(absl::StrCat("(", ShapeToString(local_shape),
                                                   ") cannot be sharded across ",
                                                   local_device_count, " devices."));
  }
  if (local_shape[0] > std::numeric_limits<int64_t>::max() / num_processes) {
    return absl::InvalidArgumentError(absl::StrCat("global dimension 0 (", local_shape[0], " x ",
                                                   num_processes, ") overflows int64"));
  }
  global[0] = local_shape[0] * num_processes;
  return global;
}

}  // namespace placement

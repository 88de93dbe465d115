#include "server/tensor/assembler.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

std::string DeviceList(const std::vector<ShardDomain>& domains) {
  return absl::StrCat("[",
                      absl::StrJoin(domains, ", ",
                                    [](std::string* out, const ShardDomain& d) {
                                      absl::StrAppend(out, d.device_id);
                                    }),
                      "]");
}

// Checks the pieces against the target and returns, per target shard (mesh
// order), the index of its piece in `pieces`.
absl::StatusOr<std::vector<size_t>> MatchPieces(
    const std::vector<std::shared_ptr<const Tensor>>& pieces, const NamedSharding& sharding,
    const Shape& global_shape, const std::vector<ShardDomain>& domains) {
  const Tensor& first = *pieces.front();
  absl::flat_hash_map<int64_t, size_t> by_device;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Tensor& piece = *pieces[i];
    if (piece.shards.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", piece.id, "' is not a single-device tensor: it has ", piece.shards.size(),
          " shards; Assemble takes one single-device tensor per device (Disassemble it first)"));
    }
    if (piece.dtype != first.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", piece.id, "' has dtype ", DTypeName(piece.dtype), ", but tensor '", first.id,
          "' has ", DTypeName(first.dtype), "; all pieces must have one dtype"));
    }
    const int64_t device = piece.shards.front().domain.device_id;
    auto [it, inserted] = by_device.emplace(device, i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensors '", pieces[it->second]->id, "' and '", piece.id, "' are both on device ", device,
          "; Assemble needs exactly one tensor per device"));
    }
  }
  std::vector<size_t> match;
  match.reserve(domains.size());
  for (const ShardDomain& domain : domains) {
    auto it = by_device.find(domain.device_id);
    if (it == by_device.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no tensor on device ", domain.device_id, "; ", sharding.ToString(),
                       " over shape ", ShapeToString(global_shape),
                       " needs exactly one single-device tensor on each of devices ",
                       DeviceList(domains), ", got ", pieces.size()));
    }
    const Tensor& piece = *pieces[it->second];
    if (piece.shape != domain.shard_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", piece.id, "' on device ", domain.device_id, " has shape ",
                       ShapeToString(piece.shape), ", but ", sharding.ToString(), " over shape ",
                       ShapeToString(global_shape), " expects shard shape ",
                       ShapeToString(domain.shard_shape), " on device ", domain.device_id));
    }
    match.push_back(it->second);
    by_device.erase(it);
  }
  if (!by_device.empty()) {
    const Tensor& extra = *pieces[by_device.begin()->second];
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", extra.id, "' is on device ", by_device.begin()->first,
                     ", which is not a device of ", sharding.ToString(), " (devices ",
                     DeviceList(domains), ")"));
  }
  return match;
}

std::string PieceName(const std::string& name, size_t index) {
  return name.empty() ? std::string() : absl::StrCat(name, "/shard-", index);
}

// What AssembleTensor checked: the pieces, the target's shard domains and,
// per domain, the index of its piece.
struct CheckedAssembly {
  std::vector<std::shared_ptr<const Tensor>> pieces;
  std::vector<ShardDomain> domains;
  std::vector<size_t> match;
};

absl::StatusOr<CheckedAssembly> CheckPieces(const TensorStore& store, const Shape& global_shape,
                                            const ResolvedSharding& target,
                                            const std::vector<std::string>& piece_ids,
                                            SourceHandling source) {
  if (piece_ids.empty()) {
    return absl::InvalidArgumentError("tensor_ids is empty; Assemble needs one tensor per device");
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& id : piece_ids) {
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor_ids lists '", id, "' twice"));
    }
  }
  CheckedAssembly out;
  ASSIGN_OR_RETURN(out.pieces, store.GetMany(piece_ids));
  const Tensor& first = *out.pieces.front();
  RETURN_IF_ERROR(ValidateShape(global_shape, first.dtype));
  ASSIGN_OR_RETURN(out.domains, target.sharding.IndexDomains(global_shape));
  ASSIGN_OR_RETURN(out.match, MatchPieces(out.pieces, target.sharding, global_shape, out.domains));
  if (source == SourceHandling::kDonate) {
    // Donated pieces become the shards as they are. Their memory stays its
    // tenant's (DeviceBuffer::owner), so it must be the result's.
    for (const auto& piece : out.pieces) {
      if (piece->owner.tenant != first.owner.tenant) {
        return absl::FailedPreconditionError(absl::StrCat(
            "tensor '", piece->id, "' belongs to tenant '", piece->owner.tenant, "' and tensor '",
            first.id, "' to tenant '", first.owner.tenant,
            "': donated pieces must be one tenant's (its memory stays that tenant's); keep the "
            "sources to copy them"));
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Tensor>> CheckAssemble(
    const TensorStore& store, const Shape& global_shape, const ResolvedSharding& target,
    const std::vector<std::string>& piece_ids, SourceHandling source) {
  ASSIGN_OR_RETURN(CheckedAssembly checked,
                   CheckPieces(store, global_shape, target, piece_ids, source));
  return std::move(checked.pieces.front());
}

absl::StatusOr<std::unique_ptr<Tensor>> AssembleTensor(TensorStore* store, Shape global_shape,
                                                       const ResolvedSharding& target,
                                                       const std::vector<std::string>& piece_ids,
                                                       SourceHandling source, std::string name) {
  ASSIGN_OR_RETURN(CheckedAssembly checked,
                   CheckPieces(*store, global_shape, target, piece_ids, source));
  auto& [pieces, domains, match] = checked;
  const DType dtype = pieces.front()->dtype;
  const TensorOwner owner = pieces.front()->owner;

  if (source == SourceHandling::kKeep) {
    // This branch returns: the domains go to the result as they are.
    ASSIGN_OR_RETURN(
        std::unique_ptr<Tensor> out,
        store->AllocateOver(dtype, std::move(global_shape), target.sharding, std::move(domains),
                            target.mesh_id, std::move(name), owner));
    out->partial_op = target.partial_op;
    for (size_t i = 0; i < out->shards.size(); ++i) {
      // In a cluster, each daemon copies the pieces of its own devices.
      if (!out->shards[i].local()) continue;
      const DeviceBuffer& src = *pieces[match[i]]->shards.front().buffer;
      if (src.size() == 0) continue;
      RETURN_IF_ERROR(store->backend()->Copy(src, *out->shards[i].buffer, {{0, 0, src.size()}}));
    }
    return out;
  }

  // Donate: the checked pieces become the shards as they are.
  pieces.clear();  // drop our references so the store can hand them over
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> taken,
                   store->TakeAllForDonation(piece_ids));
  auto out = std::make_unique<Tensor>();
  auto charges = std::make_shared<std::vector<std::shared_ptr<void>>>();
  for (size_t i = 0; i < domains.size(); ++i) {
    Tensor& piece = *taken[match[i]];
    out->shards.push_back(Shard{std::move(domains[i]), std::move(piece.shards.front().buffer),
                                piece.shards.front().process_index});
    if (piece.quota_charge) charges->push_back(std::move(piece.quota_charge));
  }
  out->quota_charge = std::move(charges);
  out->name = std::move(name);
  out->owner = owner;
  out->dtype = dtype;
  out->shape = std::move(global_shape);
  out->sharding = target.sharding;
  out->mesh_id = target.mesh_id;
  out->partial_op = target.partial_op;
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> DisassembleTensor(TensorStore* store,
                                                                       const std::string& id,
                                                                       SourceHandling source) {
  std::vector<std::unique_ptr<Tensor>> out;
  if (source == SourceHandling::kKeep) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store->Get(id));
    for (size_t i = 0; i < tensor->shards.size(); ++i) {
      const Shard& shard = tensor->shards[i];
      ASSIGN_OR_RETURN(std::unique_ptr<Tensor> piece,
                       store->Allocate(tensor->dtype, shard.domain.shard_shape,
                                       NamedSharding::SingleDevice(shard.domain.device_id), "",
                                       PieceName(tensor->name, i), tensor->owner));
      if (shard.local() && shard.buffer->size() > 0) {
        RETURN_IF_ERROR(store->backend()->Copy(*shard.buffer, *piece->shards.front().buffer,
                                               {{0, 0, shard.buffer->size()}}));
      }
      out.push_back(std::move(piece));
    }
    return out;
  }

  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> tensor, store->TakeForDonation(id));
  for (size_t i = 0; i < tensor->shards.size(); ++i) {
    Shard& shard = tensor->shards[i];
    auto piece = std::make_unique<Tensor>();
    piece->name = PieceName(tensor->name, i);
    piece->owner = tensor->owner;
    piece->dtype = tensor->dtype;
    piece->shape = shard.domain.shard_shape;
    piece->sharding = NamedSharding::SingleDevice(shard.domain.device_id);
    ShardDomain domain;
    domain.device_id = shard.domain.device_id;
    domain.box = FullBox(piece->shape);
    domain.shard_shape = piece->shape;
    piece->shards.push_back(Shard{std::move(domain), std::move(shard.buffer), shard.process_index});
    piece->quota_charge = tensor->quota_charge;
    out.push_back(std::move(piece));
  }
  return out;
}

}  // namespace placement::server

#include "server/cluster/cluster_ops.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cluster/fan_out.h"
#include "server/tensor/assembler.h"
#include "server/tensor/resharder.h"

namespace placement::server {
namespace {

// A result's record: layout of `target` over `shape`, no buffers.
absl::StatusOr<std::unique_ptr<Tensor>> RecordFor(const std::string& id, DType dtype, Shape shape,
                                                  const ResolvedSharding& target, std::string name,
                                                  TensorOwner owner, Cluster* cluster) {
  auto t = std::make_unique<Tensor>();
  t->id = id;
  t->name = std::move(name);
  t->owner = std::move(owner);
  t->dtype = dtype;
  ASSIGN_OR_RETURN(std::vector<ShardDomain> domains, target.sharding.IndexDomains(shape));
  t->shape = std::move(shape);
  t->sharding = target.sharding;
  t->mesh_id = target.mesh_id;
  t->partial_op = target.partial_op;
  for (ShardDomain& d : domains) {
    const int32_t process = cluster->ProcessOf(d.device_id);
    t->shards.push_back(Shard{std::move(d), nullptr, process});
  }
  return t;
}

ResolvedSharding TargetOf(const Tensor& record) {
  return ResolvedSharding{record.sharding, record.mesh_id, record.partial_op};
}

}  // namespace

std::vector<int32_t> ClusterOps::ProcessesOf(const NamedSharding& sharding) const {
  return cluster_->ProcessesOf(sharding.mesh().device_ids());
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> ClusterOps::RunTwoPhase(
    const std::vector<int32_t>& processes, const std::function<absl::Status(int*)>& prepare,
    std::vector<std::unique_ptr<Tensor>> records, const std::vector<std::string>& delete_ids) {
  RETURN_IF_ERROR(cluster_->CheckAlive(processes));
  std::vector<std::string> ids;
  for (const auto& r : records) ids.push_back(r->id);
  int parts_ok = 0;
  absl::Status prepared = prepare(&parts_ok);
  if (!prepared.ok()) {
    tensors_->AbortOn(processes, ids);
    // A part takes its donated inputs all or none: when none did, they
    // stay everywhere. When some did before another failed, they are
    // consumed everywhere, as a failed donating collective's.
    if (!delete_ids.empty() && parts_ok > 0) {
      tensors_->DeleteEverywhere(delete_ids);
      return absl::Status(
          prepared.code(),
          absl::StrCat(prepared.message(), "; the donated source(s) were consumed (", parts_ok,
                       " of ", processes.size(), " daemons had taken theirs)"));
    }
    return prepared;
  }
  std::vector<std::shared_ptr<const Tensor>> committed;
  absl::Status status = tensors_->CommitEverywhere(std::move(records), delete_ids, &committed);
  if (!status.ok()) {
    // Whatever was committed goes again, everywhere (as the donated inputs,
    // which the commit deleted on some daemons).
    tensors_->AbortOn(processes, ids);
    std::vector<std::string> gone = delete_ids;
    for (const auto& t : committed) gone.push_back(t->id);
    tensors_->DeleteEverywhere(gone);
    return status;
  }
  return committed;
}

// --- Place -------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const Tensor>> ClusterOps::Place(const Tensor& source,
                                                                const ResolvedSharding& target,
                                                                std::string name,
                                                                TensorOwner owner) {
  // The checks Reshard makes, before anything moves.
  if (!source.sharding.partial_axes().empty() || !target.sharding.partial_axes().empty()) {
    return Reshard(store_, source, target, std::move(name), std::move(owner), nullptr).status();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> record,
                   RecordFor(store_->NewId(), source.dtype, source.shape, target, std::move(name),
                             std::move(owner), cluster_));
  record->session_id = source.session_id;
  const std::string source_id = source.id;
  const Tensor& result = *record;
  const std::vector<int32_t> processes = ProcessesOf(target.sharding);
  const int32_t self = cluster_->process_index();
  auto prepare = [&](int* parts_ok) {
    return FanOutCall(
               peers_, processes,
               {self, [&] { return PreparePlace(source_id, result, self, absl::ZeroDuration()); }},
               &PeerTransport::StartPreparePlace)
        .Counting(parts_ok)(source_id, result);
  };
  std::vector<std::unique_ptr<Tensor>> records;
  records.push_back(std::move(record));
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const Tensor>> out,
                   RunTwoPhase(processes, prepare, std::move(records), {}));
  return out.front();
}

absl::Status ClusterOps::PreparePlace(const std::string& source_id, const Tensor& result,
                                      int32_t driver, absl::Duration lifetime) {
  TensorStore::QuietScope quiet;
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> source, store_->Get(source_id));
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> placed,
                   Reshard(store_, *source, TargetOf(result), result.name, result.owner, data_));
  placed->id = result.id;
  placed->session_id = result.session_id;
  return tensors_->AddPending(std::move(placed), driver, lifetime);
}

// --- Assemble ----------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const Tensor>> ClusterOps::Assemble(
    Shape global_shape, const ResolvedSharding& target, const std::vector<std::string>& ids,
    SourceHandling source, std::string name) {
  // Every check the daemons' parts make, on the records here, before any
  // of them takes a donated piece.
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> first,
                   CheckAssemble(*store_, global_shape, target, ids, source));
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> record,
                   RecordFor(store_->NewId(), first->dtype, global_shape, target, std::move(name),
                             first->owner, cluster_));
  first.reset();
  const bool donate = source == SourceHandling::kDonate;
  const Tensor& result = *record;
  const std::vector<int32_t> processes = ProcessesOf(target.sharding);
  const int32_t self = cluster_->process_index();
  auto prepare = [&](int* parts_ok) {
    return FanOutCall(
               peers_, processes,
               {self,
                [&] { return PrepareAssemble(ids, result, source, self, absl::ZeroDuration()); }},
               &PeerTransport::StartPrepareAssemble)
        .Counting(parts_ok)(ids, result, donate);
  };
  std::vector<std::unique_ptr<Tensor>> records;
  records.push_back(std::move(record));
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const Tensor>> out,
                   RunTwoPhase(processes, prepare, std::move(records),
                               donate ? ids : std::vector<std::string>{}));
  return out.front();
}

absl::Status ClusterOps::PrepareAssemble(const std::vector<std::string>& piece_ids,
                                         const Tensor& result, SourceHandling source,
                                         int32_t driver, absl::Duration lifetime) {
  TensorStore::QuietScope quiet;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> assembled,
      AssembleTensor(store_, result.shape, TargetOf(result), piece_ids, source, result.name));
  assembled->id = result.id;
  assembled->session_id = result.session_id;
  return tensors_->AddPending(std::move(assembled), driver, lifetime);
}

// --- Disassemble ---------------------------------------------------------------

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> ClusterOps::Disassemble(
    const std::string& id, SourceHandling source) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store_->Get(id));
  std::vector<std::unique_ptr<Tensor>> records;
  std::vector<std::string> result_ids;
  for (size_t i = 0; i < tensor->shards.size(); ++i) {
    const Shard& shard = tensor->shards[i];
    ResolvedSharding one{NamedSharding::SingleDevice(shard.domain.device_id), "", std::nullopt};
    ASSIGN_OR_RETURN(
        std::unique_ptr<Tensor> record,
        RecordFor(store_->NewId(), tensor->dtype, shard.domain.shard_shape, one,
                  tensor->name.empty() ? std::string() : absl::StrCat(tensor->name, "/shard-", i),
                  tensor->owner, cluster_));
    record->session_id = tensor->session_id;
    result_ids.push_back(record->id);
    records.push_back(std::move(record));
  }
  const std::vector<int32_t> processes = ProcessesOf(tensor->sharding);
  tensor.reset();
  const bool donate = source == SourceHandling::kDonate;
  const int32_t self = cluster_->process_index();
  auto prepare = [&](int* parts_ok) {
    return FanOutCall(peers_, processes,
                      {self,
                       [&] {
                         return PrepareDisassemble(id, result_ids, source, self,
                                                   absl::ZeroDuration());
                       }},
                      &PeerTransport::StartPrepareDisassemble)
        .Counting(parts_ok)(id, result_ids, donate);
  };
  return RunTwoPhase(processes, prepare, std::move(records),
                     donate ? std::vector<std::string>{id} : std::vector<std::string>{});
}

absl::Status ClusterOps::PrepareDisassemble(const std::string& source_id,
                                            const std::vector<std::string>& result_ids,
                                            SourceHandling source, int32_t driver,
                                            absl::Duration lifetime) {
  TensorStore::QuietScope quiet;
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> pieces,
                   DisassembleTensor(store_, source_id, source));
  if (pieces.size() != result_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("disassemble of '", source_id, "' makes ",
                                                   pieces.size(), " pieces, the driver expects ",
                                                   result_ids.size()));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i]->all_local()) continue;  // another daemon's piece
    pieces[i]->id = result_ids[i];
    RETURN_IF_ERROR(tensors_->AddPending(std::move(pieces[i]), driver, lifetime));
  }
  return absl::OkStatus();
}

}  // namespace placement::server

#include "server/cluster/cluster_data.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/cluster/fan_out.h"
#include "server/logging.h"

namespace placement::server {

std::unique_ptr<Tensor> RecordOf(const Tensor& t) {
  auto r = std::make_unique<Tensor>();
  r->id = t.id;
  r->name = t.name;
  r->owner = t.owner;
  r->dtype = t.dtype;
  r->shape = t.shape;
  r->sharding = t.sharding;
  r->mesh_id = t.mesh_id;
  r->partial_op = t.partial_op;
  r->session_id = t.session_id;
  for (const Shard& s : t.shards) r->shards.push_back(Shard{s.domain, nullptr, s.process_index});
  return r;
}

// --- BoxSource -------------------------------------------------------------

BoxSource::BoxSource(std::shared_ptr<const Tensor> tensor, size_t shard, const Box& box,
                     DeviceBackend* backend)
    : tensor_(std::move(tensor)),
      shard_(shard),
      backend_(backend),
      cursor_(tensor_->shards[shard].domain.box, box, DTypeSize(tensor_->dtype)) {}

absl::StatusOr<std::unique_ptr<BoxSource>> BoxSource::Open(TensorStore* store,
                                                           const std::string& tensor_id,
                                                           int64_t device_id, const Box& box) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store->Get(tensor_id));
  for (size_t i = 0; i < tensor->shards.size(); ++i) {
    const Shard& shard = tensor->shards[i];
    if (shard.domain.device_id != device_id || !shard.local()) continue;
    if (box.size() != shard.domain.box.size() || !BoxContains(shard.domain.box, box)) {
      return absl::InvalidArgumentError(
          absl::StrCat("box ", BoxToString(box), " is not inside the shard on device ", device_id,
                       ", ", BoxToString(shard.domain.box)));
    }
    return std::unique_ptr<BoxSource>(new BoxSource(std::move(tensor), i, box, store->backend()));
  }
  return absl::NotFoundError(
      absl::StrCat("tensor '", tensor_id, "' has no shard on device ", device_id, " here"));
}

absl::Status BoxSource::Next(int64_t max_bytes, std::string* chunk) {
  runs_.clear();
  const int64_t bytes = cursor_.Next(max_bytes, /*buffer_is_source=*/true, &runs_);
  chunk->resize(static_cast<size_t>(bytes));
  if (bytes == 0) return absl::OkStatus();
  return backend_->Read(*tensor_->shards[shard_].buffer, chunk->data(), runs_);
}

// --- ShardSink ---------------------------------------------------------------

ShardSink::ShardSink(TensorStore* store, std::unique_ptr<Tensor> tensor)
    : store_(store), tensor_(std::move(tensor)), received_(tensor_->shards.size(), 0) {}

absl::StatusOr<std::unique_ptr<ShardSink>> ShardSink::Open(TensorStore* store,
                                                           const Tensor& record) {
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> tensor,
                   store->Allocate(record.dtype, record.shape, record.sharding, record.mesh_id,
                                   record.name, record.owner));
  tensor->id = record.id;
  tensor->partial_op = record.partial_op;
  tensor->session_id = record.session_id;
  return std::unique_ptr<ShardSink>(new ShardSink(store, std::move(tensor)));
}

absl::Status ShardSink::Write(const std::vector<int64_t>& device_ids,
                              absl::Span<const ByteRun> runs, absl::string_view data) {
  const int64_t size = static_cast<int64_t>(data.size());
  for (int64_t device : device_ids) {
    size_t index = tensor_->shards.size();
    for (size_t i = 0; i < tensor_->shards.size(); ++i) {
      if (tensor_->shards[i].domain.device_id == device && tensor_->shards[i].local()) index = i;
    }
    if (index == tensor_->shards.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("write.device_ids names device ", device, ", which holds no shard here"));
    }
    const int64_t shard_bytes = tensor_->shards[index].buffer->size();
    for (const ByteRun& run : runs) {
      if (run.length < 0 || run.src_offset < 0 || run.src_offset > size - run.length ||
          run.dst_offset < 0 || run.dst_offset > shard_bytes - run.length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "write run [", run.dst_offset, ", +", run.length, ") is outside the ", shard_bytes,
            "-byte shard on device ", device, " or the ", size, "-byte data"));
      }
      received_[index] += run.length;
    }
    RETURN_IF_ERROR(store_->backend()->Write(data.data(), *tensor_->shards[index].buffer, runs));
  }
  written_ += size;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Tensor>> ShardSink::Finish() {
  for (size_t i = 0; i < tensor_->shards.size(); ++i) {
    const Shard& shard = tensor_->shards[i];
    if (!shard.local()) continue;
    if (received_[i] != shard.buffer->size()) {
      return absl::InvalidArgumentError(absl::StrCat("the shard on device ", shard.domain.device_id,
                                                     " got ", received_[i], " of its ",
                                                     shard.buffer->size(), " bytes"));
    }
  }
  return std::move(tensor_);
}

// --- ClusterData -------------------------------------------------------------

ClusterData::ClusterData(Cluster* cluster, TensorStore* store, ClusterTensors* tensors,
                         PeerTransport* peers)
    : cluster_(cluster),
      store_(store),
      tensors_(tensors),
      peers_(peers),
      notices_(std::make_unique<WorkerPool>(2)) {}

ClusterData::~ClusterData() = default;

absl::StatusOr<std::unique_ptr<RemoteBoxStream>> ClusterData::OpenBox(const Tensor& tensor,
                                                                      const Shard& shard,
                                                                      const Box& box) {
  return peers_->OpenBox(shard.process_index, tensor.id, shard.domain.device_id, box,
                         cluster_->config().op_timeout * 10);
}

namespace {

class ShardWriter final : public RemoteShardWriter {
 public:
  ShardWriter(Cluster* cluster, ClusterTensors* tensors, PeerTransport* peers)
      : cluster_(cluster), tensors_(tensors), peers_(peers) {}
  ~ShardWriter() override { Abort(); }

  absl::Status Open(const Tensor& tensor) {
    id_ = tensor.id;
    std::vector<int64_t> devices;
    for (const Shard& s : tensor.shards) {
      if (!s.local()) devices.push_back(s.domain.device_id);
    }
    processes_ = cluster_->ProcessesOf(devices);
    std::unique_ptr<Tensor> record = RecordOf(tensor);
    for (int32_t p : processes_) {
      ASSIGN_OR_RETURN(std::unique_ptr<PeerShardWriter> stream,
                       peers_->OpenShardWriter(p, *record, cluster_->config().op_timeout,
                                               cluster_->config().op_timeout * 10));
      streams_.emplace(p, std::move(stream));
    }
    return absl::OkStatus();
  }

  absl::Status Write(int32_t process, absl::Span<const int64_t> device_ids,
                     absl::Span<const ByteRun> runs, const char* chunk) override {
    auto it = streams_.find(process);
    if (it == streams_.end()) {
      return absl::InternalError(absl::StrCat("no upload stream to process ", process));
    }
    return it->second->Write(device_ids, runs, chunk);
  }

  absl::StatusOr<std::shared_ptr<const Tensor>> Commit(
      std::unique_ptr<Tensor> local_part) override {
    for (auto& [process, stream] : streams_) {
      absl::Status finished = stream->Finish();
      if (!finished.ok()) {
        Abort();
        return finished;
      }
    }
    std::unique_ptr<Tensor> record = RecordOf(*local_part);
    RETURN_IF_ERROR(tensors_->AddPending(std::move(local_part)));
    std::vector<std::unique_ptr<Tensor>> records;
    records.push_back(std::move(record));
    std::vector<std::shared_ptr<const Tensor>> committed;
    absl::Status status = tensors_->CommitEverywhere(std::move(records), {}, &committed);
    done_ = true;
    if (!status.ok() || committed.empty()) {
      tensors_->AbortOn(processes_, {id_});
      std::vector<int32_t> self = {cluster_->process_index()};
      tensors_->AbortOn(self, {id_});
      if (status.ok()) status = absl::InternalError("the committed tensor is gone");
      return status;
    }
    return committed.front();
  }

  void Abort() override {
    if (done_) return;
    done_ = true;
    for (auto& [process, stream] : streams_) stream->Cancel();
    tensors_->AbortOn(processes_, {id_});
  }

 private:
  Cluster* cluster_;
  ClusterTensors* tensors_;
  PeerTransport* peers_;
  std::string id_;
  std::vector<int32_t> processes_;
  std::map<int32_t, std::unique_ptr<PeerShardWriter>> streams_;
  bool done_ = false;
};

}  // namespace

namespace {

// What every process's call must agree on, compared byte for byte.
std::string Agreement(const Tensor& t) {
  return absl::StrCat(TypedShapeToString(t.dtype, t.shape), " ", t.sharding.ToString(),
                      " over devices [", absl::StrJoin(t.sharding.mesh().device_ids(), ","), "]");
}

constexpr absl::string_view kFailed = "!failed: ";

class BarrierCommit final : public ProcessLocalCommit {
 public:
  BarrierCommit(Cluster* cluster, TensorStore* store, PeerTransport* peers, WorkerPool* notices,
                std::vector<int32_t> participants, ProcessLocalRequest request,
                std::string agreement)
      : cluster_(cluster),
        store_(store),
        peers_(peers),
        notices_(notices),
        participants_(std::move(participants)),
        request_(std::move(request)),
        agreement_(std::move(agreement)) {}

  BarrierArrival Arrival(std::string payload) const {
    BarrierArrival a;
    a.barrier_id = absl::StrCat("pl/", request_.tenant, "/", request_.global_name);
    a.process_index = cluster_->process_index();
    a.participants = participants_;
    a.payload = std::move(payload);
    a.timeout = request_.timeout;
    return a;
  }

  absl::StatusOr<std::shared_ptr<const Tensor>> Commit(
      std::unique_ptr<Tensor> local_part) override {
    done_ = true;
    ASSIGN_OR_RETURN(BarrierResult met, cluster_->coordinator()->Barrier(Arrival(agreement_)));
    for (size_t i = 0; i < met.payloads.size(); ++i) {
      const std::string& theirs = met.payloads[i];
      if (absl::StartsWith(theirs, kFailed)) {
        return absl::AbortedError(absl::StrCat("process ", met.participants[i],
                                               " failed its part of '", request_.global_name,
                                               "': ", theirs.substr(kFailed.size())));
      }
      if (theirs != agreement_) {
        return absl::InvalidArgumentError(
            absl::StrCat("process ", cluster_->process_index(), " uploads ", agreement_,
                         " but process ", met.participants[i], " uploads ", theirs, " as '",
                         request_.global_name, "'; every process must name the same global array"));
      }
    }
    local_part->id = absl::StrCat("t-", met.token);
    std::unique_ptr<Tensor> record = RecordOf(*local_part);
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> installed,
                     store_->Install(std::move(local_part)));
    if (cluster_->process_index() == participants_.front()) {
      std::vector<int32_t> others;
      for (int32_t p : cluster_->AlivePeers()) {
        if (!std::binary_search(participants_.begin(), participants_.end(), p)) {
          others.push_back(p);
        }
      }
      FanOutCall(peers_, others, &PeerTransport::StartCommit)({record.get()}, {}).IgnoreError();
    }
    return installed;
  }

  void Abort(const absl::Status& why) override {
    if (done_) return;
    done_ = true;
    BarrierArrival arrival = Arrival(absl::StrCat(kFailed, why.message()));
    // The others may wait a while yet: bounded, off this thread.
    arrival.timeout = std::min(arrival.timeout, absl::Seconds(10));
    Cluster* cluster = cluster_;
    notices_->Submit(
        [cluster, arrival] { cluster->coordinator()->Barrier(arrival).IgnoreError(); });
  }

 private:
  Cluster* cluster_;
  TensorStore* store_;
  PeerTransport* peers_;
  WorkerPool* notices_;
  std::vector<int32_t> participants_;
  ProcessLocalRequest request_;
  std::string agreement_;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessLocalCommit>> ClusterData::BeginProcessLocal(
    const Tensor& tensor, const ProcessLocalRequest& request) {
  if (request.global_name.empty() || request.global_name.size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "process_local.global_name is ", request.global_name.size(), " bytes; it must be 1..256"));
  }
  std::vector<int32_t> participants = cluster_->ProcessesOf(tensor.sharding.mesh().device_ids());
  RETURN_IF_ERROR(cluster_->CheckAlive(participants));
  return std::make_unique<BarrierCommit>(cluster_, store_, peers_, notices_.get(),
                                         std::move(participants), request, Agreement(tensor));
}

absl::StatusOr<std::unique_ptr<RemoteShardWriter>> ClusterData::StartWrite(const Tensor& tensor) {
  auto writer = std::make_unique<ShardWriter>(cluster_, tensors_, peers_);
  RETURN_IF_ERROR(writer->Open(tensor));
  return writer;
}

}  // namespace placement::server

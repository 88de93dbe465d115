#include "server/service/tensor_upload_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/shape.h"
#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/region_slices.h"
#include "server/service/rule_meshes.h"
#include "server/service/to_proto.h"
#include "server/tensor/label_limits.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

absl::Status SecondHeader() {
  return absl::InvalidArgumentError("a second header arrived; an upload has exactly one header");
}

absl::Status ChunkBeforeHeader() {
  return absl::InvalidArgumentError(
      "a chunk arrived before the header; the first message must carry the header");
}

}  // namespace

UploadReactor::UploadReactor(grpc::CallbackServerContext* context, const TensorOps* ops,
                             CallGate* gate, grpc::ByteBuffer* response, RegionRegistry* regions)
    : UploadStreamReactor(context, gate, StreamKind::kUpload, response),
      ops_(ops),
      regions_(regions) {
  Begin();
}

absl::Status UploadReactor::Consume(const pb::UploadRequest& request) {
  switch (request.payload_case()) {
    case pb::UploadRequest::kHeader: {
      if (header_seen_) return SecondHeader();
      header_seen_ = true;
      const pb::UploadHeader& header = request.header();
      ASSIGN_OR_RETURN(TensorSpec spec,
                       TensorSpecFromProto(header.dtype(), header.shape(), header.name(),
                                           header.owner(), "header"));
      spec.owner.tenant = caller().tenant;
      Describe(spec.name.empty()
                   ? TypedShapeToString(spec.dtype, spec.shape)
                   : absl::StrCat(spec.name, " ", TypedShapeToString(spec.dtype, spec.shape)),
               ByteSize(spec.dtype, spec.shape));
      RETURN_IF_ERROR(CheckRuleMeshesVisible(*ops_->meshes(), caller(), header.rule()));
      ASSIGN_OR_RETURN(PlacementRule rule, PlacementRuleFromProto(header.rule()));
      if (header.has_process_local()) {
        ASSIGN_OR_RETURN(ProcessLocalRequest local,
                         ProcessLocalFromProto(header.process_local(), caller().tenant));
        std::optional<Shape> global;
        if (header.process_local().global_shape_size() > 0) {
          ASSIGN_OR_RETURN(global, ShapeFromProto(header.process_local().global_shape(),
                                                  "header.process_local.global_shape"));
        }
        ASSIGN_OR_RETURN(session_,
                         ops_->StartProcessLocalUpload(std::move(spec), rule, global, local));
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(session_, ops_->StartUpload(std::move(spec), rule));
      return absl::OkStatus();
    }
    case pb::UploadRequest::kChunk:
      if (!header_seen_) return ChunkBeforeHeader();
      RETURN_IF_ERROR(session_->Write(request.chunk()));
      Moved(static_cast<int64_t>(request.chunk().size()));
      return absl::OkStatus();
    case pb::UploadRequest::kRegion: {
      if (!header_seen_) return ChunkBeforeHeader();
      ASSIGN_OR_RETURN(
          RegionBytes bytes,
          AcquireRegionSlice(regions_, caller(), "region", request.region(), RegionAccess::kRead));
      RETURN_IF_ERROR(
          bytes.ReadInto([&](absl::string_view piece) { return session_->Write(piece); }));
      Moved(bytes.size());
      return absl::OkStatus();
    }
    case pb::UploadRequest::PAYLOAD_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("an UploadRequest carries neither a header nor a chunk");
}

absl::Status UploadReactor::Complete() {
  if (!header_seen_) {
    return absl::InvalidArgumentError("the upload stream ended before its header");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, session_->Commit());
  session_.reset();
  committed_id_ = tensor->id;
  RETURN_IF_ERROR(AdoptCreated({committed_id_}));
  TensorToProto(*tensor, response()->mutable_tensor());
  return absl::OkStatus();
}

void UploadReactor::ForgetCommitted() {
  if (!committed_id_.empty()) ops_->store()->Delete({committed_id_}).IgnoreError();
  committed_id_.clear();  // once: OnDone may ask again after a late delivery failed
}

UploadBatchReactor::UploadBatchReactor(grpc::CallbackServerContext* context, const TensorOps* ops,
                                       CallGate* gate, grpc::ByteBuffer* response,
                                       RegionRegistry* regions)
    : UploadStreamReactor(context, gate, StreamKind::kUploadBatch, response),
      ops_(ops),
      regions_(regions) {
  Begin();
}

absl::Status UploadBatchReactor::Consume(const pb::UploadBatchRequest& request) {
  switch (request.payload_case()) {
    case pb::UploadBatchRequest::kHeader: {
      if (header_seen_) return SecondHeader();
      header_seen_ = true;
      const pb::BatchHeader& header = request.header();
      RETURN_IF_ERROR(CheckLength("header.name", header.name(), kMaxTensorNameLength));
      RETURN_IF_ERROR(CheckLength("header.owner", header.owner(), kMaxOwnerLength));
      RETURN_IF_ERROR(CheckRuleMeshesVisible(*ops_->meshes(), caller(), header.rule()));
      std::vector<BatchArraySpec> arrays;
      int64_t total = 0;
      for (int i = 0; i < header.arrays_size(); ++i) {
        const pb::ArrayHeader& array = header.arrays(i);
        ASSIGN_OR_RETURN(TensorSpec spec, TensorSpecFromProto(array.dtype(), array.shape(), "", "",
                                                              absl::StrCat("arrays[", i, "]")));
        total += ByteSize(spec.dtype, spec.shape);
        arrays.push_back(BatchArraySpec{array.key(), spec.dtype, std::move(spec.shape)});
      }
      Describe(absl::StrCat(header.name().empty() ? "" : absl::StrCat(header.name(), " "),
                            arrays.size(), arrays.size() == 1 ? " array" : " arrays"),
               total);
      ASSIGN_OR_RETURN(PlacementRule rule, PlacementRuleFromProto(header.rule()));
      if (header.has_process_local()) {
        ASSIGN_OR_RETURN(ProcessLocalRequest local,
                         ProcessLocalFromProto(header.process_local(), caller().tenant));
        if (header.process_local().global_shape_size() > 0) {
          return absl::InvalidArgumentError(
              "header.process_local.global_shape is for single uploads; a batch's global shapes "
              "are inferred per array");
        }
        ASSIGN_OR_RETURN(session_, ops_->StartProcessLocalBatch(
                                       arrays, rule, header.name(),
                                       TensorOwner(caller().tenant, header.owner()), local));
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(session_,
                       ops_->StartBatchUpload(arrays, rule, header.name(),
                                              TensorOwner(caller().tenant, header.owner())));
      return absl::OkStatus();
    }
    case pb::UploadBatchRequest::kChunk: {
      if (!header_seen_) return ChunkBeforeHeader();
      const pb::BatchChunk& chunk = request.chunk();
      if (!chunk.has_region()) {
        RETURN_IF_ERROR(session_->Write(chunk.array_index(), chunk.data()));
        Moved(static_cast<int64_t>(chunk.data().size()));
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(RegionBytes bytes, AcquireBatchChunkRegion(regions_, caller(), chunk));
      RETURN_IF_ERROR(bytes.ReadInto(
          [&](absl::string_view piece) { return session_->Write(chunk.array_index(), piece); }));
      Moved(bytes.size());
      return absl::OkStatus();
    }
    case pb::UploadBatchRequest::PAYLOAD_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("an UploadBatchRequest carries neither a header nor a chunk");
}

absl::Status UploadBatchReactor::Complete() {
  if (!header_seen_) {
    return absl::InvalidArgumentError("the batch upload stream ended before its header");
  }
  ASSIGN_OR_RETURN(auto tensors, session_->Commit());
  session_.reset();
  for (auto& [key, tensor] : tensors) {
    committed_ids_.push_back(tensor->id);
    pb::NamedTensor* named = response()->add_tensors();
    named->set_key(key);
    TensorToProto(*tensor, named->mutable_tensor());
  }
  return AdoptCreated(committed_ids_);
}

void UploadBatchReactor::ForgetCommitted() {
  ops_->store()->DeleteExisting(committed_ids_);
  committed_ids_.clear();  // once, as UploadReactor's
}

}  // namespace placement::server

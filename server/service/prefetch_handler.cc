#include "server/service/prefetch_handler.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/region_slices.h"
#include "server/service/rule_meshes.h"
#include "server/service/to_proto.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

void DurationToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
}

void StatsToProto(const PrefetchStats& stats, pb::PrefetchStats* out) {
  out->set_batches_staged(stats.batches_staged);
  out->set_bytes_staged(stats.bytes_staged);
  DurationToProto(stats.consumer_stall, out->mutable_consumer_stall());
  DurationToProto(stats.producer_blocked, out->mutable_producer_blocked());
  out->set_max_batches_held(stats.max_batches_held);
}

void OutputToProto(const PrefetchOutput& output, pb::PrefetchResponse* out) {
  if (output.stats.has_value()) {
    StatsToProto(*output.stats, out->mutable_stats());
    return;
  }
  pb::PrefetchReady* ready = out->mutable_ready();
  ready->set_sequence(output.ready->sequence);
  for (const auto& [key, tensor] : output.ready->tensors) {
    pb::NamedTensor* named = ready->add_tensors();
    named->set_key(key);
    TensorToProto(*tensor, named->mutable_tensor());
  }
}

class PrefetchReactor final
    : public grpc::ServerBidiReactor<pb::PrefetchRequest, pb::PrefetchResponse> {
 public:
  PrefetchReactor(grpc::CallbackServerContext* context, PrefetchManager* manager, CallGate* gate,
                  RegionRegistry* regions)
      : context_(context), manager_(manager), regions_(regions) {
    // Registered without holding mu_: the manager calls Abort under its own
    // lock, which then takes mu_.
    absl::StatusOr<Caller> caller = gate->Admit(*context, &ticket_);
    absl::Status status = caller.status();
    if (status.ok()) {
      caller_ = *caller;
      // Counted against the stream limits; never reaped (it waits on its
      // consumer by design).
      absl::StatusOr<StreamRegistry::Lease> lease =
          gate->OpenStream(*caller, context, StreamKind::kPrefetch);
      status = lease.status();
      if (lease.ok()) lease_ = *std::move(lease);
    }
    if (status.ok()) {
      // A stream opened in a session belongs to it: when the session is
      // closed or its lease expires, the stream is cancelled and every
      // batch it staged is freed.
      const std::string session = caller_.session_id;
      auto watch = gate->WatchSession(caller_, [this, session] {
        absl::MutexLock lock(&mu_);
        FinishLocked(absl::CancelledError(
            absl::StrCat("the prefetch stream's session '", session,
                         "' ended (closed, or its lease expired); its staged batches were freed")));
      });
      status = watch.status();
      if (watch.ok()) session_watch_ = *std::move(watch);
    }
    if (status.ok()) {
      absl::StatusOr<int64_t> id = manager_->Register(
          [this](const absl::Status& why) {
            absl::MutexLock lock(&mu_);
            FinishLocked(why);
          },
          caller_.tenant);
      if (id.ok()) {
        stream_id_ = *id;
        absl::MutexLock lock(&mu_);
        manager_->metrics()->StreamOpened();
        opened_ = true;  // closed in OnDone, which runs after this
      } else {
        status = id.status();
      }
    }
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      FinishLocked(status);
      return;
    }
    if (finish_requested_) return;  // shutdown raced with the start
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (finish_requested_) {
      MaybeFinishLocked();
      return;
    }
    absl::Status status;
    if (!ok) {
      status = context_->IsCancelled()
                   ? absl::CancelledError("the prefetch stream was cancelled by the client")
                   : InputDoneLocked();
    } else {
      status = DispatchLocked(request_);
      request_.Clear();
    }
    if (!status.ok()) {
      FinishLocked(status);
      return;
    }
    if (ok) StartRead(&request_);
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok && !finish_requested_) {
      FinishLocked(absl::CancelledError("the prefetch client went away"));
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(absl::CancelledError("the prefetch stream was cancelled by the client"));
  }

  void OnDone() override {
    session_watch_.reset();  // no session callback runs after this
    if (stream_id_.has_value()) manager_->Unregister(*stream_id_);
    {
      absl::MutexLock lock(&mu_);
      // A client's cancel fails the read in flight, which can be seen
      // before OnCancel as an input that ended mid-batch: the call's own
      // cancellation (known by now) decides, not that error.
      if (opened_) {
        manager_->metrics()->StreamClosed(context_->IsCancelled() ? absl::StatusCode::kCancelled
                                                                  : finish_status_.code());
      }
    }
    delete this;
  }

 private:
  absl::Status InputDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pipeline_ == nullptr) {
      return absl::InvalidArgumentError("the prefetch stream ended before its open message");
    }
    return pipeline_->OnInputDone();
  }

  absl::Status DispatchLocked(const pb::PrefetchRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (request.payload_case() == pb::PrefetchRequest::kOpen) {
      if (pipeline_ != nullptr) {
        return absl::InvalidArgumentError("a second open message arrived; a stream opens once");
      }
      if (absl::Status s =
              CheckRuleMeshesVisible(*manager_->ops()->meshes(), caller_, request.open().rule());
          !s.ok()) {
        return s;
      }
      absl::StatusOr<PrefetchConfig> config = PrefetchConfigFromProto(request.open());
      if (!config.ok()) return config.status();
      config->tenant = caller_.tenant;
      lease_.Describe(
          request.open().name().empty() ? std::string("(unnamed)") : request.open().name(), 0);
      pipeline_ = manager_->NewPipeline(std::move(*config));
      return absl::OkStatus();
    }
    if (pipeline_ == nullptr) {
      return absl::InvalidArgumentError("the first message of a prefetch stream must be `open`");
    }
    switch (request.payload_case()) {
      case pb::PrefetchRequest::kBatch:
        if (absl::Status s =
                CheckRuleMeshesVisible(*manager_->ops()->meshes(), caller_, request.batch().rule());
            !s.ok()) {
          return s;
        }
        return pipeline_->OnBatchHeader(BatchHeaderFromProto(request.batch()));
      case pb::PrefetchRequest::kChunk: {
        const pb::BatchChunk& chunk = request.chunk();
        if (!chunk.has_region()) {
          lease_.Progress(static_cast<int64_t>(chunk.data().size()));
          return pipeline_->OnBatchChunk(chunk.array_index(), chunk.data());
        }
        absl::StatusOr<RegionBytes> bytes = AcquireBatchChunkRegion(regions_, caller_, chunk);
        if (!bytes.ok()) return bytes.status();
        lease_.Progress(static_cast<int64_t>(bytes->size()));
        return bytes->ReadInto([&](absl::string_view piece) {
          return pipeline_->OnBatchChunk(chunk.array_index(), piece);
        });
      }
      case pb::PrefetchRequest::kRelease:
        return pipeline_->OnRelease(request.release().sequence());
      case pb::PrefetchRequest::kNext:
        return pipeline_->OnNext();
      default:
        return absl::InvalidArgumentError("a PrefetchRequest carries no payload");
    }
  }

  // Starts the next write if one is due and none is in flight; finishes OK
  // once the stats are written.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_requested_) {
      MaybeFinishLocked();  // a finish may have waited for this write
      return;
    }
    if (writing_ || pipeline_ == nullptr) return;
    std::optional<PrefetchOutput> output = pipeline_->TakeOutput();
    if (!output.has_value()) {
      if (pipeline_->done()) FinishLocked(absl::OkStatus());
      return;
    }
    response_.Clear();
    OutputToProto(*output, &response_);
    output.reset();  // drop the tensor references before the write completes
    writing_ = true;
    StartWrite(&response_);
  }

  // Closes the pipeline (freeing every staged batch) and finishes with
  // `status` (OK after the stats, or the failure) once no write is in
  // flight. The first call wins.
  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_requested_) return;
    finish_requested_ = true;
    finish_status_ = status;
    if (pipeline_ != nullptr) pipeline_->Close();
    MaybeFinishLocked();
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finish_requested_ || finish_sent_ || writing_) return;
    finish_sent_ = true;
    Finish(ToGrpcStatus(finish_status_));
  }

  grpc::CallbackServerContext* context_;
  PrefetchManager* manager_;
  CallGate::Ticket ticket_;
  RegionRegistry* regions_;  // null: region chunks are refused
  Caller caller_;            // set once in the constructor
  StreamRegistry::Lease lease_;
  std::unique_ptr<SessionManager::Watch> session_watch_;  // null outside a session
  std::optional<int64_t> stream_id_;

  absl::Mutex mu_;
  // Counted open in the metrics (StreamOpened), so closed once it is done.
  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<PrefetchPipeline> pipeline_ ABSL_GUARDED_BY(mu_);
  pb::PrefetchRequest request_;    // the read in flight
  pb::PrefetchResponse response_;  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_sent_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<pb::PrefetchRequest, pb::PrefetchResponse>* PrefetchHandler::Prefetch(
    grpc::CallbackServerContext* context) {
  return new PrefetchReactor(context, manager_, gate_, regions_);
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
PrefetchHandler::PrefetchHandler(PrefetchManager* manager, CallGate* gate, RegionRegistry* regions)
    : manager_(manager), gate_(gate), regions_(regions) {}
PrefetchHandler::~PrefetchHandler() = default;

}  // namespace placement::server

#include "server/peer/peer_streams.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/peer/cluster_proto.h"
#include "server/peer/peer_call.h"
#include "server/peer/tensor_record_proto.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

class PeerBoxStream final : public RemoteBoxStream {
 public:
  PeerBoxStream(PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout)
      : call_(channels, cluster, process, timeout) {}
  ~PeerBoxStream() override {
    if (reader_ != nullptr && !finished_) {
      call_.context()->TryCancel();
      reader_->Finish().ok();
    }
  }

  absl::Status Start(const pb::ReadBoxRequest& request) {
    reader_ = call_.stub()->ReadBox(call_.context(), request);
    return absl::OkStatus();
  }

  absl::Status Read(char* dst, int64_t length) override {
    while (length > 0) {
      if (pos_ == chunk_.size()) {
        pb::ReadBoxResponse response;
        if (!reader_->Read(&response)) {
          finished_ = true;
          absl::Status status = call_.Finish(reader_->Finish());
          if (!status.ok()) return status;
          return absl::InternalError(absl::StrCat("the box stream from process ", call_.process(),
                                                  " ended ", length, " bytes short"));
        }
        chunk_ = std::move(*response.mutable_chunk());
        pos_ = 0;
        continue;
      }
      const size_t take = std::min(static_cast<size_t>(length), chunk_.size() - pos_);
      std::memcpy(dst, chunk_.data() + pos_, take);
      pos_ += take;
      dst += take;
      length -= static_cast<int64_t>(take);
    }
    return absl::OkStatus();
  }

 private:
  PeerCall call_;
  std::unique_ptr<grpc::ClientReader<pb::ReadBoxResponse>> reader_;
  std::string chunk_;
  size_t pos_ = 0;
  bool finished_ = false;
};

// WriteShards: the header went at Open; each Write is one or more
// ShardWrite messages of about 1 MiB.
class PeerShardStream final : public PeerShardWriter {
 public:
  PeerShardStream(PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout)
      : call_(channels, cluster, process, timeout) {}
  ~PeerShardStream() override {
    if (!finished_) Cancel();
  }

  // Starts the stream with `header`; the stream's outcome when the daemon
  // refused it at once.
  absl::Status Open(const pb::WriteShardsRequest& header) {
    writer_ = call_.stub()->WriteShards(call_.context(), &response_);
    if (writer_->Write(header)) return absl::OkStatus();
    absl::Status status = Finish();
    if (!status.ok()) return status;
    return absl::UnavailableError(
        absl::StrCat("the shard stream to process ", call_.process(), " closed at its header"));
  }

  absl::Status Write(absl::Span<const int64_t> device_ids, absl::Span<const ByteRun> runs,
                     const char* chunk) override {
    // Messages stay around 1 MiB whatever the caller hands over (a same-host
    // region upload passes the whole array at once).
    constexpr int64_t kMessageBytes = int64_t{1} << 20;
    pb::ShardWrite* write = message_.mutable_write();
    auto start = [&] {
      write->Clear();
      for (int64_t id : device_ids) write->add_device_ids(id);
    };
    auto flush = [&]() -> bool {
      if (write->runs_size() == 0) return true;
      const bool sent = writer_->Write(message_);
      start();
      return sent;
    };
    start();
    for (const ByteRun& run : runs) {
      int64_t done = 0;
      while (done < run.length) {
        const int64_t room = kMessageBytes - static_cast<int64_t>(write->data().size());
        if (room <= 0) {
          if (!flush()) return Finish();
          continue;
        }
        const int64_t take = std::min(room, run.length - done);
        pb::ByteSpan* span = write->add_runs();
        span->set_offset(run.dst_offset + done);
        span->set_length(take);
        write->mutable_data()->append(chunk + run.src_offset + done, static_cast<size_t>(take));
        done += take;
      }
    }
    if (!flush()) return Finish();
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    if (finished_) return absl::FailedPreconditionError("stream already finished");
    finished_ = true;
    writer_->WritesDone();
    return call_.Finish(writer_->Finish());
  }

  void Cancel() override {
    if (finished_) return;
    finished_ = true;
    call_.context()->TryCancel();
    writer_->Finish().ok();
  }

 private:
  PeerCall call_;
  pb::WriteShardsResponse response_;
  std::unique_ptr<grpc::ClientWriter<pb::WriteShardsRequest>> writer_;
  pb::WriteShardsRequest message_;
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenPeerBox(PeerChannels* channels,
                                                             Cluster* cluster, int32_t process,
                                                             const std::string& tensor_id,
                                                             int64_t device_id, const Box& box,
                                                             absl::Duration timeout) {
  RETURN_IF_ERROR(cluster->CheckAlive({process}));
  pb::ReadBoxRequest request;
  request.set_tensor_id(tensor_id);
  request.set_device_id(device_id);
  for (const IndexRange& r : box) {
    pb::IndexRange* range = request.add_box();
    range->set_begin(r.begin);
    range->set_end(r.end);
  }
  auto stream = std::make_unique<PeerBoxStream>(channels, cluster, process, timeout);
  RETURN_IF_ERROR(stream->Start(request));
  return stream;
}

absl::StatusOr<std::unique_ptr<PeerShardWriter>> OpenPeerShardWriter(
    PeerChannels* channels, Cluster* cluster, int32_t process, const Tensor& record,
    absl::Duration pending_lifetime, absl::Duration timeout) {
  RETURN_IF_ERROR(cluster->CheckAlive({process}));
  auto stream = std::make_unique<PeerShardStream>(channels, cluster, process, timeout);
  pb::WriteShardsRequest header;
  RecordToProto(record, header.mutable_header()->mutable_tensor());
  DurationToProto(pending_lifetime, header.mutable_header()->mutable_pending_lifetime());
  header.mutable_header()->set_driver_process(cluster->process_index());
  RETURN_IF_ERROR(stream->Open(header));
  return stream;
}

}  // namespace placement::server

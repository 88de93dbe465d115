// Client side of TensorService.Upload and UploadBatch: the Uploader streams
// a header, then chunk_bytes messages assembled straight from the caller's
// pieces; only one chunk is ever buffered here.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/call_context.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/tensors_inplace.h"
#include "client/src/tensors_region.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// The status a broken stream finished with; never OK.
absl::Status BrokenStreamStatus(const grpc::Status& status, absl::string_view what) {
  if (!status.ok()) return FromGrpcStatus(status);
  return absl::UnavailableError(absl::StrCat(what, ": the daemon closed the stream early"));
}

}  // namespace

struct Uploader::Impl {
  enum class State { kOpen, kDone };

  // Declaration order matters: the writer refers to the context and stub.
  std::unique_ptr<pb::TensorService::Stub> stub;
  grpc::ClientContext context;
  pb::UploadResponse response;
  std::unique_ptr<grpc::ClientWriter<pb::UploadRequest>> writer;
  pb::UploadRequest message;  // reused for every chunk
  std::string* chunk = nullptr;
  std::vector<uint8_t> scratch;  // WriteFrom's read buffer, one chunk
  std::string description;       // "f32[32,32]"
  int64_t total = 0;
  int64_t written = 0;  // accepted from the caller, including `chunk`
  int64_t chunk_bytes = kDefaultChunkBytes;
  State state = State::kOpen;
  absl::Status failure;  // why the upload ended, when it did not succeed
  ProgressFn progress;
  int64_t reported = -1;  // the last `done` given to progress

  void Report(int64_t done) {
    if (progress && done != reported) {
      reported = done;
      progress(done, total);
    }
  }

  absl::Status Fail(absl::Status status) {
    if (state == State::kOpen) {
      context.TryCancel();
      writer->Finish();
      state = State::kDone;
      failure = status;
    }
    return status;
  }

  absl::Status Send() {
    if (writer->Write(message)) {
      chunk->clear();                        // keeps the capacity
      if (written < total) Report(written);  // `total` once the daemon has it all
      return absl::OkStatus();
    }
    grpc::Status status = writer->Finish();
    state = State::kDone;
    failure = BrokenStreamStatus(status, absl::StrCat("upload of ", description));
    return failure;
  }

  absl::Status Append(absl::Span<const uint8_t> bytes) {
    if (state != State::kOpen) return failure;
    if (static_cast<int64_t>(bytes.size()) > total - written) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("expected ", total, " bytes for ", description, ", got at least ",
                       written + static_cast<int64_t>(bytes.size()))));
    }
    while (!bytes.empty()) {
      size_t take = std::min<size_t>(bytes.size(), chunk_bytes - chunk->size());
      chunk->append(reinterpret_cast<const char*>(bytes.data()), take);
      bytes.remove_prefix(take);
      written += static_cast<int64_t>(take);
      if (static_cast<int64_t>(chunk->size()) == chunk_bytes) {
        absl::Status sent = Send();
        if (!sent.ok()) return sent;
      }
    }
    return absl::OkStatus();
  }
};

Uploader::Uploader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Uploader::~Uploader() {
  if (impl_ != nullptr) Cancel();
}

int64_t Uploader::total_bytes() const { return impl_->total; }
int64_t Uploader::bytes_written() const { return impl_->written; }

absl::Status Uploader::Write(absl::Span<const uint8_t> bytes) { return impl_->Append(bytes); }

absl::Status Uploader::WriteFrom(const ByteReader& reader) {
  Impl& u = *impl_;
  if (u.state != Impl::State::kOpen) return u.failure;
  if (u.scratch.empty()) u.scratch.resize(static_cast<size_t>(u.chunk_bytes));
  while (u.written < u.total) {
    size_t want = static_cast<size_t>(std::min<int64_t>(u.chunk_bytes, u.total - u.written));
    auto n = reader(absl::MakeSpan(u.scratch.data(), want));
    if (!n.ok()) return u.Fail(n.status());
    if (*n == 0) return absl::OkStatus();  // Finish reports a short upload
    if (*n > want) {
      return u.Fail(absl::InternalError(
          absl::StrCat("ByteReader returned ", *n, " bytes for a ", want, "-byte buffer")));
    }
    absl::Status appended = u.Append(absl::MakeConstSpan(u.scratch.data(), *n));
    if (!appended.ok()) return appended;
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> Uploader::Finish() {
  Impl& u = *impl_;
  if (u.state != Impl::State::kOpen) return u.failure;
  if (u.written != u.total) {
    return u.Fail(absl::InvalidArgumentError(
        absl::StrCat("expected ", u.total, " bytes for ", u.description, ", got ", u.written)));
  }
  if (!u.chunk->empty()) {
    absl::Status sent = u.Send();
    if (!sent.ok()) return sent;
  }
  u.writer->WritesDone();
  grpc::Status status = u.writer->Finish();
  u.state = Impl::State::kDone;
  if (!status.ok()) {
    u.failure = FromGrpcStatus(status);
    return u.failure;
  }
  u.failure =
      absl::FailedPreconditionError(absl::StrCat("upload of ", u.description, " already finished"));
  u.Report(u.total);
  return FromProto(u.response.tensor());
}

void Uploader::Cancel() {
  // The status is the caller's to see in the next Write or Finish.
  impl_
      ->Fail(absl::CancelledError(
          absl::StrCat("upload of ", impl_->description, " was cancelled by the caller")))
      .IgnoreError();
}

absl::StatusOr<std::unique_ptr<Uploader>> TensorClient::StartUpload(
    DType dtype, std::vector<int64_t> shape, const Rule& rule, const UploadOptions& options) const {
  auto total = ExpectedBytes(dtype, shape);
  if (!total.ok()) return total.status();
  absl::Status chunk_ok = ValidateChunkBytes(options.chunk_bytes);
  if (!chunk_ok.ok()) return chunk_ok;

  auto impl = std::make_unique<Uploader::Impl>();
  absl::Status header_ok =
      FillUploadHeader(dtype, shape, rule, options, impl->message.mutable_header());
  if (!header_ok.ok()) return header_ok;
  impl->description = DescribeArray(dtype, shape);
  impl->total = *total;
  impl->chunk_bytes = options.chunk_bytes;
  impl->progress = options.progress;
  impl->stub = pb::TensorService::NewStub(client_.impl().channel);
  client_.impl().Prepare(&impl->context, options.timeout);
  impl->writer = impl->stub->Upload(&impl->context, &impl->response);
  if (!impl->writer->Write(impl->message)) {
    grpc::Status status = impl->writer->Finish();
    return BrokenStreamStatus(status, absl::StrCat("upload of ", impl->description));
  }
  impl->chunk = impl->message.mutable_chunk();  // drops the header
  impl->chunk->reserve(static_cast<size_t>(std::min<int64_t>(impl->chunk_bytes, impl->total)));
  return std::unique_ptr<Uploader>(new Uploader(std::move(impl)));
}

absl::StatusOr<TensorInfo> TensorClient::Upload(const HostArray& array, const Rule& rule,
                                                const UploadOptions& options) const {
  auto total = ExpectedBytes(array.dtype, array.shape);
  if (!total.ok()) return total.status();
  if (static_cast<int64_t>(array.data.size()) != *total) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", *total, " bytes for ",
                                                   DescribeArray(array.dtype, array.shape),
                                                   ", got ", array.data.size()));
  }
  absl::Status options_ok = ValidateUploadOptions(options);
  if (!options_ok.ok()) return options_ok;
  if (auto in_place = UploadInPlace(client_, array, rule, options)) return *std::move(in_place);
  if (auto through_region = UploadThroughStaging(client_, array, rule, options)) {
    return *std::move(through_region);
  }
  auto uploader = StartUpload(array.dtype, array.shape, rule, options);
  if (!uploader.ok()) return uploader.status();
  absl::Status written = (*uploader)->Write(array.data);
  if (!written.ok()) return written;
  return (*uploader)->Finish();
}

absl::StatusOr<TensorInfo> TensorClient::UploadFrom(DType dtype, std::vector<int64_t> shape,
                                                    const ByteReader& reader, const Rule& rule,
                                                    const UploadOptions& options) const {
  absl::Status options_ok = ValidateUploadOptions(options);
  if (!options_ok.ok()) return options_ok;
  if (auto through_region =
          UploadFromThroughStaging(client_, dtype, shape, reader, rule, options)) {
    return *std::move(through_region);
  }
  auto uploader = StartUpload(dtype, std::move(shape), rule, options);
  if (!uploader.ok()) return uploader.status();
  absl::Status written = (*uploader)->WriteFrom(reader);
  if (!written.ok()) return written;
  return (*uploader)->Finish();
}

absl::StatusOr<std::vector<NamedTensor>> TensorClient::UploadBatch(
    const std::vector<BatchArray>& arrays, const Rule& rule, const UploadOptions& options) const {
  absl::Status chunk_ok = ValidateChunkBytes(options.chunk_bytes);
  if (!chunk_ok.ok()) return chunk_ok;
  pb::UploadBatchRequest message;
  pb::BatchHeader* header = message.mutable_header();
  absl::Status header_ok = FillBatchHeader(rule, options, header);
  if (!header_ok.ok()) return header_ok;
  for (const BatchArray& entry : arrays) {
    const HostArray& a = entry.array;
    auto total = ExpectedBytes(a.dtype, a.shape);
    if (!total.ok()) {
      return absl::Status(total.status().code(),
                          absl::StrCat("array '", entry.key, "': ", total.status().message()));
    }
    if (static_cast<int64_t>(a.data.size()) != *total) {
      return absl::InvalidArgumentError(absl::StrCat("array '", entry.key, "': expected ", *total,
                                                     " bytes for ", DescribeArray(a.dtype, a.shape),
                                                     ", got ", a.data.size()));
    }
    pb::ArrayHeader* h = header->add_arrays();
    h->set_key(entry.key);
    h->set_dtype(ToProto(a.dtype));
    for (int64_t d : a.shape) h->add_shape(d);
  }

  // A local daemon reads the arrays from one staging region (TransferPath).
  absl::StatusOr<std::optional<RegionPool::Lease>> staged =
      StageBatchArrays(client_, arrays, options.path);
  if (!staged.ok()) return staged.status();

  int64_t total_bytes = 0;
  for (const BatchArray& a : arrays) total_bytes += static_cast<int64_t>(a.array.data.size());
  int64_t sent = 0;
  auto stub = pb::TensorService::NewStub(client_.impl().channel);
  grpc::ClientContext context;
  client_.impl().Prepare(&context, options.timeout);
  pb::UploadBatchResponse response;
  auto writer = stub->UploadBatch(&context, &response);
  bool ok = writer->Write(message);
  int64_t region_offset = 0;
  for (size_t i = 0; ok && staged->has_value() && i < arrays.size(); ++i) {
    const int64_t size = static_cast<int64_t>(arrays[i].array.data.size());
    if (size == 0) continue;
    pb::BatchChunk* chunk = message.mutable_chunk();
    chunk->set_array_index(static_cast<int32_t>(i));
    chunk->mutable_region()->set_region_id((*staged)->region().id());
    chunk->mutable_region()->set_offset(region_offset);
    chunk->mutable_region()->set_size(size);
    region_offset += size;
    ok = writer->Write(message);
  }
  for (size_t i = 0; ok && !staged->has_value() && i < arrays.size(); ++i) {
    absl::Span<const uint8_t> data = arrays[i].array.data;
    while (ok && !data.empty()) {
      size_t take = std::min<size_t>(data.size(), static_cast<size_t>(options.chunk_bytes));
      pb::BatchChunk* chunk = message.mutable_chunk();
      chunk->set_array_index(static_cast<int32_t>(i));
      chunk->mutable_data()->assign(reinterpret_cast<const char*>(data.data()), take);
      data.remove_prefix(take);
      ok = writer->Write(message);
      sent += static_cast<int64_t>(take);
      if (ok && options.progress && sent < total_bytes) options.progress(sent, total_bytes);
    }
  }
  if (ok) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok() || !ok) return BrokenStreamStatus(status, "UploadBatch");
  if (options.progress) options.progress(total_bytes, total_bytes);
  if (response.tensors_size() != static_cast<int>(arrays.size())) {
    return absl::InternalError(absl::StrCat("UploadBatch of ", arrays.size(), " arrays returned ",
                                            response.tensors_size(), " tensors"));
  }
  return FromProtos(response.tensors());
}

}  // namespace placement::client

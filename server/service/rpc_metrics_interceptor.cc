#include "server/service/rpc_metrics_interceptor.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "placement/v1/prefetch_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

constexpr char kRpcs[] = "placementd_rpcs_total";
constexpr char kDuration[] = "placementd_rpc_duration_seconds";
constexpr char kReceived[] = "placementd_rpc_received_bytes";
constexpr char kSent[] = "placementd_rpc_sent_bytes";

// "OK", "INVALID_ARGUMENT", ...: gRPC's and Abseil's codes are the same.
std::string CodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat(static_cast<int>(code)) : name;
}

// Interceptors see a received message only as `void*`; its type is the
// method's request type, so the methods whose requests stream in are listed
// with a function that knows that type.
using MessageBytesFn = size_t (*)(const void*);

template <typename Request>
size_t RequestBytes(const void* message) {
  return static_cast<const Request*>(message)->ByteSizeLong();
}

MessageBytesFn StreamedRequestBytes(const std::string& method) {
  static const auto* table = new absl::flat_hash_map<std::string, MessageBytesFn>{
      {absl::StrCat("/", pb::TensorService::service_full_name(), "/Upload"),
       &RequestBytes<pb::UploadRequest>},
      {absl::StrCat("/", pb::TensorService::service_full_name(), "/UploadBatch"),
       &RequestBytes<pb::UploadBatchRequest>},
      {absl::StrCat("/", pb::PrefetchService::service_full_name(), "/Prefetch"),
       &RequestBytes<pb::PrefetchRequest>},
  };
  auto it = table->find(method);
  return it == table->end() ? nullptr : it->second;
}

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics* metrics, const ServerRpcInfo& info)
      : metrics_(metrics),
        method_(info.method()),
        start_(absl::Now()),
        request_bytes_(StreamedRequestBytes(method_)),
        streams_out_(info.type() == ServerRpcInfo::Type::SERVER_STREAMING ||
                     info.type() == ServerRpcInfo::Type::BIDI_STREAMING) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (request_bytes_ != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (const void* message = methods->GetRecvMessage(); message != nullptr) {
        received_ += request_bytes_(message);
      }
    }
    if (streams_out_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // Serializes now; gRPC sends these bytes (no second serialization).
      if (grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage(); buffer != nullptr) {
        sent_ += buffer->Length();
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const MetricLabels method = {{"method", method_}};
      metrics_->Increment(
          kRpcs, {{"method", method_}, {"code", CodeName(methods->GetSendStatus().error_code())}});
      metrics_->Observe(kDuration, method, absl::ToDoubleSeconds(absl::Now() - start_));
      if (request_bytes_ != nullptr) metrics_->Observe(kReceived, method, received_);
      if (streams_out_) metrics_->Observe(kSent, method, sent_);
    }
    methods->Proceed();
  }

 private:
  Metrics* const metrics_;
  const std::string method_;
  const absl::Time start_;
  const MessageBytesFn request_bytes_;  // null: requests do not stream in
  const bool streams_out_;
  double received_ = 0;  // gRPC runs one call's interceptions one at a time
  double sent_ = 0;
};

class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(metrics_, *info);
  }

 private:
  Metrics* metrics_;
};

// 1 KiB, 4 KiB, ..., 16 GiB.
std::vector<double> ByteBuckets() {
  std::vector<double> buckets;
  for (double b = 1024; b <= 16.0 * (1 << 30); b *= 4) buckets.push_back(b);
  return buckets;
}

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(Metrics* metrics) {
  metrics->Describe(kRpcs, "counter", "RPCs finished, by method and status code.");
  metrics->DescribeHistogram(kDuration, "Seconds from the start of an RPC to its final status.",
                             {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                              2.5, 5, 10, 30, 60, 300});
  metrics->DescribeHistogram(
      kReceived, "Bytes of the request messages a client streamed in, per call (protobuf size).",
      ByteBuckets());
  metrics->DescribeHistogram(
      kSent, "Bytes of the response messages the daemon streamed out, per call (serialized).",
      ByteBuckets());
  return std::make_unique<RpcMetricsInterceptorFactory>(metrics);
}

}  // namespace placement::server

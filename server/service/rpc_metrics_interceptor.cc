#include "server/service/rpc_metrics_interceptor.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"
#include "placement/v1/prefetch_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

constexpr char kStarted[] = "grpc_server_started_total";
constexpr char kHandled[] = "grpc_server_handled_total";
constexpr char kHandling[] = "grpc_server_handling_seconds";
constexpr char kReceivedMessages[] = "grpc_server_msg_received_total";
constexpr char kSentMessages[] = "grpc_server_msg_sent_total";
constexpr char kReceived[] = "placementd_rpc_received_bytes";
constexpr char kSent[] = "placementd_rpc_sent_bytes";

// Codes as google.golang.org/grpc/codes spells them (Code.String()), which
// is what stock dashboards filter on.
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};

std::string CodeName(grpc::StatusCode code) {
  const int n = static_cast<int>(code);
  return n >= 0 && n < static_cast<int>(kCodeNames.size()) ? kCodeNames[n] : absl::StrCat(n);
}

const char* TypeName(bool client_streaming, bool server_streaming) {
  if (client_streaming && server_streaming) return "bidi_stream";
  if (client_streaming) return "client_stream";
  if (server_streaming) return "server_stream";
  return "unary";
}

const char* TypeName(ServerRpcInfo::Type type) {
  switch (type) {
    case ServerRpcInfo::Type::CLIENT_STREAMING:
      return TypeName(true, false);
    case ServerRpcInfo::Type::SERVER_STREAMING:
      return TypeName(false, true);
    case ServerRpcInfo::Type::BIDI_STREAMING:
      return TypeName(true, true);
    default:
      return TypeName(false, false);
  }
}

// {grpc_type, grpc_service, grpc_method} of "/pkg.Service/Method".
MetricLabels MethodLabels(absl::string_view path, const char* type) {
  absl::string_view trimmed = absl::StripPrefix(path, "/");
  const size_t slash = trimmed.find('/');
  absl::string_view service = slash == absl::string_view::npos ? "" : trimmed.substr(0, slash);
  absl::string_view method = slash == absl::string_view::npos ? trimmed : trimmed.substr(slash + 1);
  return {{"grpc_type", type},
          {"grpc_service", std::string(service)},
          {"grpc_method", std::string(method)}};
}

// The byte histograms name the method without its type.
MetricLabels WithoutType(const MetricLabels& labels) {
  return MetricLabels(labels.begin() + 1, labels.end());
}

MetricLabels WithCode(MetricLabels labels, const std::string& code) {
  labels.emplace_back("grpc_code", code);
  return labels;
}

// Interceptors see a received message only as `void*`; its type is the
// method's request type, so the methods whose requests stream in are listed
// with a function that knows that type.
using MessageBytesFn = size_t (*)(const void*);

template <typename Request>
size_t RequestBytes(const void* message) {
  return static_cast<const Request*>(message)->ByteSizeLong();
}

// Upload and UploadBatch are raw methods (tensor_handler.h): their received
// messages are the serialized bytes.
size_t BufferBytes(const void* message) {
  return static_cast<const grpc::ByteBuffer*>(message)->Length();
}

MessageBytesFn StreamedRequestBytes(const std::string& method) {
  static const auto* table = new absl::flat_hash_map<std::string, MessageBytesFn>{
      {absl::StrCat("/", pb::TensorService::service_full_name(), "/Upload"), &BufferBytes},
      {absl::StrCat("/", pb::TensorService::service_full_name(), "/UploadBatch"), &BufferBytes},
      {absl::StrCat("/", pb::PrefetchService::service_full_name(), "/Prefetch"),
       &RequestBytes<pb::PrefetchRequest>},
  };
  auto it = table->find(method);
  return it == table->end() ? nullptr : it->second;
}

// What a call of one method updates, looked up once per method (not per
// call): its series, and how to count its streamed bytes. The handled
// counter of a code is made at its first use, so the exposition shows only
// the codes a method has answered (and OK).
class MethodSeries {
 public:
  MethodSeries(Metrics* metrics, const ServerRpcInfo& info)
      : MethodSeries(metrics, info, MethodLabels(info.method(), TypeName(info.type()))) {}

  // The counter of calls answered `code`.
  CounterSeries Handled(grpc::StatusCode code) {
    const int n = static_cast<int>(code);
    if (n < 0 || n >= static_cast<int>(kCodeNames.size())) {
      return metrics_->Counter(kHandled, WithCode(labels_, CodeName(code)));
    }
    absl::MutexLock lock(&mu_);
    std::optional<CounterSeries>& series = handled_[n];
    if (!series) series = metrics_->Counter(kHandled, WithCode(labels_, kCodeNames[n]));
    return *series;
  }

  const MessageBytesFn request_bytes;  // null: requests do not stream in
  const bool streams_out;
  const CounterSeries started, received_messages, sent_messages;
  const HistogramSeries handling, received, sent;

 private:
  MethodSeries(Metrics* metrics, const ServerRpcInfo& info, MetricLabels labels)
      : request_bytes(StreamedRequestBytes(info.method())),
        streams_out(info.type() == ServerRpcInfo::Type::SERVER_STREAMING ||
                    info.type() == ServerRpcInfo::Type::BIDI_STREAMING),
        started(metrics->Counter(kStarted, labels)),
        received_messages(metrics->Counter(kReceivedMessages, labels)),
        sent_messages(metrics->Counter(kSentMessages, labels)),
        handling(metrics->Histogram(kHandling, labels)),
        received(metrics->Histogram(kReceived, WithoutType(labels))),
        sent(metrics->Histogram(kSent, WithoutType(labels))),
        metrics_(metrics),
        labels_(std::move(labels)) {}

  Metrics* const metrics_;
  const MetricLabels labels_;
  absl::Mutex mu_;
  std::array<std::optional<CounterSeries>, kCodeNames.size()> handled_ ABSL_GUARDED_BY(mu_);
};

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit RpcMetricsInterceptor(MethodSeries* series) : series_(series), start_(absl::Now()) {
    series_->started.Add(1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (const void* message = methods->GetRecvMessage(); message != nullptr) {
        ++received_messages_;
        if (series_->request_bytes != nullptr) received_ += series_->request_bytes(message);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      ++sent_messages_;
      // Serializes now; gRPC sends these bytes (no second serialization).
      if (series_->streams_out) {
        if (grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage(); buffer != nullptr) {
          sent_ += buffer->Length();
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      series_->Handled(methods->GetSendStatus().error_code()).Add(1);
      series_->handling.Observe(absl::ToDoubleSeconds(absl::Now() - start_));
      series_->received_messages.Add(received_messages_);
      series_->sent_messages.Add(sent_messages_);
      if (series_->request_bytes != nullptr) series_->received.Observe(received_);
      if (series_->streams_out) series_->sent.Observe(sent_);
    }
    methods->Proceed();
  }

 private:
  MethodSeries* const series_;
  const absl::Time start_;
  // gRPC runs one call's interceptions one at a time.
  double received_ = 0;
  double sent_ = 0;
  double received_messages_ = 0;
  double sent_messages_ = 0;
};

class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(SeriesOf(*info));
  }

 private:
  // The method's series, made at its first call: one entry per method path
  // the server saw, as the registry holds one set of series per path.
  MethodSeries* SeriesOf(const ServerRpcInfo& info) {
    const absl::string_view path = info.method();
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = series_.find(path);
      if (it != series_.end()) return it->second.get();
    }
    absl::MutexLock lock(&mu_);
    std::unique_ptr<MethodSeries>& slot = series_[path];
    if (slot == nullptr) slot = std::make_unique<MethodSeries>(metrics_, info);
    return slot.get();
  }

  Metrics* const metrics_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<MethodSeries>> series_ ABSL_GUARDED_BY(mu_);
};

// Creates every served method's series at zero once the server has
// registered all its services (reflection and health included, which
// register themselves during the build).
class ZeroSeriesPlugin final : public grpc::ServerBuilderPlugin {
 public:
  explicit ZeroSeriesPlugin(Metrics* metrics) : metrics_(metrics) {}
  std::string name() override { return "placementd_rpc_metrics"; }
  void InitServer(grpc::ServerInitializer*) override {}
  void Finish(grpc::ServerInitializer* si) override {
    const auto* pool = google::protobuf::DescriptorPool::generated_pool();
    for (const std::string& service_name : *si->GetServiceList()) {
      const google::protobuf::ServiceDescriptor* service = pool->FindServiceByName(service_name);
      if (service == nullptr) continue;  // its series appear with its first call
      for (int i = 0; i < service->method_count(); ++i) {
        const google::protobuf::MethodDescriptor* m = service->method(i);
        const std::string path = absl::StrCat("/", service_name, "/", m->name());
        const MetricLabels labels =
            MethodLabels(path, TypeName(m->client_streaming(), m->server_streaming()));
        for (const char* counter : {kStarted, kReceivedMessages, kSentMessages}) {
          metrics_->Add(counter, labels, 0);
        }
        metrics_->Add(kHandled, WithCode(labels, "OK"), 0);
        metrics_->InitHistogram(kHandling, labels);
        if (StreamedRequestBytes(path) != nullptr) {
          metrics_->InitHistogram(kReceived, WithoutType(labels));
        }
        if (m->server_streaming()) metrics_->InitHistogram(kSent, WithoutType(labels));
      }
    }
  }
  void ChangeArguments(const std::string&, void*) override {}

 private:
  Metrics* const metrics_;
};

class ZeroSeriesOption final : public grpc::ServerBuilderOption {
 public:
  explicit ZeroSeriesOption(Metrics* metrics) : metrics_(metrics) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ZeroSeriesPlugin>(metrics_));
  }

 private:
  Metrics* const metrics_;
};

// 1 KiB, 4 KiB, ..., 16 GiB.
std::vector<double> ByteBuckets() {
  std::vector<double> buckets;
  for (double b = 1024; b <= 16.0 * (1 << 30); b *= 4) buckets.push_back(b);
  return buckets;
}

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InstallRpcMetrics(
    grpc::ServerBuilder* builder, Metrics* metrics) {
  metrics->Describe(kStarted, "counter", "Total number of RPCs started on the server.");
  metrics->Describe(kHandled, "counter",
                    "Total number of RPCs completed on the server, regardless of success or "
                    "failure.");
  metrics->Describe(kReceivedMessages, "counter",
                    "Total number of RPC stream messages received on the server.");
  metrics->Describe(kSentMessages, "counter",
                    "Total number of gRPC stream messages sent by the server.");
  metrics->DescribeHistogram(kHandling,
                             "Histogram of response latency (seconds) of gRPC that had been "
                             "application-level handled by the server.",
                             {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                              2.5, 5, 10, 30, 60, 300});
  metrics->DescribeHistogram(
      kReceived, "Bytes of the request messages a client streamed in, per call (protobuf size).",
      ByteBuckets());
  metrics->DescribeHistogram(
      kSent, "Bytes of the response messages the daemon streamed out, per call (serialized).",
      ByteBuckets());
  builder->SetOption(std::make_unique<ZeroSeriesOption>(metrics));
  return std::make_unique<RpcMetricsInterceptorFactory>(metrics);
}

}  // namespace placement::server

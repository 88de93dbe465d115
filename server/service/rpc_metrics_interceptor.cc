#include "server/service/rpc_metrics_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

std::string CodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {
      "OK",           "CANCELLED",          "UNKNOWN",      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",  "DATA_LOSS",
      "UNAUTHENTICATED"};
  int c = static_cast<int>(code);
  if (c >= 0 && c < 17) return kNames[c];
  return absl::StrCat(c);
}

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->Increment("placementd_rpcs_total",
                          {{"method", method_}, {"code", CodeName(methods->GetSendStatus().error_code())}});
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  std::string method_;
};

class RpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(metrics_, info->method());
  }

 private:
  Metrics* metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(Metrics* metrics) {
  metrics->Describe("placementd_rpcs_total", "counter", "RPCs finished, by method and status code.");
  return std::make_unique<RpcMetricsInterceptorFactory>(metrics);
}

}  // namespace placement::server

// Counts every RPC by method and final status code into Metrics
// (placementd_rpcs_total{method,code}).
#ifndef PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_
#define PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics/metrics.h"

namespace placement::server {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(Metrics* metrics);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

// A gRPC server interceptor that records every RPC into Metrics:
//   placementd_rpcs_total{method,code}            counter, at the final status
//   placementd_rpc_duration_seconds{method}       histogram, start to final status
//   placementd_rpc_received_bytes{method}         histogram, per call: protobuf bytes of
//                                                 the requests a client streams in
//                                                 (Upload, UploadBatch, Prefetch)
//   placementd_rpc_sent_bytes{method}             histogram, per call: serialized bytes of
//                                                 the responses the daemon streams out
//                                                 (Download, Prefetch)
// `method` is the full gRPC path ("/placement.v1.TensorService/Upload").
#ifndef PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_
#define PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics/metrics.h"

namespace placement::server {

// Declares the metrics above. REQUIRES: metrics outlives the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeRpcMetricsInterceptorFactory(Metrics* metrics);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

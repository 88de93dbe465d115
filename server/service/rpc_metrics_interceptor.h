// RPC metrics under the names stock gRPC dashboards and alerts use (those of
// go-grpc-prometheus / grpc-ecosystem's server metrics):
//   grpc_server_started_total{grpc_type,grpc_service,grpc_method}            counter
//   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}  counter
//   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}         histogram
//   grpc_server_msg_received_total{grpc_type,grpc_service,grpc_method}       counter
//   grpc_server_msg_sent_total{grpc_type,grpc_service,grpc_method}           counter
// and the sizes of streamed transfers:
//   placementd_rpc_received_bytes{grpc_service,grpc_method}  histogram, per call: protobuf
//       bytes of the requests a client streams in (Upload, UploadBatch, Prefetch)
//   placementd_rpc_sent_bytes{grpc_service,grpc_method}      histogram, per call: serialized
//       bytes of the responses the daemon streams out (Download, Prefetch, reflection)
// grpc_type is unary, client_stream, server_stream or bidi_stream;
// grpc_service the full service name ("placement.v1.TensorService");
// grpc_method the method ("Upload"); grpc_code the code as gRPC's Go
// library spells it ("OK", "InvalidArgument", "NotFound", ...).
//
// Every method of every service the server registers has its started,
// message and latency series, and handled{grpc_code="OK"}, at zero from the
// start (as go-grpc-prometheus's InitializeMetrics does).
#ifndef PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_
#define PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/server_builder.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/metrics/metrics.h"

namespace placement::server {

// Declares the metrics above, and has `builder` create the series of every
// method it serves once it is built. Returns the interceptor factory that
// records each call; add it to the builder's interceptor creators.
// REQUIRES: metrics outlives the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InstallRpcMetrics(
    grpc::ServerBuilder* builder, Metrics* metrics);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_RPC_METRICS_INTERCEPTOR_H_

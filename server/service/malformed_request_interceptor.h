// A server interceptor that names malformed requests: when a unary call's
// request bytes do not parse as its request message, gRPC fails the call
// itself with UNIMPLEMENTED and no message (the handler never runs); this
// interceptor sees the failed parse (no received message) and rewrites that
// status to INVALID_ARGUMENT "malformed request: ...". Streams parse each
// message in the handler's read loop and already answer INVALID_ARGUMENT.
//
// Register it before the metrics interceptor so the metrics count the
// rewritten code. Thread-safe (one interceptor per call).
#ifndef PLACEMENT_SERVER_SERVICE_MALFORMED_REQUEST_INTERCEPTOR_H_
#define PLACEMENT_SERVER_SERVICE_MALFORMED_REQUEST_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace placement::server {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeMalformedRequestInterceptorFactory();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_MALFORMED_REQUEST_INTERCEPTOR_H_

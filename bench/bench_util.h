// Shared pieces of the benchmarks: the in-process baseline services (bare
// echo, bare byte sink/source), latency percentiles, and ratio printing.
// Every benchmark prints ratios against a baseline measured in the same run.
#ifndef PLACEMENT_BENCH_BENCH_UTIL_H_
#define PLACEMENT_BENCH_BENCH_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "placement/bench/v1/echo.grpc.pb.h"

namespace placement::bench {

// Bare baseline services: no gate, no metrics, no core -- just gRPC.
class EchoServiceImpl final : public placement::bench::v1::EchoService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const v1::EchoMessage* request,
                                 v1::EchoMessage* response) override;
  grpc::ServerReadReactor<v1::EchoMessage>* Sink(grpc::CallbackServerContext* context,
                                                 v1::SinkSummary* response) override;
  grpc::ServerWriteReactor<v1::EchoMessage>* Source(grpc::CallbackServerContext* context,
                                                    const v1::SourceRequest* request) override;
};

// A gRPC server with only the echo service, on `address` ("127.0.0.1:0" or
// "unix:/path"). `bound` receives the dialable address.
std::unique_ptr<grpc::Server> StartEchoServer(EchoServiceImpl* service, const std::string& address,
                                              std::string* bound);

struct LatencySummary {
  absl::Duration p50;
  absl::Duration p99;
  absl::Duration mean;
};
LatencySummary Summarize(std::vector<absl::Duration> samples);

// "1.23 us".
std::string Micros(absl::Duration d);

// The median of `values` (the upper one of an even count); 0 when empty.
double Median(std::vector<double> values);

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_BENCH_UTIL_H_

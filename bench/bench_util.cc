#include "bench/bench_util.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace placement::bench {

grpc::ServerUnaryReactor* EchoServiceImpl::Echo(grpc::CallbackServerContext* context,
                                                const v1::EchoMessage* request,
                                                v1::EchoMessage* response) {
  *response = *request;
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<v1::EchoMessage>* EchoServiceImpl::Sink(grpc::CallbackServerContext*,
                                                                v1::SinkSummary* response) {
  class Reactor final : public grpc::ServerReadReactor<v1::EchoMessage> {
   public:
    explicit Reactor(v1::SinkSummary* response) : response_(response) { StartRead(&message_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        response_->set_total_bytes(total_);
        Finish(grpc::Status::OK);
        return;
      }
      total_ += static_cast<int64_t>(message_.payload().size());
      StartRead(&message_);
    }
    void OnDone() override { delete this; }

   private:
    v1::SinkSummary* response_;
    v1::EchoMessage message_;
    int64_t total_ = 0;
  };
  return new Reactor(response);
}

grpc::ServerWriteReactor<v1::EchoMessage>* EchoServiceImpl::Source(
    grpc::CallbackServerContext*, const v1::SourceRequest* request) {
  class Reactor final : public grpc::ServerWriteReactor<v1::EchoMessage> {
   public:
    explicit Reactor(const v1::SourceRequest* request)
        : remaining_(request->total_bytes()), chunk_(std::max<int64_t>(1, request->chunk_bytes())) {
      message_.mutable_payload()->assign(static_cast<size_t>(std::min(chunk_, remaining_)), 'x');
      Next();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      Next();
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (remaining_ <= 0) {
        Finish(grpc::Status::OK);
        return;
      }
      int64_t n = std::min(chunk_, remaining_);
      if (static_cast<int64_t>(message_.payload().size()) != n)
        message_.mutable_payload()->resize(n);
      remaining_ -= n;
      StartWrite(&message_);
    }
    int64_t remaining_;
    int64_t chunk_;
    v1::EchoMessage message_;
  };
  return new Reactor(request);
}

std::unique_ptr<grpc::Server> StartEchoServer(EchoServiceImpl* service, const std::string& address,
                                              std::string* bound) {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  bool is_unix = address.rfind("unix:", 0) == 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), is_unix ? nullptr : &port);
  builder.RegisterService(service);
  auto server = builder.BuildAndStart();
  if (is_unix) {
    *bound = address;
  } else {
    *bound = absl::StrFormat("%s:%d", address.substr(0, address.rfind(':')), port);
  }
  return server;
}

LatencySummary Summarize(std::vector<absl::Duration> samples) {
  LatencySummary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.p50 = samples[samples.size() / 2];
  s.p99 = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
  absl::Duration total;
  for (auto d : samples) total += d;
  s.mean = total / static_cast<int64_t>(samples.size());
  return s;
}

std::string Micros(absl::Duration d) {
  return absl::StrFormat("%.1f us", absl::ToDoubleMicroseconds(d));
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace placement::bench

// ListDevices round-trip latency through the daemon's full stack (gate,
// interceptor, handler, inventory) against a bare gRPC echo service started
// in the same process on the same transport; and a small collective (an
// all-reduce of a 1 KiB f32 tensor sharded over the 8 devices, through
// CollectiveService, KEEP: the result is deleted untimed) against an echo
// of 1 KiB: through the client library (with and without its session), on
// the generated stub, and on the stub sending what the library sends (the
// session header and a deadline), which parts the library's own cost from
// gRPC's; and the echo sending that header and deadline too, the baseline
// that carries gRPC's cost of them. Prints p50/p99 and the ratios.
//
//   build/bin/device_latency_bench [--iterations=20000] [--transport=tcp|unix|both]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/lock_order_checks.h"
#include "placement/client/client.h"
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "server/daemon.h"
#include "server/logging.h"

ABSL_FLAG(int, iterations, 20000, "Timed round trips per service.");
ABSL_FLAG(int, warmup, 2000, "Untimed round trips first.");
ABSL_FLAG(std::string, transport, "both", "tcp, unix or both.");

namespace placement::bench {
namespace {

template <typename Fn>
std::vector<absl::Duration> Time(int warmup, int iterations, Fn&& call) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<absl::Duration> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    absl::Time start = absl::Now();
    call();
    samples.push_back(absl::Now() - start);
  }
  return samples;
}

int Run(const std::string& transport) {
  std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("placement-bench-", getpid());
  std::filesystem::create_directories(dir);
  const bool is_unix = transport == "unix";
  server::DaemonConfig config;
  config.listen = is_unix ? absl::StrCat("unix:", dir, "/placementd.sock") : "127.0.0.1:0";
  config.backend.kind = "cpu";
  auto daemon = server::Daemon::Start(config);
  if (!daemon.ok()) {
    std::fprintf(stderr, "daemon: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  EchoServiceImpl echo_service;
  std::string echo_address;
  auto echo_server = StartEchoServer(
      &echo_service, is_unix ? absl::StrCat("unix:", dir, "/echo.sock") : "127.0.0.1:0",
      &echo_address);

  auto client = client::Client::Connect((*daemon)->address());
  if (!client.ok()) return 1;
  // The same library without a session of its own (so without the
  // session header on every call): what carrying the session costs.
  auto sessionless = client::Client::Connect(
      (*daemon)->address(), client::ClientOptions{.session_policy = client::SessionPolicy::kNone});
  if (!sessionless.ok()) return 1;
  auto echo_channel = grpc::CreateChannel(echo_address, grpc::InsecureChannelCredentials());
  auto echo_stub = v1::EchoService::NewStub(echo_channel);

  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  int errors = 0;
  // Interleave the two so that machine noise hits both alike.
  std::vector<absl::Duration> ours, bare;
  for (int round = 0; round < 4; ++round) {
    auto a = Time(warmup / 4, iterations / 4, [&] {
      if (!(*client)->ListDevices().ok()) ++errors;
    });
    auto b = Time(warmup / 4, iterations / 4, [&] {
      grpc::ClientContext context;
      v1::EchoMessage request, response;
      if (!echo_stub->Echo(&context, request, &response).ok()) ++errors;
    });
    ours.insert(ours.end(), a.begin(), a.end());
    bare.insert(bare.end(), b.begin(), b.end());
  }
  // A 1 KiB collective (client library and generated stub) against a 1 KiB echo.
  client::MeshClient meshes(**client);
  client::TensorClient tensors(**client);
  client::CollectiveClient collectives(**client);
  client::CollectiveClient sessionless_collectives(**sessionless);
  std::vector<float> values(256, 1.0f);
  auto mesh = meshes.Create({{"data", 8}}, {.mesh_id = "bench"});
  auto input = tensors.Upload(client::HostArray::Of(values, {256}),
                              client::Placement::Sharded("bench", {{"data"}}));
  if (!mesh.ok() || !input.ok()) {
    std::fprintf(stderr, "setup: %s %s\n", mesh.status().ToString().c_str(),
                 input.status().ToString().c_str());
    return 1;
  }
  // The same call on the generated stub (no client library): what the
  // daemon costs, apart from the C++ client's own work.
  auto daemon_channel =
      grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  auto collective_stub = ::placement::v1::CollectiveService::NewStub(daemon_channel);
  std::vector<absl::Duration> collective, raw_collective, echo_1k, no_session, stub_as_library,
      echo_as_library;
  // What the library sends on every call: its session and a deadline.
  const std::string session_id = (*client)->session_id();
  const absl::Duration deadline = (*client)->options().default_deadline;
  auto AsTheLibrary = [&](grpc::ClientContext& context) {
    context.AddMetadata("placement-session", session_id);
    if (deadline > absl::ZeroDuration() && deadline != absl::InfiniteDuration()) {
      context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    }
  };
  v1::EchoMessage kib;
  kib.set_payload(std::string(1024, 'x'));
  // Deletes the results a timed loop made, 256 per call.
  auto DeleteMade = [&](std::vector<std::string>& made) {
    for (size_t i = 0; i < made.size(); i += 256) {
      std::vector<std::string> some(made.begin() + i,
                                    made.begin() + std::min(made.size(), i + 256));
      if (!tensors.Delete(some).ok()) ++errors;
    }
    made.clear();
  };
  // One call of each kind in turn, the order rotating, so that the
  // machine's slow and fast moments hit every kind alike (blocks of
  // thousands of calls of one kind saw the ratio swing 1.3-2.0x between
  // identical runs on a 2-core VM).
  std::vector<std::string> made;
  made.reserve(256);
  // One all-reduce through a client library, its result kept for DeleteMade.
  auto library_call = [&](const client::CollectiveClient& through) {
    auto sum = through.AllReduce(input->id, client::ReduceOp::kSum);
    if (sum.ok()) {
      made.push_back(sum->id);
    } else {
      ++errors;
    }
  };
  const std::function<void()> calls[] = {
      [&] { library_call(collectives); },  // the client library
      [&] {                                // the generated stub
        grpc::ClientContext context;
        ::placement::v1::AllReduceRequest request;
        request.set_tensor_id(input->id);
        ::placement::v1::CollectiveResponse response;
        if (collective_stub->AllReduce(&context, request, &response).ok()) {
          made.push_back(response.tensor().id());
        } else {
          ++errors;
        }
      },
      [&] {  // the echo
        grpc::ClientContext context;
        v1::EchoMessage response;
        if (!echo_stub->Echo(&context, kib, &response).ok()) ++errors;
      },
      [&] { library_call(sessionless_collectives); },  // without a session
      [&] {                                            // the stub sending what the library sends
        grpc::ClientContext context;
        AsTheLibrary(context);
        ::placement::v1::AllReduceRequest request;
        request.set_tensor_id(input->id);
        request.set_op(::placement::v1::REDUCE_OP_SUM);
        ::placement::v1::CollectiveResponse response;
        if (collective_stub->AllReduce(&context, request, &response).ok()) {
          made.push_back(response.tensor().id());
        } else {
          ++errors;
        }
      },
      [&] {  // the echo sending what the library sends
        grpc::ClientContext context;
        AsTheLibrary(context);
        v1::EchoMessage response;
        if (!echo_stub->Echo(&context, kib, &response).ok()) ++errors;
      }};
  std::vector<absl::Duration>* samples[] = {&collective, &raw_collective,  &echo_1k,
                                            &no_session, &stub_as_library, &echo_as_library};
  constexpr int kCalls = 6;
  for (int i = 0; i < warmup + iterations; ++i) {
    for (int k = 0; k < kCalls; ++k) {
      const int which = (i + k) % kCalls;
      const absl::Time start = absl::Now();
      calls[which]();
      if (i >= warmup) samples[which]->push_back(absl::Now() - start);
    }
    if (made.size() >= 256) DeleteMade(made);  // untimed
  }
  DeleteMade(made);
  LatencySummary c = Summarize(collective), k = Summarize(echo_1k), r = Summarize(raw_collective);
  LatencySummary ns = Summarize(no_session), sl = Summarize(stub_as_library);
  LatencySummary el = Summarize(echo_as_library);
  LatencySummary o = Summarize(ours), e = Summarize(bare);
  std::printf("transport=%s iterations=%d errors=%d\n", transport.c_str(), iterations, errors);
  std::printf("  ListDevices (8 cpu devices): p50 %s  p99 %s  mean %s\n", Micros(o.p50).c_str(),
              Micros(o.p99).c_str(), Micros(o.mean).c_str());
  std::printf("  bare gRPC echo:              p50 %s  p99 %s  mean %s\n", Micros(e.p50).c_str(),
              Micros(e.p99).c_str(), Micros(e.mean).c_str());
  std::printf("  ratio ListDevices / echo:    p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(o.p50, e.p50), absl::FDivDuration(o.p99, e.p99));
  std::printf("  AllReduce 1 KiB (8 devices): p50 %s  p99 %s  mean %s\n", Micros(c.p50).c_str(),
              Micros(c.p99).c_str(), Micros(c.mean).c_str());
  std::printf("  bare gRPC echo of 1 KiB:     p50 %s  p99 %s  mean %s\n", Micros(k.p50).c_str(),
              Micros(k.p99).c_str(), Micros(k.mean).c_str());
  std::printf("  ratio AllReduce / echo:      p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(c.p50, k.p50), absl::FDivDuration(c.p99, k.p99));
  std::printf("  AllReduce on the stub:       p50 %s  p99 %s  mean %s\n", Micros(r.p50).c_str(),
              Micros(r.p99).c_str(), Micros(r.mean).c_str());
  std::printf("  ratio stub AllReduce / echo: p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(r.p50, k.p50), absl::FDivDuration(r.p99, k.p99));
  std::printf("  AllReduce, no session:       p50 %s  p99 %s  mean %s\n", Micros(ns.p50).c_str(),
              Micros(ns.p99).c_str(), Micros(ns.mean).c_str());
  std::printf("  ratio no-session / echo:     p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(ns.p50, k.p50), absl::FDivDuration(ns.p99, k.p99));
  std::printf("  stub, session + deadline:    p50 %s  p99 %s  mean %s\n", Micros(sl.p50).c_str(),
              Micros(sl.p99).c_str(), Micros(sl.mean).c_str());
  std::printf("  ratio that stub / echo:      p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(sl.p50, k.p50), absl::FDivDuration(sl.p99, k.p99));
  // gRPC's cost of the session header and the deadline in both.
  std::printf("  echo, session + deadline:    p50 %s  p99 %s  mean %s\n", Micros(el.p50).c_str(),
              Micros(el.p99).c_str(), Micros(el.mean).c_str());
  std::printf("  ratio AllReduce / that echo: p50 %.2f  p99 %.2f\n",
              absl::FDivDuration(c.p50, el.p50), absl::FDivDuration(c.p99, el.p99));
  echo_server->Shutdown();
  (*daemon)->Drain();
  std::filesystem::remove_all(dir);
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  placement::server::SetLogLevel(placement::server::LogLevel::kWarning);
  std::string transport = absl::GetFlag(FLAGS_transport);
  int rc = 0;
  if (transport == "tcp" || transport == "both") rc |= placement::bench::Run("tcp");
  if (transport == "unix" || transport == "both") rc |= placement::bench::Run("unix");
  return rc;
}

// ListDevices round-trip latency through the daemon's full stack (gate,
// interceptor, handler, inventory) against a bare gRPC echo service started
// in the same process on the same transport; and a small collective (an
// all-reduce of a 1 KiB f32 tensor sharded over the 8 devices, through
// CollectiveService, KEEP: the result is deleted untimed) against an echo
// of 1 KiB: through the client library (with and without its session), on
// the generated stub, and on the stub sending what the library sends (the
// session header and a deadline), which parts the library's own cost from
// gRPC's; and the echo sending that header and deadline too, the baseline
// that carries gRPC's cost of them; and Describe of the input on the stub,
// which answers the same TensorInfo (8 shards) with no collective behind it,
// so the collective's own cost shows apart from its response's. Prints
// p50/p99 and the ratios, then the process's CPU per call of four of the
// kinds (blocks of 128 calls) and their ratios to the echo's.
//
//   build/bin/device_latency_bench [--iterations=20000] [--transport=tcp|unix|both]
#include <sys/resource.h>

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
#include "placement/v1/tensor_service.grpc.pb.h"
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

// "  <label> p50 .. p99 .. mean ..", labels in one column.
void PrintLatency(const char* label, const LatencySummary& s) {
  std::printf("  %-28s p50 %s  p99 %s  mean %s\n", label, Micros(s.p50).c_str(),
              Micros(s.p99).c_str(), Micros(s.mean).c_str());
}

// CPU time (user + system) this process has used: the client, the daemon
// and the echo server all run in it.
absl::Duration ProcessCpu() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto of = [](const timeval& t) {
    return absl::Seconds(t.tv_sec) + absl::Microseconds(t.tv_usec);
  };
  return of(usage.ru_utime) + of(usage.ru_stime);
}

// "  <label> p50 a/b  p99 a/b".
void PrintRatio(const char* label, const LatencySummary& a, const LatencySummary& b) {
  std::printf("  %-28s p50 %.2f  p99 %.2f\n", label, absl::FDivDuration(a.p50, b.p50),
              absl::FDivDuration(a.p99, b.p99));
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
  auto tensor_stub = ::placement::v1::TensorService::NewStub(daemon_channel);
  std::vector<absl::Duration> collective, raw_collective, echo_1k, no_session, stub_as_library,
      echo_as_library, describe;
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
  // The kinds of call, in the order of calls[] and samples[].
  enum Kind {
    kLibrary,
    kStub,
    kEcho,
    kNoSession,
    kStubAsLibrary,
    kEchoAsLibrary,
    kDescribe,
    kCalls
  };
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
      },
      [&] {  // the input's TensorInfo (8 shards, as a result's) on the stub: no collective
        grpc::ClientContext context;
        ::placement::v1::DescribeRequest request;
        request.set_tensor_id(input->id);
        ::placement::v1::DescribeResponse response;
        if (!tensor_stub->Describe(&context, request, &response).ok()) ++errors;
      }};
  std::vector<absl::Duration>* samples[] = {&collective, &raw_collective,  &echo_1k,
                                            &no_session, &stub_as_library, &echo_as_library,
                                            &describe};
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
  // CPU per call of four of the kinds, each in blocks of 128 calls (rotating
  // between the kinds; deleting results stays outside the blocks): less
  // sensitive to this VM's scheduling noise than latency, so a change in the
  // work done per call shows here first.
  constexpr Kind kCpuKinds[] = {kEcho, kLibrary, kStub, kDescribe};
  absl::Duration cpu[kCalls] = {};
  int cpu_calls[kCalls] = {};
  for (int block = 0; block < std::max(4, iterations / 128); ++block) {
    const Kind which = kCpuKinds[block % std::size(kCpuKinds)];
    const absl::Duration before = ProcessCpu();
    for (int i = 0; i < 128; ++i) calls[which]();
    cpu[which] += ProcessCpu() - before;
    cpu_calls[which] += 128;
    DeleteMade(made);
  }
  auto cpu_per_call = [&](int which) { return cpu[which] / cpu_calls[which]; };
  LatencySummary c = Summarize(collective), k = Summarize(echo_1k), r = Summarize(raw_collective);
  LatencySummary ns = Summarize(no_session), sl = Summarize(stub_as_library);
  LatencySummary el = Summarize(echo_as_library), d = Summarize(describe);
  LatencySummary o = Summarize(ours), e = Summarize(bare);
  std::printf("transport=%s iterations=%d errors=%d\n", transport.c_str(), iterations, errors);
  PrintLatency("ListDevices (8 cpu devices):", o);
  PrintLatency("bare gRPC echo:", e);
  PrintRatio("ratio ListDevices / echo:", o, e);
  PrintLatency("AllReduce 1 KiB (8 devices):", c);
  PrintLatency("bare gRPC echo of 1 KiB:", k);
  PrintRatio("ratio AllReduce / echo:", c, k);
  PrintLatency("AllReduce on the stub:", r);
  PrintRatio("ratio stub AllReduce / echo:", r, k);
  PrintLatency("AllReduce, no session:", ns);
  PrintRatio("ratio no-session / echo:", ns, k);
  PrintLatency("stub, session + deadline:", sl);
  PrintRatio("ratio that stub / echo:", sl, k);
  // gRPC's cost of the session header and the deadline in both.
  PrintLatency("echo, session + deadline:", el);
  PrintRatio("ratio AllReduce / that echo:", c, el);
  // A call answering the same TensorInfo with no collective behind it: what
  // the collective itself adds on the daemon.
  PrintLatency("Describe on the stub:", d);
  PrintRatio("ratio Describe / echo:", d, k);
  PrintRatio("ratio stub AllReduce / Describe:", r, d);
  std::printf("  CPU per call (this process, blocks of 128): echo 1 KiB %s",
              Micros(cpu_per_call(kEcho)).c_str());
  for (const auto& [kind, label] : {std::pair{kLibrary, "AllReduce library"},
                                    std::pair{kStub, "stub"}, std::pair{kDescribe, "Describe"}}) {
    std::printf(", %s %s (%.2fx)", label, Micros(cpu_per_call(kind)).c_str(),
                absl::FDivDuration(cpu_per_call(kind), cpu_per_call(kEcho)));
  }
  std::printf("\n");
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

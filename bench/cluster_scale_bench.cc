// cluster_scale_bench: what a cluster costs as it grows (docs/cluster.md
// "Scale"). For each size N (--sizes), in a child process of its own (each
// forks its daemons before it makes any gRPC object), N real placementd
// daemons on 127.0.0.1 with one CPU device each:
//
//   formation   wall time from launch until every daemon is ready (the
//               cluster formed), against N lone daemons launched the same
//               way (no cluster): the ratio is what forming adds to
//               starting N processes;
//   idle        CPU of the coordinator (process 0) and of a member over
//               --idle_seconds at --heartbeat_interval, as a share of one
//               core; resident memory of each;
//   all-reduce  a 4 KiB-per-device f32 SUM of a tensor sharded over one
//               device per daemon (a mesh spanning all N), driven through
//               daemon 0's CollectiveService (single-controller, source
//               KEEP): the first call (which forms the set's transport
//               contexts) -- its latency and the CPU all daemons spent on
//               it -- and the p50 of --reps later calls, against Gloo's
//               ring all-reduce of the same bytes by N ranks (threads of the
//               child, an in-memory rendezvous; only up to --gloo_max_n).
//
//   build/bin/cluster_scale_bench --sizes=2,8,32,128
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/cluster_daemons.h"
#include "bench/gloo_ranks.h"
#include "common/lock_order_checks.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/mesh_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

ABSL_FLAG(std::string, sizes, "2,8,32,128", "Cluster sizes (daemons, one CPU device each).");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1), "--heartbeat_interval.");
ABSL_FLAG(int, heartbeat_misses, 10, "--heartbeat_misses.");
ABSL_FLAG(int, idle_seconds, 10, "Seconds of idle cluster over which CPU is sampled.");
ABSL_FLAG(int, reps, 30, "Timed all-reduces after the first (p50).");
ABSL_FLAG(int, gloo_max_n, 32, "Largest N for the direct-Gloo baseline (N^2 connections).");

namespace placement::bench {
namespace {

namespace pb = placement::v1;

constexpr int64_t kBlockBytes = 4096;

// utime + stime of `pid`, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
  if (f.size() < 13) return 0;
  double utime = 0, stime = 0;
  (void)absl::SimpleAtod(f[11], &utime);
  (void)absl::SimpleAtod(f[12], &stime);
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double RssMiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      double kib = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2) (void)absl::SimpleAtod(parts[1], &kib);
      return kib / 1024.0;
    }
  }
  return 0;
}

double TotalCpu(const ClusterDaemons& d) {
  double total = 0;
  for (int i = 0; i < d.size(); ++i) total += CpuSeconds(d.pid(i));
  return total;
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

ClusterDaemonsOptions DaemonOptions(int n, bool lone) {
  ClusterDaemonsOptions o;
  o.num_processes = n;
  o.devices_per_process = 1;
  o.device_memory = int64_t{64} << 20;
  o.lone = lone;
  o.start_timeout = absl::Minutes(5);
  o.extra_flags = {
      absl::StrCat("--heartbeat_interval=",
                   absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_interval))),
      absl::StrCat("--heartbeat_misses=", absl::GetFlag(FLAGS_heartbeat_misses)),
  };
  return o;
}

struct Row {
  int n = 0;
  double lone_s = 0, formation_s = 0;
  double coordinator_cpu = 0, member_cpu = 0;  // share of one core
  double coordinator_rss = 0, member_rss = 0;  // MiB
  double first_ms = 0, first_cpu_ms = 0, p50_ms = 0;
  double gloo_p50_ms = -1;
  std::string error;
};

// The mesh, the tensor and the all-reduces; fills the all-reduce columns.
absl::Status MeasureAllReduce(const ClusterDaemons& daemons, Row& row) {
  const int n = daemons.size();
  auto channel = grpc::CreateChannel(daemons.address(0), grpc::InsecureChannelCredentials());
  auto meshes = pb::MeshService::NewStub(channel);
  auto tensors = pb::TensorService::NewStub(channel);
  auto collectives = pb::CollectiveService::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Minutes(1)));
    pb::CreateMeshRequest request;
    request.set_mesh_id("all");
    pb::MeshAxis* axis = request.mutable_axes()->add_axes();
    axis->set_name("d");
    axis->set_size(n);
    for (int d = 0; d < n; ++d) request.add_device_ids(d);
    pb::CreateMeshResponse response;
    grpc::Status s = meshes->CreateMesh(&context, request, &response);
    if (!s.ok()) return absl::InternalError(absl::StrCat("CreateMesh: ", s.error_message()));
  }
  std::string id;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Minutes(1)));
    pb::UploadResponse response;
    auto writer = tensors->Upload(&context, &response);
    pb::UploadRequest header;
    header.mutable_header()->set_dtype(pb::DTYPE_F32);
    header.mutable_header()->add_shape(n * kBlockBytes / 4);
    pb::Sharding* sharding =
        header.mutable_header()->mutable_rule()->mutable_placement()->mutable_sharding();
    sharding->set_mesh_id("all");
    sharding->mutable_spec()->add_dims()->add_axes("d");
    writer->Write(header);
    pb::UploadRequest chunk;
    chunk.set_chunk(std::string(n * kBlockBytes, '\0'));
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!s.ok()) return absl::InternalError(absl::StrCat("Upload: ", s.error_message()));
    id = response.tensor().id();
  }
  auto all_reduce = [&]() -> absl::StatusOr<absl::Duration> {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Minutes(2)));
    pb::AllReduceRequest request;
    request.set_tensor_id(id);
    request.set_op(pb::REDUCE_OP_SUM);
    request.set_source(pb::SOURCE_HANDLING_KEEP);
    pb::CollectiveResponse response;
    const absl::Time start = absl::Now();
    grpc::Status s = collectives->AllReduce(&context, request, &response);
    const absl::Duration took = absl::Now() - start;
    if (!s.ok()) return absl::InternalError(absl::StrCat("AllReduce: ", s.error_message()));
    grpc::ClientContext del_context;
    pb::DeleteTensorsRequest del;
    del.add_tensor_ids(response.tensor().id());
    pb::DeleteTensorsResponse deleted;
    tensors->Delete(&del_context, del, &deleted);
    return took;
  };
  const double cpu_before = TotalCpu(daemons);
  absl::StatusOr<absl::Duration> first = all_reduce();
  if (!first.ok()) return first.status();
  row.first_cpu_ms = (TotalCpu(daemons) - cpu_before) * 1e3;
  row.first_ms = absl::ToDoubleMilliseconds(*first);
  std::vector<double> samples;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    absl::StatusOr<absl::Duration> t = all_reduce();
    if (!t.ok()) return t.status();
    samples.push_back(absl::ToDoubleMilliseconds(*t));
  }
  row.p50_ms = Median(samples);
  return absl::OkStatus();
}

// One size, in this (child) process. Prints nothing; returns the row.
Row Measure(int n) {
  Row row;
  row.n = n;
  {
    const absl::Time start = absl::Now();
    auto lone = ClusterDaemons::Start(DaemonOptions(n, /*lone=*/true));
    if (!lone.ok()) {
      row.error = std::string(lone.status().message());
      return row;
    }
    row.lone_s = absl::ToDoubleSeconds(absl::Now() - start);
  }
  const absl::Time start = absl::Now();
  auto daemons = ClusterDaemons::Start(DaemonOptions(n, /*lone=*/false));
  if (!daemons.ok()) {
    row.error = std::string(daemons.status().message());
    return row;
  }
  row.formation_s = absl::ToDoubleSeconds(absl::Now() - start);
  // Let the first heartbeats settle, then sample an idle window.
  absl::SleepFor(absl::GetFlag(FLAGS_heartbeat_interval) * 2);
  const ClusterDaemons& d = **daemons;
  const int member = n - 1;
  const double c0 = CpuSeconds(d.pid(0)), m0 = CpuSeconds(d.pid(member));
  const absl::Duration idle = absl::Seconds(absl::GetFlag(FLAGS_idle_seconds));
  absl::SleepFor(idle);
  row.coordinator_cpu = (CpuSeconds(d.pid(0)) - c0) / absl::ToDoubleSeconds(idle);
  row.member_cpu = (CpuSeconds(d.pid(member)) - m0) / absl::ToDoubleSeconds(idle);
  row.coordinator_rss = RssMiB(d.pid(0));
  row.member_rss = RssMiB(d.pid(member));
  if (absl::Status s = MeasureAllReduce(d, row); !s.ok()) row.error = std::string(s.message());
#if PLACEMENT_WITH_GLOO
  if (n <= absl::GetFlag(FLAGS_gloo_max_n) && row.error.empty()) {
    auto ranks = GlooRanks::Connect(n);
    if (ranks.ok()) {
      std::vector<double> samples;
      for (int r = 0; r < 5; ++r) {
        samples.push_back(
            (*ranks)->Time(kBlockBytes, absl::GetFlag(FLAGS_reps), GlooRanks::Staging::kNone) *
            1e3);
      }
      row.gloo_p50_ms = Median(samples);
    }
  }
#endif
  return row;
}

std::string Serialize(const Row& r) {
  return absl::StrFormat("%d %f %f %f %f %f %f %f %f %f %f\t%s", r.n, r.lone_s, r.formation_s,
                         r.coordinator_cpu, r.member_cpu, r.coordinator_rss, r.member_rss,
                         r.first_ms, r.first_cpu_ms, r.p50_ms, r.gloo_p50_ms, r.error);
}

bool Parse(const std::string& line, Row& r) {
  std::istringstream in(line.substr(0, line.find('\t')));
  in >> r.n >> r.lone_s >> r.formation_s >> r.coordinator_cpu >> r.member_cpu >>
      r.coordinator_rss >> r.member_rss >> r.first_ms >> r.first_cpu_ms >> r.p50_ms >>
      r.gloo_p50_ms;
  if (line.find('\t') != std::string::npos) {
    r.error = std::string(absl::StripTrailingAsciiWhitespace(line.substr(line.find('\t') + 1)));
  }
  return !in.fail();
}

// Runs Measure(n) in a child and reads its row back through a pipe.
Row MeasureInChild(int n) {
  int fds[2];
  Row row;
  row.n = n;
  if (pipe(fds) != 0) {
    row.error = "pipe failed";
    return row;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const std::string line = Serialize(Measure(n)) + "\n";
    (void)!write(fds[1], line.data(), line.size());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string line;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof(buf))) > 0) line.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!Parse(line, row)) row.error = absl::StrCat("the child for N=", n, " printed no row");
  return row;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  using namespace placement::bench;  // NOLINT(build/namespaces): main only
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  std::vector<int> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      std::cerr << "--sizes: '" << s << "' is not a cluster size of at least 2\n";
      return 2;
    }
    sizes.push_back(n);
  }
  std::printf(
      "cluster_scale_bench: one CPU device per daemon, heartbeat %s x %d, idle window %d s, "
      "%d timed all-reduces; load average %s, %ld hardware threads\n\n",
      absl::FormatDuration(absl::GetFlag(FLAGS_heartbeat_interval)).c_str(),
      absl::GetFlag(FLAGS_heartbeat_misses), absl::GetFlag(FLAGS_idle_seconds),
      absl::GetFlag(FLAGS_reps), LoadAverage().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "| N | N lone starts s | formation s | formation / lone | coordinator CPU %% | member CPU "
      "%% | coordinator RSS MiB | member RSS MiB | first 4 KiB all-reduce ms | its CPU, all "
      "daemons ms | p50 ms | Gloo direct p50 ms | p50 / Gloo |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (int n : sizes) {
    const Row r = MeasureInChild(n);
    if (!r.error.empty() && r.formation_s == 0) {
      std::printf("| %d | failed: %s |\n", n, r.error.c_str());
      std::fflush(stdout);
      continue;
    }
    std::printf(
        "| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.2f | %s | %s "
        "|%s\n",
        r.n, r.lone_s, r.formation_s, r.formation_s / r.lone_s, 100 * r.coordinator_cpu,
        100 * r.member_cpu, r.coordinator_rss, r.member_rss, r.first_ms, r.first_cpu_ms, r.p50_ms,
        r.gloo_p50_ms < 0 ? "-" : absl::StrFormat("%.3f", r.gloo_p50_ms).c_str(),
        r.gloo_p50_ms <= 0 ? "-" : absl::StrFormat("%.1f", r.p50_ms / r.gloo_p50_ms).c_str(),
        r.error.empty() ? "" : absl::StrCat(" (", r.error, ")").c_str());
    std::fflush(stdout);
  }
  std::printf("\nload average after: %s\n", LoadAverage().c_str());
  return 0;
}

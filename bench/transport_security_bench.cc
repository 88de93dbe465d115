// What TLS and token authentication cost, measured in one run on one machine:
// three in-process daemons on 127.0.0.1 -- plaintext, TLS (certificates made
// with `openssl` in a temp dir), plaintext with bearer-token authentication --
// and, against each, upload throughput of --size_mib MiB tensors and the
// round-trip latency of a small RPC (ListDevices). Rounds interleave the
// three so machine noise hits them alike. Prints absolute figures and the
// ratios TLS / plaintext and token / plaintext.
//
//   build/bin/transport_security_bench [--size_mib=64] [--uploads=8] [--iterations=4000]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/lock_order_checks.h"
#include "placement/client/client.h"
#include "placement/client/tensors.h"
#include "server/auth/credentials_file.h"
#include "server/daemon.h"
#include "server/logging.h"

ABSL_FLAG(int64_t, size_mib, 64, "Bytes of each uploaded tensor, in MiB.");
ABSL_FLAG(int, uploads, 8, "Timed uploads per daemon.");
ABSL_FLAG(int, iterations, 4000, "Timed ListDevices round trips per daemon.");

namespace placement::bench {
namespace {

constexpr char kToken[] = "bench-token-0123456789abcdef";

bool Sh(const std::string& command) { return std::system(command.c_str()) == 0; }

// CA, and a server certificate for 127.0.0.1 signed by it.
bool MakeCertificates(const std::string& d) {
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  return Sh(absl::StrCat("openssl req -x509 ", ec, " -keyout ", d, "/ca.key -out ", d,
                         "/ca.pem -days 2 -subj /CN=bench-ca -addext "
                         "basicConstraints=critical,CA:TRUE 2>/dev/null")) &&
         Sh(absl::StrCat("openssl req -new ", ec, " -keyout ", d, "/server.key -out ", d,
                         "/server.csr -subj /CN=placementd 2>/dev/null")) &&
         Sh(absl::StrCat("printf 'subjectAltName=IP:127.0.0.1\\n' > ", d, "/server.ext")) &&
         Sh(absl::StrCat("openssl x509 -req -in ", d, "/server.csr -CA ", d, "/ca.pem -CAkey ", d,
                         "/ca.key -CAcreateserial -days 2 -extfile ", d, "/server.ext -out ", d,
                         "/server.pem 2>/dev/null"));
}

struct Target {
  std::string label;
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<client::Client> client;
  std::vector<absl::Duration> latencies;
  std::vector<double> upload_mb_per_s;
};

int Run() {
  const std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("placement-tls-bench-", getpid());
  std::filesystem::create_directories(dir);
  if (!MakeCertificates(dir)) {
    std::fprintf(stderr, "openssl failed\n");
    return 1;
  }
  {
    server::TokenDigest digest = server::DigestToken(kToken);
    std::string hex;
    for (uint8_t b : digest) hex += absl::StrCat(absl::Hex(b, absl::kZeroPad2));
    std::ofstream(dir + "/creds") << "token sha256:" << hex << " bench user\n";
  }

  std::vector<Target> targets(3);
  targets[0].label = "plaintext";
  targets[1].label = "TLS";
  targets[2].label = "token";
  for (int i = 0; i < 3; ++i) {
    server::DaemonConfig config;
    config.listen = "127.0.0.1:0";
    config.backend.kind = "cpu";
    server::RequestDevicesEverywhere({1, absl::GetFlag(FLAGS_size_mib) << 21},
                                     &config.backend.platforms);
    client::ClientOptions options;
    options.default_deadline = absl::Minutes(10);
    if (i == 1) {
      config.transport.tls_cert = dir + "/server.pem";
      config.transport.tls_key = dir + "/server.key";
      options.tls = true;
      options.tls_ca_file = dir + "/ca.pem";
    }
    if (i == 2) {
      config.auth_file = dir + "/creds";
      options.token = kToken;
    }
    auto daemon = server::Daemon::Start(config);
    if (!daemon.ok()) {
      std::fprintf(stderr, "%s daemon: %s\n", targets[i].label.c_str(),
                   daemon.status().ToString().c_str());
      return 1;
    }
    targets[i].daemon = std::move(*daemon);
    auto client = client::Client::Connect(targets[i].daemon->address(), options);
    if (!client.ok()) {
      std::fprintf(stderr, "%s connect: %s\n", targets[i].label.c_str(),
                   client.status().ToString().c_str());
      return 1;
    }
    targets[i].client = std::move(*client);
  }

  const int64_t bytes = absl::GetFlag(FLAGS_size_mib) << 20;
  std::vector<uint8_t> src(bytes, 1);
  client::HostArray array{client::DType::kU8, {bytes}, src};
  // The gRPC stream on every target (a loopback daemon would take a region).
  client::UploadOptions stream;
  stream.path = client::TransferPath::kStream;
  const int rounds = 4;
  int errors = 0;
  for (int round = 0; round < rounds; ++round) {
    for (Target& t : targets) {
      client::TensorClient tensors(*t.client);
      for (int i = 0; i < absl::GetFlag(FLAGS_uploads) / rounds; ++i) {
        absl::Time start = absl::Now();
        auto info = tensors.Upload(array, {}, stream);
        absl::Duration took = absl::Now() - start;
        if (!info.ok() || !tensors.Delete({info->id}).ok()) {
          ++errors;
          continue;
        }
        t.upload_mb_per_s.push_back(bytes / absl::ToDoubleSeconds(took) / 1e6);
      }
      for (int i = 0; i < 100; ++i) (void)t.client->ListDevices();  // warm
      for (int i = 0; i < absl::GetFlag(FLAGS_iterations) / rounds; ++i) {
        absl::Time start = absl::Now();
        if (!t.client->ListDevices().ok()) ++errors;
        t.latencies.push_back(absl::Now() - start);
      }
    }
  }
  std::printf("upload %lld MiB x %d, ListDevices x %d, errors=%d\n",
              static_cast<long long>(absl::GetFlag(FLAGS_size_mib)), absl::GetFlag(FLAGS_uploads),
              absl::GetFlag(FLAGS_iterations), errors);
  std::vector<LatencySummary> lat;
  std::vector<double> mbps;
  for (Target& t : targets) {
    lat.push_back(Summarize(t.latencies));
    mbps.push_back(Median(t.upload_mb_per_s));
    std::printf("  %-9s upload median %8.1f MB/s   ListDevices p50 %s  p99 %s\n", t.label.c_str(),
                mbps.back(), Micros(lat.back().p50).c_str(), Micros(lat.back().p99).c_str());
  }
  std::printf(
      "  ratio TLS / plaintext:   upload throughput %.2f   ListDevices p50 %.2f  p99 %.2f\n",
      mbps[1] / mbps[0], absl::FDivDuration(lat[1].p50, lat[0].p50),
      absl::FDivDuration(lat[1].p99, lat[0].p99));
  std::printf(
      "  ratio token / plaintext: upload throughput %.2f   ListDevices p50 %.2f  p99 %.2f\n",
      mbps[2] / mbps[0], absl::FDivDuration(lat[2].p50, lat[0].p50),
      absl::FDivDuration(lat[2].p99, lat[0].p99));
  for (Target& t : targets) {
    t.client.reset();
    t.daemon->Drain();
  }
  std::filesystem::remove_all(dir);
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  placement::server::SetLogLevel(placement::server::LogLevel::kWarning);
  return placement::bench::Run();
}

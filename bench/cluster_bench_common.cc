#include "bench/cluster_bench_common.h"

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placement::bench {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string SizeName(int64_t bytes) {
  return bytes >= (1 << 20) ? absl::StrFormat("%lld MiB", static_cast<long long>(bytes >> 20))
                            : absl::StrFormat("%lld KiB", static_cast<long long>(bytes >> 10));
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

std::shared_ptr<grpc::Channel> Dial(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  args.SetMaxSendMessageSize(16 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

void OnThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
  for (auto& t : threads) t.join();
}

void SpinBarrier::ArriveAndWait() {
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return;
  }
  while (generation_.load(std::memory_order_acquire) == generation) std::this_thread::yield();
}

void FirstError::Note(const absl::Status& s) {
  if (s.ok()) return;
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = s;
}

absl::Status FirstError::Get() {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace placement::bench

#include "bench/gloo_ranks.h"

#if PLACEMENT_WITH_GLOO

#include <gloo/allreduce.h>
#include <gloo/math.h>

#include <barrier>
#include <cstring>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/collective/cluster/wire_reduction.h"
#include "server/collective/gloo/gloo_support.h"

namespace placement::bench {
namespace {

void OnThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
  for (auto& t : threads) t.join();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooRanks>> GlooRanks::Connect(int n) {
  auto ranks = std::unique_ptr<GlooRanks>(new GlooRanks());
  ranks->engines_.resize(n);
  absl::Mutex mu;
  absl::Status error;
  OnThreads(n, [&](int r) {
    server::GlooEngineOptions options;
    options.rank = r;
    options.size = n;
    options.store = &ranks->store_;
    options.prefix = "cluster_bench";
    options.timeout = absl::Seconds(120);
    auto engine = server::GlooEngine::Create(options);
    if (engine.ok()) ranks->engines_[r] = *std::move(engine);
    absl::MutexLock lock(&mu);
    if (error.ok()) error = engine.status();
  });
  if (!error.ok()) return error;
  return ranks;
}

double GlooRanks::Time(int64_t bytes, int iters, Staging staging) {
  const int n = static_cast<int>(engines_.size());
  const size_t count = static_cast<size_t>(bytes) / sizeof(float);
  const bool staged = staging != Staging::kNone;
  const bool kernels = staging == Staging::kKernels || staging == Staging::kFresh;
  std::vector<std::vector<float>> in(n, std::vector<float>(count, 0.0f));
  std::vector<std::vector<float>> out(staged ? n : 0, std::vector<float>(count, 0.0f));
  std::vector<std::vector<float>> kept(staged && staging != Staging::kFresh ? n : 0,
                                       std::vector<float>(count, 0.0f));
  std::barrier sync(n);
  absl::Time start;
  double seconds = 0;
  OnThreads(n, [&](int r) {
    sync.arrive_and_wait();
    if (r == 0) start = absl::Now();
    for (int i = 0; i < iters; ++i) {
      std::unique_ptr<float[]> scratch;
      float* data = in[r].data();
      if (staging == Staging::kFresh) {
        scratch.reset(new float[count]);
        data = scratch.get();
      } else if (staged) {
        data = kept[r].data();
      }
      if (kernels) {
        const std::byte* inputs[1] = {reinterpret_cast<const std::byte*>(in[r].data())};
        server::ReduceToWire(DType::kF32, server::ReduceOp::kSum, inputs,
                             reinterpret_cast<std::byte*>(data), static_cast<int64_t>(count));
      } else if (staged) {
        std::memcpy(data, in[r].data(), bytes);
      }
      gloo::AllreduceOptions opts(engines_[r]->context());
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(data, count);
      if (kernels) {
        opts.setReduceFunction(server::GlooPairwiseReduce(DType::kF32, server::ReduceOp::kSum));
      } else {
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      }
      opts.setTimeout(std::chrono::seconds(120));
      gloo::allreduce(opts);
      if (staged) std::memcpy(out[r].data(), data, bytes);
    }
    sync.arrive_and_wait();
    if (r == 0) seconds = absl::ToDoubleSeconds(absl::Now() - start) / iters;
  });
  return seconds;
}

}  // namespace placement::bench

#endif  // PLACEMENT_WITH_GLOO

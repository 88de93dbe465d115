#include "bench/gloo_ranks.h"

#if PLACEMENT_WITH_GLOO

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <barrier>
#include <cstring>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/collective/cluster/wire_reduction.h"
#include "server/collective/transport/gloo/gloo_support.h"

namespace placement::bench {
namespace {

void OnThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
  for (auto& t : threads) t.join();
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<gloo::Context>>> ConnectGlooContexts(
    server::RendezvousStore* store, int n, const std::string& prefix, absl::Duration timeout) {
  std::vector<std::shared_ptr<gloo::Context>> contexts(n);
  absl::Mutex mu;
  absl::Status error;
  OnThreads(n, [&](int r) {
    absl::Status status;
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto context = std::make_shared<gloo::rendezvous::Context>(r, n);
      context->setTimeout(server::GlooMilliseconds(timeout));
      server::GlooStoreAdapter adapter(store, timeout);
      gloo::rendezvous::PrefixStore prefixed(prefix, adapter);
      std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
      context->connectFullMesh(prefixed, device);
      contexts[r] = std::move(context);
    } catch (const std::exception& e) {
      status = server::GlooErrorStatus(absl::StrCat("gloo rank ", r, " of ", n), e.what());
    }
    absl::MutexLock lock(&mu);
    if (error.ok()) error = status;
  });
  if (!error.ok()) return error;
  return contexts;
}

absl::StatusOr<std::unique_ptr<GlooRanks>> GlooRanks::Connect(int n) {
  auto ranks = std::unique_ptr<GlooRanks>(new GlooRanks());
  absl::StatusOr<std::vector<std::shared_ptr<gloo::Context>>> contexts =
      ConnectGlooContexts(&ranks->store_, n, "cluster_bench", absl::Seconds(120));
  if (!contexts.ok()) return contexts.status();
  ranks->contexts_ = *std::move(contexts);
  return ranks;
}

double GlooRanks::Time(int64_t bytes, int iters, Staging staging) {
  const int n = static_cast<int>(contexts_.size());
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
        server::ReduceToWire(DType::kF32, ReduceOp::kSum, inputs,
                             reinterpret_cast<std::byte*>(data), static_cast<int64_t>(count));
      } else if (staged) {
        std::memcpy(data, in[r].data(), bytes);
      }
      gloo::AllreduceOptions opts(contexts_[r]);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(data, count);
      if (kernels) {
        opts.setReduceFunction(server::GlooPairwiseReduce(DType::kF32, ReduceOp::kSum));
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

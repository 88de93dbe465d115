// Data-parallel linear regression on placementd's CPU virtual devices.
//
// The model y = X w + b is trained with full-batch gradient descent on
// synthetic data whose exact solution is known (w* = [2, -3, 0.5],
// b* = 1). The batch is split over the devices of a one-axis mesh named
// "batch"; each step, every device's gradient is computed HERE, on the
// client (this example has no device kernels), uploaded to that device, and
// the daemon averages them -- the seed's DataParallel.all_reduce_gradients:
//
//   --layout=partial  (default) each device's gradient is uploaded to that
//                     device and Assembled into one tensor that is partial
//                     over "batch" (DTensor Partial), then
//                     DataParallel::all_reduce_gradients(grads, "mean")
//                     reduces it in place (donation);
//   --layout=blocks   all gradients are uploaded as one f32[n, 4] tensor
//                     sharded over "batch" (one row per device) and
//                     CollectiveClient::AllReduce(.., "mean") averages the
//                     rows.
//
// The averaged gradient is downloaded and applied. The program prints the
// loss every --log_every steps and exits 0 when w and b are within
// --tolerance of the solution, 1 otherwise.
//
//   placementd --backend=cpu --cpu_devices=8 --listen=127.0.0.1:50051 &
//   linear_regression --target=127.0.0.1:50051
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "placement/client/collectives.h"
#include "placement/client/placement.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "placementd address (host:port or unix:/path)");
ABSL_FLAG(int, devices, 8, "data-parallel devices (the mesh's 'batch' axis)");
ABSL_FLAG(int, samples_per_device, 32, "rows of the batch on each device");
ABSL_FLAG(int, steps, 150, "gradient-descent steps");
ABSL_FLAG(double, learning_rate, 0.5, "step size");
ABSL_FLAG(std::string, layout, "partial", "how gradients reach the daemon: partial or blocks");
ABSL_FLAG(double, tolerance, 1e-3, "largest accepted |w - w*|, |b - b*| at the end");
ABSL_FLAG(int, log_every, 25, "print the loss every N steps");

namespace {

namespace pc = placement::client;

constexpr int kFeatures = 3;
constexpr float kTrueW[kFeatures] = {2.0f, -3.0f, 0.5f};
constexpr float kTrueB = 1.0f;

// One device's slice of the batch.
struct Shard {
  std::vector<float> x;  // [rows, kFeatures]
  std::vector<float> y;  // [rows]
};

std::vector<Shard> MakeData(int devices, int rows) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<Shard> shards(devices);
  for (Shard& s : shards) {
    for (int r = 0; r < rows; ++r) {
      float y = kTrueB;
      for (int f = 0; f < kFeatures; ++f) {
        const float v = u(rng);
        s.x.push_back(v);
        y += kTrueW[f] * v;
      }
      s.y.push_back(y);
    }
  }
  return shards;
}

// d(mean squared error)/d[w, b] on one shard, and the shard's loss.
std::vector<float> Gradient(const Shard& s, const std::vector<float>& params, double* loss) {
  const int rows = static_cast<int>(s.y.size());
  std::vector<float> g(kFeatures + 1, 0.0f);
  double sq = 0;
  for (int r = 0; r < rows; ++r) {
    float pred = params[kFeatures];
    for (int f = 0; f < kFeatures; ++f) pred += params[f] * s.x[r * kFeatures + f];
    const float err = pred - s.y[r];
    sq += static_cast<double>(err) * err;
    for (int f = 0; f < kFeatures; ++f) g[f] += 2.0f * err * s.x[r * kFeatures + f] / rows;
    g[kFeatures] += 2.0f * err / rows;
  }
  *loss = sq / rows;
  return g;
}

int Fail(const absl::Status& status, const char* what) {
  std::fprintf(stderr, "linear_regression: %s: %s\n", what, status.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int devices = absl::GetFlag(FLAGS_devices);
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (layout != "partial" && layout != "blocks") {
    std::fprintf(stderr, "linear_regression: --layout must be partial or blocks\n");
    return 2;
  }

  auto client = pc::Client::Connect(absl::GetFlag(FLAGS_target));
  if (!client.ok()) return Fail(client.status(), "connect");
  pc::MeshClient meshes(**client);
  pc::TensorClient tensors(**client);
  pc::CollectiveClient collectives(**client);
  pc::DataParallel dp(**client);

  // A one-axis mesh named like the seed's default all_reduce axis.
  auto mesh = meshes.CreateDataParallel(devices, "batch");
  if (!mesh.ok()) return Fail(mesh.status(), "create mesh");

  const std::vector<Shard> data = MakeData(devices, absl::GetFlag(FLAGS_samples_per_device));
  std::vector<float> params(kFeatures + 1, 0.0f);
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  const int steps = absl::GetFlag(FLAGS_steps);
  for (int step = 0; step <= steps; ++step) {
    double loss = 0;
    std::vector<std::vector<float>> grads;
    for (const Shard& s : data) {
      double shard_loss = 0;
      grads.push_back(Gradient(s, params, &shard_loss));
      loss += shard_loss / devices;
    }
    if (step % absl::GetFlag(FLAGS_log_every) == 0 || step == steps) {
      std::printf("step %4d  loss %.3e  w = [%.4f, %.4f, %.4f]  b = %.4f\n", step, loss, params[0],
                  params[1], params[2], params[3]);
    }
    if (step == steps) break;

    std::string reduced_id;
    std::vector<float> mean(kFeatures + 1);
    if (layout == "partial") {
      // Each gradient onto its device, assembled into one partial tensor.
      std::vector<std::string> ids;
      for (int d = 0; d < devices; ++d) {
        auto piece = tensors.Upload(pc::HostArray::Of(grads[d], {kFeatures + 1}),
                                    pc::Placement::Device(mesh->device_ids[d]));
        if (!piece.ok()) return Fail(piece.status(), "upload gradient");
        ids.push_back(piece->id);
      }
      auto partial = tensors.Assemble({kFeatures + 1},
                                      pc::Placement::Sharded(*mesh, {}).WithPartial({"batch"}), ids,
                                      pc::SourceHandling::kDonate);
      if (!partial.ok()) return Fail(partial.status(), "assemble");
      auto reduced = dp.all_reduce_gradients({{"grad", *partial}}, "mean", "batch",
                                             pc::SourceHandling::kDonate);
      if (!reduced.ok()) return Fail(reduced.status(), "all_reduce_gradients");
      reduced_id = reduced->at("grad").id();
    } else {
      // One row per device, dimension 0 sharded over "batch".
      std::vector<float> rows;
      for (const auto& g : grads) rows.insert(rows.end(), g.begin(), g.end());
      auto blocks = tensors.Upload(pc::HostArray::Of(rows, {devices, kFeatures + 1}),
                                   pc::Placement::Sharded(*mesh, {{"batch"}}));
      if (!blocks.ok()) return Fail(blocks.status(), "upload gradients");
      auto reduced = collectives.AllReduce(
          blocks->id, "mean", {.axes = {"batch"}, .source = pc::SourceHandling::kDonate});
      if (!reduced.ok()) return Fail(reduced.status(), "all_reduce");
      reduced_id = reduced->id;
    }
    auto header = tensors.Download(reduced_id, pc::AsWritableBytes(mean));
    if (!header.ok()) return Fail(header.status(), "download");
    if (auto freed = tensors.Delete({reduced_id}); !freed.ok())
      return Fail(freed.status(), "delete");
    for (int i = 0; i <= kFeatures; ++i) params[i] -= lr * mean[i];
  }
  if (auto deleted = meshes.Delete(mesh->id, pc::TensorsOnMesh::kDelete); !deleted.ok()) {
    return Fail(deleted.status(), "delete mesh");
  }

  double worst = std::fabs(static_cast<double>(params[kFeatures] - kTrueB));
  for (int f = 0; f < kFeatures; ++f) {
    worst = std::max(worst, std::fabs(static_cast<double>(params[f] - kTrueW[f])));
  }
  const bool converged = worst <= absl::GetFlag(FLAGS_tolerance);
  std::printf("%s: w = [%.5f, %.5f, %.5f] b = %.5f (solution [2, -3, 0.5], 1; max error %.2e)\n",
              converged ? "converged" : "NOT converged", params[0], params[1], params[2], params[3],
              worst);
  return converged ? 0 : 1;
}

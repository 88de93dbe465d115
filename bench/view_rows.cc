#include "bench/view_rows.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace placement::bench {
namespace {

bool Ok(const absl::Status& status, const std::string& what) {
  if (status.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", what.c_str(), status.ToString().c_str());
  return false;
}

absl::Duration Median(std::vector<absl::Duration> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// One full read of the bytes (the consumer's pass): a sum of 64-bit words,
// four accumulators, the same loop for every path.
uint64_t Read(const std::byte* data, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0, w[4];
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    std::memcpy(w, data + i, 32);
    a += w[0];
    b += w[1];
    c += w[2];
    d += w[3];
  }
  for (; i < n; ++i) a += static_cast<uint64_t>(data[i]);
  return a + b + c + d;
}

// Times `fn` `reps` times; the median, or ZeroDuration on failure.
absl::Duration Time(int reps, const std::function<bool()>& fn) {
  std::vector<absl::Duration> samples;
  for (int r = 0; r < reps; ++r) {
    const absl::Time start = absl::Now();
    if (!fn()) return absl::ZeroDuration();
    samples.push_back(absl::Now() - start);
  }
  return Median(samples);
}

}  // namespace

bool RunViewRows(const ViewRowsInput& in) {
  const client::Client& client = *in.client;
  client::TensorClient tensors(client);
  std::vector<std::byte> src(static_cast<size_t>(std::max(in.bytes, in.max_view_bytes)));
  for (size_t i = 0; i < src.size(); i += 4096) src[i] = std::byte(i >> 12);
  const auto upload = [&](int64_t bytes, const client::Rule& rule) -> std::string {
    client::HostArray array{
        client::DType::kF32,
        {bytes / 4},
        {reinterpret_cast<const uint8_t*>(src.data()), static_cast<size_t>(bytes)}};
    auto info = tensors.Upload(array, rule);
    return Ok(info.status(), "view rows: upload") ? info->id : "";
  };

  // Time to a readable view: View() returns with every shard mapped; the
  // first byte is read so the span is known good. Flat in size when nothing
  // is copied or touched.
  std::printf(
      "\nviews: time to a readable view (View: ExportShards + fd hand-over + mmap), "
      "1 device, median of %d\n",
      in.reps);
  absl::Duration first = absl::ZeroDuration();
  for (int64_t bytes = int64_t{1} << 20; bytes <= in.max_view_bytes; bytes *= 4) {
    const std::string id = upload(bytes, client::Placement::Device(0));
    if (id.empty()) return false;
    const absl::Duration t = Time(in.reps, [&] {
      auto view = tensors.View(id);
      if (!Ok(view.status(), "view")) return false;
      const std::byte first_byte = (*view)->bytes(0)[0];
      asm volatile("" : : "r"(first_byte) : "memory");  // read, not optimised away
      return Ok((*view)->Close(), "close");
    });
    if (t == absl::ZeroDuration() || !Ok(tensors.Delete({id}).status(), "delete")) return false;
    if (first == absl::ZeroDuration()) first = t;
    std::printf("  %6lld MiB   %8.1f us   x%.2f of 1 MiB\n", static_cast<long long>(bytes >> 20),
                absl::ToDoubleMicroseconds(t), absl::FDivDuration(t, first));
  }

  // View + one full read against the download paths + the same read.
  std::vector<std::byte> dst(static_cast<size_t>(in.bytes));
  std::memset(dst.data(), 1, dst.size());  // touched once, like a reused buffer
  auto region = client::SharedRegion::Create(client, in.bytes, "bench-view-read");
  if (!Ok(region.status(), "region")) return false;
  std::memset((*region)->data(), 1, static_cast<size_t>(in.bytes));
  client::DownloadOptions stream;
  stream.path = client::TransferPath::kStream;
  const uint64_t expected = Read(src.data(), static_cast<size_t>(in.bytes));
  std::printf(
      "\nviews: %lld MiB, view + one full read against download + the same read, "
      "median of %d\n",
      static_cast<long long>(in.bytes >> 20), in.reps);
  const std::vector<std::pair<std::string, client::Rule>> rules = {
      {"1 device", client::Placement::Device(0)},
      {absl::StrCat("P('data') over ", in.mesh->device_ids.size(), " devices"),
       client::Placement::Sharded(*in.mesh, {{"data"}})}};
  for (const auto& [what, rule] : rules) {
    const std::string id = upload(in.bytes, rule);
    if (id.empty()) return false;
    bool good = true;
    const absl::Duration view = Time(in.reps, [&] {
      auto v = tensors.View(id);
      if (!Ok(v.status(), "view")) return false;
      uint64_t sum = 0;
      // Shards in mesh order tile the array: their words sum to the array's.
      for (const auto& shard : (*v)->shards()) sum += Read(shard.bytes.data(), shard.bytes.size());
      good = good && sum == expected;
      return Ok((*v)->Close(), "close");
    });
    const absl::Duration region_read = Time(in.reps, [&] {
      if (!Ok(tensors.DownloadToRegion(id, **region, 0).status(), "region download")) return false;
      good = good && Read(reinterpret_cast<const std::byte*>((*region)->data()),
                          static_cast<size_t>(in.bytes)) == expected;
      return true;
    });
    const absl::Duration grpc_read = Time(in.reps, [&] {
      if (!Ok(tensors
                  .Download(id, absl::MakeSpan(reinterpret_cast<uint8_t*>(dst.data()), dst.size()),
                            client::DownloadSelection::Whole(), stream)
                  .status(),
              "download")) {
        return false;
      }
      good = good && Read(dst.data(), dst.size()) == expected;
      return true;
    });
    if (!good || view == absl::ZeroDuration() || region_read == absl::ZeroDuration() ||
        grpc_read == absl::ZeroDuration() || !Ok(tensors.Delete({id}).status(), "delete")) {
      std::fprintf(stderr, "view rows: a read did not match or a call failed (%s)\n", what.c_str());
      return false;
    }
    std::printf(
        "  %-24s view+read %8.2f ms   region download+read %8.2f ms (x%.2f)   "
        "gRPC download+read %8.2f ms (x%.2f)\n",
        what.c_str(), absl::ToDoubleMilliseconds(view), absl::ToDoubleMilliseconds(region_read),
        absl::FDivDuration(region_read, view), absl::ToDoubleMilliseconds(grpc_read),
        absl::FDivDuration(grpc_read, view));
  }
  return true;
}

}  // namespace placement::bench

// placectl prefetch DIR: streams a directory of .npy batches through a
// daemon prefetch pipeline (the seed's prefetch_to_device), to try the
// service and watch its backpressure. Each staged batch is printed, then
// released; the daemon frees everything when the stream ends.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "placement/client/prefetch.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/npy.h"
#include "tools/placectl/output.h"
#include "tools/placectl/rules.h"
#include "tools/placectl/tensor_output.h"

ABSL_FLAG(int32_t, buffer_size, 2,
          "prefetch: batches staged and unreleased at most, the one in use included (the "
          "seed's default 2).");
ABSL_FLAG(std::string, key, "x", "prefetch: the array key of single-file batches.");
ABSL_DECLARE_FLAG(std::string, name);
ABSL_DECLARE_FLAG(int64_t, chunk_bytes);

namespace placement::placectl {
namespace fs = std::filesystem;
namespace {

// One batch: (key, file) per array.
using BatchFiles = std::vector<std::pair<std::string, std::string>>;

std::vector<fs::path> Sorted(const fs::path& dir, bool directories, std::error_code& ec) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (directories ? entry.is_directory() : entry.path().extension() == ".npy") {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The batches under `dir`: its subdirectories (arrays keyed by file stem) or
// else its .npy files (one array keyed `key`). NOT_FOUND for a missing
// directory, INVALID_ARGUMENT when it holds no batch.
absl::StatusOr<std::vector<BatchFiles>> FindBatches(const std::string& dir,
                                                    const std::string& key) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a directory"));
  }
  std::vector<BatchFiles> batches;
  for (const fs::path& sub : Sorted(dir, /*directories=*/true, ec)) {
    BatchFiles batch;
    for (const fs::path& file : Sorted(sub, /*directories=*/false, ec)) {
      batch.emplace_back(file.stem().string(), file.string());
    }
    if (batch.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch directory ", sub.string(), " holds no .npy file"));
    }
    batches.push_back(std::move(batch));
  }
  if (batches.empty()) {
    for (const fs::path& file : Sorted(dir, /*directories=*/false, ec)) {
      batches.push_back({{key, file.string()}});
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  if (batches.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " holds no .npy file and no batch subdirectory"));
  }
  return batches;
}

absl::StatusOr<client::HostBatch> ReadBatch(const BatchFiles& files) {
  client::HostBatch batch;
  for (const auto& [key, path] : files) {
    absl::StatusOr<std::unique_ptr<NpyReader>> reader = NpyReader::Open(path);
    if (!reader.ok()) return reader.status();
    const NpyHeader& h = (*reader)->header();
    std::vector<uint8_t> bytes(static_cast<size_t>(h.data_bytes));
    size_t filled = 0;
    while (filled < bytes.size()) {
      absl::StatusOr<size_t> n = (*reader)->Read(absl::MakeSpan(bytes).subspan(filled));
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::DataLossError(absl::StrCat(path, ": file ended early"));
      filled += *n;
    }
    batch.Add(key, h.dtype, h.shape, std::move(bytes));
  }
  return batch;
}

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(d)); }

}  // namespace

int RunPrefetch(Session& session, const Args& args) {
  absl::StatusOr<std::optional<client::Rule>> rule = RuleFromFlags(session);
  if (!rule.ok()) return session.UsageError(rule.status().message());
  if (absl::GetFlag(FLAGS_buffer_size) < 1) {
    return session.UsageError(
        absl::StrCat("--buffer_size must be >= 1, got ", absl::GetFlag(FLAGS_buffer_size)));
  }
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) return session.UsageError("--chunk_bytes must be >= 1");
  if (absl::GetFlag(FLAGS_key).empty()) return session.UsageError("--key must not be empty");
  absl::StatusOr<std::vector<BatchFiles>> batches = FindBatches(args[0], absl::GetFlag(FLAGS_key));
  if (!batches.ok()) return ReportError(batches.status());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;

  size_t next = 0;
  std::vector<BatchFiles> files = *std::move(batches);
  client::BatchSource source =
      [&files, next]() mutable -> absl::StatusOr<std::optional<client::HostBatch>> {
    if (next == files.size()) return std::optional<client::HostBatch>();
    absl::StatusOr<client::HostBatch> batch = ReadBatch(files[next++]);
    if (!batch.ok()) return batch.status();
    return std::optional<client::HostBatch>(*std::move(batch));
  };
  client::PrefetchOptions options;
  options.name = absl::GetFlag(FLAGS_name);
  options.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  auto it = client::PrefetchToDevice(*client, std::move(source), rule->value_or(client::Rule()),
                                     absl::GetFlag(FLAGS_buffer_size), options);
  if (!it.ok()) return ReportError(it.status());

  std::vector<std::vector<std::string>> rows = {{"BATCH", "KEY", "ID", "ARRAY", "PLACEMENT"}};
  std::vector<std::string> json;
  while (true) {
    absl::StatusOr<std::optional<client::DeviceBatch>> batch = (*it)->Next();
    if (!batch.ok()) return ReportError(batch.status());
    if (!batch->has_value()) break;
    for (const client::NamedTensor& t : (*batch)->tensors) {
      rows.push_back({absl::StrCat((*batch)->sequence), t.key, t.tensor.id,
                      client::DescribeArray(t.tensor.dtype, t.tensor.shape),
                      PlacementText(t.tensor)});
    }
    json.push_back(ToJson(**batch));
  }
  const client::PrefetchIteratorStats& stats = (*it)->stats();
  client::PrefetchStats daemon = stats.daemon.value_or(client::PrefetchStats());
  if (session.json()) {
    std::printf("{\"batches\":[%s],\"stats\":%s}\n", absl::StrJoin(json, ",").c_str(),
                ToJson(daemon).c_str());
    return 0;
  }
  std::printf("%s", FormatTable(rows).c_str());
  std::printf(
      "batches: %lld staged (%s), at most %lld held; consumer stall %s, producer blocked %s\n",
      static_cast<long long>(daemon.batches_staged), HumanBytes(daemon.bytes_staged).c_str(),
      static_cast<long long>(daemon.max_batches_held), Seconds(daemon.consumer_stall).c_str(),
      Seconds(daemon.producer_blocked).c_str());
  return 0;
}

}  // namespace placement::placectl

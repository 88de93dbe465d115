// placectl tensor put-batch | get-shards | assemble | disassemble: the calls
// that move several arrays or shards at once.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/client/rules.h"
#include "placement/client/tensors.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/npy.h"
#include "tools/placectl/npy_mapping.h"
#include "tools/placectl/output.h"
#include "tools/placectl/process_local_flags.h"
#include "tools/placectl/progress.h"
#include "tools/placectl/rules.h"
#include "tools/placectl/tensor_output.h"

ABSL_DECLARE_FLAG(std::string, name);
ABSL_DECLARE_FLAG(bool, donate);
ABSL_DECLARE_FLAG(int64_t, chunk_bytes);
ABSL_DECLARE_FLAG(std::string, devices);

namespace placement::placectl {
namespace {

client::SourceHandling SourceFromFlags() {
  return absl::GetFlag(FLAGS_donate) ? client::SourceHandling::kDonate
                                     : client::SourceHandling::kKeep;
}

}  // namespace

int RunTensorPutBatch(Session& session, const Args& args) {
  absl::StatusOr<std::optional<client::Rule>> rule = RuleFromFlags(session);
  if (!rule.ok()) return session.UsageError(rule.status().message());
  absl::StatusOr<std::optional<client::ProcessLocal>> local = ProcessLocalFromFlags(session, *rule);
  if (!local.ok()) return session.UsageError(local.status().message());
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) return session.UsageError("--chunk_bytes must be >= 1");
  std::vector<std::pair<std::string, std::string>> entries;
  std::set<std::string> keys;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
      return session.UsageError(absl::StrCat("'", arg, "' is not KEY=FILE.npy"));
    }
    std::string key = arg.substr(0, eq);
    if (!keys.insert(key).second) {
      return session.UsageError(absl::StrCat("key '", key, "' is given twice"));
    }
    entries.emplace_back(std::move(key), arg.substr(eq + 1));
  }
  std::vector<std::unique_ptr<MappedNpy>> files;
  std::vector<client::BatchArray> arrays;
  for (const auto& [key, path] : entries) {
    absl::StatusOr<std::unique_ptr<MappedNpy>> file = MappedNpy::Open(path);
    if (!file.ok()) return ReportError(file.status());
    const NpyHeader& h = (*file)->header();
    arrays.push_back({key, client::HostArray{h.dtype, h.shape, (*file)->data()}});
    files.push_back(*std::move(file));
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  client::UploadOptions upload;
  upload.name = absl::GetFlag(FLAGS_name);
  upload.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  upload.process_local = *std::move(local);
  std::optional<ProgressBar> bar;
  bar.emplace(absl::StrCat("upload ", arrays.size(), arrays.size() == 1 ? " array" : " arrays"),
              ProgressWanted());
  upload.progress = bar->Callback();
  auto uploaded =
      client::TensorClient(*client).UploadBatch(arrays, rule->value_or(client::Rule()), upload);
  bar.reset();  // erases its line before any output
  if (!uploaded.ok()) return ReportError(uploaded.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*uploaded).c_str());
    return 0;
  }
  std::vector<client::TensorInfo> infos;
  std::vector<std::string> names;
  for (const auto& t : *uploaded) {
    names.push_back(t.key);
    infos.push_back(t.tensor);
  }
  PrintTensorTable(infos, names);
  return 0;
}

int RunTensorGetShards(Session& session, const Args& args) {
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) return session.UsageError("--chunk_bytes must be >= 1");
  absl::StatusOr<std::vector<int64_t>> wanted =
      ParseIntList(absl::GetFlag(FLAGS_devices), "--devices");
  if (!wanted.ok()) return session.UsageError(wanted.status().message());
  if (session.Given("devices") && wanted->empty()) {
    return session.UsageError("--devices needs at least one device id");
  }
  const std::string& dir = args[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return ReportError(absl::PermissionDeniedError(
        absl::StrCat("cannot create directory ", dir, ": ", ec.message())));
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  client::TensorClient tensors(*client);
  auto info = tensors.Describe(args[0]);
  if (!info.ok()) return ReportError(info.status());
  // Default: one file per distinct shard (replica 0 of each index block).
  std::vector<const client::ShardInfo*> shards;
  for (const auto& s : info->shards) {
    if (session.Given("devices")) {
      if (std::find(wanted->begin(), wanted->end(), s.device_id) != wanted->end()) {
        shards.push_back(&s);
      }
    } else if (s.replica_id == 0) {
      shards.push_back(&s);
    }
  }
  for (int64_t d : *wanted) {
    bool held = std::any_of(shards.begin(), shards.end(),
                            [d](const client::ShardInfo* s) { return s->device_id == d; });
    if (!held) {
      return ReportError(
          absl::NotFoundError(absl::StrCat("tensor ", args[0], " has no shard on device ", d)));
    }
  }
  client::DownloadOptions download;
  download.chunk_bytes = std::min<int64_t>(absl::GetFlag(FLAGS_chunk_bytes), int64_t{4} << 20);
  std::vector<std::vector<std::string>> rows = {{"DEVICE", "INDEX", "SHAPE", "REPLICA", "FILE"}};
  std::vector<std::string> json;
  for (const client::ShardInfo* shard : shards) {
    std::string path = absl::StrCat(dir, "/device_", shard->device_id, ".npy");
    std::unique_ptr<NpyWriter> writer;
    auto header = tensors.Download(
        args[0],
        [&](const client::DownloadHeader& h) -> absl::Status {
          auto created = NpyWriter::Create(path, h.dtype, h.shape);
          if (!created.ok()) return created.status();
          writer = *std::move(created);
          return absl::OkStatus();
        },
        [&](absl::Span<const uint8_t> chunk) { return writer->Write(chunk); },
        client::DownloadSelection::Device(shard->device_id), download);
    if (!header.ok()) return ReportError(header.status());
    absl::Status finished = writer->Finish();
    if (!finished.ok()) return ReportError(finished);
    rows.push_back({absl::StrCat(shard->device_id), IndexText(*shard), ShapeText(shard->shape),
                    absl::StrCat(shard->replica_id), path});
    json.push_back(absl::StrCat("{\"path\":", JsonQuote(path), ",\"shard\":", ToJson(*shard), "}"));
  }
  if (session.json()) {
    std::printf("{\"shards\":[%s]}\n", absl::StrJoin(json, ",").c_str());
  } else {
    std::printf("%s", FormatTable(rows).c_str());
  }
  return 0;
}

int RunTensorAssemble(Session& session, const Args& args) {
  absl::StatusOr<std::vector<int64_t>> shape = ParseIntList(args[0], "SHAPE");
  if (!shape.ok()) return session.UsageError(shape.status().message());
  absl::StatusOr<std::optional<client::Placement>> placement = PlacementFromFlags(session);
  if (!placement.ok()) return session.UsageError(placement.status().message());
  if (!placement->has_value()) {
    return session.UsageError(
        "tensor assemble needs --mesh (with --spec), --replicated or --device");
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto assembled = client::TensorClient(*client).Assemble(
      *shape, **placement, Args(args.begin() + 1, args.end()), SourceFromFlags(),
      absl::GetFlag(FLAGS_name));
  if (!assembled.ok()) return ReportError(assembled.status());
  PrintTensors({*assembled}, session.json(), /*single=*/true);
  return 0;
}

int RunTensorDisassemble(Session& session, const Args& args) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto parts = client::TensorClient(*client).Disassemble(args[0], SourceFromFlags());
  if (!parts.ok()) return ReportError(parts.status());
  PrintTensors(*parts, session.json());
  return 0;
}

}  // namespace placement::placectl

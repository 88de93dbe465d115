// placectl tensor put | get | ls | describe | rm | place.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/client/rules.h"
#include "placement/client/tensors.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/npy.h"
#include "tools/placectl/output.h"
#include "tools/placectl/process_local_flags.h"
#include "tools/placectl/progress.h"
#include "tools/placectl/rules.h"
#include "tools/placectl/tensor_output.h"
#include "tools/placectl/tensor_view_get.h"

ABSL_FLAG(std::string, name, "",
          "Name of the new tensor (put, place, assemble, collectives); tensor put-batch: tensors "
          "are named NAME/KEY.");
ABSL_FLAG(bool, donate, false,
          "Delete the source tensors once the result exists (place, assemble, disassemble, "
          "collectives).");
ABSL_FLAG(std::string, name_prefix, "", "tensor ls: only tensors whose name starts with this.");
ABSL_FLAG(std::string, prefix, "",
          "tensor rm: delete every tensor whose name starts with this (instead of ids).");
ABSL_FLAG(int64_t, chunk_bytes, int64_t{1} << 20,
          "Bytes per stream message of uploads and "
          "downloads (downloads: at most 4 MiB).");
ABSL_FLAG(int32_t, process, -1,
          "tensor get: download only the distinct shards held by this node (process index), "
          "concatenated along dimension 0 (loadax global_to_host_array).");
ABSL_DECLARE_FLAG(int64_t, device);
ABSL_DECLARE_FLAG(std::string, mesh);

namespace placement::placectl {

int RunTensorPut(Session& session, const Args& args) {
  absl::StatusOr<std::optional<client::Rule>> rule = RuleFromFlags(session);
  if (!rule.ok()) return session.UsageError(rule.status().message());
  absl::StatusOr<std::optional<client::ProcessLocal>> local = ProcessLocalFromFlags(session, *rule);
  if (!local.ok()) return session.UsageError(local.status().message());
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) return session.UsageError("--chunk_bytes must be >= 1");
  auto reader = NpyReader::Open(args[0]);
  if (!reader.ok()) return ReportError(reader.status());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  client::UploadOptions upload;
  upload.name = absl::GetFlag(FLAGS_name);
  upload.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  upload.process_local = *std::move(local);
  std::optional<ProgressBar> bar;
  bar.emplace(absl::StrCat("upload ", args[0]), ProgressWanted());
  upload.progress = bar->Callback();
  NpyReader* r = reader->get();
  auto info = client::TensorClient(*client).UploadFrom(
      r->header().dtype, r->header().shape,
      [r](absl::Span<uint8_t> buffer) { return r->Read(buffer); }, rule->value_or(client::Rule()),
      upload);
  bar.reset();  // erases its line before any output
  if (!info.ok()) return ReportError(info.status());
  PrintTensors({*info}, session.json(), /*single=*/true);
  return 0;
}

namespace {

void PrintGot(const Session& session, const std::string& path,
              const client::DownloadHeader& header) {
  if (session.json()) {
    std::printf("%s\n", ToJson(header).c_str());
  } else {
    std::printf("wrote %s: %s, %s\n", path.c_str(),
                client::DescribeArray(header.dtype, header.shape).c_str(),
                HumanBytes(header.total_bytes).c_str());
  }
}

}  // namespace

int RunTensorGet(Session& session, const Args& args) {
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) return session.UsageError("--chunk_bytes must be >= 1");
  if (session.Given("device") && session.Given("process")) {
    return session.UsageError("give --device or --process, not both");
  }
  if (session.Given("device") && absl::GetFlag(FLAGS_device) < 0) {
    return session.UsageError("--device must be a device id >= 0");
  }
  if (session.Given("process") && absl::GetFlag(FLAGS_process) < 0) {
    return session.UsageError("--process must be a process index >= 0");
  }
  const std::string& path = args[1];
  client::DownloadSelection selection = client::DownloadSelection::Whole();
  if (session.Given("device")) {
    selection = client::DownloadSelection::Device(absl::GetFlag(FLAGS_device));
  } else if (session.Given("process")) {
    selection = client::DownloadSelection::Process(absl::GetFlag(FLAGS_process));
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  std::optional<ProgressBar> bar;
  bar.emplace(absl::StrCat("download ", path), ProgressWanted());
  if (!session.Given("process")) {
    // A daemon on this host: read its memory in place (a view).
    std::optional<int64_t> device;
    if (session.Given("device")) device = absl::GetFlag(FLAGS_device);
    if (auto viewed = GetThroughView(*client, args[0], path, device, bar->Callback());
        viewed.has_value()) {
      bar.reset();  // erases its line before any output
      if (!viewed->ok()) return ReportError(viewed->status());
      PrintGot(session, path, **viewed);
      return 0;
    }
  }
  client::DownloadOptions download;
  download.chunk_bytes = std::min<int64_t>(absl::GetFlag(FLAGS_chunk_bytes), int64_t{4} << 20);
  download.progress = bar->Callback();
  std::unique_ptr<NpyWriter> writer;
  auto header = client::TensorClient(*client).Download(
      args[0],
      [&](const client::DownloadHeader& h) -> absl::Status {
        auto created = NpyWriter::Create(path, h.dtype, h.shape);
        if (!created.ok()) return created.status();
        writer = *std::move(created);
        return absl::OkStatus();
      },
      [&](absl::Span<const uint8_t> chunk) { return writer->Write(chunk); }, selection, download);
  bar.reset();  // erases its line before any output
  if (!header.ok()) return ReportError(header.status());
  absl::Status finished = writer->Finish();
  if (!finished.ok()) return ReportError(finished);
  PrintGot(session, path, *header);
  return 0;
}

int RunTensorList(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto list = client::TensorClient(*client).List(absl::GetFlag(FLAGS_name_prefix),
                                                 absl::GetFlag(FLAGS_mesh));
  if (!list.ok()) return ReportError(list.status());
  PrintTensors(*list, session.json());
  return 0;
}

int RunTensorDescribe(Session& session, const Args& args) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto info = client::TensorClient(*client).Describe(args[0]);
  if (!info.ok()) return ReportError(info.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*info).c_str());
    return 0;
  }
  std::printf(
      "id:        %s\nname:      %s\narray:     %s\nplacement: %s\nsharding:  %s %s\nbytes:     "
      "%s (on devices: %s)\n",
      info->id.c_str(), info->name.c_str(), client::DescribeArray(info->dtype, info->shape).c_str(),
      PlacementText(*info).c_str(),
      info->sharding.mesh_id.empty() ? "(implicit mesh)" : info->sharding.mesh_id.c_str(),
      client::SpecToString(info->sharding.spec).c_str(), HumanBytes(info->size_bytes).c_str(),
      HumanBytes(info->device_bytes).c_str());
  std::vector<std::vector<std::string>> rows = {
      {"DEVICE", "NODE", "INDEX", "SHAPE", "REPLICA", "BYTES"}};
  for (const auto& s : info->shards) {
    rows.push_back({absl::StrCat(s.device_id), absl::StrCat(s.process_index), IndexText(s),
                    ShapeText(s.shape), absl::StrCat(s.replica_id), HumanBytes(s.size_bytes)});
  }
  std::printf("%s", FormatTable(rows).c_str());
  return 0;
}

int RunTensorRemove(Session& session, const Args& args) {
  const bool by_prefix = session.Given("prefix");
  if (by_prefix && !args.empty()) {
    return session.UsageError("give tensor ids or --prefix, not both");
  }
  if (!by_prefix && args.empty()) return session.UsageError("give tensor ids or --prefix=P");
  if (by_prefix && absl::GetFlag(FLAGS_prefix).empty()) {
    return session.UsageError("--prefix must not be empty (it would match every named tensor)");
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  client::TensorClient tensors(*client);
  std::vector<std::string> ids = args;
  if (by_prefix) {
    auto list = tensors.List(absl::GetFlag(FLAGS_prefix));
    if (!list.ok()) return ReportError(list.status());
    ids.clear();
    for (const auto& t : *list) ids.push_back(t.id);
  }
  int64_t freed = 0;
  if (!ids.empty()) {
    auto deleted = tensors.Delete(ids);
    if (!deleted.ok()) return ReportError(deleted.status());
    freed = *deleted;
  }
  if (session.json()) {
    // DeleteTensorsResponse's proto JSON (int64 as a string).
    std::printf("{\"freed_bytes\":\"%lld\"}\n", static_cast<long long>(freed));
  } else {
    std::printf("deleted %zu tensors, freed %s\n", ids.size(), HumanBytes(freed).c_str());
  }
  return 0;
}

int RunTensorPlace(Session& session, const Args& args) {
  absl::StatusOr<std::optional<client::Rule>> rule = RuleFromFlags(session);
  if (!rule.ok()) return session.UsageError(rule.status().message());
  if (!rule->has_value()) {
    return session.UsageError("tensor place needs --device, --mesh, --replicated or --rule");
  }
  if (args.size() > 1 && session.Given("name")) {
    return session.UsageError("--name names a single result; give one tensor id with it");
  }
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto placed = client::TensorClient(*client).Place(
      args, **rule,
      absl::GetFlag(FLAGS_donate) ? client::SourceHandling::kDonate : client::SourceHandling::kKeep,
      absl::GetFlag(FLAGS_name));
  if (!placed.ok()) return ReportError(placed.status());
  PrintTensors(*placed, session.json(), /*single=*/args.size() == 1);
  return 0;
}

}  // namespace placement::placectl

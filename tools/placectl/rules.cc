#include "tools/placectl/rules.h"

#include <utility>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/placectl/names.h"

ABSL_FLAG(int64_t, device, -1,
          "Placement: the whole tensor on this device. tensor get: download only this device's "
          "shard.");
ABSL_FLAG(std::string, mesh, "",
          "Placement: shard over this mesh with --spec (no --spec: replicated on it), or the mesh "
          "of a --rule. tensor ls: only tensors on this mesh.");
ABSL_FLAG(std::string, spec, "",
          "Placement with --mesh: PartitionSpec such as \"data,None\", \"(x,y)\", \"None,model\", "
          "\"P('data', None)\"; empty = replicated on the mesh.");
ABSL_FLAG(bool, padded, false,
          "Placement with --mesh: allow dimensions that do not divide (padded shards).");
ABSL_FLAG(std::string, replicated, "", "Placement: replicate on every device of this mesh.");
ABSL_FLAG(std::string, rule, "",
          "Placement rule of the seeds: shard_batch_dim | replicate | model_state | "
          "data_partition.");
ABSL_FLAG(int64_t, batch_axis, 0,
          "--rule=shard_batch_dim: the array dimension to shard (negative counts from the end; "
          "arrays of lower rank are replicated).");
ABSL_FLAG(std::string, mesh_axis, "data", "--rule=shard_batch_dim: the mesh axis to shard over.");
ABSL_FLAG(std::string, param_sharding, "replicate",
          "--rule=model_state: replicate (P()) or shard (dimension 0 over the mesh's first axis).");
ABSL_FLAG(std::string, partition, "full",
          "--rule=data_partition: full (dimension 0 over all mesh axes) or replicated.");
ABSL_FLAG(std::string, partial, "",
          "tensor assemble with --mesh: comma-separated mesh axes over which the shards are "
          "partial summands (DTensor Partial), e.g. for collective all-reduce.");
ABSL_FLAG(std::string, partial_op, "sum",
          "With --partial: how the summands combine (sum, mean, "
          "max, min, prod).");
ABSL_DECLARE_FLAG(std::string, devices);

namespace placement::placectl {
namespace {

// The rule each rule-specific flag belongs to.
constexpr std::pair<const char*, const char*> kRuleOwnedFlags[] = {
    {"batch_axis", "shard_batch_dim"},
    {"mesh_axis", "shard_batch_dim"},
    {"param_sharding", "model_state"},
    {"partition", "data_partition"},
    {"devices", "replicate"}};

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "",
                     absl::string_view d = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c, d));
}

// Placement flags that name no rule: --device, --mesh/--spec, --replicated.
absl::StatusOr<std::optional<client::Placement>> PlainPlacement(const Session& session) {
  const bool device = session.Given("device");
  const bool mesh = session.Given("mesh");
  const bool replicated = session.Given("replicated");
  if (device + mesh + replicated > 1) {
    return Invalid("give only one of --device, --mesh (with --spec) and --replicated");
  }
  for (const char* flag : {"spec", "padded", "partial", "partial_op"}) {
    if (session.Given(flag) && !mesh) return Invalid("--", flag, " needs --mesh");
  }
  if (session.Given("partial_op") && !session.Given("partial")) {
    return Invalid("--partial_op needs --partial");
  }
  if (device) {
    if (absl::GetFlag(FLAGS_device) < 0) {
      return Invalid("--device must be a device id >= 0, got ",
                     absl::StrCat(absl::GetFlag(FLAGS_device)));
    }
    return client::Placement::Device(absl::GetFlag(FLAGS_device));
  }
  if (replicated) {
    if (absl::GetFlag(FLAGS_replicated).empty()) return Invalid("--replicated needs a mesh id");
    return client::Placement::Replicated(absl::GetFlag(FLAGS_replicated));
  }
  if (!mesh) return std::optional<client::Placement>();
  if (absl::GetFlag(FLAGS_mesh).empty()) return Invalid("--mesh needs a mesh id");
  absl::StatusOr<client::Spec> spec = client::ParseSpec(absl::GetFlag(FLAGS_spec));
  if (!spec.ok()) return Invalid("--spec: ", spec.status().message());
  client::Placement placement =
      client::Placement::Sharded(absl::GetFlag(FLAGS_mesh), *std::move(spec));
  if (absl::GetFlag(FLAGS_padded)) placement = placement.Padded();
  return placement;
}

}  // namespace

const std::vector<std::string>& RuleFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "device",     "mesh",      "spec",    "padded",         "replicated", "rule",
      "batch_axis", "mesh_axis", "devices", "param_sharding", "partition"};
  return *names;
}

const std::vector<std::string>& PlacementFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "device", "mesh", "spec", "padded", "replicated", "partial", "partial_op"};
  return *names;
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text, absl::string_view field) {
  std::vector<int64_t> out;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(piece, &value)) {
      return Invalid(field, " entry '", piece, "' is not an integer");
    }
    out.push_back(value);
  }
  return out;
}

absl::StatusOr<std::optional<client::Rule>> RuleFromFlags(const Session& session) {
  const std::string rule = absl::GetFlag(FLAGS_rule);
  for (const auto& [flag, owner] : kRuleOwnedFlags) {
    if (session.Given(flag) && rule != owner) {
      return Invalid("--", flag, " applies only with --rule=", owner);
    }
  }
  if (!session.Given("rule")) {
    absl::StatusOr<std::optional<client::Placement>> placement = PlainPlacement(session);
    if (!placement.ok()) return placement.status();
    if (!placement->has_value()) return std::optional<client::Rule>();
    return std::optional<client::Rule>(client::Rule(**placement));
  }
  for (const char* flag : {"device", "spec", "padded", "replicated"}) {
    if (session.Given(flag)) return Invalid("--rule=", rule, " does not take --", flag);
  }
  const std::string mesh = absl::GetFlag(FLAGS_mesh);
  if (rule == "replicate") {
    if (!mesh.empty() && session.Given("devices")) {
      return Invalid("--rule=replicate takes --mesh or --devices, not both");
    }
    if (!mesh.empty()) return std::optional<client::Rule>(client::Rule::ReplicateOn(mesh));
    absl::StatusOr<std::vector<int64_t>> ids =
        ParseIntList(absl::GetFlag(FLAGS_devices), "--devices");
    if (!ids.ok()) return ids.status();
    return std::optional<client::Rule>(client::Rule::Replicate(*std::move(ids)));
  }
  if (rule != "shard_batch_dim" && rule != "model_state" && rule != "data_partition") {
    return Invalid(
        "--rule must be shard_batch_dim, replicate, model_state or data_partition, got '", rule,
        "'");
  }
  if (mesh.empty()) return Invalid("--rule=", rule, " needs --mesh");
  if (rule == "shard_batch_dim") {
    return std::optional<client::Rule>(client::Rule::ShardBatchDim(
        mesh, absl::GetFlag(FLAGS_batch_axis), absl::GetFlag(FLAGS_mesh_axis)));
  }
  if (rule == "model_state") {
    const std::string sharding = absl::GetFlag(FLAGS_param_sharding);
    if (sharding != "replicate" && sharding != "shard") {
      return Invalid("--param_sharding must be replicate or shard, got '", sharding, "'");
    }
    return std::optional<client::Rule>(client::Rule::ModelState(mesh, sharding));
  }
  const std::string partition = absl::GetFlag(FLAGS_partition);
  if (partition != "full" && partition != "replicated") {
    return Invalid("--partition must be full or replicated, got '", partition, "'");
  }
  return std::optional<client::Rule>(
      client::Rule::DataPartition(mesh, partition == "full" ? client::DataPartition::kFull
                                                            : client::DataPartition::kReplicated));
}

absl::StatusOr<std::optional<client::Placement>> PlacementFromFlags(const Session& session) {
  absl::StatusOr<std::optional<client::Placement>> placement = PlainPlacement(session);
  if (!placement.ok() || !placement->has_value() || !session.Given("partial")) return placement;
  absl::StatusOr<client::ReduceOp> op =
      ParseReduceOp(absl::GetFlag(FLAGS_partial_op), "--partial_op");
  if (!op.ok()) return op.status();
  std::vector<std::string> axes =
      absl::StrSplit(absl::GetFlag(FLAGS_partial), ',', absl::SkipWhitespace());
  if (axes.empty()) return Invalid("--partial needs at least one mesh axis");
  return std::optional<client::Placement>((*placement)->WithPartial(std::move(axes), *op));
}

}  // namespace placement::placectl

#include "tools/placectl/process_local_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/placectl/rules.h"

ABSL_FLAG(std::string, global_name, "",
          "tensor put / put-batch: a multi-controller upload of this node's part under this name, "
          "shared by every node's call (put-batch: arrays are named NAME/KEY). Needs --mesh, "
          "--replicated or --rule=data_partition.");
ABSL_FLAG(std::string, global_shape, "",
          "With --global_name: the global shape D,D,...; default: inferred as JAX does (for "
          "--rule=data_partition --partition=full: the local rows x the number of processes).");
ABSL_FLAG(absl::Duration, global_timeout, absl::Seconds(60),
          "With --global_name: how long to wait for the other nodes' uploads.");

namespace placement::placectl {
namespace {

// ProcessLocal.global_name's limit (tensor_service.proto).
constexpr size_t kMaxGlobalNameBytes = 256;

// A sharding, a replicated mesh or a data partition rule.
bool OverAMesh(const client::Rule& rule) {
  if (rule.kind() == client::Rule::Kind::kDataPartition) return true;
  return rule.kind() == client::Rule::Kind::kPlacement &&
         (rule.placement().is_sharded() || rule.placement().is_replicated());
}

}  // namespace

const std::vector<std::string>& ProcessLocalFlagNames() {
  static const auto* names =
      new std::vector<std::string>{"global_name", "global_shape", "global_timeout"};
  return *names;
}

absl::StatusOr<std::optional<client::ProcessLocal>> ProcessLocalFromFlags(
    const Session& session, const std::optional<client::Rule>& rule) {
  if (!session.Given("global_name")) {
    for (const char* flag : {"global_shape", "global_timeout"}) {
      if (session.Given(flag)) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " needs --global_name"));
      }
    }
    return std::optional<client::ProcessLocal>();
  }
  client::ProcessLocal local;
  local.global_name = absl::GetFlag(FLAGS_global_name);
  if (local.global_name.empty()) {
    return absl::InvalidArgumentError("--global_name must not be empty");
  }
  if (local.global_name.size() > kMaxGlobalNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--global_name is ", local.global_name.size(),
                                                   " bytes; at most ", kMaxGlobalNameBytes));
  }
  if (session.Given("name")) {
    return absl::InvalidArgumentError(
        "give --name or --global_name, not both (a multi-controller upload is named by "
        "--global_name)");
  }
  if (!rule.has_value() || !OverAMesh(*rule)) {
    return absl::InvalidArgumentError(
        "--global_name needs a placement over a mesh: --mesh (with --spec), --replicated or "
        "--rule=data_partition");
  }
  absl::StatusOr<std::vector<int64_t>> shape =
      ParseIntList(absl::GetFlag(FLAGS_global_shape), "--global_shape");
  if (!shape.ok()) return shape.status();
  for (int64_t d : *shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--global_shape entries must be >= 0, got ", d));
    }
  }
  local.global_shape = *std::move(shape);
  local.timeout = absl::GetFlag(FLAGS_global_timeout);
  if (local.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--global_timeout must be positive, got ",
                                                   absl::FormatDuration(local.timeout)));
  }
  return std::optional<client::ProcessLocal>(std::move(local));
}

}  // namespace placement::placectl

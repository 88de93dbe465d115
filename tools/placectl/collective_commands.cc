// placectl collective all-reduce | all-reduce-batch | all-gather |
// reduce-scatter | broadcast: collectives over daemon tensors (the bytes
// stay in the daemon; the result is a new tensor, printed like `tensor ls`).
#include <cstdio>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "placement/client/collectives.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/names.h"
#include "tools/placectl/output.h"
#include "tools/placectl/tensor_output.h"

ABSL_FLAG(std::string, op, "",
          "Reduction: sum | mean | max | min | prod. all-reduce: default the tensor's partial op, "
          "else sum; reduce-scatter: default sum.");
ABSL_FLAG(std::string, axes, "",
          "Comma-separated mesh axes to run over; default: every axis (all-reduce, broadcast), "
          "the axes sharding --dim (all-gather), the partial axes (reduce-scatter).");
ABSL_FLAG(int64_t, dim, 0,
          "all-gather / reduce-scatter: the tensor dimension (negative counts from the end).");
ABSL_FLAG(int64_t, root, -1, "broadcast: the device whose shard every device receives.");
ABSL_FLAG(std::string, controller, "single",
          "Who drives a collective on a tensor whose shards span daemons: single (this call "
          "drives every daemon) or multi (every node runs the same command on its own daemon; "
          "the calls meet and run once).");
ABSL_DECLARE_FLAG(std::string, name);
ABSL_DECLARE_FLAG(bool, donate);

namespace placement::placectl {
namespace {

// INVALID_ARGUMENT for an unknown --controller (checked before connecting).
absl::StatusOr<client::CollectiveOptions> OptionsFromFlags() {
  client::CollectiveOptions options;
  options.axes = absl::StrSplit(absl::GetFlag(FLAGS_axes), ',', absl::SkipWhitespace());
  options.source =
      absl::GetFlag(FLAGS_donate) ? client::SourceHandling::kDonate : client::SourceHandling::kKeep;
  options.name = absl::GetFlag(FLAGS_name);
  const std::string controller = absl::GetFlag(FLAGS_controller);
  absl::StatusOr<client::Controller> parsed = client::ParseController(controller);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--controller must be single or multi, got '", controller, "'"));
  }
  options.controller = *parsed;
  return options;
}

// `unset` when --op was not given.
absl::StatusOr<client::ReduceOp> OpFromFlags(const Session& session, client::ReduceOp unset) {
  if (!session.Given("op")) return unset;
  return ParseReduceOp(absl::GetFlag(FLAGS_op), "--op");
}

int Finish(Session& session, const absl::StatusOr<client::TensorInfo>& result) {
  if (!result.ok()) return ReportError(result.status());
  PrintTensors({*result}, session.json(), /*single=*/true);
  return 0;
}

}  // namespace

int RunAllReduce(Session& session, const Args& args) {
  absl::StatusOr<client::ReduceOp> op = OpFromFlags(session, client::ReduceOp::kUnspecified);
  if (!op.ok()) return session.UsageError(op.status().message());
  absl::StatusOr<client::CollectiveOptions> options = OptionsFromFlags();
  if (!options.ok()) return session.UsageError(options.status().message());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  return Finish(session, client::CollectiveClient(*client).AllReduce(args[0], *op, *options));
}

int RunAllReduceBatch(Session& session, const Args& args) {
  absl::StatusOr<client::ReduceOp> op = OpFromFlags(session, client::ReduceOp::kUnspecified);
  if (!op.ok()) return session.UsageError(op.status().message());
  absl::StatusOr<client::CollectiveOptions> options = OptionsFromFlags();
  if (!options.ok()) return session.UsageError(options.status().message());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto results = client::CollectiveClient(*client).AllReduceBatch(args, *op, *options);
  if (!results.ok()) return ReportError(results.status());
  PrintTensors(*results, session.json());
  return 0;
}

int RunAllGather(Session& session, const Args& args) {
  absl::StatusOr<client::CollectiveOptions> options = OptionsFromFlags();
  if (!options.ok()) return session.UsageError(options.status().message());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  return Finish(session, client::CollectiveClient(*client).AllGather(
                             args[0], absl::GetFlag(FLAGS_dim), *options));
}

int RunReduceScatter(Session& session, const Args& args) {
  absl::StatusOr<client::ReduceOp> op = OpFromFlags(session, client::ReduceOp::kSum);
  if (!op.ok()) return session.UsageError(op.status().message());
  absl::StatusOr<client::CollectiveOptions> options = OptionsFromFlags();
  if (!options.ok()) return session.UsageError(options.status().message());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  return Finish(session, client::CollectiveClient(*client).ReduceScatter(
                             args[0], *op, absl::GetFlag(FLAGS_dim), *options));
}

int RunBroadcast(Session& session, const Args& args) {
  if (!session.Given("root")) return session.UsageError("collective broadcast needs --root=DEVICE");
  if (absl::GetFlag(FLAGS_root) < 0) {
    return session.UsageError(
        absl::StrCat("--root must be a device id >= 0, got ", absl::GetFlag(FLAGS_root)));
  }
  absl::StatusOr<client::CollectiveOptions> options = OptionsFromFlags();
  if (!options.ok()) return session.UsageError(options.status().message());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  return Finish(session, client::CollectiveClient(*client).Broadcast(
                             args[0], absl::GetFlag(FLAGS_root), *options));
}

}  // namespace placement::placectl

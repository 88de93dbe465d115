#include "server/collective/transport/gloo/gloo_transport.h"

#include <gloo/transport/tcp/device.h>

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/collective/cluster/rank_buffer_io.h"
#include "server/collective/transport/gloo/gloo_support.h"
#include "server/collective/transport/gloo/hierarchical_collectives.h"
#include "server/collective/transport/gloo/recursive_doubling.h"
#include "server/collective/transport/transport_registry.h"

namespace placement::server {

absl::StatusOr<std::unique_ptr<CrossProcessTransport>> GlooTransport::Create(
    const CrossProcessTransportOptions& options) {
  if (absl::Status s = CheckTransportOptions("gloo", options); !s.ok()) return s;
  absl::StatusOr<std::string> address = ResolveGlooAddress(options.hostname);
  if (!address.ok()) {
    return absl::UnavailableError(
        absl::StrCat("gloo transport: Gloo cannot listen: ", address.status().message()));
  }
  if (*address == "0.0.0.0" || *address == "::") {
    return absl::UnavailableError(absl::StrCat(
        "gloo transport: '", options.hostname, "' is a wildcard address (", *address,
        "); Gloo must listen on the peer interface only: advertise a peer address with a "
        "host of this machine (--peer_advertise_address)"));
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = *address;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo transport: Gloo cannot listen on ", options.hostname, ": ", e.what()));
  }
  return std::unique_ptr<CrossProcessTransport>(
      new GlooTransport(options, *std::move(address), std::move(device)));
}

GlooTransport::GlooTransport(const CrossProcessTransportOptions& options, std::string address,
                             std::shared_ptr<gloo::transport::Device> device)
    : backend_(options.backend),
      address_(std::move(address)),
      contexts_(options.store, std::move(device), options.process_index) {}

GlooTransport::~GlooTransport() = default;

// How long a call that failed on a closed connection waits to hear of a
// lost process (GlooContextCache::AbortReason) before it reports Gloo's
// words: survivors learn of a loss on their own heartbeats, within one
// interval of each other, so this names the loss when they learn it close
// together (and costs a failed call at most this much).
constexpr absl::Duration kLossGrace = absl::Milliseconds(200);

absl::Status GlooTransport::FailureOf(const TransportGroupKey& key, const std::string& call,
                                      const std::string& gloo_error) {
  // Aborted because the cluster lost a process: say that, not Gloo's words
  // for the abort. A peer that learnt the loss first closed its
  // connections; this process learns it moments later.
  const std::string reason =
      contexts_.AbortReason(key, IsGlooTimeout(gloo_error) ? absl::ZeroDuration() : kLossGrace);
  return reason.empty() ? GlooErrorStatus(call, gloo_error)
                        : absl::UnavailableError(absl::StrCat(call, ": ", reason));
}

absl::Status GlooTransport::Run(CollectiveKind kind, const CollectiveItem& item,
                                const ClusterItemPlan& plan, const TransportGroupKey& key,
                                uint32_t tag, absl::Duration budget, absl::string_view what) {
  absl::StatusOr<std::shared_ptr<gloo::Context>> context = contexts_.Get(key, budget);
  if (!context.ok()) return context.status();
  const GlooOperation op{*context, tag, GlooMilliseconds(budget)};
  RankBufferIo io(backend_);
  absl::Status status;
  try {
    status = RunHierarchical(kind, item, plan, op, io);
  } catch (const std::exception& e) {
    status = FailureOf(key,
                       absl::StrCat("gloo ", CollectiveKindName(kind), " over processes ",
                                    ProcessListKey(plan.processes), " (", what, ")"),
                       e.what());
  }
  // Whatever failed, this process is now out of step with its peers on
  // this context.
  if (!status.ok()) {
    contexts_.Fail(key);
  } else {
    contexts_.Ran(key, WitnessRank(kind, plan));
  }
  return status;
}

absl::StatusOr<std::vector<std::string>> GlooTransport::Exchange(const TransportGroupKey& key,
                                                                 const std::string& block,
                                                                 uint32_t tag,
                                                                 absl::Duration budget,
                                                                 absl::string_view what) {
  constexpr size_t kMaxBlock = 4096;
  if (block.empty() || block.size() > kMaxBlock) {
    return absl::InvalidArgumentError(absl::StrCat("gloo exchange (", what, "): a block of ",
                                                   block.size(), " bytes; must be 1..", kMaxBlock));
  }
  absl::StatusOr<std::shared_ptr<gloo::Context>> context = contexts_.Get(key, budget);
  if (!context.ok()) return context.status();
  const size_t n = key.processes.size();
  std::string gathered(block.size() * n, '\0');
  absl::Status status;
  try {
    RecursiveDoublingAllGather(**context, block.data(), block.size(), gathered.data(), tag,
                               GlooMilliseconds(budget));
  } catch (const std::exception& e) {
    status = FailureOf(key,
                       absl::StrCat("gloo exchange over processes ", ProcessListKey(key.processes),
                                    " (", what, ")"),
                       e.what());
  }
  if (!status.ok()) {
    contexts_.Fail(key);
    return status;
  }
  // Every rank's result holds every block.
  contexts_.Ran(key, 0);
  std::vector<std::string> blocks;
  blocks.reserve(n);
  for (size_t i = 0; i < n; ++i) blocks.push_back(gathered.substr(i * block.size(), block.size()));
  return blocks;
}

PLACEMENT_REGISTER_TRANSPORT(gloo, "gloo collectives", &GlooTransport::Create);

}  // namespace placement::server

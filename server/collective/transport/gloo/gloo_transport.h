// GlooTransport: the "gloo" CrossProcessTransport -- Gloo 0.5's TCP
// transport over host memory, platform-neutral: rank buffers are used in
// place on a host-addressable backend and staged through the backend's
// Read / Write otherwise (a CUDA shard goes through host memory). Each
// group is a Gloo context that connects each process to its two ring
// neighbours (gloo_ring_context.h) by a rendezvous through the
// coordinator's store under "gloo/<group name>" (GlooContextCache);
// each item runs hierarchically (hierarchical_collectives.h): this
// process's ranks combined on the host, one Gloo participant per process.
//
// Listening: Gloo binds `hostname` (resolved to one numeric address, the
// peer interface), a fresh port per pair; never a wildcard address --
// Create refuses 0.0.0.0 and ::. Debian's Gloo has no TLS
// (GLOO_HAVE_TRANSPORT_TCP_TLS 0): tensor bytes travel in plaintext
// between daemons (docs/security.md).
//
// Thread-safe (CrossProcessTransport).
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_TRANSPORT_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/collective/transport/cross_process_transport.h"
#include "server/collective/transport/gloo/gloo_context_cache.h"

namespace placement::server {

class GlooTransport final : public CrossProcessTransport {
 public:
  // INVALID_ARGUMENT without a store or backend, or for a negative process
  // index; UNAVAILABLE when Gloo cannot listen on `hostname` (unresolvable,
  // not an address of this host, or a wildcard address).
  static absl::StatusOr<std::unique_ptr<CrossProcessTransport>> Create(
      const CrossProcessTransportOptions& options);
  // Closes every Gloo connection of this process (peers in an operation see
  // UNAVAILABLE). REQUIRES: no call in flight.
  ~GlooTransport() override;

  absl::string_view Name() const override { return "gloo"; }
  std::string ListenAddress() const override { return address_; }
  // Debian's Gloo has no TLS transport.
  bool encrypted() const override { return false; }
  absl::Status Run(CollectiveKind kind, const CollectiveItem& item, const ClusterItemPlan& plan,
                   const TransportGroupKey& key, uint32_t tag, absl::Duration budget,
                   absl::string_view what) override;
  // One RecursiveDoublingAllGather (log2 n exchanges) on the group's
  // GlooRingContext. Its tag keeps it apart from Run's operations, which
  // use the same slot prefixes: the cluster engine's agreement tag is never
  // an item's tag.
  absl::StatusOr<std::vector<std::string>> Exchange(const TransportGroupKey& key,
                                                    const std::string& block, uint32_t tag,
                                                    absl::Duration budget,
                                                    absl::string_view what) override;
  void Abort(const TransportGroupKey& key) override { contexts_.Fail(key); }
  void AbortGeneration(uint64_t epoch, const std::string& set_key, uint64_t generation) override {
    contexts_.FailGeneration(epoch, set_key, generation);
  }
  void AbortProcess(int32_t process, uint64_t through_epoch, const std::string& why) override {
    contexts_.FailProcess(process, through_epoch, why);
  }
  bool Connected(const TransportGroupKey& key) const override { return contexts_.Connected(key); }
  void DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept) override {
    contexts_.DropEpochsBefore(epoch, kept);
  }
  size_t connected_groups() const override { return contexts_.connected(); }

 private:
  GlooTransport(const CrossProcessTransportOptions& options, std::string address,
                std::shared_ptr<gloo::transport::Device> device);

  // The status of `call` on `key`'s context, which failed with Gloo's
  // `gloo_error`: the cluster's reason when it aborted the context for a
  // lost process (waiting up to kLossGrace for one after a closed
  // connection), else Gloo's words (GlooErrorStatus).
  absl::Status FailureOf(const TransportGroupKey& key, const std::string& call,
                         const std::string& gloo_error);

  DeviceBackend* const backend_;
  const std::string address_;
  GlooContextCache contexts_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_TRANSPORT_H_

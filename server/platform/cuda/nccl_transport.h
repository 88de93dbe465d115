// NcclTransport: the "nccl" CrossProcessTransport, EXPERIMENTAL -- NCCL
// between the GPU daemons of a cluster (--cluster_transport=nccl), the
// bytes moving GPU to GPU (NVLink, InfiniBand / RoCE, or NCCL's sockets)
// instead of through host memory as with "gloo". Only for daemons whose
// platform is "cuda" (Create refuses other backends).
//
// Groups. Each spanning item runs on one NCCL communicator per rank of the
// item's group that this process holds (NCCL's one-process-many-GPUs
// form): the group's ranks are its devices, so an item needs every one of
// its ranks on its own GPU (logical devices of one GPU cannot share a
// communicator: FAILED_PRECONDITION, use "gloo"). Communicators are made on
// first use per (TransportGroupKey, the item's device ids) and kept with
// the key: the process holding rank 0 draws an ncclUniqueId and publishes
// it in the coordinator's store under "nccl/<key name>/<digest of the
// device ids>/id" (as XLA's nccl_id_store does); the others read it, all
// join non-blocking (NcclComms), and once the communicators are up (NCCL's
// init returns only when every rank joined) rank 0's process deletes the
// key. Exchange runs an ncclAllGather on a communicator of one rank per
// process (its first GPU), made the same way under "nccl/<key name>/x".
//
// Ordering. NCCL matches operations by their order on a communicator, not
// by tag: the cluster engine runs a set's calls in ticket order and the
// items of one subset in the same relative order on every process, which
// is what NCCL needs; the tag is unused. Multi-controller calls that
// differ (unchecked) exchange each other's bytes or wait out their budget;
// --cluster_check_collectives catches them first. Calls of different sets
// that share GPUs run on different communicators whose kernels may
// interleave differently on different processes: NCCL can deadlock then
// (until the budget aborts them); a trainer should give such sets
// distinct call phases.
//
// Failure. A failed rendezvous or operation (timeout, NCCL error, a lost
// peer) aborts every communicator of the key (ncclCommAbort) and refuses
// the key from then on, as with Gloo; the cluster bumps the set's
// generation. Abort, AbortGeneration and AbortProcess only flag the keys
// (ncclCommAbort may take a while; they run on the cluster's threads): a
// call inside a flagged key's communicators ends within one poll -- 20 us
// in NCCL's waits, AbortableRendezvousStore::kPoll in the store's -- and
// aborts them; idle ones are aborted by the key's next call, which is
// refused, or when their epoch is dropped. Argument errors this process
// can tell alone (a dtype NCCL cannot reduce, ranks that share a GPU) fail
// before the key is touched. A process that forfeits a call never joins
// its communicators; its peers read the generation's
// GenerationAbandonedKey while they wait for the unique id
// (AbortableRendezvousStore's watch) and inside NCCL (Interruption: at
// most every AbortableRendezvousStore::kPoll), and fail UNAVAILABLE with
// its words.
//
// Numerics are NCCL's: f16 / bf16 reduce in their own precision at every
// step (gloo: f32 accumulation, one rounding), integer MEAN is ncclAvg in
// the dtype's width; i16 and bool cannot be reduced (INVALID_ARGUMENT).
//
// Network: NCCL picks its interface itself unless NCCL_SOCKET_IFNAME says
// (it is read from the daemon's environment); Create logs the interface
// that holds `hostname` (the peer address) to put there when it is unset.
// NCCL's traffic is not encrypted.
//
// Thread-safe (CrossProcessTransport).
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_TRANSPORT_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/collective/transport/cross_process_transport.h"
#include "server/collective/transport/transport_groups.h"
#include "server/platform/cuda/cuda_backend.h"

namespace placement::server {

class NcclComms;

// "nccl/e3/s0,1/g0/p0,1/<digest>": the rendezvous prefix of the
// communicators of `key` over the devices `device_ids` (rank order); an
// empty list names the exchange communicator ("/x").
std::string NcclPrefix(const TransportGroupKey& key, const std::vector<int64_t>& device_ids);

class NcclTransport final : public CrossProcessTransport {
 public:
  // INVALID_ARGUMENT without a store or backend, or for a negative process
  // index; FAILED_PRECONDITION when the backend is not the cuda platform's
  // or NCCL cannot be loaded.
  static absl::StatusOr<std::unique_ptr<CrossProcessTransport>> Create(
      const CrossProcessTransportOptions& options);
  // Aborts every communicator. REQUIRES: no call in flight.
  ~NcclTransport() override;

  absl::string_view Name() const override { return "nccl"; }
  // NCCL listens on the interface it picked (NCCL_SOCKET_IFNAME): its
  // address is not known here.
  std::string ListenAddress() const override { return ""; }
  bool encrypted() const override { return false; }
  // Makes the item's communicators on first use (see Groups); fails
  // UNAVAILABLE when the key was refused.
  absl::Status Run(CollectiveKind kind, const CollectiveItem& item, const ClusterItemPlan& plan,
                   const TransportGroupKey& key, uint32_t tag, absl::Duration budget,
                   absl::string_view what) override;
  absl::StatusOr<std::vector<std::string>> Exchange(const TransportGroupKey& key,
                                                    const std::string& block, uint32_t tag,
                                                    absl::Duration budget,
                                                    absl::string_view what) override;
  void Abort(const TransportGroupKey& key) override;
  void AbortGeneration(uint64_t epoch, const std::string& set_key, uint64_t generation) override;
  void AbortProcess(int32_t process, uint64_t through_epoch, const std::string& why) override;
  bool Connected(const TransportGroupKey& key) const override;
  void DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept) override;
  size_t connected_groups() const override;

 private:
  struct Entry;

  NcclTransport(const CrossProcessTransportOptions& options, CudaBackend* backend);

  std::shared_ptr<Entry> EntryFor(const TransportGroupKey& key);
  // Flags `entry` with `why` (see "Failure").
  static void Interrupt(Entry& entry, const absl::Status& why);
  // The communicators of `key` over `ranks` (rank -> CUDA ordinal of the
  // ranks this process holds; ascending ranks), made on first use.
  // REQUIRES: entry.mu held.
  absl::StatusOr<NcclComms*> CommsFor(Entry& entry, const TransportGroupKey& key,
                                      const std::vector<int64_t>& device_ids, int size,
                                      const std::vector<std::pair<int, int>>& ranks,
                                      absl::Duration budget);
  // Runs `fn` on the entry of `key` under its lock; a failure aborts the
  // key's communicators and refuses the key.
  absl::Status WithEntry(const TransportGroupKey& key, absl::string_view call,
                         absl::FunctionRef<absl::Status(Entry&)> fn);

  RendezvousStore* const store_;
  CudaBackend* const backend_;
  const int32_t process_index_;
  // By epoch and key name.
  TransportGroups<Entry> entries_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_TRANSPORT_H_

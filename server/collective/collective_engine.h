// CollectiveEngine: all-reduce, all-gather, reduce-scatter and broadcast over
// groups of device buffers (NCCL / Gloo / MPI semantics), behind one seam so
// the daemon's collective service does not care which technology moves the
// bytes. Every engine has the same contract: Run(kind, items, context).
// Implementations (each platform brings the intra-node one, see
// server/platform/):
//   LocalEngine       (local/)  groups entirely in this process on
//                               host-addressable devices (CPU virtual
//                               devices): a worker pool reduces chunk by
//                               chunk straight between the host buffers.
//   HostStagedEngine            groups in this process on devices that are
//                               not host-addressable and that the device
//                               engine cannot serve (ranks sharing a GPU).
//   NcclEngine        (server/platform/cuda/) GPUs: cached communicators
//                               per device group, dedicated streams, async
//                               error polling.
//   ClusterEngine     (cluster/) groups spanning the daemons of a cluster:
//                               calls ordered by CrossProcessTicket, each
//                               spanning item on the platform's
//                               CrossProcessTransport (transport/; gloo:
//                               a process's ranks combined on its host, one
//                               Gloo participant per process).
//
// One call carries one or more CollectiveItems. Each item is one collective
// over one group of ranks; the items of a call are independent of each other
// and an engine runs them together (fused, like an NCCL group): the groups of
// a mesh axis (psum over 'data' on a 2x4 mesh is 4 groups) and the tensors of
// a gradient batch travel in one call.
//
// An item describes its group GLOBALLY -- `group` is the device id of every
// rank in rank order, ranks on other processes (nodes) included -- and lists
// THIS process's contributions in `local`, each tagged with its rank in the
// group. An engine serving groups entirely in this process (Local,
// HostStaged, NCCL today) requires `local` to hold every rank; the engine
// spanning processes (ClusterEngine) reaches the other ranks through its
// transport's connections. Sizes per rank, for a group of n ranks and a block of B bytes:
//   AllReduce:      send B,   recv B     recv = op over every rank's send
//   AllGather:      send B,   recv n*B   recv = send of rank 0 ++ ... ++ rank n-1
//   ReduceScatter:  send n*B, recv B     rank r's recv = op over every send's block r
//   Broadcast:      send B on the root (others unused, may be null), recv B
// MEAN divides by n, the number of ranks in the group, on every engine.
// recv may be the same buffer as send (in place) for AllReduce and
// Broadcast; for AllGather and ReduceScatter it must not overlap any send.
// Buffers must stay alive and unmodified by others until the call returns.
//
// Thread-safety: implementations are thread-safe; concurrent calls on
// disjoint buffers proceed in parallel.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/dtype.h"
#include "common/reduce_op.h"
#include "server/device/device_backend.h"

namespace placement::server {

// The four collectives.
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast };

// "all_reduce", "all_gather", "reduce_scatter", "broadcast".
absl::string_view CollectiveKindName(CollectiveKind kind);

// One rank's buffers, contributed by this process.
struct RankBuffers {
  int32_t rank = 0;  // in the item's group
  const DeviceBuffer* send = nullptr;
  DeviceBuffer* recv = nullptr;
};

// One collective over one group of ranks. See the header comment for sizes.
struct CollectiveItem {
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;  // AllReduce and ReduceScatter only
  int32_t root = 0;              // Broadcast only: the source's rank in the group
  // The global group: the device id of every rank, in rank order.
  std::vector<int64_t> group;
  // This process's contributions, each tagged with its rank in `group`.
  std::vector<RankBuffers> local;
};

// An item whose every rank is in this process: rank r sends send[r] and
// receives into recv[r]; the group is the recv buffers' devices in order.
// REQUIRES: send.size() == recv.size(); recv[r] non-null.
CollectiveItem AllLocalItem(DType dtype, ReduceOp op, std::vector<const DeviceBuffer*> send,
                            std::vector<DeviceBuffer*> recv, int32_t root = 0);

// The place of a call that spans processes in the order every process of
// the set executes them. Every process of the set receives the call with
// the same ticket, including processes that contribute no rank to any of
// its items (they still consume the ticket). Two ways to number them:
//   coordinator   (call_ordered false) the cluster coordinator issued the
//                 ticket: 0, 1, 2, ... per (set_key, epoch);
//   call order    (call_ordered true; multi-controller calls) every process
//                 numbered the call itself: the n-th call of the set since
//                 it formed at (epoch, generation) on every process is the
//                 same call, as NCCL and torch.distributed require. The
//                 engine then checks, on the transport, that every process
//                 asked for the same call (`digest`) at the same number and
//                 that none failed before it, and keeps the call's turn
//                 until ClusterEngine::Settle agrees on its outcome.
struct CrossProcessTicket {
  std::string set_key;      // the process set the call belongs to, e.g. "0,1,3"
  uint64_t epoch = 0;       // membership epoch the ticket (or set) was issued in
  uint64_t generation = 0;  // the set's context generation (bumped after a failure)
  uint64_t ticket = 0;      // 0, 1, 2, ... per (set_key, epoch) or per formation
  bool call_ordered = false;
  // call_ordered: a digest of the request (any bytes, at most 16 used),
  // equal on every process that asked for the same call; and the set's
  // processes (ascending), among which the engine agrees.
  std::string digest;
  std::vector<int32_t> processes;
  // call_ordered: a group of the call that spans processes leaves one of
  // `processes` out, or no group spans processes at all. Derived from the
  // request alone (ClusterCollectives::Number, which sets it only when calls
  // are unchecked), so every process sets it alike. The engine
  // then runs the call's agreement round even without check_calls: a part
  // that fails first could not reach every process through the call's own
  // groups (ClusterEngineOptions::check_calls).
  bool partial_groups = false;
};

// Per-call controls every engine honours.
struct CollectiveContext {
  // Polled between chunks (LocalEngine), while waiting for the device
  // (NcclEngine), and between items (ClusterEngine). Returning true stops the
  // call with CANCELLED; receive buffers then hold unspecified bytes.
  std::function<bool()> cancelled;
  // DEADLINE_EXCEEDED once passed (same polling points as `cancelled`; Gloo
  // turns the remaining time into its own per-operation timeout).
  absl::Time deadline = absl::InfiniteFuture();
  // Cross-process engines match the operations of different processes by
  // tag: every process must issue the same calls with the same tags. 0 lets
  // the engine number calls itself (correct when every process issues the
  // same sequence of calls). In-process engines ignore it.
  uint32_t tag = 0;
  // Required when an item spans processes (ClusterEngine orders such calls
  // by it and names their Gloo contexts after it); engines serving one
  // process ignore it. Not owned; must outlive the call.
  const CrossProcessTicket* ticket = nullptr;

  // CANCELLED or DEADLINE_EXCEEDED when the call must stop now, else OK.
  absl::Status Check() const;
};

class CollectiveEngine {
 public:
  virtual ~CollectiveEngine() = default;

  // "local", "host_staged", "nccl", "gloo" (logs and messages only).
  virtual absl::string_view Name() const = 0;

  // True when a small call completes in microseconds without setup or I/O
  // (in-process memory copies), so a caller may run it on its own thread
  // instead of handing it to a dispatch pool.
  virtual bool CompletesInline() const { return false; }

  // Runs `kind` over every item. INVALID_ARGUMENT when an item is
  // inconsistent (group and contributions, sizes, a dtype or op the engine
  // cannot reduce -- the message names the item, the rank and the numbers);
  // CANCELLED / DEADLINE_EXCEEDED as CollectiveContext says; INTERNAL or
  // UNAVAILABLE with the library's text when the transport fails. On error,
  // receive buffers hold unspecified bytes; send buffers are untouched
  // unless they are also receive buffers.
  virtual absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                           const CollectiveContext& context) = 0;
};

// For engines that serve groups entirely in this process: checks every item
// against the size table (one contribution per rank, ranks 0..n-1 each
// once, n = group size, each rank's recv on its group device) and returns
// the items with `local` in rank order -- `items` itself when they already
// are, else copies in `storage`. `what` prefixes messages
// ("all_reduce item 2: recv[3] is 4000 bytes, expected 4096"). Also rejects
// a root outside [0, n), sizes that are not a multiple of the dtype size,
// and bool for reductions.
absl::StatusOr<absl::Span<const CollectiveItem>> ValidateLocalItems(
    CollectiveKind kind, absl::Span<const CollectiveItem> items,
    std::vector<CollectiveItem>* storage);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_

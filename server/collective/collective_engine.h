// CollectiveEngine: all-reduce, all-gather, reduce-scatter and broadcast over
// groups of device buffers (NCCL / Gloo / MPI semantics), behind one seam so
// the daemon's collective service does not care which technology moves the
// bytes. Implementations:
//   LocalEngine  (local/)  CPU virtual devices in one process: a fixed worker
//                          pool reduces chunk by chunk straight between the
//                          devices' host buffers.
//   NcclEngine   (nccl/)   GPUs of this process: cached communicators per
//                          device group, dedicated streams, async error polling.
//   GlooEngine   (gloo/)   CPU across processes or nodes: Gloo's TCP transport,
//                          rendezvous through a RendezvousStore, tags, timeouts.
//
// One call carries one or more CollectiveItems. Each item is one collective
// over one group of ranks; the items of a call are independent of each other
// and an engine runs them together (fused, like an NCCL group): the groups of
// a mesh axis (psum over 'data' on a 2x4 mesh is 4 groups) and the tensors of
// a gradient batch travel in one call.
//
// Buffers: an in-process engine (Local, NCCL) receives the buffer of EVERY
// rank of a group, in rank order. A cross-process engine (Gloo) receives the
// buffers this process contributes and reaches the other ranks through its
// own connections; see its header. Sizes per rank, for a group of n ranks and
// a block of B bytes:
//   AllReduce:      send[i] B,   recv[i] B        recv = op over all send
//   AllGather:      send[i] B,   recv[i] n*B      recv = send[0] ++ ... ++ send[n-1]
//   ReduceScatter:  send[i] n*B, recv[i] B        recv[i] = op over all send[*] block i
//   Broadcast:      send[root] B (others unused, may be null), recv[i] B
// recv[i] may be the same buffer as send[i] (in place) for AllReduce and
// Broadcast; for AllGather and ReduceScatter it must not overlap any send.
// Buffers must stay alive and unmodified by others until the call returns.
//
// Thread-safety: implementations are thread-safe; concurrent calls on
// disjoint buffers proceed in parallel.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/dtype.h"
#include "server/common/reduce_op.h"
#include "server/device/device_backend.h"

namespace placement::server {

// One collective over one group of ranks. See the header comment for sizes.
struct CollectiveItem {
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;  // AllReduce and ReduceScatter only
  int root = 0;                  // Broadcast only: rank of the source
  std::vector<const DeviceBuffer*> send;
  std::vector<DeviceBuffer*> recv;
};

// Per-call controls every engine honours.
struct CollectiveContext {
  // Polled between chunks (LocalEngine), while waiting for the device
  // (NcclEngine), and between items (GlooEngine). Returning true stops the
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

  // CANCELLED or DEADLINE_EXCEEDED when the call must stop now, else OK.
  absl::Status Check() const;
};

class CollectiveEngine {
 public:
  virtual ~CollectiveEngine() = default;

  // "local", "nccl", "gloo".
  virtual absl::string_view Name() const = 0;

  // Every method: INVALID_ARGUMENT when an item's buffers are inconsistent
  // (count, sizes, a dtype or op the engine cannot reduce -- the message
  // names the item and the numbers); CANCELLED / DEADLINE_EXCEEDED as
  // CollectiveContext says; INTERNAL or UNAVAILABLE with the library's text
  // when the transport fails. On error, receive buffers hold unspecified
  // bytes; send buffers are untouched unless they are also receive buffers.
  virtual absl::Status AllReduce(absl::Span<const CollectiveItem> items,
                                 const CollectiveContext& context) = 0;
  virtual absl::Status AllGather(absl::Span<const CollectiveItem> items,
                                 const CollectiveContext& context) = 0;
  virtual absl::Status ReduceScatter(absl::Span<const CollectiveItem> items,
                                     const CollectiveContext& context) = 0;
  virtual absl::Status Broadcast(absl::Span<const CollectiveItem> items,
                                 const CollectiveContext& context) = 0;
};

// The four collectives, for code that validates or dispatches generically.
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast };

absl::string_view CollectiveKindName(CollectiveKind kind);

// Checks the sizes of every item against the table in the header comment for
// an in-process engine (one send and one recv per rank). `what` prefixes the
// messages ("all_reduce item 2: recv[3] is 4000 bytes, expected 4096").
// Also rejects zero ranks, a root outside [0, n), sizes that are not a
// multiple of the dtype size, and bool for reductions.
absl::Status ValidateLocalItems(CollectiveKind kind, absl::Span<const CollectiveItem> items);

// Dispatches to the engine's method for `kind`.
absl::Status RunCollective(CollectiveEngine& engine, CollectiveKind kind,
                           absl::Span<const CollectiveItem> items,
                           const CollectiveContext& context);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_ENGINE_H_

#include "server/collective/transport/gloo/hierarchical_collectives.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "server/collective/cluster/wire_reduction.h"
#include "server/collective/transport/gloo/gloo_ring_context.h"
#include "server/collective/transport/gloo/gloo_support.h"
#include "server/collective/transport/gloo/recursive_doubling.h"

namespace placement::server {
namespace {

// Whether an all-gather of these per-process byte counts runs by recursive
// doubling: it moves the ring's bytes in fewer steps, except that the
// ranks beyond the largest power of two receive everything once more at
// the end, which only small blocks afford. The same on every process.
bool GatherByRecursiveDoubling(const std::vector<size_t>& counts) {
  const size_t size = counts.size();
  if ((size & (size - 1)) == 0) return true;
  return *std::max_element(counts.begin(), counts.end()) <= kRecursiveDoublingMaxBytes;
}

// Whether a broadcast runs by recursive doubling (small blocks) rather
// than around the ring. The same on every process.
bool BroadcastByRecursiveDoubling(const ClusterItemPlan& plan) {
  return static_cast<size_t>(plan.block) <= kRecursiveDoublingMaxBytes;
}

// Host scratch without zero-filling (every byte is written before it is
// read).
std::unique_ptr<std::byte[]> Scratch(int64_t bytes) {
  return std::unique_ptr<std::byte[]>(new std::byte[static_cast<size_t>(bytes)]);
}

// All-reduces `count` elements of `wire` in place over the subset: up to
// kRecursiveDoublingMaxBytes by recursive doubling (log2 n exchanges),
// beyond it with Gloo's ring all-reduce, which sends only to rank - 1 and
// receives only from rank + 1 (and checks that both pairs exist). Both run
// on a GlooRingContext; Gloo's other algorithms need more pairs.
void GlooAllReduceInPlace(const GlooOperation& op, DType wire, ReduceOp combine, std::byte* data,
                          int64_t count) {
  const size_t element = static_cast<size_t>(DTypeSize(wire));
  if (static_cast<size_t>(count) * element <= kRecursiveDoublingMaxBytes) {
    RecursiveDoublingAllReduce(*op.context, data, static_cast<size_t>(count), element,
                               GlooPairwiseReduce(wire, combine), op.tag, op.timeout);
    return;
  }
  gloo::AllreduceOptions opts(op.context);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  WithGlooElementType(wire, [&](auto proto) {
    using T = decltype(proto);
    opts.setOutput(reinterpret_cast<T*>(data), static_cast<size_t>(count));
  });
  opts.setReduceFunction(GlooPairwiseReduce(wire, combine));
  opts.setTag(op.tag);
  opts.setTimeout(op.timeout);
  gloo::allreduce(opts);
}

// The local sends reduced into a wire scratch of `count` elements, then
// all-reduced and finished in place (AllReduce: count = B / elem;
// ReduceScatter: count = n * B / elem).
absl::StatusOr<std::unique_ptr<std::byte[]>> ReduceAcrossProcesses(const CollectiveItem& item,
                                                                   const ClusterItemPlan& plan,
                                                                   const GlooOperation& op,
                                                                   RankBufferIo& io, int64_t count,
                                                                   bool finish) {
  const DType wire = WireDType(item.dtype, item.op);
  std::unique_ptr<std::byte[]> scratch = Scratch(count * DTypeSize(wire));
  {
    std::vector<std::vector<std::byte>> staging(plan.local.size());
    std::vector<const std::byte*> sends;
    sends.reserve(plan.local.size());
    for (size_t j = 0; j < plan.local.size(); ++j) {
      absl::StatusOr<const std::byte*> view = io.View(*plan.local[j].send, staging[j]);
      if (!view.ok()) return view.status();
      sends.push_back(*view);
    }
    ReduceToWire(item.dtype, item.op, sends, scratch.get(), count);
  }
  GlooAllReduceInPlace(op, wire, WireCombineOp(item.op), scratch.get(), count);
  if (finish) FinishFromWire(item.dtype, item.op, plan.ranks, scratch.get(), scratch.get(), count);
  return scratch;
}

absl::Status AllReduce(const CollectiveItem& item, const ClusterItemPlan& plan,
                       const GlooOperation& op, RankBufferIo& io) {
  const int64_t count = plan.block / DTypeSize(item.dtype);
  // One rank on this process, in host memory, reduced in its own element
  // type: Gloo reduces straight in the receive buffer -- no scratch, at
  // most one copy (none in place), as a direct Gloo caller would.
  if (plan.local.size() == 1 && WireDType(item.dtype, item.op) == item.dtype) {
    const RankBuffers& rank = plan.local.front();
    std::byte* recv = io.Direct(*rank.recv);
    const std::byte* send = rank.send != nullptr ? io.Direct(*rank.send) : nullptr;
    if (recv != nullptr && send != nullptr) {
      if (send != recv) std::memcpy(recv, send, static_cast<size_t>(plan.block));
      GlooAllReduceInPlace(op, item.dtype, WireCombineOp(item.op), recv, count);
      if (item.op == ReduceOp::kMean) {
        FinishFromWire(item.dtype, item.op, plan.ranks, recv, recv, count);
      }
      return absl::OkStatus();
    }
  }
  absl::StatusOr<std::unique_ptr<std::byte[]>> result =
      ReduceAcrossProcesses(item, plan, op, io, count, /*finish=*/true);
  if (!result.ok()) return result.status();
  const ByteRun run{0, 0, plan.block};
  for (const RankBuffers& r : plan.local) {
    if (absl::Status s = io.Write(result->get(), *r.recv, {&run, 1}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReduceScatter(const CollectiveItem& item, const ClusterItemPlan& plan,
                           const GlooOperation& op, RankBufferIo& io) {
  const int64_t block_count = plan.block / DTypeSize(item.dtype);
  absl::StatusOr<std::unique_ptr<std::byte[]>> result =
      ReduceAcrossProcesses(item, plan, op, io, plan.ranks * block_count, /*finish=*/false);
  if (!result.ok()) return result.status();
  // Finish only the blocks this process keeps, each narrowed in place at the
  // start of its wire block.
  const int64_t wire_block = block_count * DTypeSize(WireDType(item.dtype, item.op));
  for (const RankBuffers& r : plan.local) {
    std::byte* block = result->get() + r.rank * wire_block;
    FinishFromWire(item.dtype, item.op, plan.ranks, block, block, block_count);
    const ByteRun run{r.rank * wire_block, 0, plan.block};
    if (absl::Status s = io.Write(result->get(), *r.recv, {&run, 1}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Runs from the gathered scratch (processes in subset order, each with its
// ranks ascending) to rank order, adjacent runs merged: one run when the
// group lists the processes' ranks contiguously in process order.
std::vector<ByteRun> GatheredToRankOrder(const ClusterItemPlan& plan) {
  std::vector<ByteRun> runs;
  runs.reserve(static_cast<size_t>(plan.ranks));
  int64_t src = 0;
  for (const std::vector<int32_t>& ranks : plan.ranks_by_position) {
    for (int32_t rank : ranks) {
      runs.push_back(ByteRun{src, rank * plan.block, plan.block});
      src += plan.block;
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const ByteRun& a, const ByteRun& b) { return a.dst_offset < b.dst_offset; });
  std::vector<ByteRun> merged;
  for (const ByteRun& run : runs) {
    if (!merged.empty() && merged.back().src_offset + merged.back().length == run.src_offset &&
        merged.back().dst_offset + merged.back().length == run.dst_offset) {
      merged.back().length += run.length;
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

absl::Status AllGather(const ClusterItemPlan& plan, const GlooOperation& op, RankBufferIo& io) {
  std::unique_ptr<std::byte[]> gathered = Scratch(plan.ranks * plan.block);
  std::vector<size_t> counts;  // bytes of each process, in subset order
  int64_t mine = 0;            // where this process's blocks start
  for (size_t q = 0; q < plan.ranks_by_position.size(); ++q) {
    counts.push_back(plan.ranks_by_position[q].size() * static_cast<size_t>(plan.block));
    if (static_cast<int32_t>(q) < plan.position) mine += static_cast<int64_t>(counts.back());
  }
  // This process's blocks primed in place: the gather needs no input.
  for (size_t j = 0; j < plan.local.size(); ++j) {
    std::byte* dst = gathered.get() + mine + static_cast<int64_t>(j) * plan.block;
    if (absl::Status s = io.Read(*plan.local[j].send, 0, dst, plan.block); !s.ok()) return s;
  }
  if (GatherByRecursiveDoubling(counts)) {
    RecursiveDoublingAllGatherV(*op.context, gathered.get(), counts, op.tag, op.timeout);
  } else {
    // Gloo's allgatherv is a ring: it sends only to rank + 1 and receives
    // only from rank - 1.
    gloo::AllgathervOptions opts(op.context);
    opts.setOutput(reinterpret_cast<uint8_t*>(gathered.get()), counts);
    opts.setTag(op.tag);
    opts.setTimeout(op.timeout);
    gloo::allgatherv(opts);
  }
  const std::vector<ByteRun> runs = GatheredToRankOrder(plan);
  for (const RankBuffers& r : plan.local) {
    if (absl::Status s = io.Write(gathered.get(), *r.recv, runs); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Broadcast(const CollectiveItem& item, const ClusterItemPlan& plan,
                       const GlooOperation& op, RankBufferIo& io) {
  std::unique_ptr<std::byte[]> bytes = Scratch(plan.block);
  if (plan.position == plan.root_position) {
    for (const RankBuffers& r : plan.local) {
      if (r.rank != item.root) continue;
      if (absl::Status s = io.Read(*r.send, 0, bytes.get(), plan.block); !s.ok()) return s;
    }
  }
  if (BroadcastByRecursiveDoubling(plan)) {
    RecursiveDoublingBroadcast(*op.context, plan.root_position, bytes.get(),
                               static_cast<size_t>(plan.block), op.tag, op.timeout);
  } else {
    RingBroadcast(*op.context, plan.root_position, bytes.get(), static_cast<size_t>(plan.block),
                  op.tag, op.timeout);
  }
  const ByteRun run{0, 0, plan.block};
  for (const RankBuffers& r : plan.local) {
    if (absl::Status s = io.Write(bytes.get(), *r.recv, {&run, 1}); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunHierarchical(CollectiveKind kind, const CollectiveItem& item,
                             const ClusterItemPlan& plan, const GlooOperation& op,
                             RankBufferIo& io) {
  if (plan.block == 0) return absl::OkStatus();
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return AllReduce(item, plan, op, io);
    case CollectiveKind::kAllGather:
      return AllGather(plan, op, io);
    case CollectiveKind::kReduceScatter:
      return ReduceScatter(item, plan, op, io);
    case CollectiveKind::kBroadcast:
      return Broadcast(item, plan, op, io);
  }
  return absl::InvalidArgumentError("unknown collective kind");
}

int WitnessRank(CollectiveKind kind, const ClusterItemPlan& plan) {
  if (plan.block == 0) return -1;
  if (kind != CollectiveKind::kBroadcast || BroadcastByRecursiveDoubling(plan)) return 0;
  const int size = static_cast<int>(plan.processes.size());
  return (plan.root_position + size - 1) % size;
}

}  // namespace placement::server

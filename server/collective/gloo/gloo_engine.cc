#include "server/collective/gloo/gloo_engine.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/collective/gloo/gloo_support.h"
#include "server/collective/kernels/reduce_kernels.h"

namespace placement::server {
namespace {

std::byte* Bytes(const DeviceBuffer* b) { return static_cast<std::byte*>(b->data()); }

absl::Status ValidateGlooItem(CollectiveKind kind, const CollectiveItem& item, int size, int rank,
                              const std::string& where) {
  const size_t k = item.local.size();
  const int64_t n = static_cast<int64_t>(item.group.size());
  if (k == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no local contributions; every process contributes to the group"));
  }
  if (n != static_cast<int64_t>(size) * static_cast<int64_t>(k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": a group of ", n, " ranks with ", k, " contributions from each of ", size,
        " processes; the Gloo engine needs every process to contribute the same number"));
  }
  if (kind != CollectiveKind::kAllReduce && k != 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": Gloo ", CollectiveKindName(kind),
                                                   " takes one local buffer per process, got ", k));
  }
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const RankBuffers& r : item.local) {
    if (r.rank < 0 || r.rank >= n || seen[r.rank]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rank ", r.rank, " outside [0, ", n, ") or listed twice"));
    }
    seen[r.rank] = true;
  }
  // Gloo orders blocks and roots by process: group rank r is process r.
  if (kind != CollectiveKind::kAllReduce && item.local[0].rank != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": this process (Gloo rank ", rank, ") contributes group rank ", item.local[0].rank,
        "; for ", CollectiveKindName(kind), " group rank r must be Gloo rank r"));
  }
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  if (reduces && !IsReducible(item.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": dtype ", DTypeName(item.dtype), " cannot be reduced"));
  }
  // Gloo combines pairwise in the element type, so a MEAN summed in i8..i64,
  // u8, f16 or bf16 would wrap or overflow before the division.
  if (reduces && item.op == ReduceOp::kMean && item.dtype != DType::kF32 &&
      item.dtype != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the Gloo engine computes MEAN only for f32 and f64, not ",
        DTypeName(item.dtype), "; reduce with SUM and divide, or upcast first"));
  }
  if (kind == CollectiveKind::kBroadcast && (item.root < 0 || item.root >= size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": root rank ", item.root, " outside [0, ", size, ")"));
  }
  const bool is_root = kind == CollectiveKind::kBroadcast && item.root == rank;
  const int64_t elem = DTypeSize(item.dtype);
  const RankBuffers& first = item.local[0];
  int64_t block = -1;
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather) {
    if (first.send != nullptr) block = first.send->size();
  } else if (first.recv != nullptr) {
    block = first.recv->size();
  }
  if (block < 0 || block % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": block of ", block, " bytes is not whole ", DTypeName(item.dtype), " elements"));
  }
  const int64_t send_size = kind == CollectiveKind::kReduceScatter ? size * block : block;
  const int64_t recv_size = kind == CollectiveKind::kAllGather ? size * block : block;
  for (const RankBuffers& r : item.local) {
    const bool needs_send = kind != CollectiveKind::kBroadcast || is_root;
    if (needs_send && (r.send == nullptr || r.send->size() != send_size)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": send[", r.rank, "] is ",
                                                     r.send ? r.send->size() : 0,
                                                     " bytes, expected ", send_size));
    }
    if (r.recv == nullptr || r.recv->size() != recv_size) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": recv[", r.rank, "] is ",
                                                     r.recv ? r.recv->size() : 0,
                                                     " bytes, expected ", recv_size));
    }
  }
  return absl::OkStatus();
}

// All-reduce of `outputs` (in place) or `inputs` into `outputs`.
void GlooAllReduce(const std::shared_ptr<gloo::Context>& context, DType dtype, ReduceOp op,
                   GlooEngineOptions::Algorithm algorithm, std::vector<std::byte*> inputs,
                   std::vector<std::byte*> outputs, int64_t bytes, uint32_t tag,
                   std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(context);
  opts.setAlgorithm(algorithm == GlooEngineOptions::Algorithm::kBcube
                        ? gloo::AllreduceOptions::Algorithm::BCUBE
                        : gloo::AllreduceOptions::Algorithm::RING);
  const size_t elements = static_cast<size_t>(bytes / DTypeSize(dtype));
  WithGlooElementType(dtype, [&](auto proto) {
    using T = decltype(proto);
    std::vector<T*> in, out;
    for (std::byte* p : inputs) in.push_back(reinterpret_cast<T*>(p));
    for (std::byte* p : outputs) out.push_back(reinterpret_cast<T*>(p));
    if (!in.empty()) opts.setInputs(in, elements);
    opts.setOutputs(out, elements);
  });
  opts.setReduceFunction(GlooPairwiseReduce(dtype, op));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

}  // namespace

GlooEngine::GlooEngine(const GlooEngineOptions& options, std::shared_ptr<gloo::Context> context)
    : rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout),
      algorithm_(options.algorithm),
      context_(std::move(context)) {}

GlooEngine::~GlooEngine() = default;

absl::StatusOr<std::unique_ptr<GlooEngine>> GlooEngine::Create(const GlooEngineOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: rank ", options.rank, " outside [0, size) for size ", options.size));
  }
  if (options.store == nullptr) return absl::InvalidArgumentError("gloo: no rendezvous store");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: timeout must be positive, got ",
                                                   absl::FormatDuration(options.timeout)));
  }
  absl::StatusOr<std::string> address = ResolveGlooAddress(options.hostname);
  if (!address.ok()) {
    return absl::UnavailableError(absl::StrCat("gloo: ", address.status().message()));
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = *address;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(GlooMilliseconds(options.timeout));
    GlooStoreAdapter adapter(options.store, options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, adapter);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooEngine>(new GlooEngine(options, std::move(context)));
  } catch (const GlooStoreFailure& e) {
    return e.status;
  } catch (const std::exception& e) {
    return GlooErrorStatus(
        absl::StrCat("gloo: connecting rank ", options.rank, " of ", options.size), e.what());
  }
}

void GlooEngine::RunItem(CollectiveKind kind, const CollectiveItem& item, uint32_t tag,
                         std::chrono::milliseconds timeout) {
  const int64_t elem = DTypeSize(item.dtype);
  switch (kind) {
    case CollectiveKind::kAllReduce: {
      std::vector<std::byte*> inputs, outputs;
      bool in_place = true;
      for (const RankBuffers& r : item.local) {
        in_place = in_place && r.send == r.recv;
        inputs.push_back(Bytes(r.send));
        outputs.push_back(Bytes(r.recv));
      }
      if (in_place) inputs.clear();
      const int64_t bytes = item.local[0].recv->size();
      GlooAllReduce(context_, item.dtype, item.op, algorithm_, inputs, outputs, bytes, tag,
                    timeout);
      if (item.op == ReduceOp::kMean) {
        // MEAN divides by the group size, as on every engine.
        const int64_t ranks = static_cast<int64_t>(item.group.size());
        for (std::byte* out : outputs) DivideInPlace(item.dtype, out, bytes / elem, ranks);
      }
      return;
    }
    case CollectiveKind::kReduceScatter: {
      const RankBuffers& mine = item.local[0];
      const int64_t block = mine.recv->size();
      std::vector<std::byte> scratch(static_cast<size_t>(mine.send->size()));
      std::memcpy(scratch.data(), mine.send->data(), scratch.size());
      GlooAllReduce(context_, item.dtype, item.op, algorithm_, {}, {scratch.data()},
                    static_cast<int64_t>(scratch.size()), tag, timeout);
      std::byte* out = Bytes(mine.recv);
      std::memcpy(out, scratch.data() + rank_ * block, static_cast<size_t>(block));
      if (item.op == ReduceOp::kMean) DivideInPlace(item.dtype, out, block / elem, size_);
      return;
    }
    case CollectiveKind::kAllGather: {
      gloo::AllgatherOptions opts(context_);
      const RankBuffers& mine = item.local[0];
      const size_t elements = static_cast<size_t>(mine.send->size() / elem);
      WithGlooElementType(item.dtype, [&](auto proto) {
        using T = decltype(proto);
        opts.setInput(static_cast<T*>(mine.send->data()), elements);
        opts.setOutput(static_cast<T*>(mine.recv->data()), elements * size_);
      });
      opts.setTag(tag);
      opts.setTimeout(timeout);
      gloo::allgather(opts);
      return;
    }
    case CollectiveKind::kBroadcast: {
      gloo::BroadcastOptions opts(context_);
      const RankBuffers& mine = item.local[0];
      const size_t elements = static_cast<size_t>(mine.recv->size() / elem);
      WithGlooElementType(item.dtype, [&](auto proto) {
        using T = decltype(proto);
        if (item.root == rank_ && mine.send != mine.recv) {
          opts.setInput(static_cast<T*>(mine.send->data()), elements);
        }
        opts.setOutput(static_cast<T*>(mine.recv->data()), elements);
      });
      opts.setRoot(item.root);
      opts.setTag(tag);
      opts.setTimeout(timeout);
      gloo::broadcast(opts);
      return;
    }
  }
}

absl::Status GlooEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                             const CollectiveContext& context) {
  for (size_t i = 0; i < items.size(); ++i) {
    absl::Status s = ValidateGlooItem(kind, items[i], size_, rank_,
                                      absl::StrCat(CollectiveKindName(kind), " item ", i));
    if (!s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  const uint32_t tag = context.tag != 0 ? context.tag : next_tag_++;
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = context.Check(); !s.ok()) return s;
    absl::Duration timeout = timeout_;
    if (context.deadline != absl::InfiniteFuture()) {
      timeout = std::min(timeout, context.deadline - absl::Now());
    }
    try {
      RunItem(kind, items[i], tag, GlooMilliseconds(timeout));
    } catch (const std::exception& e) {
      return GlooErrorStatus(absl::StrCat("gloo ", CollectiveKindName(kind), " item ", i, " (rank ",
                                          rank_, " of ", size_, ", tag ", tag, ")"),
                             e.what());
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server

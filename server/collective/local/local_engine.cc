#include "server/collective/local/local_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "server/collective/kernels/reduce_kernels.h"

namespace placement::server {
namespace {

// One chunk of work: bytes [begin, begin + length) of block `part` of item
// `item` (part: the receiving rank for reduce-scatter, the sending rank for
// all-gather, 0 otherwise).
struct Task {
  int32_t item = 0;
  int32_t part = 0;
  int64_t begin = 0;
  int64_t length = 0;
};

std::byte* Bytes(const DeviceBuffer* buffer) { return static_cast<std::byte*>(buffer->data()); }

// Bytes of one block (see the table in collective_engine.h).
int64_t BlockBytes(CollectiveKind kind, const CollectiveItem& item) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
      return item.local[0].send->size();
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      return item.local[0].recv->size();
  }
  return 0;
}

std::vector<Task> PlanTasks(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                            int64_t chunk_bytes) {
  std::vector<Task> tasks;
  for (size_t i = 0; i < items.size(); ++i) {
    const CollectiveItem& item = items[i];
    const int64_t elem = DTypeSize(item.dtype);
    const int64_t chunk = std::max(elem, chunk_bytes / elem * elem);
    const int64_t block = BlockBytes(kind, item);
    const bool per_rank =
        kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllGather;
    const int parts = per_rank ? static_cast<int>(item.local.size()) : 1;
    for (int part = 0; part < parts; ++part) {
      for (int64_t begin = 0; begin < block; begin += chunk) {
        tasks.push_back(Task{static_cast<int32_t>(i), part, begin, std::min(chunk, block - begin)});
      }
    }
  }
  return tasks;
}

// REQUIRES: item.local in rank order (ValidateLocalItems).
void RunTask(CollectiveKind kind, const CollectiveItem& item, const Task& task) {
  const std::vector<RankBuffers>& ranks = item.local;
  const size_t n = ranks.size();
  const int64_t elem = DTypeSize(item.dtype);
  absl::InlinedVector<const std::byte*, 16> inputs;
  absl::InlinedVector<std::byte*, 16> outputs;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      for (size_t j = 0; j < n; ++j) inputs.push_back(Bytes(ranks[j].send) + task.begin);
      for (size_t j = 0; j < n; ++j) outputs.push_back(Bytes(ranks[j].recv) + task.begin);
      ReduceInto(item.dtype, item.op, inputs, outputs, task.length / elem);
      return;
    case CollectiveKind::kReduceScatter: {
      const int64_t offset = task.part * ranks[0].recv->size() + task.begin;
      for (size_t j = 0; j < n; ++j) inputs.push_back(Bytes(ranks[j].send) + offset);
      outputs.push_back(Bytes(ranks[task.part].recv) + task.begin);
      ReduceInto(item.dtype, item.op, inputs, outputs, task.length / elem);
      return;
    }
    case CollectiveKind::kAllGather: {
      const std::byte* src = Bytes(ranks[task.part].send) + task.begin;
      const int64_t offset = task.part * ranks[0].send->size() + task.begin;
      for (size_t j = 0; j < n; ++j) std::memcpy(Bytes(ranks[j].recv) + offset, src, task.length);
      return;
    }
    case CollectiveKind::kBroadcast: {
      const std::byte* src = Bytes(ranks[item.root].send) + task.begin;
      for (size_t j = 0; j < n; ++j) {
        std::byte* dst = Bytes(ranks[j].recv) + task.begin;
        if (dst != src) std::memcpy(dst, src, task.length);
      }
      return;
    }
  }
}

// Calls that move fewer bytes than this run on the calling thread: waking a
// helper costs more than the work (an all-gather of 128-byte blocks over 8
// devices is 8 tasks of 1 KiB of copies each).
constexpr int64_t kInlineBytes = 64 << 10;

// How many threads drain `tasks`: the caller alone for a small call, else
// the caller and every pool thread.
int Parallelism(const std::vector<Task>& tasks, int pool_threads) {
  int64_t bytes = 0;
  for (const Task& task : tasks) bytes += task.length;
  return bytes < kInlineBytes ? 1 : pool_threads + 1;
}

}  // namespace

LocalEngine::LocalEngine(const LocalEngineOptions& options)
    : options_(options),
      pool_(std::make_unique<WorkerPool>(options.num_threads < 0 ? WorkerPool::DefaultThreads()
                                                                 : options.num_threads)) {
  if (options_.chunk_bytes <= 0) options_.chunk_bytes = LocalEngineOptions{}.chunk_bytes;
}

LocalEngine::~LocalEngine() = default;

absl::Status LocalEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                              const CollectiveContext& context) {
  std::vector<CollectiveItem> sorted;
  absl::StatusOr<absl::Span<const CollectiveItem>> ordered =
      ValidateLocalItems(kind, items, &sorted);
  if (!ordered.ok()) return ordered.status();
  items = *ordered;
  absl::Status status = context.Check();
  if (!status.ok()) return status;
  const std::vector<Task> tasks = PlanTasks(kind, items, options_.chunk_bytes);

  std::atomic<bool> stop{false};
  absl::Mutex mu;
  absl::Status first_error;
  pool_->ParallelFor(static_cast<int64_t>(tasks.size()), Parallelism(tasks, pool_->num_threads()),
                     [&](int64_t t) {
                       if (stop.load(std::memory_order_relaxed)) return;
                       absl::Status check = context.Check();
                       if (!check.ok()) {
                         stop.store(true, std::memory_order_relaxed);
                         absl::MutexLock lock(&mu);
                         if (first_error.ok()) first_error = check;
                         return;
                       }
                       const Task& task = tasks[t];
                       RunTask(kind, items[task.item], task);
                     });
  absl::MutexLock lock(&mu);
  return first_error;
}

}  // namespace placement::server

#include "server/platform/cuda/nccl_engine.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/logging.h"
#include "server/platform/cuda/nccl_support.h"

namespace placement::server {

// The communicators of one device group with their streams and events.
// `mu` serialises calls on the group; the vectors are written only while
// the group is being built (before it is shared) or aborted (under `mu`).
struct NcclEngine::Group {
  std::vector<int64_t> device_ids;
  std::vector<int> ordinals;
  absl::Mutex mu;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> events;
  bool aborted = false;

  ~Group() {
    for (size_t r = 0; r < ordinals.size(); ++r) {
      cudaSetDevice(ordinals[r]);
      if (r < streams.size() && streams[r] != nullptr) cudaStreamDestroy(streams[r]);
      if (r < events.size() && events[r] != nullptr) cudaEventDestroy(events[r]);
      if (!aborted && r < comms.size() && comms[r] != nullptr) ncclCommDestroy(comms[r]);
    }
  }

  // Aborts every communicator (kernels in flight are stopped), then waits
  // for the streams so no NCCL work touches the buffers after return.
  void Abort() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (aborted) return;
    for (ncclComm_t comm : comms) {
      if (comm != nullptr) ncclCommAbort(comm);
    }
    aborted = true;
    for (size_t r = 0; r < streams.size(); ++r) {
      cudaSetDevice(ordinals[r]);
      cudaStreamSynchronize(streams[r]);
    }
  }
};

NcclEngine::NcclEngine(CudaBackend* backend, NcclEngineOptions options, int nccl_version)
    : backend_(backend), options_(options), staged_(backend), nccl_version_(nccl_version) {}

NcclEngine::~NcclEngine() = default;

absl::StatusOr<std::unique_ptr<NcclEngine>> NcclEngine::Create(CudaBackend* backend,
                                                               const NcclEngineOptions& options) {
  int version = 0;
  if (ncclResult_t r = ncclGetVersion(&version); r != ncclSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL unavailable: ncclGetVersion failed: ", ncclGetErrorString(r)));
  }
  LogInfo("collectives: NCCL ", version / 10000, ".", (version / 100) % 100, ".", version % 100);
  return std::unique_ptr<NcclEngine>(new NcclEngine(backend, options, version));
}

int64_t NcclEngine::cached_groups() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(groups_.size());
}

absl::StatusOr<std::shared_ptr<NcclEngine::Group>> NcclEngine::GetGroup(
    const std::vector<int64_t>& device_ids) {
  absl::MutexLock lock(&mu_);
  if (auto it = groups_.find(device_ids); it != groups_.end()) return it->second;

  auto group = std::make_shared<Group>();
  group->device_ids = device_ids;
  for (int64_t id : device_ids) {
    const int ordinal = backend_->Ordinal(id);
    if (ordinal < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", id, " is not a GPU of this process's CUDA backend"));
    }
    group->ordinals.push_back(ordinal);
  }
  const int n = static_cast<int>(device_ids.size());
  group->comms.assign(n, nullptr);
  if (ncclResult_t r = ncclCommInitAll(group->comms.data(), n, group->ordinals.data());
      r != ncclSuccess) {
    group->comms.clear();
    return NcclStatus(
        r, nullptr,
        absl::StrCat("ncclCommInitAll(devices [", absl::StrJoin(device_ids, ", "), "])"));
  }
  group->streams.assign(n, nullptr);
  group->events.assign(n, nullptr);
  for (int r = 0; r < n; ++r) {
    if (cudaError_t err = cudaSetDevice(group->ordinals[r]); err != cudaSuccess) {
      return CudaStatus(err, "cudaSetDevice");
    }
    if (cudaError_t err = cudaStreamCreateWithFlags(&group->streams[r], cudaStreamNonBlocking);
        err != cudaSuccess) {
      return CudaStatus(err, "cudaStreamCreateWithFlags");
    }
    if (cudaError_t err = cudaEventCreateWithFlags(&group->events[r], cudaEventDisableTiming);
        err != cudaSuccess) {
      return CudaStatus(err, "cudaEventCreateWithFlags");
    }
  }
  LogInfo("collectives: NCCL communicators for devices [", absl::StrJoin(device_ids, ", "), "]");
  groups_.emplace(device_ids, group);
  return group;
}

void NcclEngine::Forget(const std::shared_ptr<Group>& group) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group->device_ids);
  if (it != groups_.end() && it->second == group) groups_.erase(it);
}

absl::Status NcclEngine::AbortGroup(const std::vector<int64_t>& device_ids) {
  std::shared_ptr<Group> group;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(device_ids);
    if (it == groups_.end()) {
      return absl::NotFoundError(absl::StrCat("no NCCL communicators for devices [",
                                              absl::StrJoin(device_ids, ", "), "]"));
    }
    group = it->second;
    groups_.erase(it);
  }
  absl::MutexLock lock(&group->mu);
  group->Abort();
  return absl::OkStatus();
}

namespace {

// Enqueues one item on its group's communicators (inside a group call).
// REQUIRES: item.local in rank order (ValidateLocalItems).
absl::Status Enqueue(CollectiveKind kind, const CollectiveItem& item,
                     const std::vector<ncclComm_t>& comms,
                     const std::vector<cudaStream_t>& streams) {
  for (size_t r = 0; r < item.local.size(); ++r) {
    const ncclResult_t result =
        EnqueueNcclRank(kind, item.dtype, item.op, item.root, item.local[r], comms[r], streams[r]);
    if (result != ncclSuccess) {
      return NcclStatus(result, comms[r],
                        absl::StrCat(CollectiveKindName(kind), " enqueue on rank ", r));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NcclEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                             const CollectiveContext& context) {
  std::vector<CollectiveItem> sorted;
  absl::StatusOr<absl::Span<const CollectiveItem>> ordered =
      ValidateLocalItems(kind, items, &sorted);
  if (!ordered.ok()) return ordered.status();
  items = *ordered;
  // Items whose ranks share a GPU go host-staged; the rest to NCCL.
  std::vector<CollectiveItem> nccl_items, staged_items;
  for (const CollectiveItem& item : items) {
    std::set<int> gpus;
    for (int64_t device : item.group) gpus.insert(backend_->Ordinal(device));
    (gpus.size() == item.group.size() ? nccl_items : staged_items).push_back(item);
  }
  if (staged_items.empty()) return RunNccl(kind, items, context);
  if (absl::Status s = staged_.Run(kind, staged_items, context); !s.ok()) return s;
  return nccl_items.empty() ? absl::OkStatus() : RunNccl(kind, nccl_items, context);
}

absl::Status NcclEngine::RunNccl(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                 const CollectiveContext& context) {
  for (const CollectiveItem& item : items) {
    if (absl::Status s = CheckNcclKind(kind, item.dtype); !s.ok()) return s;
  }
  if (absl::Status s = context.Check(); !s.ok()) return s;

  // The group of every item, and the distinct groups in key order (the
  // lock order that keeps concurrent multi-group calls deadlock-free).
  std::vector<std::shared_ptr<Group>> item_groups;
  std::map<std::vector<int64_t>, std::shared_ptr<Group>> distinct;
  for (const CollectiveItem& item : items) {
    const std::vector<int64_t>& ids = item.group;
    absl::StatusOr<std::shared_ptr<Group>> group = GetGroup(ids);
    if (!group.ok()) return group.status();
    item_groups.push_back(*group);
    distinct.emplace(ids, *group);
  }
  for (auto& [ids, group] : distinct) group->mu.Lock();
  absl::Status status = [&]() -> absl::Status {
    for (auto& [ids, group] : distinct) {
      if (group->aborted) {
        return absl::UnavailableError(
            absl::StrCat("NCCL communicators for devices [", absl::StrJoin(ids, ", "),
                         "] were aborted by a concurrent failure; retry to rebuild them"));
      }
    }
    {
      // One launch order for every GPU: groups that share devices (a 2x2 mesh
      // reduced over "data" and over "model" at once) must enqueue their
      // kernels in the same order on each device, or NCCL can deadlock.
      // Completion is polled outside this lock.
      absl::MutexLock launch(&launch_mu_);
      if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) {
        return NcclStatus(r, nullptr, "ncclGroupStart");
      }
      absl::Status enqueued;
      for (size_t i = 0; i < items.size() && enqueued.ok(); ++i) {
        enqueued = Enqueue(kind, items[i], item_groups[i]->comms, item_groups[i]->streams);
      }
      if (ncclResult_t r = ncclGroupEnd(); r != ncclSuccess && enqueued.ok()) {
        enqueued = NcclStatus(r, nullptr, "ncclGroupEnd");
      }
      if (!enqueued.ok()) return enqueued;
      for (auto& [ids, group] : distinct) {
        for (size_t r = 0; r < group->streams.size(); ++r) {
          cudaSetDevice(group->ordinals[r]);
          if (cudaError_t err = cudaEventRecord(group->events[r], group->streams[r]);
              err != cudaSuccess) {
            return CudaStatus(err, "cudaEventRecord");
          }
        }
      }
    }  // launch_mu_
    // Poll: completion, asynchronous NCCL errors, the caller's context.
    for (int64_t polls = 0;; ++polls) {
      bool done = true;
      for (auto& [ids, group] : distinct) {
        for (size_t r = 0; r < group->events.size(); ++r) {
          cudaError_t err = cudaEventQuery(group->events[r]);
          if (err == cudaErrorNotReady) {
            done = false;
          } else if (err != cudaSuccess) {
            return CudaStatus(err, absl::StrCat("collective on device ", ids[r]));
          }
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(group->comms[r], &async);
          if (async != ncclSuccess && async != ncclInProgress) {
            return NcclStatus(async, group->comms[r],
                              absl::StrCat(CollectiveKindName(kind), " on device ", ids[r]));
          }
        }
      }
      if (done) return absl::OkStatus();
      if (absl::Status s = context.Check(); !s.ok()) return s;
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        absl::SleepFor(options_.poll_interval);
      }
    }
  }();
  if (!status.ok()) {
    // Anything that stopped midway leaves communicators in an unknown state:
    // abort them (this also stops kernels still running) and rebuild on the
    // next call.
    for (auto& [ids, group] : distinct) {
      group->Abort();
      Forget(group);
      LogWarning("collectives: aborted NCCL communicators for devices [", absl::StrJoin(ids, ", "),
                 "]: ", status.ToString());
    }
  }
  for (auto it = distinct.rbegin(); it != distinct.rend(); ++it) it->second->mu.Unlock();
  return status;
}

}  // namespace placement::server

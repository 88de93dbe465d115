// NcclEngine: collectives between the GPUs of this process through NCCL.
//
// Communicators: one set per group of devices (the ordered device ids of a
// group -- for a mesh, one per (mesh, axes) group), created on first use with
// ncclCommInitAll and cached for the engine's lifetime, each with a
// dedicated non-blocking stream and a completion event per device. Work of
// one call is enqueued inside one ncclGroupStart/ncclGroupEnd (all items,
// all groups), then the engine polls the events, ncclCommGetAsyncError and
// the call's CollectiveContext until the work completes. An asynchronous
// NCCL error, a CUDA error, cancellation or a deadline aborts the group's
// communicators (ncclCommAbort) and drops them from the cache, so the next
// call rebuilds them instead of hanging on a poisoned communicator.
//
// Errors: NCCL's text is kept ("ncclRemoteError: remote process exited or
// there was a network error; last error: ..."). ncclSystemError and
// ncclRemoteError are UNAVAILABLE (the transport); the others are INTERNAL.
//
// Types: f32, f64, f16, bf16 (ncclBfloat16), i8, i32, i64, u8 reduce;
// MEAN is ncclAvg (integers: NCCL sums in the dtype's width, then divides).
// i16 and bool cannot be reduced by NCCL (INVALID_ARGUMENT); all-gather and
// broadcast move any dtype as bytes.
//
// Groups NCCL cannot serve: ranks of one group on the same GPU (logical
// devices) -- NCCL allows one rank per GPU -- run through a HostStagedEngine
// (host copies, LocalEngine reductions); the other items of the same call
// still run on NCCL.
//
// NCCL's own device memory (communicator buffers) is not accounted against
// the CudaBackend's per-device budgets.
//
// Thread-safe: calls on different device groups run concurrently; calls on
// the same group are serialised by the group's lock (NCCL requires one
// in-order issuer per communicator). Groups are locked in a fixed order, so
// calls spanning several groups cannot deadlock.
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_ENGINE_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/collective_engine.h"
#include "server/collective/host_staged_engine.h"
#include "server/platform/cuda/cuda_backend.h"

namespace placement::server {

struct NcclEngineOptions {
  // Sleep between polls once the first spin-phase polls found the work
  // unfinished.
  absl::Duration poll_interval = absl::Microseconds(20);
};

class NcclEngine final : public CollectiveEngine {
 public:
  // REQUIRES: backend outlives the engine. FAILED_PRECONDITION when the NCCL
  // library cannot report its version (not loadable).
  static absl::StatusOr<std::unique_ptr<NcclEngine>> Create(CudaBackend* backend,
                                                            const NcclEngineOptions& options = {});
  ~NcclEngine() override;

  absl::string_view Name() const override { return "nccl"; }
  absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                   const CollectiveContext& context) override;

  // Device groups with live communicators (tests: caching and rebuilding).
  int64_t cached_groups() const;
  // NCCL's version code (e.g. 22809 for 2.28.9).
  int nccl_version() const { return nccl_version_; }

  // Aborts and forgets the communicators of the group of `device_ids` (in
  // rank order); the next call over that group creates new ones. NOT_FOUND
  // when no such group is cached. Used when a failure outside NCCL makes a
  // communicator suspect, and by tests of the rebuild path.
  absl::Status AbortGroup(const std::vector<int64_t>& device_ids);

 private:
  struct Group;
  NcclEngine(CudaBackend* backend, NcclEngineOptions options, int nccl_version);

  // REQUIRES: every item's ranks are on distinct GPUs.
  absl::Status RunNccl(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                       const CollectiveContext& context);
  // The cached group for `device_ids`, created on first use.
  absl::StatusOr<std::shared_ptr<Group>> GetGroup(const std::vector<int64_t>& device_ids);
  // Removes `group` from the cache if it is still the cached entry.
  void Forget(const std::shared_ptr<Group>& group);

  CudaBackend* backend_;
  NcclEngineOptions options_;
  HostStagedEngine staged_;
  int nccl_version_;
  mutable absl::Mutex mu_;
  // Serialises kernel launches across groups (see Run).
  mutable absl::Mutex launch_mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_ENGINE_H_

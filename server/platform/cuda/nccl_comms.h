// NcclComms: this process's NCCL communicators in one group of ranks that
// may span processes (NcclTransport's groups): one communicator per rank
// this process holds, each on its GPU with its own non-blocking stream and
// completion event. They are made non-blocking (ncclConfig_t::blocking =
// 0) from the group's unique id, so creation and every operation wait in a
// loop that ends at a budget or when the caller's interrupt says so (the
// transport aborted the group: a peer was lost) -- no NCCL call blocks on a
// peer that went away. A failed creation or operation aborts the
// communicators (ncclCommAbort stops kernels still running); they stay
// unusable (aborted()).
//
// NCCL's own device memory is not accounted against the CudaBackend's
// per-device budgets.
//
// Thread-compatible: one call at a time (the transport holds its group's
// lock); Abort too.
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_COMMS_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_COMMS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace placement::server {

class NcclComms {
 public:
  // A rank of the group this process holds, and the GPU (CUDA ordinal) it
  // runs on.
  struct LocalRank {
    int rank = 0;
    int ordinal = 0;
  };
  // Polled while waiting: OK, or why the wait must end (the status is
  // returned, prefixed by `what`).
  using Interrupt = absl::FunctionRef<absl::Status()>;

  // Joins the group of `size` ranks named by `id` with `local` (ascending
  // ranks, distinct GPUs), waiting up to `budget` for every rank of every
  // process to join. DEADLINE_EXCEEDED when they did not; NCCL's errors
  // (NcclStatus); the interrupt's status.
  static absl::StatusOr<std::unique_ptr<NcclComms>> Create(const ncclUniqueId& id, int size,
                                                           std::vector<LocalRank> local,
                                                           absl::Duration budget,
                                                           Interrupt interrupted,
                                                           absl::string_view what);
  // Aborts: never waits for peers.
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  // Enqueues enqueue(j, comm, stream) for every local rank j (in `local`
  // order) inside one NCCL group call and waits until the work is done on
  // every stream, up to `budget`. Errors: DEADLINE_EXCEEDED; an enqueue's,
  // an asynchronous NCCL or a CUDA error; the interrupt's status; every one
  // aborts the communicators. FAILED_PRECONDITION once aborted.
  absl::Status Run(absl::FunctionRef<ncclResult_t(size_t j, ncclComm_t, cudaStream_t)> enqueue,
                   absl::Duration budget, Interrupt interrupted, absl::string_view what);

  // Stops every kernel and frees the communicators (idempotent).
  void Abort();
  bool aborted() const { return aborted_; }
  size_t size() const { return local_.size(); }

 private:
  explicit NcclComms(std::vector<LocalRank> local);
  // Waits until no communicator reports ncclInProgress (a non-blocking
  // call is still being issued), up to `deadline`.
  absl::Status WaitIssued(absl::Time deadline, Interrupt interrupted, absl::string_view what);
  // The status that ends a wait now, if any: an asynchronous NCCL error of
  // a communicator, the interrupt, or the deadline.
  absl::Status Stop(absl::Time deadline, Interrupt interrupted, absl::string_view what);

  std::vector<LocalRank> local_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  bool aborted_ = false;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_COMMS_H_

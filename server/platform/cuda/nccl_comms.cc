#include "server/platform/cuda/nccl_comms.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/platform/cuda/nccl_support.h"

namespace placement::server {
namespace {

// Polls spin (yield) this many times before sleeping between polls.
constexpr int kSpinPolls = 64;
constexpr absl::Duration kPollInterval = absl::Microseconds(20);

void Pause(int polls) {
  if (polls < kSpinPolls) {
    std::this_thread::yield();
  } else {
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace

NcclComms::NcclComms(std::vector<LocalRank> local)
    : local_(std::move(local)),
      comms_(local_.size(), nullptr),
      streams_(local_.size(), nullptr),
      events_(local_.size(), nullptr) {}

NcclComms::~NcclComms() {
  Abort();
  for (size_t j = 0; j < local_.size(); ++j) {
    cudaSetDevice(local_[j].ordinal);
    if (streams_[j] != nullptr) cudaStreamDestroy(streams_[j]);
    if (events_[j] != nullptr) cudaEventDestroy(events_[j]);
  }
}

void NcclComms::Abort() {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t comm : comms_) {
    if (comm != nullptr) ncclCommAbort(comm);
  }
  // No kernel of these communicators touches a buffer after this.
  for (size_t j = 0; j < local_.size(); ++j) {
    if (streams_[j] == nullptr) continue;
    cudaSetDevice(local_[j].ordinal);
    cudaStreamSynchronize(streams_[j]);
  }
}

absl::Status NcclComms::Stop(absl::Time deadline, Interrupt interrupted, absl::string_view what) {
  for (size_t j = 0; j < comms_.size(); ++j) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comms_[j], &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      return NcclStatus(async, comms_[j], absl::StrCat(what, " (rank ", local_[j].rank, ")"));
    }
  }
  if (absl::Status s = interrupted(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": not done in time"));
  }
  return absl::OkStatus();
}

absl::Status NcclComms::WaitIssued(absl::Time deadline, Interrupt interrupted,
                                   absl::string_view what) {
  for (int polls = 0;; ++polls) {
    bool issued = true;
    for (size_t j = 0; j < comms_.size(); ++j) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comms_[j], &state);
      if (state == ncclInProgress) {
        issued = false;
      } else if (state != ncclSuccess) {
        // A failed init or launch queues no kernel: the events would
        // complete at once over untouched buffers.
        return NcclStatus(state, comms_[j], absl::StrCat(what, " (rank ", local_[j].rank, ")"));
      }
    }
    if (issued) return absl::OkStatus();
    if (absl::Status s = Stop(deadline, interrupted, what); !s.ok()) return s;
    Pause(polls);
  }
}

absl::StatusOr<std::unique_ptr<NcclComms>> NcclComms::Create(const ncclUniqueId& id, int size,
                                                             std::vector<LocalRank> local,
                                                             absl::Duration budget,
                                                             Interrupt interrupted,
                                                             absl::string_view what) {
  const absl::Time deadline = absl::Now() + budget;
  std::unique_ptr<NcclComms> c(new NcclComms(std::move(local)));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  absl::Status status;
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) {
    return NcclStatus(r, nullptr, absl::StrCat(what, ": ncclGroupStart"));
  }
  for (size_t j = 0; j < c->local_.size() && status.ok(); ++j) {
    const LocalRank& mine = c->local_[j];
    if (cudaError_t err = cudaSetDevice(mine.ordinal); err != cudaSuccess) {
      status = CudaStatus(err, absl::StrCat(what, ": cudaSetDevice(", mine.ordinal, ")"));
      break;
    }
    ncclUniqueId copy = id;
    const ncclResult_t r = ncclCommInitRankConfig(&c->comms_[j], size, copy, mine.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      status = NcclStatus(r, nullptr,
                          absl::StrCat(what, ": ncclCommInitRankConfig(rank ", mine.rank, " of ",
                                       size, ", GPU ", mine.ordinal, ")"));
    }
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (status.ok() && ended != ncclSuccess && ended != ncclInProgress) {
    status = NcclStatus(ended, nullptr, absl::StrCat(what, ": ncclGroupEnd"));
  }
  if (status.ok()) status = c->WaitIssued(deadline, interrupted, what);
  for (size_t j = 0; j < c->local_.size() && status.ok(); ++j) {
    cudaSetDevice(c->local_[j].ordinal);
    if (cudaError_t err = cudaStreamCreateWithFlags(&c->streams_[j], cudaStreamNonBlocking);
        err != cudaSuccess) {
      status = CudaStatus(err, absl::StrCat(what, ": cudaStreamCreateWithFlags"));
    } else if (cudaError_t err = cudaEventCreateWithFlags(&c->events_[j], cudaEventDisableTiming);
               err != cudaSuccess) {
      status = CudaStatus(err, absl::StrCat(what, ": cudaEventCreateWithFlags"));
    }
  }
  if (!status.ok()) return status;  // ~NcclComms aborts what was made
  return c;
}

absl::Status NcclComms::Run(
    absl::FunctionRef<ncclResult_t(size_t j, ncclComm_t, cudaStream_t)> enqueue,
    absl::Duration budget, Interrupt interrupted, absl::string_view what) {
  if (aborted_) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": the communicators were aborted"));
  }
  const absl::Time deadline = absl::Now() + budget;
  absl::Status status = [&]() -> absl::Status {
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) {
      return NcclStatus(r, nullptr, absl::StrCat(what, ": ncclGroupStart"));
    }
    absl::Status enqueued;
    for (size_t j = 0; j < comms_.size() && enqueued.ok(); ++j) {
      const ncclResult_t r = enqueue(j, comms_[j], streams_[j]);
      if (r != ncclSuccess && r != ncclInProgress) {
        enqueued = NcclStatus(r, comms_[j], absl::StrCat(what, " (rank ", local_[j].rank, ")"));
      }
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (enqueued.ok() && ended != ncclSuccess && ended != ncclInProgress) {
      enqueued = NcclStatus(ended, nullptr, absl::StrCat(what, ": ncclGroupEnd"));
    }
    if (!enqueued.ok()) return enqueued;
    if (absl::Status s = WaitIssued(deadline, interrupted, what); !s.ok()) return s;
    for (size_t j = 0; j < comms_.size(); ++j) {
      cudaSetDevice(local_[j].ordinal);
      if (cudaError_t err = cudaEventRecord(events_[j], streams_[j]); err != cudaSuccess) {
        return CudaStatus(err, absl::StrCat(what, ": cudaEventRecord"));
      }
    }
    for (int polls = 0;; ++polls) {
      bool done = true;
      for (size_t j = 0; j < events_.size(); ++j) {
        const cudaError_t err = cudaEventQuery(events_[j]);
        if (err == cudaErrorNotReady) {
          done = false;
        } else if (err != cudaSuccess) {
          return CudaStatus(err, absl::StrCat(what, " (rank ", local_[j].rank, ")"));
        }
      }
      if (done) {
        // An error NCCL reported while the kernels ran.
        return Stop(
            absl::InfiniteFuture(), [] { return absl::OkStatus(); }, what);
      }
      if (absl::Status s = Stop(deadline, interrupted, what); !s.ok()) return s;
      Pause(polls);
    }
  }();
  if (!status.ok()) Abort();
  return status;
}

}  // namespace placement::server

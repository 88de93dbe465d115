// ClusterTensors: keeps every daemon's TensorStore agreeing on which
// tensors exist (docs/cluster.md). Every daemon holds every tensor's record;
// a shard's bytes live only on the daemon of its device.
//
//   - Commits and deletes made through this daemon reach the others before
//     the call that made them returns (TensorStore hooks -> PeerService
//     Commit / DeleteTensors on every live peer).
//   - Operations whose result has shards on several daemons build them in
//     two phases: each daemon prepares its shards as a PENDING tensor under
//     the driver's id (AddPending), then Commit installs the record
//     everywhere (pending shards become the tensor's), or Abort frees them.
//     A pending tensor not committed within `pending_lifetime` is freed
//     (its driver died).
//   - Membership: when a process is lost, every tensor with a shard on it is
//     deleted here (its bytes are gone); when this daemon itself was
//     dropped, it deletes every tensor with a shard on itself, and after
//     joining again copies the records it lacks from process 0 and deletes
//     the records it kept from before that process 0 no longer has (deleted
//     while it was out).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_TENSORS_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_TENSORS_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/cluster/cluster.h"
#include "server/cluster/peer_transport.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

class ClusterTensors {
 public:
  // REQUIRES: every argument outlives this object.
  ClusterTensors(Cluster* cluster, TensorStore* store, PeerTransport* peers,
                 absl::Duration pending_lifetime);
  ~ClusterTensors();  // frees pending tensors, stops the reaper

  // Sets the store's hooks (remote devices, process of a device, commit
  // and delete propagation) and listens to membership. REQUIRES: before
  // serving, cluster enabled and joined.
  void Attach();

  // --- the peer side (PeerService) ---------------------------------------------
  // Holds `tensor` (id set, this daemon's shards written) until Commit or
  // Abort. ALREADY_EXISTS for an id already pending or committed.
  // `driver` is the daemon that will commit or abort it: its loss frees
  // the tensor at once; so does `lifetime` passing (0: the default).
  absl::Status AddPending(std::unique_ptr<Tensor> tensor, int32_t driver = -1,
                          absl::Duration lifetime = absl::ZeroDuration());
  // Holds `ids` aborted for good: frees them where pending, deletes them
  // where installed already (a collective's part installs its results when
  // it ends, ClusterCollectives::Participate), and remembers them for the
  // pending lifetime, so that a part still running here when its driver
  // gave up cannot hold them afterwards (AddPending refuses them, ABORTED).
  // The peer side of a driver's Abort.
  void AbortForDriver(const std::vector<std::string>& ids);
  // Installs `records`: a pending tensor of the same id becomes committed
  // with its buffers; otherwise the record is installed as a shell, which
  // must have no shard on this daemon (FAILED_PRECONDITION: the shards were
  // never prepared or were freed). Then deletes `delete_ids` here. Tensors
  // already present are left as they are.
  absl::Status CommitHere(std::vector<std::unique_ptr<Tensor>> records,
                          const std::vector<std::string>& delete_ids);
  void AbortHere(const std::vector<std::string>& ids);
  int64_t DeleteHere(const std::vector<std::string>& ids);
  // DeleteHere(ids), then the same on every live peer, best effort: what a
  // failed operation left on some daemons -- inputs it consumed on some and
  // not others, results some installed -- goes everywhere, whichever
  // daemons still hold it.
  void DeleteEverywhere(const std::vector<std::string>& ids);
  // Deletes `ids` on `peers` (StartDeleteTensors), best effort, logging a
  // miss.
  void DeleteOnPeers(const std::vector<std::string>& ids, const std::vector<int32_t>& peers);
  int64_t pending_count() const;
  TensorStore* store() const { return store_; }

  // --- the driver side ---------------------------------------------------------------
  // Installs `tensors` on every live daemon (this one through CommitHere,
  // with `delete_ids` deleted too) but `installed`, the peers that
  // installed them (and deleted `delete_ids`) themselves. The first error,
  // after trying all.
  absl::Status CommitEverywhere(std::vector<std::unique_ptr<Tensor>> tensors,
                                const std::vector<std::string>& delete_ids,
                                std::vector<std::shared_ptr<const Tensor>>* committed,
                                const std::vector<int32_t>& installed = {});
  // Frees pending `ids` on `processes` (this daemon included when listed),
  // and deletes them where a peer installed them already (AbortForDriver).
  // An Abort that does not reach a process that is still a member is tried
  // again every second until it does, the process is lost (which frees its
  // tensors anyway) or the pending lifetime passes: a result a participant
  // installed at once must not outlive its aborted call.
  void AbortOn(const std::vector<int32_t>& processes, const std::vector<std::string>& ids);
  // Aborts waiting to be tried again (for tests).
  int64_t abort_retries() const;

  // Copies the records this daemon lacks from `process` (after a rejoin).
  // After this daemon was dropped (ClusterEvent::self_lost), also deletes
  // here the records it held when it was dropped that `process` no longer
  // lists: tensors deleted while the others could not reach it. (Records
  // committed since are never candidates: a commit still on its way to
  // `process` cannot remove them. One that reached this daemon before it
  // was dropped and `process` only after this listing -- a commit delayed
  // past the whole detection bound and rejoin -- would be.)
  absl::Status SyncFrom(int32_t process);

 private:
  struct Pending {
    std::unique_ptr<Tensor> tensor;
    absl::Time expires;
    int32_t driver = -1;
  };

  void OnCommit(const Tensor& tensor);
  void OnDelete(const std::vector<std::string>& ids);
  void OnClusterEvent(const ClusterEvent& event);
  void ReapLoop();
  // Tries the Aborts that failed again (AbortOn); off the lock.
  void RetryAborts();

  Cluster* cluster_;
  TensorStore* store_;
  PeerTransport* peers_;
  const absl::Duration pending_lifetime_;
  mutable absl::Mutex mu_;
  std::map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Ids aborted by their driver (AbortForDriver), until they expire.
  std::map<std::string, absl::Time> aborted_ ABSL_GUARDED_BY(mu_);
  // Aborts that did not reach a member, to try again until `until`.
  struct AbortRetry {
    int32_t process = -1;
    std::vector<std::string> ids;
    absl::Time until;
  };
  std::vector<AbortRetry> abort_retries_ ABSL_GUARDED_BY(mu_);
  // The records (all shells) this daemon held when it was last dropped,
  // for SyncFrom to check against process 0's; empty otherwise.
  std::vector<std::string> held_when_dropped_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread reaper_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_TENSORS_H_

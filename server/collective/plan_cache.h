// PlanCache: collective plans (collective_plan.h) by everything that
// determines them -- the collective, its axes, dim or root, and the input's
// layout -- so that a trainer's calls, which repeat the same collectives on
// the same layouts every step, plan once (a plan is pure: the same inputs
// give the same plan). Failed plans are not kept. Bounded: past
// kMaxEntries the cache starts over.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_PLAN_CACHE_H_
#define PLACEMENT_SERVER_COLLECTIVE_PLAN_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/collective/collective_plan.h"

namespace placement::server {

// What a plan is asked for, apart from the layout.
struct PlanQuery {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<std::string> axes;
  int64_t dim = 0;            // AllGather, ReduceScatter
  int64_t root_position = 0;  // Broadcast
};

class PlanCache {
 public:
  static constexpr size_t kMaxEntries = 1024;

  // PlanAllReduce / PlanAllGather / PlanReduceScatter / PlanBroadcast of
  // `layout`, as `query` names, or the same plan made before. Both are
  // taken by value: they become the lookup key without another copy.
  absl::StatusOr<std::shared_ptr<const CollectivePlan>> Plan(PlanQuery query,
                                                             TensorLayout layout) const;

 private:
  struct Key {
    PlanQuery query;
    TensorLayout layout;
    bool operator==(const Key& other) const;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.query.kind, k.query.axes, k.query.dim,
                        k.query.root_position, k.layout.dtype, k.layout.shape, k.layout.sharding);
    }
  };

  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<Key, std::shared_ptr<const CollectivePlan>> plans_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_PLAN_CACHE_H_

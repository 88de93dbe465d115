#include "server/collective/plan_cache.h"

#include <utility>

namespace placement::server {
namespace {

absl::StatusOr<CollectivePlan> MakePlan(const PlanQuery& query, const TensorLayout& layout) {
  switch (query.kind) {
    case CollectiveKind::kAllReduce:
      return PlanAllReduce(layout, query.axes);
    case CollectiveKind::kAllGather:
      return PlanAllGather(layout, query.axes, query.dim);
    case CollectiveKind::kReduceScatter:
      return PlanReduceScatter(layout, query.axes, query.dim);
    case CollectiveKind::kBroadcast:
      return PlanBroadcast(layout, query.axes, query.root_position);
  }
  return absl::InvalidArgumentError("unknown collective kind");
}

}  // namespace

bool PlanCache::Key::operator==(const Key& other) const {
  return query.kind == other.query.kind && query.axes == other.query.axes &&
         query.dim == other.query.dim && query.root_position == other.query.root_position &&
         layout.dtype == other.layout.dtype && layout.shape == other.layout.shape &&
         layout.sharding == other.layout.sharding;
}

absl::StatusOr<std::shared_ptr<const CollectivePlan>> PlanCache::Plan(PlanQuery query,
                                                                      TensorLayout layout) const {
  Key key{std::move(query), std::move(layout)};
  {
    absl::MutexLock lock(&mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  absl::StatusOr<CollectivePlan> made = MakePlan(key.query, key.layout);
  if (!made.ok()) return made.status();
  auto plan = std::make_shared<const CollectivePlan>(*std::move(made));
  absl::MutexLock lock(&mu_);
  if (plans_.size() >= kMaxEntries) plans_.clear();
  plans_.emplace(std::move(key), plan);
  return plan;
}

}  // namespace placement::server

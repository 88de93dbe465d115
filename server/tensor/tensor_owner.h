// TensorOwner: whom a tensor belongs to. `tenant` is the authenticated tenant
// of the call that created it (server/auth/caller.h) and decides who can see
// it; `label` is the free-form owner string a client may add (the proto's
// `owner` field), a label within the tenant. Results of Place, Assemble,
// Disassemble and collectives copy their source's owner whole.
//
// A bare string converts to a label of the implicit tenant "" (the only
// tenant when authentication is off), so code that knows no tenants reads as
// before.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_OWNER_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_OWNER_H_

#include <string>
#include <utility>

namespace placement::server {

struct TensorOwner {
  TensorOwner() = default;
  TensorOwner(std::string tenant_in, std::string label_in)
      : tenant(std::move(tenant_in)), label(std::move(label_in)) {}
  // NOLINTNEXTLINE(google-explicit-constructor): a label of the implicit tenant
  TensorOwner(std::string label_in) : label(std::move(label_in)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  TensorOwner(const char* label_in) : label(label_in) {}

  // The key of the per-owner quota: the label, prefixed with "tenant/" when
  // the tenant is not the implicit one.
  std::string QuotaKey() const { return tenant.empty() ? label : tenant + "/" + label; }
  bool operator==(const TensorOwner&) const = default;

  std::string tenant;
  std::string label;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_OWNER_H_

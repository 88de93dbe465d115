// ExportOptions: the bounds of the shard exports (views) a daemon hands out
// (--max_exports, --tenant_max_exports; server/region/region_flags.cc reads
// them, since views travel on the region socket). Plain struct.
#ifndef PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_
#define PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace placement::server {

struct ExportOptions {
  // Exports open at once, over all tenants and per tenant; 0 = unlimited.
  // Each holds a tensor's memory and, until redeemed, one fd per shard.
  int64_t max_exports = 4096;
  int64_t max_exports_per_tenant = 1024;
  // How long a token waits for its redemption before its export ends.
  absl::Duration redeem_ttl = absl::Seconds(60);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_

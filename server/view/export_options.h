// ExportOptions: the bounds of the shard exports (views) and in-place
// uploads a daemon hands out (--max_exports, --tenant_max_exports,
// --max_upload_reservations, --upload_reservation_ttl;
// server/region/region_flags.cc reads them, since their fds travel on the
// region socket). Plain structs.
#ifndef PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_
#define PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace placement::server {

// Uploads written in place (upload_reservations.h): --max_upload_reservations,
// --tenant_max_upload_reservations, --upload_reservation_ttl.
struct UploadReservationOptions {
  // Reservations open at once, over all tenants; 0 = unlimited. Each holds
  // its tensor's memory and, until redeemed, one fd per shard.
  int64_t max_open = 256;
  // Per tenant; 0 = unlimited.
  int64_t max_open_per_tenant = 64;
  // How long a reservation waits for its token's redemption; once redeemed
  // it lasts until its commit, cancel or its writer's exit (as long as a
  // copy takes), or this long again where writers cannot be watched.
  absl::Duration ttl = absl::Seconds(60);
};

struct ExportOptions {
  // Exports open at once, over all tenants and per tenant; 0 = unlimited.
  // Each holds a tensor's memory and, until redeemed, one fd per shard.
  int64_t max_exports = 4096;
  int64_t max_exports_per_tenant = 1024;
  // How long a token waits for its redemption before its export ends.
  absl::Duration redeem_ttl = absl::Seconds(60);
  UploadReservationOptions uploads;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_VIEW_EXPORT_OPTIONS_H_

// The daemon's own scrape-time gauges (device memory per device, calls in
// flight, up, open and reaped streams) and their descriptions.
//
// Thread-safe as Metrics is; the collector points into the given
// components, so the metrics endpoint must stop before they die.
#ifndef PLACEMENT_SERVER_DAEMON_METRICS_H_
#define PLACEMENT_SERVER_DAEMON_METRICS_H_

#include "server/device/device_inventory.h"
#include "server/metrics/metrics.h"
#include "server/service/call_gate.h"
#include "server/service/stream_registry.h"

namespace placement::server {

void AddDaemonGauges(Metrics* metrics, const DeviceInventory* inventory, const CallGate* gate,
                     const StreamRegistry* streams);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_METRICS_H_

// The metrics every Prometheus target is expected to serve, beside the
// daemon's own:
//   placementd_build_info{version,revision,grpc_version}  gauge, always 1
//   process_cpu_seconds_total          counter  user + system CPU time
//   process_resident_memory_bytes      gauge    resident set size
//   process_virtual_memory_bytes       gauge    virtual memory size
//   process_open_fds / process_max_fds gauge    open descriptors and their limit
//   process_start_time_seconds         gauge    process start, Unix time
// The process_* names and meanings are those of the Prometheus client
// libraries' process collector (prometheus-cpp has none), read from /proc
// and getrusage at scrape time.
//
// Thread-safe (the collector reads only the process's own state).
#ifndef PLACEMENT_SERVER_METRICS_STANDARD_METRICS_H_
#define PLACEMENT_SERVER_METRICS_STANDARD_METRICS_H_

#include "server/metrics/metrics.h"

namespace placement::server {

// Declares the metrics above and adds their collector.
void AddStandardMetrics(Metrics* metrics);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_STANDARD_METRICS_H_

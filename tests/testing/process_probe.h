// What a live process holds, read from /proc/<pid> -- the figures hardening
// tests compare against a baseline (resident memory, open descriptors, memory
// mappings) -- and the daemon's Prometheus text over plain HTTP.
//
// Thread-safe (pure functions).
#ifndef PLACEMENT_TESTS_TESTING_PROCESS_PROBE_H_
#define PLACEMENT_TESTS_TESTING_PROCESS_PROBE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace placement::testing {

// VmRSS of `pid` in bytes, or -1.
int64_t ResidentBytes(pid_t pid);
// VmRSS less RssShmem, plus the daemon's own memory files (the CPU
// platform's device blocks of 256 KiB and more, "/memfd:placementd-device"):
// the process's own resident memory, without the shared-memory pages it
// maps from other processes (a daemon's client regions), or -1.
int64_t OwnResidentBytes(pid_t pid);
// Entries of /proc/<pid>/fd, or -1.
int64_t OpenFds(pid_t pid);
// Lines of /proc/<pid>/maps (one per mapping), or -1.
int64_t Mappings(pid_t pid);
// The mappings of shared memory files among them (memfd, /dev/shm): the
// daemon's memory-file blocks and the regions it maps -- what a region or
// view that was not released leaves behind, apart from the thread stacks
// and malloc arenas that Mappings also counts. -1 on failure.
int64_t FileMappings(pid_t pid);
// The `n` mappings of /proc/<pid>/smaps with the most resident memory, one
// "RSS kB  address range  name" line each: what to print when a resident
// memory bound fails.
std::string LargestMappings(pid_t pid, int n);

// The body of GET `path` from 127.0.0.1:`port` over HTTP/1.0 ("" on failure).
std::string HttpGet(int port, const std::string& path);
// The port of a ready file's "metrics=http://127.0.0.1:PORT/metrics" value,
// or 0.
int MetricsPort(const std::string& metrics_url);
// The value of the sample `series` (name and labels exactly as exposed, e.g.
// `placementd_rpcs_total{code="OK",method="/x"}`) in a Prometheus text
// exposition, or -1 when absent.
double MetricValue(absl::string_view exposition, absl::string_view series);

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_PROCESS_PROBE_H_

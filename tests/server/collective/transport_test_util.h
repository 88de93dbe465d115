// Test helpers for cross-process transports.
#ifndef PLACEMENT_TESTS_SERVER_COLLECTIVE_TRANSPORT_TEST_UTIL_H_
#define PLACEMENT_TESTS_SERVER_COLLECTIVE_TRANSPORT_TEST_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/collective/transport/rendezvous_store.h"
#include "server/collective/transport/transport_registry.h"
#include "server/platform/cpu/cpu_backend.h"

namespace placement::server::testing {

// The status of making the registered transport `name` over `devices` CPU
// virtual devices (the transport is dropped at once, before the backend):
// FAILED_PRECONDITION from a transport made for another platform's buffers.
inline absl::Status CreateOverCpuDevices(const std::string& name, int devices) {
  CpuBackendOptions cpu;
  cpu.num_devices = devices;
  auto backend = CpuBackend::Create(cpu);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return backend.status();
  InMemoryRendezvousStore store;
  CrossProcessTransportOptions options;
  options.store = &store;
  options.backend = backend->get();
  return TransportRegistry::Global().Create(name, options).status();
}

}  // namespace placement::server::testing

#endif  // PLACEMENT_TESTS_SERVER_COLLECTIVE_TRANSPORT_TEST_UTIL_H_

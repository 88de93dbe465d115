// Raw gRPC calls and channels that a test's threads (a "trainer" each) make
// fresh, to a daemon that is up.
//
// gRPC 1.51's TCP client (src/core/lib/iomgr/tcp_client_posix.cc) reads
// errno after other calls once connect() has returned, so now and then a
// fresh channel's first connection fails with a stray errno ("UNKNOWN:
// ipv4:127.0.0.1:P: No such file or directory", syscall connect, errno 2)
// and a call without wait_for_ready fails UNAVAILABLE at once without
// reaching the daemon: 3 of 29 runs of cluster_process_local_test's 4x2
// case (about 120 fresh channels a run) beside a parallel cluster test,
// each leaving the other processes to wait 30 s at their barrier. So a
// trainer's one call waits for its channel (the channel tries again after
// its backoff), and a thread's channel for many calls is connected first.
#ifndef PLACEMENT_TESTS_TESTING_TRAINER_CALL_H_
#define PLACEMENT_TESTS_TESTING_TRAINER_CALL_H_

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace placement::testing {

// Sets `timeout` as the call's deadline and wait_for_ready. Only for a
// daemon that is up: against one that is gone the call waits out its whole
// deadline (DEADLINE_EXCEEDED) instead of failing UNAVAILABLE at once.
inline void PrepareTrainerCall(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  context->set_wait_for_ready(true);
}

// A plaintext channel to `address` that a thread of its own uses for many
// calls, connected before it is handed out (gRPC reconnects after each
// failed attempt until `timeout`). A channel still unconnected then is a
// test failure (ADD_FAILURE naming the address) and is returned as it is.
inline std::shared_ptr<grpc::Channel> ReadyChannel(const std::string& address,
                                                   absl::Duration timeout = absl::Seconds(10)) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    ADD_FAILURE() << "no connection to " << address << " within " << timeout;
  }
  return channel;
}

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_TRAINER_CALL_H_

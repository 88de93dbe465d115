// placement::client::Session against a real daemon: background renewals keep
// a short lease alive past its ttl, calls on a client whose options carry the
// session id create tensors in it, and closing the session frees them.
#include <signal.h>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/session.h"
#include "placement/client/tensors.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using testing::DaemonProcess;

TEST(ClientSessionTest, RenewalsKeepTheLeaseAndCloseFreesItsTensors) {
  auto daemon = DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--session_sweep_interval=50ms"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  auto session = client::Session::Open(**client, absl::Seconds(3), "trainer");
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->ttl(), absl::Seconds(3));

  client::ClientOptions scoped_options;
  scoped_options.session_id = (*session)->id();
  auto scoped = client::Client::Connect((*daemon)->address(), scoped_options);
  ASSERT_TRUE(scoped.ok()) << scoped.status();
  std::vector<float> x = {1, 2, 3, 4};
  auto info = client::TensorClient(**scoped).Upload(client::HostArray::Of<float>(x, {4}));
  ASSERT_TRUE(info.ok()) << info.status();

  // Four renewals at ttl / 3 span more than the ttl: without them the
  // sweeper (50 ms) would have ended the session.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while ((*session)->renewals() < 4 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_GE((*session)->renewals(), 4);
  EXPECT_FALSE((*session)->lost());
  client::TensorClient tensors(**client);
  EXPECT_TRUE(tensors.Describe(info->id).ok());

  auto deleted = (*session)->Close();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(tensors.Describe(info->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*(*session)->Close(), 0);  // idempotent

  // A call naming a closed session is refused before it does anything.
  auto refused = client::TensorClient(**scoped).Upload(client::HostArray::Of<float>(x, {4}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

TEST(ClientSessionTest, BadTtlKeepsTheDaemonsError) {
  auto daemon = DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=1"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  auto session = client::Session::Open(**client, absl::Hours(2));
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session.status().message(), "ttl is 2h; must be between 1s and 1h (0 selects 1m)");
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement

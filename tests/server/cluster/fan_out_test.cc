// FanOutAsync: every call started at once, the caller's own part on the
// calling thread meanwhile, the calls kept until their `done` ran (calls
// that complete in Wait, on the waiting thread, included), and the error
// that explains the fan-out. (FanOutCall, its typed form, runs against real
// daemons in peer_client_test.)
#include "server/cluster/fan_out.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

// A call that ends with `status`: inline (before Start returns) or from a
// thread of its own once `release` is notified. Its destructor records
// whether `done` had run.
class TestCall final : public PeerTransport::PendingCall {
 public:
  TestCall(absl::Status status, bool inline_done, absl::Notification* release,
           PeerTransport::Done done, std::atomic<int>* destroyed_early)
      : destroyed_early_(destroyed_early) {
    auto finish = [this, status, done = std::move(done)] {
      done(status);
      ran_.store(true);
    };
    if (inline_done) {
      finish();
    } else {
      thread_ = std::thread([release, finish] {
        release->WaitForNotification();
        finish();
      });
    }
  }
  ~TestCall() override {
    // `done` already returned to the fan-out; the thread is ending.
    if (thread_.joinable()) thread_.join();
    if (!ran_.load()) destroyed_early_->fetch_add(1);
  }

 private:
  std::atomic<bool> ran_{false};
  std::atomic<int>* destroyed_early_;
  std::thread thread_;
};

TEST(FanOutAsyncTest, StartsEveryCallRunsItsOwnPartMeanwhileAndWaitsForAll) {
  absl::Notification release;
  std::atomic<int> destroyed_early{0};
  std::atomic<int> started{0};
  std::vector<int32_t> order;
  const absl::Status status = FanOutAsync(
      {0, 1, 2, 3},
      [&](int32_t p, PeerTransport::Done done) -> std::unique_ptr<PeerTransport::PendingCall> {
        started.fetch_add(1);
        // Process 1 answers at once; 2 and 3 only after the caller's part.
        return std::make_unique<TestCall>(absl::OkStatus(), p == 1, &release, std::move(done),
                                          &destroyed_early);
      },
      /*here=*/0,
      [&] {
        // Every other call was started before this part runs.
        EXPECT_EQ(started.load(), 3);
        release.Notify();
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(destroyed_early.load(), 0);
}

TEST(FanOutAsyncTest, PicksTheCauseOverConsequencesInProcessOrder) {
  absl::Notification release;
  release.Notify();
  std::atomic<int> destroyed_early{0};
  auto start_with = [&](std::vector<absl::Status> by_process) {
    return [&, by_process](int32_t p, PeerTransport::Done done) {
      return std::unique_ptr<PeerTransport::PendingCall>(std::make_unique<TestCall>(
          by_process[p], p % 2 == 0, &release, std::move(done), &destroyed_early));
    };
  };
  // A closed connection on process 1 is a consequence of process 2's own
  // failure.
  absl::Status s = FanOutAsync(
      {0, 1, 2}, start_with({absl::OkStatus(), absl::UnavailableError("connection closed"),
                             absl::ResourceExhaustedError("no room")}));
  EXPECT_EQ(s, absl::ResourceExhaustedError("no room"));
  // The caller's own part counts in its place.
  s = FanOutAsync({0, 1, 2},
                  start_with({absl::OkStatus(), absl::OkStatus(), absl::AbortedError("late")}), 1,
                  [] { return absl::InvalidArgumentError("bad item"); });
  EXPECT_EQ(s, absl::InvalidArgumentError("bad item"));
  // Only consequences: a part told of a loss says why the others' waits
  // ran out (process 0's rendezvous timed out because process 1 refused).
  s = FanOutAsync({0, 1}, start_with({absl::DeadlineExceededError("not published within 20s"),
                                      absl::UnavailableError("process 2 is lost")}));
  EXPECT_EQ(s, absl::UnavailableError("process 2 is lost"));
  // Only waits that ran out or were cancelled: the first.
  s = FanOutAsync(
      {0, 1}, start_with({absl::DeadlineExceededError("slow"), absl::CancelledError("cancelled")}));
  EXPECT_EQ(s, absl::DeadlineExceededError("slow"));
  EXPECT_EQ(destroyed_early.load(), 0);
}

TEST(FanOutAsyncTest, APartOutsideTheProcessesDoesNotRunAndNoProcessesIsOk) {
  bool ran = false;
  absl::Status s = FanOutAsync(
      {},
      [](int32_t, PeerTransport::Done) -> std::unique_ptr<PeerTransport::PendingCall> {
        ADD_FAILURE() << "no process to call";
        return nullptr;
      },
      /*here=*/5,
      [&] {
        ran = true;
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(ran);
}

TEST(FanOutAsyncTest, ManyProcessesAreAnsweredFromOneThread) {
  // 256 calls, every one answered by a single thread once all were
  // started: the fan-out waits without a thread per process.
  constexpr int kProcesses = 256;
  absl::Mutex mu;
  std::vector<PeerTransport::Done> dones;
  std::thread answers([&] {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](std::vector<PeerTransport::Done>* d) { return d->size() == kProcesses; }, &dones));
    for (size_t i = 0; i < dones.size(); ++i) {
      dones[i](i == 7 ? absl::NotFoundError("tensor 't-1' is unknown") : absl::OkStatus());
    }
  });
  class Held final : public PeerTransport::PendingCall {};
  std::vector<int32_t> processes;
  for (int32_t p = 0; p < kProcesses; ++p) processes.push_back(p);
  absl::Status s = FanOutAsync(
      processes,
      [&](int32_t, PeerTransport::Done done) -> std::unique_ptr<PeerTransport::PendingCall> {
        absl::MutexLock lock(&mu);
        dones.push_back(std::move(done));
        return std::make_unique<Held>();
      });
  answers.join();
  EXPECT_EQ(s, absl::NotFoundError("tensor 't-1' is unknown"));
}

// A call that completes only when waited for, on the waiting thread (as
// PeerClient's do).
class WaitedCall final : public PeerTransport::PendingCall {
 public:
  WaitedCall(absl::Status status, PeerTransport::Done done)
      : status_(std::move(status)), done_(std::move(done)) {}
  void Wait() override { done_(status_); }

 private:
  absl::Status status_;
  PeerTransport::Done done_;
};

TEST(FanOutAsyncTest, CallsThatCompleteInWaitAreWaitedForOnTheCallingThread) {
  std::vector<std::thread::id> answered_on;
  absl::Status s = FanOutAsync({0, 1, 2}, [&](int32_t p, PeerTransport::Done done) {
    return std::unique_ptr<PeerTransport::PendingCall>(std::make_unique<WaitedCall>(
        p == 2 ? absl::FailedPreconditionError("no room") : absl::OkStatus(),
        [&answered_on, done = std::move(done)](absl::Status status) {
          answered_on.push_back(std::this_thread::get_id());
          done(std::move(status));
        }));
  });
  EXPECT_EQ(s, absl::FailedPreconditionError("no room"));
  EXPECT_THAT(answered_on,
              ::testing::ElementsAre(std::this_thread::get_id(), std::this_thread::get_id(),
                                     std::this_thread::get_id()));
}

}  // namespace
}  // namespace placement::server

// SessionManager over a real TensorStore on CPU virtual devices: leases per
// tenant (other tenants see NOT_FOUND, admins see all), ttl and name bounds,
// tensors adopted by a session freed when it is closed or expires (device
// memory back to its baseline), persisting, a long session forgetting the
// tensors its calls deleted, adopting into an ended session,
// watchers and end listeners run once, and the background sweeper.
#include "server/session/session_manager.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TestRig;

Caller Tenant(std::string tenant) {
  Caller caller;
  caller.tenant = std::move(tenant);
  return caller;
}

Caller Admin() {
  Caller caller = Tenant("ops");
  caller.role = Role::kAdmin;
  return caller;
}

// A committed 4 KiB tensor of `tenant` on device 0.
std::string MakeTensor(TestRig& rig, const std::string& tenant) {
  auto tensor = rig.store->Allocate(DType::kU8, {4096}, NamedSharding::SingleDevice(0), "", "",
                                    TensorOwner(tenant, ""));
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return rig.store->Commit(std::move(*tensor))->id;
}

SessionOptions Quick() {
  SessionOptions options;
  options.min_ttl = absl::Milliseconds(10);
  options.sweep_interval = absl::Hours(1);  // tests sweep by hand unless they say otherwise
  return options;
}

TEST(SessionManagerTest, SessionsBelongToTheirTenant) {
  TestRig rig;
  SessionManager sessions(rig.store.get(), Quick());
  auto a = sessions.Open(Tenant("team-a"), absl::ZeroDuration(), "training");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->id, ::testing::StartsWith("s-"));
  EXPECT_EQ(a->tenant, "team-a");
  EXPECT_EQ(a->name, "training");
  EXPECT_EQ(a->ttl, absl::Seconds(60));  // zero = the default
  EXPECT_TRUE(sessions.IsOpen(a->id));
  // Another tenant's session is an id that does not exist.
  EXPECT_EQ(sessions.Renew(Tenant("team-b"), a->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sessions.Close(Tenant("team-b"), a->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sessions.CheckJoin(Tenant("team-b"), a->id).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(sessions.CheckJoin(Tenant("team-a"), a->id).ok());
  EXPECT_TRUE(sessions.List(Tenant("team-b")).empty());
  ASSERT_EQ(sessions.List(Tenant("team-a")).size(), 1u);
  ASSERT_EQ(sessions.List(Admin()).size(), 1u);
  EXPECT_TRUE(sessions.Renew(Admin(), a->id).ok());
  EXPECT_EQ(sessions.size(), 1);
}

TEST(SessionManagerTest, SessionsAreBoundedInAllAndPerTenant) {
  TestRig rig;
  SessionOptions options = Quick();
  options.max_sessions = 3;
  options.max_sessions_per_tenant = 2;
  SessionManager sessions(rig.store.get(), options);
  auto a1 = sessions.Open(Tenant("team-a"), absl::ZeroDuration(), "");
  auto a2 = sessions.Open(Tenant("team-a"), absl::ZeroDuration(), "");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = sessions.Open(Tenant("team-a"), absl::ZeroDuration(), "");
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a3.status().message(), HasSubstr("the tenant has 2 of --tenant_max_sessions=2 open"));
  ASSERT_TRUE(sessions.Open(Tenant("team-b"), absl::ZeroDuration(), "").ok());
  auto b2 = sessions.Open(Tenant("team-b"), absl::ZeroDuration(), "");
  EXPECT_EQ(b2.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b2.status().message(), HasSubstr("3 of --max_sessions=3 are open"));
  EXPECT_EQ(sessions.size("team-a"), 2);
  EXPECT_EQ(sessions.size("team-b"), 1);
  // Closing and expiring give the places back.
  ASSERT_TRUE(sessions.Close(Tenant("team-a"), a1->id).ok());
  EXPECT_TRUE(sessions.Open(Tenant("team-b"), absl::ZeroDuration(), "").ok());
  EXPECT_EQ(sessions.SweepExpired(absl::Now() + absl::Hours(2)), 3);
  EXPECT_EQ(sessions.size("team-a"), 0);
  EXPECT_TRUE(sessions.Open(Tenant("team-a"), absl::ZeroDuration(), "").ok());
}

TEST(SessionManagerTest, BoundsOnTtlAndName) {
  TestRig rig;
  SessionManager sessions(rig.store.get(), Quick());
  auto too_long = sessions.Open(Tenant("t"), absl::Hours(2), "");
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  auto too_short = sessions.Open(Tenant("t"), absl::Milliseconds(1), "");
  EXPECT_EQ(too_short.status().code(), absl::StatusCode::kInvalidArgument);
  auto named =
      sessions.Open(Tenant("t"), absl::Seconds(5), std::string(kMaxSessionNameLength + 1, 'n'));
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sessions.size(), 0);
  // An id too long to be one is refused without echoing it back.
  const std::string huge(kMaxSessionIdLength + 1, 'x');
  absl::Status join = sessions.CheckJoin(Tenant("t"), huge);
  EXPECT_EQ(join.code(), absl::StatusCode::kInvalidArgument) << join;
  EXPECT_THAT(std::string(join.message()), ::testing::Not(HasSubstr(huge)));
}

TEST(SessionManagerTest, CloseFreesTheSessionsTensorsAndKeepsDurableOnes) {
  TestRig rig;
  const int64_t baseline = rig.MemoryInUse();
  SessionManager sessions(rig.store.get(), Quick());
  auto s = sessions.Open(Tenant("t"), absl::Seconds(30), "");
  ASSERT_TRUE(s.ok());
  const std::string a = MakeTensor(rig, "t"), b = MakeTensor(rig, "t"), kept = MakeTensor(rig, "t");
  ASSERT_TRUE(sessions.Adopt(s->id, {a, b}).ok());
  EXPECT_EQ(sessions.tensor_count(), 2);
  // Persisting takes a tensor out of its session: it outlives the close.
  ASSERT_TRUE(sessions.Adopt(s->id, {kept}).ok());
  ASSERT_TRUE(sessions.Persist(Tenant("t"), {kept}).ok());
  EXPECT_EQ(sessions.Persist(Tenant("other"), {kept}).code(), absl::StatusCode::kNotFound);
  auto closed = sessions.Close(Tenant("t"), s->id);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 2);
  EXPECT_FALSE(sessions.IsOpen(s->id));
  EXPECT_EQ(rig.store->Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rig.store->Get(b).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(rig.store->Get(kept).ok());
  ASSERT_TRUE(rig.store->Delete({kept}).ok());
  EXPECT_EQ(rig.MemoryInUse(), baseline);
  EXPECT_EQ(sessions.tensor_count(), 0);
}

// A session that ended deletes its tensors one by one after it is gone: a
// tensor persisted in that window stays (before, Persist answered OK and
// the tensor was deleted right after). The watch runs in the window.
TEST(SessionManagerTest, ATensorPersistedWhileItsSessionEndsStays) {
  TestRig rig;
  SessionManager sessions(rig.store.get(), Quick());
  auto s = sessions.Open(Tenant("t"), absl::Seconds(30), "");
  ASSERT_TRUE(s.ok());
  const std::string a = MakeTensor(rig, "t"), b = MakeTensor(rig, "t");
  ASSERT_TRUE(sessions.Adopt(s->id, {a, b}).ok());
  absl::Status persisted = absl::UnknownError("not run");
  auto watch =
      sessions.WatchSession(s->id, [&] { persisted = sessions.Persist(Tenant("t"), {b}); });
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto closed = sessions.Close(Tenant("t"), s->id);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 1);
  ASSERT_TRUE(persisted.ok()) << persisted;
  EXPECT_EQ(rig.store->Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(rig.store->Get(b).ok());
  watch->reset();
  ASSERT_TRUE(rig.store->Delete({b}).ok());
}

// Persist racing the end of the tensor's session, many times: OK only
// for a tensor that stays (before, Persist could resolve the tensor, lose
// the race to the ending session's delete and still answer OK); a tensor
// deleted under it is NOT_FOUND or FAILED_PRECONDITION.
TEST(SessionManagerTest, PersistRacingTheSessionsEndIsOkOnlyForWhatStays) {
  TestRig rig;
  SessionManager sessions(rig.store.get(), Quick());
  int kept = 0, refused = 0;
  for (int i = 0; i < 1000; ++i) {
    auto s = sessions.Open(Tenant("t"), absl::Seconds(30), "");
    ASSERT_TRUE(s.ok()) << s.status();
    const std::string a = MakeTensor(rig, "t");
    ASSERT_TRUE(sessions.Adopt(s->id, {a}).ok());
    absl::Status persisted;
    std::atomic<int> ready{0};
    auto start_together = [&ready] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
    };
    std::thread racer([&] {
      start_together();
      persisted = sessions.Persist(Tenant("t"), {a});
    });
    start_together();
    ASSERT_TRUE(sessions.Close(Tenant("t"), s->id).ok());
    racer.join();
    if (persisted.ok()) {
      ASSERT_TRUE(rig.store->Get(a).ok()) << "iteration " << i << ": Persist said OK, and the "
                                          << "tensor was deleted";
      ASSERT_TRUE(rig.store->Delete({a}).ok());
      ++kept;
    } else {
      EXPECT_THAT(persisted.code(), ::testing::AnyOf(absl::StatusCode::kNotFound,
                                                     absl::StatusCode::kFailedPrecondition))
          << persisted;
      ++refused;
    }
  }
  std::printf("persist racing close: %d kept, %d refused\n", kept, refused);
}

// A lease that ran out is over before the sweeper comes: it can be neither
// renewed nor joined; the sweep then ends it once. An id too long to be a
// session's, sent as the metadata, is named as such.
TEST(SessionManagerTest, AnExpiredLeaseIsOverBeforeItIsSwept) {
  TestRig rig;
  SessionManager sessions(rig.store.get(), Quick());
  auto s = sessions.Open(Tenant("t"), absl::Milliseconds(10), "");
  ASSERT_TRUE(s.ok());
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(sessions.Renew(Tenant("t"), s->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sessions.CheckJoin(Tenant("t"), s->id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sessions.SweepExpired(absl::Now()), 1);
  const absl::Status long_id = sessions.CheckJoin(Tenant("t"), std::string(300, 'x'));
  EXPECT_EQ(long_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_id.message()),
              HasSubstr("placement-session metadata: its value is 300 bytes long"));
}

TEST(SessionManagerTest, ALongSessionForgetsTheTensorsItsCallsDeleted) {
  // A training loop's session: every step makes a result and deletes it.
  TestRig rig;
  const int64_t baseline = rig.MemoryInUse();
  SessionManager sessions(rig.store.get(), Quick());
  auto s = sessions.Open(Tenant("t"), absl::Seconds(30), "");
  ASSERT_TRUE(s.ok());
  std::vector<std::string> live;
  for (int step = 0; step < 10000; ++step) {
    const std::string result = MakeTensor(rig, "t");
    ASSERT_TRUE(sessions.Adopt(s->id, {result}).ok());
    if (step % 100 == 0) {
      live.push_back(result);  // one in a hundred stays
    } else {
      ASSERT_TRUE(rig.store->Delete({result}).ok());
    }
    // Remembered ids stay within twice the live ones plus the floor (the
    // live count only grows here, so its last prune's is at most today's).
    ASSERT_LE(sessions.tensor_count(), 2 * static_cast<int64_t>(live.size()) +
                                           static_cast<int64_t>(SessionManager::kPruneFloor))
        << "step " << step;
  }
  // Listing counts the live tensors; a renewal forgets the deleted ones.
  auto listed = sessions.List(Tenant("t"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].num_tensors, 100);
  auto renewed = sessions.Renew(Tenant("t"), s->id);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->num_tensors, 100);
  EXPECT_EQ(sessions.tensor_count(), 100);
  EXPECT_EQ(sessions.tensor_count("t"), 100);
  // An idle session's renewal forgets what was deleted since, too.
  ASSERT_TRUE(rig.store->Delete({live.back()}).ok());
  live.pop_back();
  EXPECT_EQ(sessions.tensor_count(), 100);  // not yet
  ASSERT_TRUE(sessions.Renew(Tenant("t"), s->id).ok());
  EXPECT_EQ(sessions.tensor_count(), 99);
  // Pruning forgot no live tensor: closing the session frees every one.
  auto closed = sessions.Close(Tenant("t"), s->id);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 99);
  for (const std::string& id : live) {
    EXPECT_EQ(rig.store->Get(id).status().code(), absl::StatusCode::kNotFound) << id;
  }
  EXPECT_EQ(rig.MemoryInUse(), baseline);
  EXPECT_EQ(sessions.tensor_count(), 0);
}

TEST(SessionManagerTest, AdoptingIntoAnEndedSessionDeletesTheTensors) {
  TestRig rig;
  const int64_t baseline = rig.MemoryInUse();
  SessionManager sessions(rig.store.get(), Quick());
  auto s = sessions.Open(Tenant("t"), absl::Seconds(30), "");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(sessions.Close(Tenant("t"), s->id).ok());
  // A call that joined the session finished after it ended.
  const std::string late = MakeTensor(rig, "t");
  absl::Status adopted = sessions.Adopt(s->id, {late});
  EXPECT_EQ(adopted.code(), absl::StatusCode::kFailedPrecondition) << adopted;
  EXPECT_EQ(rig.store->Get(late).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rig.MemoryInUse(), baseline);
}

TEST(SessionManagerTest, ExpiryEndsSessionsOnceAndTellsWatchersAndListeners) {
  TestRig rig;
  const int64_t baseline = rig.MemoryInUse();
  SessionManager sessions(rig.store.get(), Quick());
  std::vector<std::string> ended;
  sessions.AddEndListener([&](const std::string& id) { ended.push_back(id); });
  auto short_lived = sessions.Open(Tenant("t"), absl::Seconds(1), "");
  auto long_lived = sessions.Open(Tenant("t"), absl::Seconds(60), "");
  ASSERT_TRUE(short_lived.ok() && long_lived.ok());
  ASSERT_TRUE(sessions.Adopt(short_lived->id, {MakeTensor(rig, "t")}).ok());
  int watched = 0;
  auto watch = sessions.WatchSession(short_lived->id, [&] { ++watched; });
  ASSERT_TRUE(watch.ok()) << watch.status();
  int unwatched = 0;
  {
    auto dropped = sessions.WatchSession(short_lived->id, [&] { ++unwatched; });
    ASSERT_TRUE(dropped.ok());
  }  // destroyed: never runs
  EXPECT_EQ(sessions.WatchSession("s-00000000000000000000000000000000", [] {}).status().code(),
            absl::StatusCode::kNotFound);
  // Nothing has expired yet.
  EXPECT_EQ(sessions.SweepExpired(absl::Now()), 0);
  EXPECT_EQ(sessions.SweepExpired(short_lived->expire_time + absl::Seconds(1)), 1);
  EXPECT_EQ(sessions.SweepExpired(short_lived->expire_time + absl::Seconds(1)), 0);
  EXPECT_FALSE(sessions.IsOpen(short_lived->id));
  EXPECT_TRUE(sessions.IsOpen(long_lived->id));
  EXPECT_EQ(watched, 1);
  EXPECT_EQ(unwatched, 0);
  EXPECT_THAT(ended, ElementsAre(short_lived->id));
  EXPECT_EQ(rig.MemoryInUse(), baseline);
  EXPECT_EQ(sessions.Renew(Tenant("t"), short_lived->id).status().code(),
            absl::StatusCode::kNotFound);
  watch->reset();
}

TEST(SessionManagerTest, TheSweeperEndsExpiredSessionsByItself) {
  TestRig rig;
  const int64_t baseline = rig.MemoryInUse();
  SessionOptions options = Quick();
  options.sweep_interval = absl::Milliseconds(10);
  SessionManager sessions(rig.store.get(), options);
  auto s = sessions.Open(Tenant("t"), absl::Milliseconds(20), "");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(sessions.Adopt(s->id, {MakeTensor(rig, "t")}).ok());
  // Bounded wait for the condition, not for a time.
  // The session leaves the open set before its tensors are deleted, so wait
  // for the memory too.
  for (int i = 0; i < 2000 && (sessions.IsOpen(s->id) || rig.MemoryInUse() != baseline); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_FALSE(sessions.IsOpen(s->id));
  EXPECT_EQ(rig.store->size(), 0);
  EXPECT_EQ(rig.MemoryInUse(), baseline);
}

}  // namespace
}  // namespace placement::server

// GlooRingContext with real Gloo over loopback TCP, its ranks threads of
// this process meeting through an InMemoryRendezvousStore behind a counting
// wrapper: a context of N connects each rank only to its neighbours --
// rank - 1, rank + 1 and its recursive-doubling partners (getPair of any
// other rank is null) -- after reading only those ranks' keys, once each;
// the operations the Gloo transport issues (Gloo's ring all-reduce,
// allgather, allgatherv, RingBroadcast from every root, one of several
// chunks, and recursive-doubling all-reduce and all-gather, bit-identical
// on every rank) give the computed results on it; closeConnections and
// AbortGlooContext cope with the missing pairs; an absent neighbour fails
// the rendezvous with the store's DEADLINE_EXCEEDED naming its key within
// the budget; and, through the whole transport (SimulatedCluster), the
// first collective over 8 processes reads each process's neighbours' keys
// and leaves none behind, broadcast included.
#include "server/collective/transport/gloo/gloo_ring_context.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/transport/abortable_rendezvous_store.h"
#include "server/collective/transport/gloo/gloo_support.h"
#include "server/collective/transport/gloo/recursive_doubling.h"
#include "server/collective/transport/rendezvous_store.h"
#include "tests/server/collective/simulated_cluster.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

// The store interface over an InMemoryRendezvousStore, counting what
// passes (a thin wrapper of the interface, not a stand-in for it).
class CountingStore final : public RendezvousStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    sets_.fetch_add(1);
    return inner_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    {
      absl::MutexLock lock(&mu_);
      ++gets_[key];
    }
    return inner_.Get(key, timeout);
  }
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override {
    return inner_.DeletePrefix(prefix);
  }

  int sets() const { return sets_.load(); }
  // Reads of each key.
  std::map<std::string, int> gets() const {
    absl::MutexLock lock(&mu_);
    return gets_;
  }
  int total_gets() const {
    int n = 0;
    for (const auto& [key, count] : gets()) n += count;
    return n;
  }
  size_t size() const { return inner_.size(); }

 private:
  InMemoryRendezvousStore inner_;
  std::atomic<int> sets_{0};
  mutable absl::Mutex mu_;
  std::map<std::string, int> gets_ ABSL_GUARDED_BY(mu_);
};

std::shared_ptr<gloo::transport::Device> DeviceOn(const std::string& address) {
  gloo::transport::tcp::attr attr;
  attr.hostname = address;
  return gloo::transport::tcp::CreateDevice(attr);
}

std::shared_ptr<gloo::transport::Device> LoopbackDevice() { return DeviceOn("127.0.0.1"); }

// A store whose Gets wait until Release (or their timeout), for a rank that
// publishes its key and then goes silent.
class SilentAfterPublishingStore final : public RendezvousStore {
 public:
  explicit SilentAfterPublishingStore(RendezvousStore* inner) : inner_(inner) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    released_.WaitForNotificationWithTimeout(timeout);
    return absl::DeadlineExceededError(absl::StrCat("silent: ", key));
  }
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override {
    return inner_->DeletePrefix(prefix);
  }
  void Release() { released_.Notify(); }

 private:
  RendezvousStore* const inner_;
  absl::Notification released_;
};

// Runs fn(rank) for every rank at once, each on its own thread.
void OnRanks(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r); });
  for (auto& t : threads) t.join();
}

// `size` ring contexts under `prefix`, one device per rank (as one per
// process); every Connect must succeed.
std::vector<std::shared_ptr<gloo::Context>> ConnectRing(RendezvousStore& store,
                                                        const std::string& prefix, int size) {
  std::vector<std::shared_ptr<gloo::Context>> contexts(size);
  std::vector<absl::Status> statuses(size);
  OnRanks(size, [&](int r) {
    absl::StatusOr<std::shared_ptr<gloo::Context>> context =
        GlooRingContext::Connect(store, prefix, r, size, LoopbackDevice(), absl::Seconds(20));
    statuses[r] = context.status();
    if (context.ok()) contexts[r] = *std::move(context);
  });
  for (int r = 0; r < size; ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  return contexts;
}

TEST(GlooRingContextTest, NeighboursAreTheRingAndTheRecursiveDoublingPartners) {
  EXPECT_THAT(GlooRingContext::Neighbours(0, 1), ::testing::IsEmpty());
  EXPECT_THAT(GlooRingContext::Neighbours(1, 2), ::testing::ElementsAre(0));
  EXPECT_THAT(GlooRingContext::Neighbours(0, 3), ::testing::ElementsAre(1, 2));
  // 8: rank XOR 1, 2, 4 and the ring.
  EXPECT_THAT(GlooRingContext::Neighbours(0, 8), ::testing::ElementsAre(1, 2, 4, 7));
  EXPECT_THAT(GlooRingContext::Neighbours(7, 8), ::testing::ElementsAre(0, 3, 5, 6));
  EXPECT_THAT(GlooRingContext::Neighbours(4, 8), ::testing::ElementsAre(0, 3, 5, 6));
  // 6: core 0..3, extras 4 and 5 paired with 0 and 1.
  EXPECT_THAT(RecursiveDoublingPartners(1, 6), ::testing::ElementsAre(0, 3, 5));
  EXPECT_THAT(RecursiveDoublingPartners(5, 6), ::testing::ElementsAre(1));
  EXPECT_THAT(GlooRingContext::Neighbours(5, 6), ::testing::ElementsAre(0, 1, 4));
  for (int size = 1; size <= 40; ++size) {
    for (int a = 0; a < size; ++a) {
      const std::vector<int> of_a = GlooRingContext::Neighbours(a, size);
      for (int b : RecursiveDoublingPartners(a, size)) {
        EXPECT_THAT(of_a, ::testing::Contains(b)) << a << " of " << size;
        EXPECT_THAT(RecursiveDoublingPartners(b, size), ::testing::Contains(a))
            << a << " and " << b << " of " << size;
      }
      for (int b : of_a) {
        EXPECT_THAT(GlooRingContext::Neighbours(b, size), ::testing::Contains(a))
            << a << " and " << b << " of " << size;
      }
      int log2 = 0;
      while ((2 << log2) <= size) ++log2;
      EXPECT_LE(of_a.size(), static_cast<size_t>(std::min(size - 1, log2 + 3)))
          << a << " of " << size;
    }
  }
  EXPECT_LE(GlooRingContext::Neighbours(5, 128).size(), 9u);
}

class GlooRingOfN : public ::testing::TestWithParam<int> {};

TEST_P(GlooRingOfN, ConnectsOnlyNeighboursAfterOneReadOfEach) {
  const int n = GetParam();
  CountingStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts = ConnectRing(store, "t", n);
  // One key per rank, read once by each of its neighbours and by nobody
  // else.
  EXPECT_EQ(store.sets(), n);
  int reads = 0;
  for (int r = 0; r < n; ++r) {
    const size_t neighbours = GlooRingContext::Neighbours(r, n).size();
    EXPECT_EQ(store.gets()[absl::StrCat("t/ring/", r)], static_cast<int>(neighbours)) << r;
    reads += static_cast<int>(neighbours);
  }
  EXPECT_EQ(store.total_gets(), reads);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(contexts[r], nullptr);
    const std::vector<int> neighbours = GlooRingContext::Neighbours(r, n);
    for (int q = 0; q < n; ++q) {
      const bool neighbour = std::find(neighbours.begin(), neighbours.end(), q) != neighbours.end();
      EXPECT_EQ(contexts[r]->getPair(q) != nullptr, neighbour) << "rank " << r << ", pair " << q;
    }
  }
  // The keys live under the prefix (what GlooContextCache::Ran deletes).
  EXPECT_EQ(*store.DeletePrefix("t/"), n);
  EXPECT_EQ(store.size(), 0u);
}

TEST_P(GlooRingOfN, TheTransportsOperationsGiveTheComputedResults) {
  const int n = GetParam();
  CountingStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts = ConnectRing(store, "ops", n);
  for (const auto& context : contexts) ASSERT_NE(context, nullptr);
  const auto timeout = std::chrono::milliseconds(20000);

  // Ring all-reduce (SUM of int32): 1000 * r + i from each rank.
  constexpr int kCount = 1003;
  std::vector<std::vector<int32_t>> reduced(n, std::vector<int32_t>(kCount));
  OnRanks(n, [&](int r) {
    for (int i = 0; i < kCount; ++i) reduced[r][i] = 1000 * r + i;
    gloo::AllreduceOptions opts(contexts[r]);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(reduced[r].data(), kCount);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int32_t>));
    opts.setTag(1);
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
  });
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kCount; ++i) {
      ASSERT_EQ(reduced[r][i], 1000 * (n * (n - 1) / 2) + n * i) << "rank " << r << " at " << i;
    }
  }

  // Allgather (the transport's Exchange): 37 bytes from each rank.
  constexpr int kBlock = 37;
  std::vector<std::string> gathered(n, std::string(n * kBlock, '\0'));
  OnRanks(n, [&](int r) {
    std::string block(kBlock, static_cast<char>('a' + r));
    gloo::AllgatherOptions opts(contexts[r]);
    opts.setInput(block.data(), block.size());
    opts.setOutput(gathered[r].data(), gathered[r].size());
    opts.setTag(2);
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  });
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(gathered[r].substr(q * kBlock, kBlock), std::string(kBlock, 'a' + q)) << r;
    }
  }

  // Allgatherv (the transport's all-gather), primed in place: rank q
  // contributes q + 1 bytes of value q.
  std::vector<size_t> counts(n);
  std::iota(counts.begin(), counts.end(), size_t{1});
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  std::vector<std::vector<uint8_t>> gatheredv(n, std::vector<uint8_t>(total, 0xAB));
  OnRanks(n, [&](int r) {
    const size_t offset = static_cast<size_t>(r) * (r + 1) / 2;
    std::fill_n(gatheredv[r].begin() + offset, counts[r], static_cast<uint8_t>(r));
    gloo::AllgathervOptions opts(contexts[r]);
    opts.setOutput(gatheredv[r].data(), counts);
    opts.setTag(3);
    opts.setTimeout(timeout);
    gloo::allgatherv(opts);
  });
  std::vector<uint8_t> want;
  for (int q = 0; q < n; ++q) want.insert(want.end(), counts[q], static_cast<uint8_t>(q));
  for (int r = 0; r < n; ++r) EXPECT_EQ(gatheredv[r], want) << "rank " << r;

  // RingBroadcast from every root: 13 bytes, and 3 MiB + 5 (4 chunks).
  for (size_t bytes : {size_t{13}, (size_t{3} << 20) + 5}) {
    for (int root = 0; root < n; ++root) {
      std::vector<std::vector<uint8_t>> data(n, std::vector<uint8_t>(bytes, 0));
      for (size_t i = 0; i < bytes; ++i) data[root][i] = static_cast<uint8_t>(i * 7 + root);
      OnRanks(n,
              [&](int r) { RingBroadcast(*contexts[r], root, data[r].data(), bytes, 4, timeout); });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(data[r], data[root]) << "rank " << r << ", root " << root << ", " << bytes;
      }
    }
  }

  // Recursive-doubling all-reduce of floats: the same bits on every rank
  // (each exchange adds the lower rank's partial first), the sum of the
  // contributions up to rounding.
  constexpr int kFloats = 777;
  std::vector<std::vector<float>> floats(n, std::vector<float>(kFloats));
  OnRanks(n, [&](int r) {
    for (int i = 0; i < kFloats; ++i) floats[r][i] = 0.1f * static_cast<float>(r + 1) + 1e-3f * i;
    RecursiveDoublingAllReduce(*contexts[r], floats[r].data(), kFloats, sizeof(float),
                               GlooPairwiseReduce(DType::kF32, ReduceOp::kSum), 5, timeout);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(std::memcmp(floats[r].data(), floats[0].data(), kFloats * sizeof(float)), 0)
        << "rank " << r;
  }
  for (int i = 0; i < kFloats; ++i) {
    const double want = 0.1 * n * (n + 1) / 2 + 1e-3 * i * n;
    ASSERT_NEAR(floats[0][i], want, 1e-4 * want) << "at " << i;
  }
  // Recursive-doubling all-gather (the transport's Exchange), twice on the
  // same tag: 41 bytes from each rank, one block inside the output.
  for (int round = 0; round < 2; ++round) {
    constexpr size_t kWord = 41;
    std::vector<std::string> words(n, std::string(n * kWord, '\0'));
    OnRanks(n, [&](int r) {
      const std::string block(kWord, static_cast<char>('A' + r + round));
      if (r % 2 == 0) {
        RecursiveDoublingAllGather(*contexts[r], block.data(), kWord, words[r].data(), 6, timeout);
      } else {
        words[r].replace(r * kWord, kWord, block);
        RecursiveDoublingAllGather(*contexts[r], words[r].data() + r * kWord, kWord,
                                   words[r].data(), 6, timeout);
      }
    });
    for (int r = 0; r < n; ++r) {
      for (int q = 0; q < n; ++q) {
        ASSERT_EQ(words[r].substr(q * kWord, kWord), std::string(kWord, 'A' + q + round))
            << "rank " << r << ", block " << q;
      }
    }
  }

  // Recursive-doubling all-gather of blocks of different sizes, an empty
  // one included, primed in place: rank q gives (q * 5) % 7 bytes of
  // value q + 1.
  std::vector<size_t> sizes(n);
  for (int q = 0; q < n; ++q) sizes[q] = static_cast<size_t>((q * 5) % 7);
  std::vector<size_t> starts(n + 1, 0);
  for (int q = 0; q < n; ++q) starts[q + 1] = starts[q] + sizes[q];
  std::vector<std::vector<uint8_t>> gathered_rd(n, std::vector<uint8_t>(starts[n], 0xEE));
  OnRanks(n, [&](int r) {
    std::fill_n(gathered_rd[r].begin() + starts[r], sizes[r], static_cast<uint8_t>(r + 1));
    RecursiveDoublingAllGatherV(*contexts[r], gathered_rd[r].data(), sizes, 7, timeout);
  });
  std::vector<uint8_t> want_rd;
  for (int q = 0; q < n; ++q) want_rd.insert(want_rd.end(), sizes[q], static_cast<uint8_t>(q + 1));
  for (int r = 0; r < n; ++r) EXPECT_EQ(gathered_rd[r], want_rd) << "rank " << r;

  // Recursive-doubling broadcast from every root: every byte value, exact.
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<uint8_t>> data(n, std::vector<uint8_t>(515, 0x5A));
    for (size_t i = 0; i < 515; ++i) data[root][i] = static_cast<uint8_t>(i + root);
    OnRanks(n, [&](int r) {
      RecursiveDoublingBroadcast(*contexts[r], root, data[r].data(), 515, 8, timeout);
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(data[r], data[root]) << "rank " << r << ", root " << root;
  }

  // Walking every pair copes with the missing ones.
  AbortGlooContext(*contexts[0]);
  for (const auto& context : contexts) context->closeConnections();
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooRingOfN, ::testing::Values(2, 3, 4, 5, 6, 7, 8, 11));

TEST(GlooRingContextTest, AnAbsentNeighbourFailsTheRendezvousWithinTheBudget) {
  // Ranks 0..3 of 5 come; 4 never does. Its neighbours 0 and 3 wait for its
  // key until the budget ends, then fail naming it.
  const absl::Duration kBudget = absl::Milliseconds(800);
  CountingStore store;
  std::vector<absl::Status> statuses(4);
  const absl::Time start = absl::Now();
  OnRanks(4, [&](int r) {
    statuses[r] =
        GlooRingContext::Connect(store, "absent", r, 5, LoopbackDevice(), kBudget).status();
  });
  EXPECT_LT(absl::Now() - start, 3 * kBudget);
  for (int r : {0, 3}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDeadlineExceeded) << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("absent/ring/4"));
  }
  // Nobody read anything but its neighbours' keys.
  for (const auto& [key, count] : store.gets()) EXPECT_LE(count, 4) << key;
}

TEST(GlooRingContextTest, AKeyWithoutThisRanksAddressIsUnavailable) {
  CountingStore store;
  ASSERT_TRUE(store.Set("bad/ring/1", "not an address list").ok());
  absl::StatusOr<std::shared_ptr<gloo::Context>> context =
      GlooRingContext::Connect(store, "bad", 0, 2, LoopbackDevice(), absl::Seconds(5));
  EXPECT_EQ(context.status().code(), absl::StatusCode::kUnavailable) << context.status();
  EXPECT_THAT(std::string(context.status().message()), HasSubstr("no address for rank 0"));
}

// Gloo's TCP pair signals a failed connection to the transfers waiting for
// their peer, but not to the send whose bytes it is writing nor to the
// receive whose bytes it is reading (Debian's Gloo, Pair::signalException):
// those waited until their timeout even after AbortGlooContext. The ring
// context's buffers are abortable: the abort ends both.
TEST(GlooRingContextTest, AnAbortEndsTransfersCutOffWhileTheirBytesMove) {
  CountingStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts = ConnectRing(store, "cut", 2);
  ASSERT_NE(contexts[0], nullptr);
  ASSERT_NE(contexts[1], nullptr);
  // Large enough that loopback needs tens of milliseconds for it.
  const size_t kBytes = size_t{256} << 20;
  const std::chrono::milliseconds kTimeout(60000);
  std::vector<char> out(kBytes, 1);
  std::vector<char> in(kBytes, 0);
  absl::Notification posted;
  bool sent = false;
  absl::Time sender_ended;
  std::thread sender([&] {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
        contexts[0]->createUnboundBuffer(out.data(), kBytes);
    try {
      buffer->send(1, /*slot=*/1);
      posted.Notify();
      sent = buffer->waitSend(kTimeout);
    } catch (const std::exception&) {
      // The receiver's failure or the abort.
    }
    if (!posted.HasBeenNotified()) posted.Notify();
    sender_ended = absl::Now();
  });
  posted.WaitForNotification();
  // The receiver asks for the bytes (the sender starts writing them), then
  // is aborted as they arrive: its connection closes under the sender's
  // write.
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
      contexts[1]->createUnboundBuffer(in.data(), kBytes);
  buffer->recv(0, /*slot=*/1);
  bool received = false;
  std::string receiver_error;
  absl::Time receiver_ended;
  std::thread receiver([&] {
    try {
      received = buffer->waitRecv(kTimeout);
    } catch (const std::exception& e) {
      receiver_error = e.what();
    }
    receiver_ended = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(2));
  const absl::Time receiver_aborted = absl::Now();
  AbortGlooContext(*contexts[1]);
  receiver.join();
  // The sender's own abort comes later (as a lost process's neighbours
  // hear of the loss from the cluster, after the connection failed).
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time sender_aborted = absl::Now();
  AbortGlooContext(*contexts[0]);
  sender.join();
  // Ended by the failure or by the abort, not by the 60 s timeout.
  EXPECT_LT(receiver_ended - receiver_aborted, absl::Seconds(20)) << receiver_error;
  EXPECT_LT(sender_ended - sender_aborted, absl::Seconds(20));
  if (received) {
    GTEST_LOG_(INFO) << "the bytes arrived before the abort";
  } else {
    EXPECT_THAT(receiver_error, HasSubstr("aborted"));
  }
  if (sent) GTEST_LOG_(INFO) << "the send completed before the receiver failed";
}

// A neighbour that published its key and then went silent: the ranks that
// read it wait in Gloo's connect for a connection that never comes (they
// are the listening side: 127.0.0.1 is below its 127.0.0.2). Aborting
// their rendezvous ends that wait at once, in the abort's words, instead
// of after the pair's timeout.
TEST(GlooRingContextTest, AnAbortEndsAConnectWaitingOnANeighbourThatWentSilent) {
  CountingStore store;
  SilentAfterPublishingStore silent(&store);
  const absl::Duration kBudget = absl::Seconds(60);
  absl::Status silent_status;
  std::thread rank2([&] {
    silent_status =
        GlooRingContext::Connect(silent, "quiet", 2, 3, DeviceOn("127.0.0.2"), kBudget).status();
  });
  std::vector<RendezvousAbort> aborts(2);
  std::vector<absl::Status> statuses(2);
  std::vector<absl::Time> ended(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      statuses[r] =
          GlooRingContext::Connect(store, "quiet", r, 3, LoopbackDevice(), kBudget, &aborts[r])
              .status();
      ended[r] = absl::Now();
    });
  }
  // Every rank published; 0 and 1 read all three keys and are connecting.
  const absl::Time limit = absl::Now() + absl::Seconds(20);
  while (store.size() < 3 && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(store.size(), 3u);
  while (store.gets().size() < 3 && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time aborted = absl::Now();
  const absl::Status why = absl::UnavailableError("process 2 (127.0.0.2:7000) is lost (epoch 3)");
  for (RendezvousAbort& abort : aborts) abort.Abort(why);
  for (auto& t : ranks) t.join();
  silent.Release();
  rank2.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r], why) << "rank " << r;
    // Not the pair's connect timeout (a fifth of the budget, 12 s).
    EXPECT_LT(ended[r] - aborted, absl::Seconds(6)) << "rank " << r;
  }
  EXPECT_FALSE(silent_status.ok());
  // A rendezvous already aborted does not start connecting.
  RendezvousAbort late;
  late.Abort(why);
  EXPECT_EQ(
      GlooRingContext::Connect(store, "late", 0, 2, LoopbackDevice(), kBudget, &late).status(),
      why);
}

// A ring broadcast of one chunk whose last rank is gone: rank 1 receives the
// root's bytes (the root's send completes) and then cannot forward them.
// The root must fail too, not return as if it had delivered: it waits for
// the last rank's acknowledgement, whose connection is closed.
TEST(GlooRingContextTest, ARingBroadcastRootFailsWhenTheLastRankIsGone) {
  CountingStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts = ConnectRing(store, "ack", 3);
  for (const auto& context : contexts) ASSERT_NE(context, nullptr);
  // Rank 2 fails before the broadcast (its connections close).
  AbortGlooContext(*contexts[2]);
  const size_t kBytes = size_t{512} << 10;  // one chunk
  const std::chrono::milliseconds kTimeout(20000);
  std::vector<std::vector<char>> data(2, std::vector<char>(kBytes, 0));
  std::fill(data[0].begin(), data[0].end(), 7);
  std::vector<std::string> errors(2);
  std::vector<absl::Time> ended(2);
  const absl::Time start = absl::Now();
  OnRanks(2, [&](int r) {
    try {
      RingBroadcast(*contexts[r], /*root=*/0, data[r].data(), kBytes, /*tag=*/9, kTimeout);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
    // As the transport does with a context whose operation failed.
    if (!errors[r].empty()) AbortGlooContext(*contexts[r]);
    ended[r] = absl::Now();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(errors[r].empty()) << "rank " << r << " returned as if the broadcast worked";
    EXPECT_LT(ended[r] - start, absl::Seconds(10)) << "rank " << r << ": " << errors[r];
  }
}

// Through the whole Gloo transport: the first collective over 8 processes
// forms contexts with one read per neighbour (4 each), and whoever's
// success shows that all took part deletes the keys -- for a broadcast
// around the ring (over 256 KiB) the last process of the ring, not the
// first.
TEST(GlooRingContextTest, TheTransportsFirstCollectiveReadsItsNeighboursKeys) {
  CountingStore store;
  testing::ClusterOptions options;
  options.processes = 8;
  options.store = &store;
  testing::SimulatedCluster c(options);
  const std::vector<int> all = testing::AllProcesses(c);
  uint64_t ticket = 0;
  const std::pair<CollectiveKind, int64_t> calls[] = {{CollectiveKind::kAllReduce, 1024},
                                                      {CollectiveKind::kBroadcast, 1024},
                                                      {CollectiveKind::kBroadcast, 70000},
                                                      {CollectiveKind::kAllGather, 1024}};
  for (const auto& [kind, count] : calls) {
    testing::Group g =
        testing::MakeGroup(c, kind, DType::kF32, ReduceOp::kSum, all, count, /*root=*/3, 21);
    // An epoch of its own per kind: each call forms a new context.
    const CrossProcessTicket t = testing::Ticket(c.AllKey(), 0, 0, /*epoch=*/++ticket);
    const int gets_before = store.total_gets();
    const int sets_before = store.sets();
    auto statuses = testing::RunGroup(c, g, all, t);
    for (int p : all) ASSERT_TRUE(statuses[p].ok()) << "process " << p << ": " << statuses[p];
    testing::ExpectResult(g);
    EXPECT_EQ(store.sets() - sets_before, 8) << CollectiveKindName(kind);
    EXPECT_EQ(store.total_gets() - gets_before, 32) << CollectiveKindName(kind);
    EXPECT_EQ(store.size(), 0u) << CollectiveKindName(kind);
  }
}

}  // namespace
}  // namespace placement::server

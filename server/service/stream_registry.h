// StreamRegistry: bounds the long-lived streams a client can make the daemon
// hold, and reaps the stalled ones.
//
//   - At most `max_streams` streams (Upload, UploadBatch, Download, Prefetch)
//     open at once in total, and `max_streams_per_tenant` per tenant (0 =
//     unlimited): past either, a new stream is refused RESOURCE_EXHAUSTED
//     before it reserves anything.
//   - A stream registered with an idle deadline (uploads and downloads) that
//     makes no progress -- no message read, no message written -- for
//     `idle_timeout` is cancelled (ServerContext::TryCancel); its reactor
//     then frees what it reserved, as for a client cancel. Prefetch streams
//     wait on their consumer by design and are only counted.
//   - Every stream says what it moves (a tensor's name or id, a prefetch
//     stream's name), how many bytes so far and of how many: List() is what
//     DaemonService.ListStreams (and `placectl top`) reports.
//
// A reaper thread looks every min(1 s, idle_timeout / 4). Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_STREAM_REGISTRY_H_
#define PLACEMENT_SERVER_SERVICE_STREAM_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

enum class StreamKind { kUpload, kUploadBatch, kDownload, kPrefetch };

// "upload", "upload_batch", "download", "prefetch".
absl::string_view StreamKindName(StreamKind kind);

// One open stream as List() reports it.
struct StreamSnapshot {
  int64_t id = 0;  // per daemon run, in open order
  StreamKind kind = StreamKind::kUpload;
  std::string tenant;
  std::string what;         // tensor name or id, "3 arrays", prefetch stream name
  int64_t bytes = 0;        // tensor bytes moved so far
  int64_t total_bytes = 0;  // 0 = not known (yet)
  absl::Time opened;
};

struct StreamLimits {
  int64_t max_streams = 1024;          // 0 = unlimited
  int64_t max_streams_per_tenant = 0;  // 0 = unlimited
  absl::Duration idle_timeout = absl::Seconds(60);
};

class StreamRegistry {
 public:
  // What a stream reports as it goes; shared by its Lease and the registry.
  struct Activity {
    std::atomic<int64_t> last_progress_ns{0};
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> total_bytes{0};
    absl::Mutex mu;
    std::string what ABSL_GUARDED_BY(mu);
  };

  // A registered stream; unregisters on destruction. Progress() is cheap
  // (atomic updates, no lock) and may be called from any thread.
  class Lease {
   public:
    Lease() = default;
    ~Lease();
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    // A message went through; `bytes` of tensor data with it.
    void Progress(int64_t bytes = 0);
    // What the stream moves and how many bytes in all (0 = not known).
    void Describe(std::string what, int64_t total_bytes);
    bool held() const { return registry_ != nullptr; }

   private:
    friend class StreamRegistry;
    Lease(StreamRegistry* registry, int64_t id, std::shared_ptr<Activity> activity)
        : registry_(registry), id_(id), activity_(std::move(activity)) {}
    void Reset();
    StreamRegistry* registry_ = nullptr;
    int64_t id_ = 0;
    std::shared_ptr<Activity> activity_;
  };

  explicit StreamRegistry(StreamLimits limits);
  ~StreamRegistry();

  // Registers a stream of `tenant`. `cancel` (thread-safe, called at most
  // once, never after the lease is gone) ends a stalled stream; null = the
  // stream is never reaped. RESOURCE_EXHAUSTED naming the limit and its flag.
  absl::StatusOr<Lease> Open(const std::string& tenant, StreamKind kind,
                             std::function<void()> cancel);

  int64_t open_streams() const;
  // The open streams, in open order.
  std::vector<StreamSnapshot> List() const;
  // Streams open now of `tenant`.
  int64_t open_streams(const std::string& tenant) const;
  int64_t reaped_total() const { return reaped_.load(); }

 private:
  // What the reaper needs to cancel one stream without holding mu_: the
  // cancel may run the stream's reactor to its end on the reaper's thread
  // (gRPC flushes callbacks inline), which closes the lease.
  struct CancelState {
    absl::Mutex mu;
    bool closed ABSL_GUARDED_BY(mu) = false;
    // The thread running `cancel` now, so a Close from inside it does not
    // wait for itself.
    std::atomic<std::thread::id> canceller{};
    std::function<void()> cancel;
  };
  struct Entry {
    std::string tenant;
    StreamKind kind = StreamKind::kUpload;
    absl::Time opened;
    std::shared_ptr<CancelState> cancel;  // null: never reaped
    std::shared_ptr<Activity> activity;
    bool cancelled = false;
  };
  void Close(int64_t id);
  void ReapLoop();

  const StreamLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int64_t, Entry> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> per_tenant_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> reaped_{0};
  std::thread reaper_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_STREAM_REGISTRY_H_

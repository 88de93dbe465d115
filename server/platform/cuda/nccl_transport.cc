#include "server/platform/cuda/nccl_transport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/collective/transport/abortable_rendezvous_store.h"
#include "server/collective/transport/transport_registry.h"
#include "server/logging.h"
#include "server/platform/cuda/nccl_comms.h"
#include "server/platform/cuda/nccl_support.h"

namespace placement::server {
namespace {

// FNV-1a over the device ids: the same on every process and build.
uint64_t DigestOf(const std::vector<int64_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t id : ids) {
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<uint64_t>(id >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

// The interface that holds `host` (a numeric or resolvable address), or "".
std::string InterfaceOf(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return "";
  std::string name;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) == 0) {
    for (ifaddrs* i = interfaces; i != nullptr && name.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr) continue;
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        if (a->ai_family != i->ifa_addr->sa_family) continue;
        const bool same =
            a->ai_family == AF_INET
                ? reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr ==
                      reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr
                : std::memcmp(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr,
                              &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                              sizeof(in6_addr)) == 0;
        if (same) {
          name = i->ifa_name;
          break;
        }
      }
    }
    freeifaddrs(interfaces);
  }
  freeaddrinfo(found);
  return name;
}

// What ends a wait inside NCCL (init or an operation) besides its budget:
// the key's interrupt, checked at every poll, and the generation's
// abandonment (a process gave the call up before joining: its peers would
// wait for it), looked up in the store at most every
// AbortableRendezvousStore::kPoll.
class Interruption {
 public:
  Interruption(const RendezvousAbort& interrupt, RendezvousStore* store, std::string abandoned)
      : interrupt_(interrupt), store_(store), abandoned_(std::move(abandoned)) {}

  absl::Status operator()() const {
    if (absl::Status s = interrupt_.status(); !s.ok()) return s;
    const absl::Time now = absl::Now();
    if (now < next_look_) return absl::OkStatus();
    next_look_ = now + AbortableRendezvousStore::kPoll;
    return WatchedKeyStatus(*store_, abandoned_);
  }

 private:
  const RendezvousAbort& interrupt_;
  RendezvousStore* const store_;
  const std::string abandoned_;
  // The first look waits a poll: a call that is quick never reaches it.
  // (Mutable: absl::FunctionRef calls it as const.)
  mutable absl::Time next_look_ = absl::Now() + AbortableRendezvousStore::kPoll;
};

}  // namespace

std::string NcclPrefix(const TransportGroupKey& key, const std::vector<int64_t>& device_ids) {
  if (device_ids.empty()) return absl::StrCat("nccl/", key.Name(), "/x");
  return absl::StrCat("nccl/", key.Name(), "/", absl::StrFormat("%016x", DigestOf(device_ids)));
}

// One key's communicators. `interrupt` is never ended: once aborted it
// says why for good (the key is refused from then on). `mu` is held by the
// call using the communicators (calls on one key do not overlap).
struct NcclTransport::Entry {
  explicit Entry(std::vector<int32_t> processes) : processes(std::move(processes)) {}
  const std::vector<int32_t> processes;  // the key's subset, ascending
  RendezvousAbort interrupt;
  absl::Mutex mu;
  // The exchange's device buffer (a block per process), made by the first
  // exchange; freed after the communicators (declared first).
  std::unique_ptr<DeviceBuffer> exchange_scratch ABSL_GUARDED_BY(mu);
  // By the ranks' device ids; {} is the exchange communicator.
  std::map<std::vector<int64_t>, std::unique_ptr<NcclComms>> comms ABSL_GUARDED_BY(mu);
  bool failed ABSL_GUARDED_BY(mu) = false;

  void AbortAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    failed = true;
    for (auto& [ids, c] : comms) c->Abort();
  }
};

absl::StatusOr<std::unique_ptr<CrossProcessTransport>> NcclTransport::Create(
    const CrossProcessTransportOptions& options) {
  if (absl::Status s = CheckTransportOptions("nccl", options); !s.ok()) return s;
  auto* cuda = dynamic_cast<CudaBackend*>(options.backend);
  if (cuda == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl transport: needs the cuda platform's GPUs; this daemon's devices are ",
                     options.backend->Name(), " (use gloo)"));
  }
  if (cuda->Devices().empty()) {
    return absl::FailedPreconditionError("nccl transport: this daemon has no GPU");
  }
  int version = 0;
  if (ncclResult_t r = ncclGetVersion(&version); r != ncclSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl transport: NCCL unavailable: ", ncclGetErrorString(r)));
  }
  const char* ifname = std::getenv("NCCL_SOCKET_IFNAME");
  const std::string interface = InterfaceOf(options.hostname);
  LogWarning("cluster: collectives between daemons over NCCL ", version / 10000, ".",
             (version / 100) % 100, ".", version % 100, " (experimental); NCCL_SOCKET_IFNAME=",
             ifname != nullptr ? ifname : "unset: NCCL picks its interface",
             ifname == nullptr && !interface.empty()
                 ? absl::StrCat(" (the peer address is on ", interface,
                                ": NCCL_SOCKET_IFNAME==", interface, " keeps NCCL there)")
                 : "");
  return std::unique_ptr<CrossProcessTransport>(new NcclTransport(options, cuda));
}

NcclTransport::NcclTransport(const CrossProcessTransportOptions& options, CudaBackend* backend)
    : store_(options.store), backend_(backend), process_index_(options.process_index) {}

NcclTransport::~NcclTransport() = default;

std::shared_ptr<NcclTransport::Entry> NcclTransport::EntryFor(const TransportGroupKey& key) {
  return entries_.GetOrMake(key.epoch, key.Name(),
                            [&] { return std::make_shared<Entry>(key.processes); });
}

void NcclTransport::Interrupt(Entry& entry, const absl::Status& why) {
  // Only flagged here: ncclCommAbort may take a while, and this runs on
  // the cluster's threads. A call inside the key's communicators sees the
  // flag at its next poll and aborts them; idle ones are aborted by the
  // key's next call (refused) or when their epoch is dropped.
  entry.interrupt.Abort(why);
}

absl::StatusOr<NcclComms*> NcclTransport::CommsFor(Entry& entry, const TransportGroupKey& key,
                                                   const std::vector<int64_t>& device_ids, int size,
                                                   const std::vector<std::pair<int, int>>& ranks,
                                                   absl::Duration budget) {
  if (auto it = entry.comms.find(device_ids); it != entry.comms.end()) return it->second.get();
  const std::string prefix = NcclPrefix(key, device_ids);
  const std::string id_key = absl::StrCat(prefix, "/id");
  const bool draws = ranks.front().first == 0;
  const absl::Time deadline = absl::Now() + budget;
  AbortableRendezvousStore store(store_, &entry.interrupt, AbortableRendezvousStore::kPoll,
                                 GenerationAbandonedKey(key.epoch, key.set_key, key.generation));
  ncclUniqueId id;
  if (draws) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclStatus(r, nullptr, absl::StrCat("ncclGetUniqueId for ", prefix));
    }
    absl::Status set = store.Set(id_key, std::string(id.internal, sizeof(id.internal)));
    if (!set.ok()) return set;
  } else {
    absl::StatusOr<std::string> value = store.Get(id_key, budget);
    if (!value.ok()) return value.status();
    if (value->size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrCat(id_key, " holds ", value->size(),
                                              " bytes, not an ncclUniqueId of ",
                                              sizeof(id.internal)));
    }
    std::memcpy(id.internal, value->data(), sizeof(id.internal));
  }
  std::vector<NcclComms::LocalRank> local;
  for (const auto& [rank, ordinal] : ranks) local.push_back({rank, ordinal});
  absl::StatusOr<std::unique_ptr<NcclComms>> made = NcclComms::Create(
      id, size, std::move(local), std::max(deadline - absl::Now(), absl::ZeroDuration()),
      Interruption(entry.interrupt, store_,
                   GenerationAbandonedKey(key.epoch, key.set_key, key.generation)),
      absl::StrCat("nccl communicators ", prefix));
  // Every rank joined, or this process gave up: the id is spent either way.
  if (draws) {
    if (absl::StatusOr<int64_t> deleted = store_->DeletePrefix(absl::StrCat(prefix, "/"));
        !deleted.ok()) {
      LogWarning("nccl: could not delete the rendezvous key of ", prefix, ": ",
                 deleted.status().message());
    }
  }
  if (!made.ok()) return made.status();
  NcclComms* comms = made->get();
  entry.comms.emplace(device_ids, *std::move(made));
  return comms;
}

absl::Status NcclTransport::WithEntry(const TransportGroupKey& key, absl::string_view call,
                                      absl::FunctionRef<absl::Status(Entry&)> fn) {
  std::shared_ptr<Entry> entry = EntryFor(key);
  absl::MutexLock lock(&entry->mu);
  absl::Status status = entry->interrupt.status();
  if (!status.ok() || entry->failed) {
    entry->AbortAll();
    return absl::UnavailableError(absl::StrCat(
        call, ": the nccl group ", key.Name(), " was aborted",
        status.ok() ? "; the set needs a new generation" : absl::StrCat(": ", status.message())));
  }
  status = fn(*entry);
  if (!status.ok()) {
    // The communicators are in an unknown state and the key's ids spent.
    entry->interrupt.Abort(absl::UnavailableError(absl::StrCat("failed: ", status.message())));
    entry->AbortAll();
    return absl::Status(status.code(), absl::StrCat(call, ": ", status.message()));
  }
  return status;
}

absl::Status NcclTransport::Run(CollectiveKind kind, const CollectiveItem& item,
                                const ClusterItemPlan& plan, const TransportGroupKey& key,
                                uint32_t /*tag*/, absl::Duration budget, absl::string_view what) {
  const std::string call = absl::StrCat("nccl ", CollectiveKindName(kind), " over processes ",
                                        ProcessListKey(plan.processes), " (", what, ")");
  // What this process alone can tell is wrong fails before the group:
  // the same on every process, and no reason to spend the key.
  if (absl::Status s = CheckNcclKind(kind, item.dtype); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(call, ": ", s.message()));
  }
  if (plan.block == 0) return absl::OkStatus();
  // (rank, CUDA ordinal) of this process's ranks, one GPU each.
  std::vector<std::pair<int, int>> ranks;
  for (const RankBuffers& r : plan.local) {
    const int ordinal = backend_->Ordinal(item.group[r.rank]);
    for (const auto& [other, used] : ranks) {
      if (used == ordinal) {
        return absl::FailedPreconditionError(absl::StrCat(
            call, ": ranks ", other, " and ", r.rank, " are both on GPU ", ordinal,
            " (logical devices); NCCL takes one rank per GPU: use --cluster_transport=gloo"));
      }
    }
    ranks.emplace_back(r.rank, ordinal);
  }
  return WithEntry(key, call, [&](Entry& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
    const absl::Time deadline = absl::Now() + budget;
    absl::StatusOr<NcclComms*> comms =
        CommsFor(entry, key, item.group, static_cast<int>(plan.ranks), ranks, budget);
    if (!comms.ok()) return comms.status();
    return (*comms)->Run(
        [&](size_t j, ncclComm_t comm, cudaStream_t stream) {
          return EnqueueNcclRank(kind, item.dtype, item.op, static_cast<int>(item.root),
                                 plan.local[j], comm, stream);
        },
        std::max(deadline - absl::Now(), absl::ZeroDuration()),
        Interruption(entry.interrupt, store_,
                     GenerationAbandonedKey(key.epoch, key.set_key, key.generation)),
        "the collective");
  });
}

absl::StatusOr<std::vector<std::string>> NcclTransport::Exchange(const TransportGroupKey& key,
                                                                 const std::string& block,
                                                                 uint32_t /*tag*/,
                                                                 absl::Duration budget,
                                                                 absl::string_view what) {
  constexpr size_t kMaxBlock = 4096;
  if (block.empty() || block.size() > kMaxBlock) {
    return absl::InvalidArgumentError(absl::StrCat("nccl exchange (", what, "): a block of ",
                                                   block.size(), " bytes; must be 1..", kMaxBlock));
  }
  const size_t n = key.processes.size();
  const int64_t len = static_cast<int64_t>(block.size());
  const auto mine = std::lower_bound(key.processes.begin(), key.processes.end(), process_index_);
  const int position = static_cast<int>(mine - key.processes.begin());
  std::string gathered(block.size() * n, '\0');
  absl::Status status = WithEntry(
      key,
      absl::StrCat("nccl exchange over processes ", ProcessListKey(key.processes), " (", what, ")"),
      [&](Entry& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
        const int64_t device = backend_->Devices().front().id;
        const absl::Time deadline = absl::Now() + budget;
        absl::StatusOr<NcclComms*> comms = CommsFor(
            entry, key, {}, static_cast<int>(n), {{position, backend_->Ordinal(device)}}, budget);
        if (!comms.ok()) return comms.status();
        // One scratch per key, for the largest block: no allocation (which
        // may synchronise the GPU) per exchange.
        if (entry.exchange_scratch == nullptr) {
          absl::StatusOr<std::unique_ptr<DeviceBuffer>> scratch =
              backend_->Allocate(device, static_cast<int64_t>(kMaxBlock * n));
          if (!scratch.ok()) return scratch.status();
          entry.exchange_scratch = *std::move(scratch);
        }
        DeviceBuffer& buffer = *entry.exchange_scratch;
        const ByteRun in{0, position * len, len};
        if (absl::Status s = backend_->Write(block.data(), buffer, {&in, 1}); !s.ok()) return s;
        std::byte* base = static_cast<std::byte*>(buffer.data());
        absl::Status ran = (*comms)->Run(
            [&](size_t, ncclComm_t comm, cudaStream_t stream) {
              // In place: this process's block already sits at its slot.
              return ncclAllGather(base + position * len, base, static_cast<size_t>(len), ncclUint8,
                                   comm, stream);
            },
            std::max(deadline - absl::Now(), absl::ZeroDuration()),
            Interruption(entry.interrupt, store_,
                         GenerationAbandonedKey(key.epoch, key.set_key, key.generation)),
            "the exchange");
        if (!ran.ok()) return ran;
        return backend_->ReadBytes(buffer, 0, gathered.data(), len * static_cast<int64_t>(n));
      });
  if (!status.ok()) return status;
  std::vector<std::string> blocks;
  blocks.reserve(n);
  for (size_t i = 0; i < n; ++i) blocks.push_back(gathered.substr(i * block.size(), block.size()));
  return blocks;
}

void NcclTransport::Abort(const TransportGroupKey& key) {
  Interrupt(*EntryFor(key),
            absl::UnavailableError(absl::StrCat("the nccl group ", key.Name(),
                                                " was aborted; the set needs a new generation")));
}

void NcclTransport::AbortGeneration(uint64_t epoch, const std::string& set_key,
                                    uint64_t generation) {
  const std::string stem = TransportGroupKey{epoch, set_key, generation, {}}.GenerationStem();
  for (const auto& entry : entries_.WithPrefix(epoch, stem)) {
    Interrupt(*entry, absl::UnavailableError(absl::StrCat("generation ", generation, " of set ",
                                                          set_key, " was aborted")));
  }
}

void NcclTransport::AbortProcess(int32_t process, uint64_t through_epoch, const std::string& why) {
  for (const auto& entry : entries_.All([&](uint64_t epoch, const Entry&e) {
         return epoch <= through_epoch &&
                std::binary_search(e.processes.begin(), e.processes.end(), process);
       })) {
    Interrupt(*entry, absl::UnavailableError(why));
  }
}

bool NcclTransport::Connected(const TransportGroupKey& key) const {
  std::shared_ptr<Entry> entry = entries_.Find(key.epoch, key.Name());
  if (entry == nullptr || !entry->mu.TryLock()) return false;
  const bool connected = !entry->failed && !entry->comms.empty();
  entry->mu.Unlock();
  return connected;
}

// Their communicators are aborted as the last holder lets go.
void NcclTransport::DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept) {
  entries_.DropEpochsBefore(epoch, kept);
}

size_t NcclTransport::connected_groups() const {
  size_t n = 0;
  for (const auto& entry : entries_.All()) {
    if (entry->mu.TryLock()) {
      n += !entry->failed && !entry->comms.empty() ? 1 : 0;
      entry->mu.Unlock();
    }
  }
  return n;
}

PLACEMENT_REGISTER_TRANSPORT(nccl, "nccl collectives between GPU daemons (experimental)",
                             &NcclTransport::Create);

}  // namespace placement::server

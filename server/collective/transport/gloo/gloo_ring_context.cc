#include "server/collective/transport/gloo/gloo_ring_context.h"

#include <gloo/transport/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/collective/transport/gloo/gloo_support.h"
#include "server/collective/transport/gloo/recursive_doubling.h"

namespace placement::server {
namespace {

std::string RingKey(const std::string& prefix, int rank) {
  return absl::StrCat(prefix, "/ring/", rank);
}

// A rank's published value: per pair, the peer rank (int32), the address's
// length (uint32) and its bytes -- host byte order, as Gloo's own address
// bytes are.
void AppendAddress(std::string& value, int32_t peer, const std::vector<char>& address) {
  const uint32_t length = static_cast<uint32_t>(address.size());
  value.append(reinterpret_cast<const char*>(&peer), sizeof(peer));
  value.append(reinterpret_cast<const char*>(&length), sizeof(length));
  value.append(address.data(), address.size());
}

// The address `value` lists for `peer`; UNAVAILABLE when it lists none (or
// is cut short).
absl::StatusOr<std::vector<char>> AddressFor(const std::string& value, int32_t peer) {
  size_t at = 0;
  while (value.size() - at >= sizeof(int32_t) + sizeof(uint32_t)) {
    int32_t rank = 0;
    uint32_t length = 0;
    std::memcpy(&rank, value.data() + at, sizeof(rank));
    std::memcpy(&length, value.data() + at + sizeof(rank), sizeof(length));
    at += sizeof(rank) + sizeof(length);
    if (value.size() - at < length) break;
    if (rank == peer) return std::vector<char>(value.begin() + at, value.begin() + at + length);
    at += length;
  }
  return absl::UnavailableError(absl::StrCat("no address for rank ", peer));
}

}  // namespace

std::vector<int> GlooRingContext::Neighbours(int rank, int size) {
  std::vector<int> neighbours = RecursiveDoublingPartners(rank, size);
  neighbours.push_back((rank + size - 1) % size);
  neighbours.push_back((rank + 1) % size);
  std::sort(neighbours.begin(), neighbours.end());
  neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
  neighbours.erase(std::remove(neighbours.begin(), neighbours.end(), rank), neighbours.end());
  return neighbours;
}

absl::StatusOr<std::shared_ptr<gloo::Context>> GlooRingContext::Connect(
    RendezvousStore& store, const std::string& prefix, int rank, int size,
    std::shared_ptr<gloo::transport::Device> device, absl::Duration budget,
    RendezvousAbort* abort) {
  const auto aborted = [&](absl::Status s) {
    if (abort != nullptr && !abort->status().ok()) return abort->status();
    return s;
  };
  try {
    auto context = std::make_shared<GlooRingContext>(rank, size);
    if (absl::Status s = context->ConnectThrowing(store, prefix, std::move(device), budget, abort);
        !s.ok()) {
      return aborted(std::move(s));
    }
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    // A partly connected context is gone here: its pairs closed. An abort
    // says why in its own words (Gloo's are those of the closed pair).
    return aborted(GlooErrorStatus(
        absl::StrCat("connecting Gloo rank ", rank, " to its neighbours"), e.what()));
  }
}

absl::Status GlooRingContext::ConnectThrowing(RendezvousStore& store, const std::string& prefix,
                                              std::shared_ptr<gloo::transport::Device> device,
                                              absl::Duration budget, RendezvousAbort* abort) {
  const absl::Time deadline = absl::Now() + budget;
  // Gloo waits up to 5x the pair's timeout for a connection, and only once
  // the peer published its key (it is live and connecting then): a fifth of
  // the budget bounds each pair's wait by `budget`.
  setTimeout(GlooMilliseconds(budget / 5));
  // The device's context (its pairs connect within this timeout), made
  // abortable (abortable_transport_context.h).
  std::shared_ptr<gloo::transport::Context> own = device->createContext(rank, size);
  own->setTimeout(getTimeout());
  auto transport = std::make_shared<AbortableTransportContext>(std::move(own));
  const std::vector<int> neighbours = Neighbours(rank, size);
  // Every pair listens from its creation, so a neighbour may connect to it
  // as soon as it is published.
  std::string mine;
  for (int peer : neighbours) {
    AppendAddress(mine, peer, transport->createPair(peer)->address().bytes());
  }
  // From here an abort closes the pairs: a connect waiting on one (for a
  // neighbour that published and then died or went silent) throws. Not
  // before: the abort walks the pairs, which must all exist by then.
  if (abort != nullptr && !abort->OnAbort([transport](const absl::Status& why) {
        transport->Abort(std::string(why.message()));
      })) {
    return abort->status();  // aborted (End comes only after Connect returns)
  }
  if (absl::Status s = store.Set(RingKey(prefix, rank), mine); !s.ok()) return s;
  std::vector<std::vector<char>> addresses;
  for (int peer : neighbours) {
    absl::StatusOr<std::string> theirs =
        store.Get(RingKey(prefix, peer), std::max(absl::ZeroDuration(), deadline - absl::Now()));
    if (!theirs.ok()) return theirs.status();
    absl::StatusOr<std::vector<char>> address = AddressFor(*theirs, rank);
    if (!address.ok()) {
      return absl::UnavailableError(absl::StrCat("the ring rendezvous key of Gloo rank ", peer,
                                                 " has ", address.status().message()));
    }
    addresses.push_back(*std::move(address));
  }
  // In ascending peer order, as Gloo's full mesh: the side of a pair that
  // listens waits until its peer reaches that pair's connect (the
  // connecting side waits for nobody). With every rank going up its peers
  // those waits form no cycle: a rank p that r waits on is still at a peer
  // below r, so along a chain of waits r -> p -> q -> ... every second rank
  // is lower, and the chain cannot return to r.
  for (size_t i = 0; i < neighbours.size(); ++i) {
    transport->getPair(neighbours[i])->connect(addresses[i]);
  }
  device_ = std::move(device);
  transportContext_ = std::move(transport);
  return absl::OkStatus();
}

bool GlooRingContext::Abort(const std::string& why) {
  // transportContext_ is the AbortableTransportContext Connect made.
  if (transportContext_ == nullptr) return false;
  std::static_pointer_cast<AbortableTransportContext>(transportContext_)->Abort(why);
  return true;
}

// RingBroadcast's acknowledgement from the last rank to the root: a slot
// prefix outside Gloo's own (gloo/types.h, 0x01-0x08).
constexpr uint8_t kRingBroadcastAckSlotPrefix = 0x40;

void RingBroadcast(gloo::Context& context, int root, void* data, size_t bytes, uint32_t tag,
                   std::chrono::milliseconds timeout) {
  const int size = context.size;
  if (size == 1 || bytes == 0) return;
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t chunks = (bytes + kChunk - 1) / kChunk;
  const auto chunk_bytes = [&](size_t c) { return std::min(kChunk, bytes - c * kChunk); };
  const int right = (context.rank + 1) % size;
  const int left = (context.rank + size - 1) % size;
  // The last rank before the root (in ring order) only receives.
  const bool forwards = right != root;
  const uint64_t slot = gloo::Slot::build(gloo::kBroadcastSlotPrefix, tag);
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer = context.createUnboundBuffer(data, bytes);
  // The last rank, root - 1 (the root's ring neighbour), tells the root it
  // has every byte, and the root returns only then: a root that succeeds
  // has delivered to every rank, and one whose delivery broke downstream
  // fails (the failing rank's connections close) rather than returning
  // first. One byte on a slot of its own; the root posts its receive before
  // sending, so the byte goes as soon as the last rank has the data.
  const uint64_t ack_slot = gloo::Slot::build(kRingBroadcastAckSlotPrefix, tag);
  char ack = 0;
  std::unique_ptr<gloo::transport::UnboundBuffer> ack_buffer;
  if (context.rank == root || !forwards) ack_buffer = context.createUnboundBuffer(&ack, 1);
  constexpr const char* kWhat = "ring broadcast";
  if (context.rank == root) {
    ack_buffer->recv(left, ack_slot);
    for (size_t c = 0; c < chunks; ++c) buffer->send(right, slot, c * kChunk, chunk_bytes(c));
  } else {
    // Two receives outstanding: the next chunk arrives while this one is
    // forwarded. A pair matches one slot's sends and receives in the order
    // they were posted, so the c-th completion is chunk c.
    constexpr size_t kInFlight = 2;
    for (size_t c = 0; c < std::min(chunks, kInFlight); ++c) {
      buffer->recv(left, slot, c * kChunk, chunk_bytes(c));
    }
    for (size_t c = 0; c < chunks; ++c) {
      WaitRecvOrThrow(*buffer, timeout, kWhat);
      if (forwards) buffer->send(right, slot, c * kChunk, chunk_bytes(c));
      if (c + kInFlight < chunks) {
        buffer->recv(left, slot, (c + kInFlight) * kChunk, chunk_bytes(c + kInFlight));
      }
    }
  }
  if (context.rank == root || forwards) {
    for (size_t c = 0; c < chunks; ++c) WaitSendOrThrow(*buffer, timeout, kWhat);
  }
  if (!forwards) {
    ack = 1;
    ack_buffer->send(root, ack_slot);
    WaitSendOrThrow(*ack_buffer, timeout, kWhat);
  } else if (context.rank == root) {
    WaitRecvOrThrow(*ack_buffer, timeout, kWhat);
  }
}

}  // namespace placement::server

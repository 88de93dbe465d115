#include "server/collective/transport/gloo/recursive_doubling.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "server/collective/transport/gloo/gloo_support.h"

namespace placement::server {
namespace {

// The largest power of two <= size (size >= 1).
int CoreSize(int size) {
  int p = 1;
  while (p * 2 <= size) p *= 2;
  return p;
}

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

void WaitSend(Buffer& buffer, std::chrono::milliseconds timeout) {
  WaitSendOrThrow(*buffer, timeout, "recursive doubling");
}
void WaitRecv(Buffer& buffer, std::chrono::milliseconds timeout) {
  WaitRecvOrThrow(*buffer, timeout, "recursive doubling");
}

}  // namespace

std::vector<int> RecursiveDoublingPartners(int rank, int size) {
  const int core = CoreSize(size);
  std::vector<int> partners;
  if (rank >= core) {
    partners.push_back(rank - core);
    return partners;
  }
  for (int m = 1; m < core; m *= 2) partners.push_back(rank ^ m);
  if (rank + core < size) partners.push_back(rank + core);
  std::sort(partners.begin(), partners.end());
  return partners;
}

void RecursiveDoublingAllReduce(gloo::Context& context, void* data, size_t count,
                                size_t element_bytes, const PairwiseReduce& reduce, uint32_t tag,
                                std::chrono::milliseconds timeout) {
  const int size = context.size;
  const int rank = context.rank;
  const size_t bytes = count * element_bytes;
  if (size == 1 || bytes == 0) return;
  const int core = CoreSize(size);
  const uint64_t slot = gloo::Slot::build(gloo::kAllreduceSlotPrefix, tag);
  Buffer mine = context.createUnboundBuffer(data, bytes);
  if (rank >= core) {  // an extra: contribute, then receive the result
    mine->send(rank - core, slot);
    WaitSend(mine, timeout);
    mine->recv(rank - core, slot);
    WaitRecv(mine, timeout);
    return;
  }
  // The partner's half, in a buffer the thread keeps (at most
  // kRecursiveDoublingMaxBytes where the transport chooses this algorithm):
  // no allocation per call.
  thread_local std::vector<char> scratch_buffer;
  if (scratch_buffer.size() < bytes) scratch_buffer.resize(bytes);
  char* const scratch = scratch_buffer.data();
  Buffer theirs = context.createUnboundBuffer(scratch, bytes);
  const bool has_extra = rank + core < size;
  if (has_extra) {
    theirs->recv(rank + core, slot);
    WaitRecv(theirs, timeout);
    reduce(data, data, scratch, count);
  }
  for (int m = 1; m < core; m *= 2) {
    const int partner = rank ^ m;
    theirs->recv(partner, slot);
    mine->send(partner, slot);
    WaitRecv(theirs, timeout);
    WaitSend(mine, timeout);  // `data` is read by the send until here
    if (partner < rank) {
      reduce(data, scratch, data, count);
    } else {
      reduce(data, data, scratch, count);
    }
  }
  if (has_extra) {
    mine->send(rank + core, slot);
    WaitSend(mine, timeout);
  }
}

void RecursiveDoublingAllGather(gloo::Context& context, const void* block, size_t block_bytes,
                                void* out, uint32_t tag, std::chrono::milliseconds timeout) {
  char* const own = static_cast<char*>(out) + static_cast<size_t>(context.rank) * block_bytes;
  if (own != block) std::memmove(own, block, block_bytes);
  RecursiveDoublingAllGatherV(context, out,
                              std::vector<size_t>(static_cast<size_t>(context.size), block_bytes),
                              tag, timeout);
}

void RecursiveDoublingAllGatherV(gloo::Context& context, void* out,
                                 const std::vector<size_t>& bytes_per_rank, uint32_t tag,
                                 std::chrono::milliseconds timeout) {
  const int size = context.size;
  const int rank = context.rank;
  std::vector<size_t> offset(static_cast<size_t>(size) + 1, 0);
  for (int r = 0; r < size; ++r) offset[r + 1] = offset[r] + bytes_per_rank[r];
  const size_t total = offset[size];
  if (size == 1 || total == 0) return;
  const int core = CoreSize(size);
  const uint64_t slot = gloo::Slot::build(gloo::kAllgatherSlotPrefix, tag);
  Buffer buffer = context.createUnboundBuffer(out, total);
  // The bytes of ranks [first, end), when there are any; both sides of a
  // pair skip the same empty runs.
  const auto run = [&](int first, int end, auto&& fn) {
    if (first < end && offset[end] > offset[first]) fn(offset[first], offset[end] - offset[first]);
  };
  if (rank >= core) {  // an extra: hand its block over, receive them all
    run(rank, rank + 1, [&](size_t at, size_t n) {
      buffer->send(rank - core, slot, at, n);
      WaitSend(buffer, timeout);
    });
    buffer->recv(rank - core, slot, 0, total);
    WaitRecv(buffer, timeout);
    return;
  }
  const bool has_extra = rank + core < size;
  if (has_extra) {
    run(rank + core, rank + core + 1, [&](size_t at, size_t n) {
      buffer->recv(rank + core, slot, at, n);
      WaitRecv(buffer, timeout);
    });
  }
  // The blocks of core ranks [base, base + m) and of their extras: at most
  // two runs of the gathered layout.
  const auto runs = [&](int base, int m, auto&& fn) {
    run(base, base + m, fn);
    run(base + core, std::min(base + m + core, size), fn);
  };
  for (int m = 1; m < core; m *= 2) {
    const int partner = rank ^ m;
    const int mine_base = rank & ~(m - 1);
    const int their_base = partner & ~(m - 1);
    // A pair matches one slot's sends and receives in posting order, and
    // both sides post their runs in the same order.
    int receives = 0;
    int sends = 0;
    runs(their_base, m, [&](size_t at, size_t n) {
      buffer->recv(partner, slot, at, n);
      ++receives;
    });
    runs(mine_base, m, [&](size_t at, size_t n) {
      buffer->send(partner, slot, at, n);
      ++sends;
    });
    for (int i = 0; i < receives; ++i) WaitRecv(buffer, timeout);
    for (int i = 0; i < sends; ++i) WaitSend(buffer, timeout);
  }
  if (has_extra) {
    buffer->send(rank + core, slot, 0, total);
    WaitSend(buffer, timeout);
  }
}

void RecursiveDoublingBroadcast(gloo::Context& context, int root, void* data, size_t bytes,
                                uint32_t tag, std::chrono::milliseconds timeout) {
  if (context.rank != root) std::memset(data, 0, bytes);
  const PairwiseReduce bitwise_or = [](void* out, const void* a, const void* b, size_t n) {
    auto* o = static_cast<unsigned char*>(out);
    const auto* x = static_cast<const unsigned char*>(a);
    const auto* y = static_cast<const unsigned char*>(b);
    for (size_t i = 0; i < n; ++i) o[i] = static_cast<unsigned char>(x[i] | y[i]);
  };
  RecursiveDoublingAllReduce(context, data, bytes, 1, bitwise_or, tag, timeout);
}

}  // namespace placement::server

#include "server/collective/transport/gloo/recursive_doubling.h"

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

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
  if (!buffer->waitSend(timeout)) throw gloo::IoException("recursive doubling: send aborted");
}
void WaitRecv(Buffer& buffer, std::chrono::milliseconds timeout) {
  if (!buffer->waitRecv(timeout)) throw gloo::IoException("recursive doubling: receive aborted");
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
  std::unique_ptr<char[]> scratch(new char[bytes]);
  Buffer theirs = context.createUnboundBuffer(scratch.get(), bytes);
  const bool has_extra = rank + core < size;
  if (has_extra) {
    theirs->recv(rank + core, slot);
    WaitRecv(theirs, timeout);
    reduce(data, data, scratch.get(), count);
  }
  for (int m = 1; m < core; m *= 2) {
    const int partner = rank ^ m;
    theirs->recv(partner, slot);
    mine->send(partner, slot);
    WaitRecv(theirs, timeout);
    WaitSend(mine, timeout);  // `data` is read by the send until here
    if (partner < rank) {
      reduce(data, scratch.get(), data, count);
    } else {
      reduce(data, data, scratch.get(), count);
    }
  }
  if (has_extra) {
    mine->send(rank + core, slot);
    WaitSend(mine, timeout);
  }
}

void RecursiveDoublingAllGather(gloo::Context& context, const void* block, size_t block_bytes,
                                void* out, uint32_t tag, std::chrono::milliseconds timeout) {
  const int size = context.size;
  const int rank = context.rank;
  char* const gathered = static_cast<char*>(out);
  const size_t total = static_cast<size_t>(size) * block_bytes;
  char* const own = gathered + static_cast<size_t>(rank) * block_bytes;
  if (own != block) std::memmove(own, block, block_bytes);
  if (size == 1 || block_bytes == 0) return;
  const int core = CoreSize(size);
  const uint64_t slot = gloo::Slot::build(gloo::kAllgatherSlotPrefix, tag);
  Buffer buffer = context.createUnboundBuffer(gathered, total);
  if (rank >= core) {  // an extra: hand its block over, receive them all
    buffer->send(rank - core, slot, static_cast<size_t>(rank) * block_bytes, block_bytes);
    WaitSend(buffer, timeout);
    buffer->recv(rank - core, slot, 0, total);
    WaitRecv(buffer, timeout);
    return;
  }
  const bool has_extra = rank + core < size;
  if (has_extra) {
    buffer->recv(rank + core, slot, static_cast<size_t>(rank + core) * block_bytes, block_bytes);
    WaitRecv(buffer, timeout);
  }
  // The blocks of core ranks [base, base + m) and of their extras, as at
  // most two runs of the gathered layout.
  const auto runs = [&](int base, int m, auto&& fn) {
    fn(static_cast<size_t>(base) * block_bytes, static_cast<size_t>(m) * block_bytes);
    const int first_extra = base + core;
    const int end_extra = std::min(base + m + core, size);
    if (first_extra < end_extra) {
      fn(static_cast<size_t>(first_extra) * block_bytes,
         static_cast<size_t>(end_extra - first_extra) * block_bytes);
    }
  };
  for (int m = 1; m < core; m *= 2) {
    const int partner = rank ^ m;
    const int mine_base = rank & ~(m - 1);
    const int their_base = partner & ~(m - 1);
    // A pair matches one slot's sends and receives in posting order, and
    // both sides post their runs in the same order.
    runs(their_base, m, [&](size_t at, size_t n) { buffer->recv(partner, slot, at, n); });
    runs(mine_base, m, [&](size_t at, size_t n) { buffer->send(partner, slot, at, n); });
    runs(their_base, m, [&](size_t, size_t) { WaitRecv(buffer, timeout); });
    runs(mine_base, m, [&](size_t, size_t) { WaitSend(buffer, timeout); });
  }
  if (has_extra) {
    buffer->send(rank + core, slot, 0, total);
    WaitSend(buffer, timeout);
  }
}

}  // namespace placement::server

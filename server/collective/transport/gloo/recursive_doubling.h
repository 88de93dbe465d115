// Recursive doubling over a Gloo context: the latency-bound algorithms for
// small payloads, in log2(size) exchanges where Gloo's ring takes
// 2 (size - 1) steps (all-reduce) or size - 1 (all-gather). Over many
// daemons on few cores each ring step waits for the next process to be
// scheduled, so a 4 KiB all-reduce over 128 daemons is ~254 wake-ups on
// the ring and ~9 here.
//
// Shape. Let P be the largest power of two <= size. Ranks below P are the
// core; a rank e >= P is an extra, paired with core rank e - P. An extra
// hands its contribution to its core partner first and gets the result
// back last; the core exchanges with rank XOR m for m = 1, 2, 4, ... < P.
// RecursiveDoublingPartners lists exactly those pairs; a context must hold
// them (GlooRingContext connects them beside the ring neighbours).
//
// Results are bit-identical on every rank: each exchange combines the
// lower rank's partial with the higher rank's, in that order, on both
// sides (and an extra's contribution comes after its core partner's).
//
// Failures throw Gloo's exceptions (gloo::IoException: a timeout or a lost
// peer), as Gloo's own collectives do. Slots are Gloo's all-reduce slots
// (the all-reduce and the broadcast) and all-gather slots for `tag`: one
// operation per tag at a time.
//
// Thread-compatible: one operation at a time per context.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_RECURSIVE_DOUBLING_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_RECURSIVE_DOUBLING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace gloo {
class Context;
}  // namespace gloo

namespace placement::server {

// Up to this many bytes per rank, the Gloo transport all-reduces and
// broadcasts by recursive doubling, beyond it on the ring (which moves
// 2 (size - 1) / size of the bytes per rank where recursive doubling moves
// log2(P) times them). All-gathers gather by recursive doubling over a
// power-of-two number of processes, or with blocks up to this size (the
// extra ranks beyond the largest power of two receive everything once
// more), on the ring otherwise; the call check always does. Measured in
// docs/cluster.md ("Recursive doubling").
inline constexpr size_t kRecursiveDoublingMaxBytes = size_t{256} << 10;

// The ranks `rank` exchanges with in a recursive-doubling operation over
// `size` ranks, ascending, without `rank`: its extra or core partner, and
// for a core rank rank XOR m for every power of two m < P. Symmetric.
// REQUIRES: 0 <= rank < size.
std::vector<int> RecursiveDoublingPartners(int rank, int size);

// out = a (+) b over `count` elements (Gloo's reduce function shape); `out`
// may be `a` or `b`.
using PairwiseReduce = std::function<void(void* out, const void* a, const void* b, size_t count)>;

// All-reduces `count` elements of `element_bytes` each at `data` in place.
// REQUIRES: every rank calls it with the same count, element size and tag;
// the context holds RecursiveDoublingPartners' pairs.
void RecursiveDoublingAllReduce(gloo::Context& context, void* data, size_t count,
                                size_t element_bytes, const PairwiseReduce& reduce, uint32_t tag,
                                std::chrono::milliseconds timeout);

// Gathers `block_bytes` from every rank: out (size * block_bytes) holds rank
// r's block at r * block_bytes. `block` may lie inside `out` at this rank's
// place. REQUIRES: as RecursiveDoublingAllReduce, with the same block size.
void RecursiveDoublingAllGather(gloo::Context& context, const void* block, size_t block_bytes,
                                void* out, uint32_t tag, std::chrono::milliseconds timeout);

// The same with blocks of different sizes (Gloo's allgatherv): rank r's
// bytes_per_rank[r] lie at the sum of the sizes before it, and this rank's
// block is in place in `out` already. Every rank receives the others'
// bytes once, as on the ring, in log2(P) + 2 exchanges instead of size - 1.
// REQUIRES: every rank passes the same sizes and tag.
void RecursiveDoublingAllGatherV(gloo::Context& context, void* out,
                                 const std::vector<size_t>& bytes_per_rank, uint32_t tag,
                                 std::chrono::milliseconds timeout);

// Broadcasts `bytes` at `data` from rank `root`: a recursive-doubling
// bitwise OR of the root's bytes with everyone else's zeros (exact for any
// bytes; every rank's success shows that all took part, rank 0's
// included). Moves log2(P) times the bytes per rank, so it is for small
// payloads; RingBroadcast (gloo_ring_context.h) for large ones.
// REQUIRES: every rank calls it with the same root, size and tag.
void RecursiveDoublingBroadcast(gloo::Context& context, int root, void* data, size_t bytes,
                                uint32_t tag, std::chrono::milliseconds timeout);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_RECURSIVE_DOUBLING_H_

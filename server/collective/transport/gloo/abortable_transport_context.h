// AbortableTransportContext: a Gloo transport context (Gloo's TCP one, as
// the transport makes them) whose Abort ends every operation in flight on
// it, the ones Gloo itself leaves waiting included.
//
// Gloo's TCP pair, when its connection fails or a buffer times out
// (Pair::signalException in Debian's Gloo, 0.0~git20220518.5b14351),
// signals the unbound buffers that wait for their peer and the receives
// still queued, but not an unbound buffer whose bytes it is writing or
// reading at that moment: such a waitSend / waitRecv lasts until its own
// timeout (the whole operation's budget) although the pair is closed. A
// ring all-reduce of megabytes is almost always in that state, so a peer
// lost mid-transfer held its neighbours for the cluster's op timeout.
//
// This context delegates to the transport's own (pairs, buffers, the
// rendezvous all stay Gloo's) and hands out unbound buffers that delegate
// to Gloo's and stay registered while they live. Abort fails every pair as
// Gloo's own application timeout does, then ends the wait of every
// registered buffer (UnboundBuffer::abortWaitSend / abortWaitRecv). A wait
// that returns or begins after that, or that Gloo fails while the abort
// closes the pairs, throws gloo::IoException with the abort's message, so
// Gloo's algorithms unwind at once instead of going on with a step that
// did not happen. (It wraps rather than derives from
// Gloo's TCP context: Debian's package lacks a header that one includes.)
//
// Thread-safety: as Gloo's context (one operation at a time); Abort from
// any thread, any number of times (the first message stays).
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_ABORTABLE_TRANSPORT_CONTEXT_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_ABORTABLE_TRANSPORT_CONTEXT_H_

#include <gloo/transport/context.h>

#include <cstddef>
#include <memory>
#include <string>

namespace placement::server {

class AbortableWaits;

class AbortableTransportContext final : public gloo::transport::Context {
 public:
  // Over `inner`, a transport context of its device (same rank and size);
  // its timeout is this context's.
  explicit AbortableTransportContext(std::shared_ptr<gloo::transport::Context> inner);
  ~AbortableTransportContext() override;

  std::unique_ptr<gloo::transport::Pair>& getPair(int rank) override;
  std::unique_ptr<gloo::transport::Pair>& createPair(int rank) override;
  // One of `inner`'s unbound buffers over [ptr, ptr + size), that Abort
  // reaches.
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr,
                                                                      size_t size) override;

  // Fails every pair (their operations throw gloo::IoException; the peers
  // see the connection reset), then ends every wait on this context's
  // buffers, now and later, with gloo::IoException(`why`). The first call
  // does it; later ones return at once.
  void Abort(const std::string& why);

 private:
  const std::shared_ptr<gloo::transport::Context> inner_;
  const std::shared_ptr<AbortableWaits> waits_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_ABORTABLE_TRANSPORT_CONTEXT_H_

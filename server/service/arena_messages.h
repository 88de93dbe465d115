// ArenaMessages: a grpc::MessageAllocator that puts a unary callback call's
// request and response on one InlineArena (common/inline_arena.h), so
// parsing the request and building the response allocate nothing per
// submessage. For methods whose messages are small and many-fielded (the
// collectives' TensorInfo responses); a message past the inline block grows
// the arena as usual.
//
// Set with the generated SetMessageAllocatorFor_<Method>; the allocator must
// outlive the service's calls (it is stateless; the holders free
// themselves when gRPC releases them after the reactor's OnDone).
#ifndef PLACEMENT_SERVER_SERVICE_ARENA_MESSAGES_H_
#define PLACEMENT_SERVER_SERVICE_ARENA_MESSAGES_H_

#include "common/inline_arena.h"
#include "grpcpp/support/message_allocator.h"

namespace placement::server {

template <typename Request, typename Response>
class ArenaMessages final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder; }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() {
      this->set_request(arena_.Create<Request>());
      this->set_response(arena_.Create<Response>());
    }
    void Release() override { delete this; }

   private:
    InlineArena arena_;
  };
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_ARENA_MESSAGES_H_

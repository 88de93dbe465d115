// InlineArena: a protobuf Arena whose first block lives inside the object,
// for the messages of one RPC. A response of a few dozen submessages (a
// TensorInfo with its shards' ranges) then costs no heap allocation while it
// fits in `kInlineBytes` and one per further block beyond, and is freed at
// once instead of by a destructor walk over every submessage.
//
// Not thread-safe for concurrent creation; messages made on it live exactly
// as long as the InlineArena. Neither copyable nor movable (the arena points
// into the object).
#ifndef PLACEMENT_COMMON_INLINE_ARENA_H_
#define PLACEMENT_COMMON_INLINE_ARENA_H_

#include <cstddef>

#include "google/protobuf/arena.h"

namespace placement {

class InlineArena {
 public:
  // Large enough for a collective's response over 8 shards and its request
  // (2,176 bytes of arena for a 1 KiB all-reduce's over 8 CPU devices).
  static constexpr size_t kInlineBytes = 4096;

  InlineArena() : arena_(Options(block_)) {}
  InlineArena(const InlineArena&) = delete;
  InlineArena& operator=(const InlineArena&) = delete;

  // A new, empty message owned by the arena.
  template <typename Message>
  Message* Create() {
    return google::protobuf::Arena::CreateMessage<Message>(&arena_);
  }

 private:
  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kInlineBytes;
    return options;
  }

  alignas(std::max_align_t) char block_[kInlineBytes];
  google::protobuf::Arena arena_;
};

}  // namespace placement

#endif  // PLACEMENT_COMMON_INLINE_ARENA_H_

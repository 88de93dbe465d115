// The agreement round of a call-ordered (multi-controller) collective
// (CrossProcessTicket::call_ordered): what every process of the set says
// about its n-th call, exchanged on the cross-process transport instead of
// at a coordinator barrier, and what each process concludes from all of it.
//
// One round per call, one small all-gather (CrossProcessTransport::Exchange)
// on the set's group before the items run: the call's number, a digest of
// its request and this part's status so far (a part that failed before the
// collective -- a result it could not allocate -- says so here, and nobody
// runs the items; so does a part whose previous call failed after its
// round). Every process concludes the same way from the same words
// (JudgeRound).
//
// Without the round (ClusterEngineOptions::check_calls off, for a call whose
// every spanning group holds the whole set -- see
// CrossProcessTicket::partial_groups), a part that fails first leaves a
// forfeit notice -- the same word, with its process -- in the rendezvous
// store and closes the set's connections; the others' operations fail at
// once and read the notice to say who failed.
//
// Pure functions; thread-compatible.
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CALL_AGREEMENT_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CALL_AGREEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placement::server {

// One process's word in a round.
struct CallWord {
  uint64_t call = 0;   // the call's number in its set (ticket)
  std::string digest;  // at most 16 bytes are carried
  absl::Status status;
};

// Every block has this size; a status message longer than fits is cut
// (marked "...").
inline constexpr size_t kCallWordBytes = 512;

std::string EncodeCallWord(const CallWord& word);
// INTERNAL for a block that is not kCallWordBytes long or is malformed.
absl::StatusOr<CallWord> DecodeCallWord(absl::string_view block);

// What the process at `self` (an index into `processes`, which `words`
// follows) concludes from a round; `set` names the set for messages
// ("set mc/0,1"):
//   its own failure, unless it is only a consequence (UNAVAILABLE,
//     DEADLINE_EXCEEDED, CANCELLED, ABORTED) of another part's failure;
//   ABORTED "process P failed its part: CODE: message" naming the first
//     other process whose failure is a cause (else the first that failed);
//   INVALID_ARGUMENT "process A and process B asked for different
//     collectives as call N of set S ..." when the numbers or digests differ;
//   else OK.
absl::Status JudgeRound(const std::vector<int32_t>& processes, size_t self,
                        const std::vector<CallWord>& words, absl::string_view set);

// The error a process reports when `process`'s part failed with `status`:
// ABORTED "process P failed its part: CODE: message".
absl::Status PartFailedError(int32_t process, const absl::Status& status);

// A forfeit notice: `process` failed its part of `word.call` with
// `word.status`. Decode: INTERNAL for a malformed notice.
std::string EncodeForfeit(int32_t process, const CallWord& word);
absl::StatusOr<std::pair<int32_t, CallWord>> DecodeForfeit(absl::string_view notice);

// The codes that report another part's failure rather than a cause.
bool IsConsequenceCode(absl::StatusCode code);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CALL_AGREEMENT_H_

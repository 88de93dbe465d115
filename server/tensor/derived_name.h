// The name of a tensor an operation derives from another one (a reshard, a
// collective): "<source name>:<operation>", so that
//   batch/images  --all_reduce-->  batch/images:all_reduce
// and a name keeps saying where a result came from. Rules (docs/api/tensors.md
// "Names"):
//   - a name the caller gives is used as it is;
//   - a result that replaces its donated source takes over the source's name;
//   - a result beside its source gets "<source>:<operation>" (the source's
//     name cut from the end so that the whole stays within
//     kMaxTensorNameLength); an unnamed source gives an unnamed result.
//
// Pure; thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_DERIVED_NAME_H_
#define PLACEMENT_SERVER_TENSOR_DERIVED_NAME_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/tensor/label_limits.h"

namespace placement::server {

// `given` when not empty; else `source` when `replaces_source`; else
// "<source>:<operation>" ("" for an unnamed source).
inline std::string DerivedTensorName(absl::string_view given, absl::string_view source,
                                     absl::string_view operation, bool replaces_source) {
  if (!given.empty()) return std::string(given);
  if (replaces_source || source.empty()) return std::string(source);
  const size_t room = kMaxTensorNameLength - operation.size() - 1;
  return absl::StrCat(source.substr(0, room), ":", operation);
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_DERIVED_NAME_H_

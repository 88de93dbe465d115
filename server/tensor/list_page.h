// One page of a tensor listing (AIP-158 pagination): the listing is sorted by
// (name, id); a page token is the (name, id) of the last tensor of the
// previous page, encoded, so a page starts strictly after it and tensors
// created or deleted between calls neither repeat nor shift others.
#ifndef PLACEMENT_SERVER_TENSOR_LIST_PAGE_H_
#define PLACEMENT_SERVER_TENSOR_LIST_PAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/tensor.h"

namespace placement::server {

inline constexpr int kDefaultListPageSize = 1000;
inline constexpr int kMaxListPageSize = 10000;

struct TensorPage {
  std::vector<std::shared_ptr<const Tensor>> tensors;
  std::string next_page_token;  // empty on the last page
};

// One page of any listing sorted by a unique string key (mesh ids, session
// ids): [begin, end) of the sorted keys and the token of the next page.
struct KeyPage {
  size_t begin = 0;
  size_t end = 0;
  std::string next_page_token;  // empty on the last page
};
// The same errors as PageOf.
absl::StatusOr<KeyPage> PageOfKeys(const std::vector<std::string>& sorted_keys, int page_size,
                                   const std::string& page_token);

// `sorted` must be sorted by (name, id) (TensorStore::List order).
// INVALID_ARGUMENT: "page_size is -1; must be >= 0", or a page_token this
// daemon did not issue ("page_token is malformed").
absl::StatusOr<TensorPage> PageOf(std::vector<std::shared_ptr<const Tensor>> sorted, int page_size,
                                  const std::string& page_token);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_LIST_PAGE_H_

#include "server/tensor/list_page.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

constexpr char kTokenPrefix[] = "v1:";

std::string EncodeToken(const Tensor& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(kTokenPrefix, last.name, std::string(1, '\0'), last.id));
}

absl::Status Malformed() {
  return absl::InvalidArgumentError(
      "page_token is malformed; pass a next_page_token from an earlier List response");
}

absl::StatusOr<size_t> PageSize(int page_size) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size is ", page_size, "; must be >= 0 (0 selects ", kDefaultListPageSize, ")"));
  }
  return page_size == 0 ? kDefaultListPageSize
                        : static_cast<size_t>(std::min(page_size, kMaxListPageSize));
}

}  // namespace

absl::StatusOr<KeyPage> PageOfKeys(const std::vector<std::string>& sorted_keys, int page_size,
                                   const std::string& page_token) {
  absl::StatusOr<size_t> size = PageSize(page_size);
  if (!size.ok()) return size.status();
  KeyPage page;
  if (!page_token.empty()) {
    std::string decoded;
    if (page_token.size() > 4096 || !absl::WebSafeBase64Unescape(page_token, &decoded) ||
        decoded.rfind(kTokenPrefix, 0) != 0) {
      return Malformed();
    }
    const std::string after = decoded.substr(sizeof(kTokenPrefix) - 1);
    page.begin =
        std::upper_bound(sorted_keys.begin(), sorted_keys.end(), after) - sorted_keys.begin();
  }
  page.end = std::min(sorted_keys.size(), page.begin + *size);
  if (page.end < sorted_keys.size()) {
    page.next_page_token =
        absl::WebSafeBase64Escape(absl::StrCat(kTokenPrefix, sorted_keys[page.end - 1]));
  }
  return page;
}

absl::StatusOr<TensorPage> PageOf(std::vector<std::shared_ptr<const Tensor>> sorted, int page_size,
                                  const std::string& page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size is ", page_size, "; must be >= 0 (0 selects ", kDefaultListPageSize, ")"));
  }
  const size_t size = page_size == 0 ? kDefaultListPageSize
                                     : static_cast<size_t>(std::min(page_size, kMaxListPageSize));
  size_t begin = 0;
  if (!page_token.empty()) {
    std::string decoded;
    if (page_token.size() > 4096 || !absl::WebSafeBase64Unescape(page_token, &decoded) ||
        decoded.rfind(kTokenPrefix, 0) != 0) {
      return absl::InvalidArgumentError(
          "page_token is malformed; pass a next_page_token from an earlier List response");
    }
    decoded.erase(0, sizeof(kTokenPrefix) - 1);
    const size_t zero = decoded.find('\0');
    if (zero == std::string::npos) {
      return absl::InvalidArgumentError(
          "page_token is malformed; pass a next_page_token from an earlier List response");
    }
    const std::pair<std::string, std::string> after(decoded.substr(0, zero),
                                                    decoded.substr(zero + 1));
    begin = std::upper_bound(sorted.begin(), sorted.end(), after,
                             [](const auto& key, const auto& tensor) {
                               return key < std::make_pair(tensor->name, tensor->id);
                             }) -
            sorted.begin();
  }
  TensorPage page;
  const size_t end = std::min(sorted.size(), begin + size);
  page.tensors.assign(std::make_move_iterator(sorted.begin() + begin),
                      std::make_move_iterator(sorted.begin() + end));
  if (end < sorted.size()) page.next_page_token = EncodeToken(*page.tensors.back());
  return page;
}

}  // namespace placement::server

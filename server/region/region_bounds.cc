#include "server/region/region_bounds.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

absl::Status CheckRegionSlice(absl::string_view field, absl::string_view region_id,
                              int64_t region_size, int64_t offset, int64_t size) {
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".offset must be >= 0, got ", offset));
  }
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".size must be >= 0, got ", size));
  }
  if (offset > region_size) {
    return absl::OutOfRangeError(absl::StrCat(field, ".offset ", offset,
                                              " is past the end of region ", region_id, " (",
                                              region_size, " bytes)"));
  }
  int64_t end = 0;
  if (__builtin_add_overflow(offset, size, &end)) {
    return absl::OutOfRangeError(absl::StrCat(field, ".offset ", offset, " + ", field, ".size ",
                                              size, " overflows int64; region ", region_id, " has ",
                                              region_size, " bytes"));
  }
  if (size > region_size - offset) {
    return absl::OutOfRangeError(absl::StrCat(field, ".offset ", offset, " + ", field, ".size ",
                                              size, " = ", end, " is past the end of region ",
                                              region_id, " (", region_size, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace placement::server

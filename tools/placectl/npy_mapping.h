// MappedNpy: a validated .npy file mapped read-only into memory, so its data
// can be handed to calls that take a whole array (UploadBatch) without a copy
// and without reading it all first: pages are read as the upload streams
// them. The same files and errors as NpyReader::Open (npy.h).
//
// Owns the mapping; not thread-safe.
#ifndef PLACEMENT_TOOLS_PLACECTL_NPY_MAPPING_H_
#define PLACEMENT_TOOLS_PLACECTL_NPY_MAPPING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tools/placectl/npy.h"

namespace placement::placectl {

class MappedNpy {
 public:
  // NOT_FOUND / INVALID_ARGUMENT as NpyReader::Open; INTERNAL when mmap fails.
  static absl::StatusOr<std::unique_ptr<MappedNpy>> Open(const std::string& path);
  ~MappedNpy();
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;

  const NpyHeader& header() const { return header_; }
  // The array's bytes (row-major, little-endian), valid while this lives.
  absl::Span<const uint8_t> data() const { return data_; }

 private:
  MappedNpy(NpyHeader header, void* base, size_t length, absl::Span<const uint8_t> data)
      : header_(std::move(header)), base_(base), length_(length), data_(data) {}
  NpyHeader header_;
  void* base_;
  size_t length_;
  absl::Span<const uint8_t> data_;
};

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_NPY_MAPPING_H_

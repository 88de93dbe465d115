// Reading and writing numpy .npy files (format versions 1.0, 2.0 and 3.0),
// streamed in chunks so files larger than memory pass through placectl.
//
// Supported element types (descr): '<f4' f32, '<f8' f64, '<f2' f16, '|i1'
// i8, '<i2' i16, '<i4' i32, '<i8' i64, '|u1' u8, '|b1' bool, and bf16 as
// '<V2' -- the descr numpy writes for ml_dtypes.bfloat16 arrays (np.save of a
// jnp/ml_dtypes bfloat16 array); read such a file back in Python with
// np.load(f).view(ml_dtypes.bfloat16). Byte order must be little-endian
// ('<', '|', or '=' on this little-endian host); C order only: a
// fortran_order file is INVALID_ARGUMENT. Every error names the file and
// what was found.
//
// NpyReader / NpyWriter own their file; not thread-safe.
#ifndef PLACEMENT_TOOLS_PLACECTL_NPY_H_
#define PLACEMENT_TOOLS_PLACECTL_NPY_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "placement/client/types.h"

namespace placement::placectl {

// "<f4", "|b1", "<V2" (bf16), ...; REQUIRES: a supported dtype.
std::string NpyDescr(client::DType dtype);
// Inverse of NpyDescr, plus '=' / '>' for one-byte types.
// INVALID_ARGUMENT naming `descr` and the supported set otherwise.
absl::StatusOr<client::DType> DTypeFromNpyDescr(absl::string_view descr);

struct NpyHeader {
  client::DType dtype = client::DType::kUnspecified;
  std::vector<int64_t> shape;
  int64_t data_bytes = 0;  // element size x elements
};

// The complete header block (magic, version, length, padded dict) for
// `dtype` and `shape`: version 1.0, or 2.0 when the dict needs it.
std::string EncodeNpyHeader(client::DType dtype, absl::Span<const int64_t> shape);
// Parses a header block at the start of `bytes`; `*header_size` receives
// its length. INVALID_ARGUMENT for a bad magic, version, dict, dtype or
// fortran order; OUT_OF_RANGE when `bytes` is shorter than the header.
absl::StatusOr<NpyHeader> DecodeNpyHeader(absl::string_view bytes, size_t* header_size);

class NpyReader {
 public:
  // Opens `path` and reads its header. NOT_FOUND when the file cannot be
  // opened; INVALID_ARGUMENT when it is not a supported .npy file or its size
  // does not match the header ("expected 4096 data bytes for f32[32,32],
  // the file holds 4000").
  static absl::StatusOr<std::unique_ptr<NpyReader>> Open(const std::string& path);
  ~NpyReader();

  const NpyHeader& header() const { return header_; }
  // Fills up to buffer.size() bytes of array data; 0 at the end.
  absl::StatusOr<size_t> Read(absl::Span<uint8_t> buffer);

 private:
  NpyReader(std::string path, std::FILE* file, NpyHeader header)
      : path_(std::move(path)), file_(file), header_(std::move(header)) {}
  std::string path_;
  std::FILE* file_;
  NpyHeader header_;
  int64_t remaining_ = 0;
};

class NpyWriter {
 public:
  // Creates (truncates) `path` and writes the header. PERMISSION_DENIED /
  // NOT_FOUND when it cannot be created.
  static absl::StatusOr<std::unique_ptr<NpyWriter>> Create(const std::string& path,
                                                           client::DType dtype,
                                                           absl::Span<const int64_t> shape);
  // Closes without Finish: the partial file is removed.
  ~NpyWriter();

  // INVALID_ARGUMENT when more bytes than the header promises arrive.
  absl::Status Write(absl::Span<const uint8_t> bytes);
  // INVALID_ARGUMENT when fewer bytes were written; flushes and closes.
  absl::Status Finish();

 private:
  NpyWriter(std::string path, std::FILE* file, int64_t expected)
      : path_(std::move(path)), file_(file), expected_(expected) {}
  std::string path_;
  std::FILE* file_;
  int64_t expected_;
  int64_t written_ = 0;
};

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_NPY_H_

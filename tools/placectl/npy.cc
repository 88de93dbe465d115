#include "tools/placectl/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "placement/client/tensors.h"

namespace placement::placectl {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr char kSupported[] = "<f4, <f8, <f2, |i1, <i2, <i4, <i8, |u1, |b1, <V2 (bf16)";

struct DescrEntry {
  client::DType dtype;
  char kind;
  int size;
};
constexpr DescrEntry kDescrs[] = {
    {client::DType::kF32, 'f', 4},  {client::DType::kF64, 'f', 8}, {client::DType::kF16, 'f', 2},
    {client::DType::kBF16, 'V', 2}, {client::DType::kI8, 'i', 1},  {client::DType::kI16, 'i', 2},
    {client::DType::kI32, 'i', 4},  {client::DType::kI64, 'i', 8}, {client::DType::kU8, 'u', 1},
    {client::DType::kBool, 'b', 1},
};

// A tiny parser for the header's Python dict literal:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class DictParser {
 public:
  explicit DictParser(absl::string_view text) : text_(text) {}

  absl::Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      if (!ParseString(&key)) return Error("expected a quoted key");
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') return Error("structured dtypes (a descr list) are not supported");
        if (!ParseString(descr)) return Error("'descr' must be a quoted string");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (text_.substr(pos_, 4) == "True") {
          *fortran = true;
          pos_ += 4;
        } else if (text_.substr(pos_, 5) == "False") {
          *fortran = false;
          pos_ += 5;
        } else {
          return Error("'fortran_order' must be True or False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        absl::Status s = ParseShape(shape);
        if (!s.ok()) return s;
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!have_descr || !have_fortran || !have_shape) {
      return Error("the header needs 'descr', 'fortran_order' and 'shape'");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("npy header ", what, " at offset ", pos_, " of \"", text_, "\""));
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ParseString(std::string* out) {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') return false;
    size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return false;
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }
  absl::Status ParseShape(std::vector<int64_t>* shape) {
    if (!Consume('(')) return Error("'shape' must be a tuple");
    size_t end = text_.find(')', pos_);
    if (end == absl::string_view::npos) return Error("unterminated 'shape' tuple");
    absl::string_view inner = text_.substr(pos_, end - pos_);
    shape->clear();
    for (absl::string_view piece : absl::StrSplit(inner, ',')) {
      piece = absl::StripAsciiWhitespace(piece);
      if (piece.empty()) continue;
      if (piece.back() == 'L') piece.remove_suffix(1);  // Python 2 longs
      int64_t d = 0;
      if (!absl::SimpleAtoi(piece, &d) || d < 0) {
        return Error(absl::StrCat("'shape' entry '", piece, "' is not a size"));
      }
      shape->push_back(d);
    }
    pos_ = end + 1;
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

std::string ShapeTuple(absl::Span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

uint32_t ReadLittleEndian(absl::string_view bytes) {
  uint32_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

}  // namespace

std::string NpyDescr(client::DType dtype) {
  for (const auto& e : kDescrs) {
    if (e.dtype == dtype)
      return absl::StrCat(e.size == 1 ? "|" : "<", std::string(1, e.kind), e.size);
  }
  return "";
}

absl::StatusOr<client::DType> DTypeFromNpyDescr(absl::string_view descr) {
  absl::string_view d = descr;
  if (d == "bfloat16") return client::DType::kBF16;
  if (d.size() >= 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    char order = d[0];
    char kind = d[1];
    int size = 0;
    if (absl::SimpleAtoi(d.substr(2), &size)) {
      for (const auto& e : kDescrs) {
        if (e.kind != kind || e.size != size) continue;
        if (order == '>' && size > 1) break;  // big-endian
        return e.dtype;
      }
    }
    if (order == '>') {
      return absl::InvalidArgumentError(absl::StrCat(
          "npy dtype '", descr, "' is big-endian; save it little-endian (arr.astype('<",
          std::string(1, kind), size, "')); supported: ", kSupported));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("npy dtype '", descr, "' is not supported; supported: ", kSupported));
}

std::string EncodeNpyHeader(client::DType dtype, absl::Span<const int64_t> shape) {
  std::string dict = absl::StrCat("{'descr': '", NpyDescr(dtype),
                                  "', 'fortran_order': False, 'shape': ", ShapeTuple(shape), ", }");
  // Pad with spaces and a final newline so the data starts 64-byte aligned.
  size_t prefix = kMagicSize + 2 + 2;
  int major = 1;
  if (dict.size() + 1 + 64 > 65535) {
    major = 2;
    prefix = kMagicSize + 2 + 4;
  }
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  uint32_t len = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + dict;
}

absl::StatusOr<NpyHeader> DecodeNpyHeader(absl::string_view bytes, size_t* header_size) {
  if (bytes.size() < kMagicSize + 2) {
    return absl::OutOfRangeError(absl::StrCat("npy header: need ", kMagicSize + 2,
                                              " bytes for the magic and version, have ",
                                              bytes.size()));
  }
  if (bytes.substr(0, kMagicSize) != absl::string_view(kMagic, kMagicSize)) {
    return absl::InvalidArgumentError("not a .npy file: the magic string \\x93NUMPY is missing");
  }
  int major = static_cast<uint8_t>(bytes[kMagicSize]);
  if (major < 1 || major > 3) {
    return absl::InvalidArgumentError(absl::StrCat("npy format version ", major, ".",
                                                   static_cast<int>(bytes[kMagicSize + 1]),
                                                   " is not supported (1.0, 2.0, 3.0 are)"));
  }
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t prefix = kMagicSize + 2 + len_bytes;
  if (bytes.size() < prefix) {
    return absl::OutOfRangeError(
        absl::StrCat("npy header: need ", prefix, " bytes, have ", bytes.size()));
  }
  size_t dict_len = ReadLittleEndian(bytes.substr(kMagicSize + 2, len_bytes));
  if (bytes.size() < prefix + dict_len) {
    return absl::OutOfRangeError(
        absl::StrCat("npy header: need ", prefix + dict_len, " bytes, have ", bytes.size()));
  }
  std::string descr;
  bool fortran = false;
  NpyHeader header;
  DictParser parser(absl::StripAsciiWhitespace(bytes.substr(prefix, dict_len)));
  absl::Status parsed = parser.Parse(&descr, &fortran, &header.shape);
  if (!parsed.ok()) return parsed;
  auto dtype = DTypeFromNpyDescr(descr);
  if (!dtype.ok()) return dtype.status();
  header.dtype = *dtype;
  // Fortran order is only a different layout when two or more dimensions
  // exceed 1; numpy itself writes False for those arrays' C-contiguous copies.
  int big_dims = 0;
  for (int64_t d : header.shape) big_dims += d > 1 ? 1 : 0;
  if (fortran && big_dims > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("npy array ", client::DescribeArray(header.dtype, header.shape),
                     " is in Fortran order; save it C-contiguous (np.ascontiguousarray)"));
  }
  auto bytes_needed = client::ExpectedBytes(header.dtype, header.shape);
  if (!bytes_needed.ok()) return bytes_needed.status();
  header.data_bytes = *bytes_needed;
  *header_size = prefix + dict_len;
  return header;
}

absl::StatusOr<std::unique_ptr<NpyReader>> NpyReader::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  auto fail = [&](absl::Status status) {
    std::fclose(file);
    return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
  };
  // The header is at most a few KiB; read until it parses.
  std::string head;
  size_t header_size = 0;
  absl::StatusOr<NpyHeader> header = absl::OutOfRangeError("empty file");
  char buf[4096];
  while (true) {
    header = DecodeNpyHeader(head, &header_size);
    if (header.ok() || header.status().code() != absl::StatusCode::kOutOfRange) break;
    size_t n = std::fread(buf, 1, sizeof(buf), file);
    if (n == 0) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("truncated .npy header (", header.status().message(), ")")));
    }
    head.append(buf, n);
    if (head.size() > (size_t{1} << 24)) {
      return fail(absl::InvalidArgumentError("npy header longer than 16 MiB"));
    }
  }
  if (!header.ok()) return fail(header.status());
  if (std::fseek(file, 0, SEEK_END) != 0) return fail(absl::InternalError("cannot seek"));
  int64_t file_size = std::ftell(file);
  int64_t data_size = file_size - static_cast<int64_t>(header_size);
  if (data_size != header->data_bytes) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "expected ", header->data_bytes, " data bytes for ",
        client::DescribeArray(header->dtype, header->shape), ", the file holds ", data_size)));
  }
  if (std::fseek(file, static_cast<long>(header_size), SEEK_SET) != 0) {
    return fail(absl::InternalError("cannot seek to the data"));
  }
  auto reader = std::unique_ptr<NpyReader>(new NpyReader(path, file, *std::move(header)));
  reader->remaining_ = reader->header_.data_bytes;
  return reader;
}

NpyReader::~NpyReader() { std::fclose(file_); }

absl::StatusOr<size_t> NpyReader::Read(absl::Span<uint8_t> buffer) {
  size_t want = static_cast<size_t>(std::min<int64_t>(remaining_, buffer.size()));
  if (want == 0) return 0;
  size_t n = std::fread(buffer.data(), 1, want, file_);
  if (n == 0) {
    return absl::DataLossError(absl::StrCat(path_, ": read failed with ", remaining_,
                                            " bytes to go: ", std::strerror(errno)));
  }
  remaining_ -= static_cast<int64_t>(n);
  return n;
}

absl::StatusOr<std::unique_ptr<NpyWriter>> NpyWriter::Create(const std::string& path,
                                                             client::DType dtype,
                                                             absl::Span<const int64_t> shape) {
  auto expected = client::ExpectedBytes(dtype, shape);
  if (!expected.ok()) return expected.status();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    int err = errno;
    std::string message = absl::StrCat("cannot create ", path, ": ", std::strerror(err));
    return err == EACCES ? absl::PermissionDeniedError(message) : absl::NotFoundError(message);
  }
  std::string header = EncodeNpyHeader(dtype, shape);
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    std::fclose(file);
    std::remove(path.c_str());
    return absl::DataLossError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<NpyWriter>(new NpyWriter(path, file, *expected));
}

NpyWriter::~NpyWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(path_.c_str());
  }
}

absl::Status NpyWriter::Write(absl::Span<const uint8_t> bytes) {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (static_cast<int64_t>(bytes.size()) > expected_ - written_) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": expected ", expected_,
                                                   " data bytes, got at least ",
                                                   written_ + static_cast<int64_t>(bytes.size())));
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return absl::DataLossError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  }
  written_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status NpyWriter::Finish() {
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  if (written_ != expected_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": expected ", expected_, " data bytes, got ", written_));
  }
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0) {
    std::remove(path_.c_str());
    return absl::DataLossError(absl::StrCat("cannot close ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace placement::placectl

// .npy reading and writing: headers byte-for-byte as numpy writes them,
// round trips of every dtype through files larger than a chunk, and every
// rejection (Fortran order, big-endian, unsupported dtypes, truncation).
#include "tools/placectl/npy.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/tensors.h"
#include "tests/testing/daemon_process.h"

namespace placement::placectl {
namespace {

using ::testing::HasSubstr;

constexpr client::DType kAllDTypes[] = {
    client::DType::kF32, client::DType::kF64, client::DType::kF16, client::DType::kBF16,
    client::DType::kI8,  client::DType::kI16, client::DType::kI32, client::DType::kI64,
    client::DType::kU8,  client::DType::kBool};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, bool boolean) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = boolean ? static_cast<uint8_t>(rng() & 1) : static_cast<uint8_t>(rng());
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A header block as numpy would write it, for a hand-written dict.
std::string RawHeader(const std::string& dict, int major = 1) {
  std::string padded = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + padded.size() + 1) % 64 != 0) padded.push_back(' ');
  padded.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  uint32_t len = static_cast<uint32_t>(padded.size());
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + padded;
}

TEST(NpyHeaderTest, MatchesNumpyByteForByte) {
  // np.save(f, np.zeros((2, 3), np.float32)) writes exactly this header.
  std::string expected = RawHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(expected.size(), 128u);
  EXPECT_EQ(EncodeNpyHeader(client::DType::kF32, {2, 3}), expected);
  EXPECT_EQ(EncodeNpyHeader(client::DType::kBool, {5}),
            RawHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"));
  EXPECT_EQ(EncodeNpyHeader(client::DType::kI64, {}),
            RawHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (), }"));
}

TEST(NpyHeaderTest, EveryDTypeAndShapeRoundTrips) {
  for (client::DType dtype : kAllDTypes) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{}, {0}, {7}, {2, 3}, {2, 3, 4}, {1, 1, 1, 1, 5}}) {
      std::string header = EncodeNpyHeader(dtype, shape);
      EXPECT_EQ(header.size() % 64, 0u);
      size_t size = 0;
      auto decoded = DecodeNpyHeader(header, &size);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(size, header.size());
      EXPECT_EQ(decoded->dtype, dtype);
      EXPECT_EQ(decoded->shape, shape);
      EXPECT_EQ(decoded->data_bytes, *client::ExpectedBytes(dtype, shape));
    }
  }
}

TEST(NpyHeaderTest, DescrNames) {
  EXPECT_EQ(NpyDescr(client::DType::kF16), "<f2");
  EXPECT_EQ(NpyDescr(client::DType::kBF16), "<V2");
  EXPECT_EQ(NpyDescr(client::DType::kI8), "|i1");
  EXPECT_EQ(NpyDescr(client::DType::kU8), "|u1");
  EXPECT_EQ(*DTypeFromNpyDescr("=f4"), client::DType::kF32);
  EXPECT_EQ(*DTypeFromNpyDescr(">i1"), client::DType::kI8);
  EXPECT_EQ(*DTypeFromNpyDescr("|b1"), client::DType::kBool);
  EXPECT_EQ(*DTypeFromNpyDescr("bfloat16"), client::DType::kBF16);
  auto big = DTypeFromNpyDescr(">f4");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("big-endian"));
  for (const char* unsupported : {"<u2", "<c8", "|O", "<U3", "<V4", "f4"}) {
    auto d = DTypeFromNpyDescr(unsupported);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << unsupported;
    EXPECT_THAT(d.status().message(), HasSubstr(unsupported));
  }
}

TEST(NpyHeaderTest, RejectsFortranOrderAndBadHeaders) {
  size_t size = 0;
  auto fortran = DecodeNpyHeader(
      RawHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"), &size);
  EXPECT_EQ(fortran.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fortran.status().message(), HasSubstr("Fortran order"));
  // One non-trivial dimension: both orders are the same bytes.
  EXPECT_TRUE(DecodeNpyHeader(
                  RawHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 5), }"), &size)
                  .ok());
  // Keys in any order, version 2.0, Python 2 long suffixes.
  auto v2 = DecodeNpyHeader(
      RawHeader("{'shape': (3L, 4L), 'fortran_order': False, 'descr': '<i2'}", 2), &size);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(v2->dtype, client::DType::kI16);

  EXPECT_EQ(DecodeNpyHeader("PK\x03\x04 not npy at all", &size).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeNpyHeader(RawHeader("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                      "'shape': (2,), }"),
                            &size)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeNpyHeader(RawHeader("{'descr': '<f4', 'shape': (2,), }"), &size).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeNpyHeader(RawHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
                            &size)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::string header = EncodeNpyHeader(client::DType::kF32, {2});
  EXPECT_EQ(DecodeNpyHeader(header.substr(0, 20), &size).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(NpyFileTest, EveryDTypeRoundTripsThroughFilesInChunks) {
  testing::TempDir dir;
  for (client::DType dtype : kAllDTypes) {
    // Larger than one 1 MiB chunk, with a ragged tail.
    std::vector<int64_t> shape = {3, 1000, 129};
    size_t bytes = static_cast<size_t>(*client::ExpectedBytes(dtype, shape));
    std::vector<uint8_t> data =
        RandomBytes(bytes, static_cast<uint32_t>(dtype), dtype == client::DType::kBool);
    std::string path = dir.path() + "/a.npy";
    auto writer = NpyWriter::Create(path, dtype, shape);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (size_t off = 0; off < data.size(); off += 777777) {
      size_t n = std::min<size_t>(777777, data.size() - off);
      ASSERT_TRUE((*writer)->Write(absl::MakeConstSpan(data.data() + off, n)).ok());
    }
    ASSERT_TRUE((*writer)->Finish().ok());

    auto reader = NpyReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->header().dtype, dtype);
    EXPECT_EQ((*reader)->header().shape, shape);
    std::vector<uint8_t> back;
    std::vector<uint8_t> chunk(1 << 20);
    while (true) {
      auto n = (*reader)->Read(absl::MakeSpan(chunk));
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) break;
      back.insert(back.end(), chunk.begin(), chunk.begin() + *n);
    }
    EXPECT_TRUE(back == data) << client::DTypeName(dtype);
  }
}

TEST(NpyFileTest, SizeMismatchesAndMissingFiles) {
  testing::TempDir dir;
  std::string path = dir.path() + "/short.npy";
  WriteAll(path, EncodeNpyHeader(client::DType::kF32, {32, 32}) + std::string(4000, '\0'));
  auto reader = NpyReader::Open(path);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reader.status().message(),
              HasSubstr("expected 4096 data bytes for f32[32,32], the file holds 4000"));
  EXPECT_THAT(reader.status().message(), HasSubstr(path));

  WriteAll(path, EncodeNpyHeader(client::DType::kF32, {2}).substr(0, 30));
  EXPECT_EQ(NpyReader::Open(path).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NpyReader::Open(dir.path() + "/missing.npy").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(NpyFileTest, WriterChecksCountsAndRemovesUnfinishedFiles) {
  testing::TempDir dir;
  std::string path = dir.path() + "/w.npy";
  {
    auto writer = NpyWriter::Create(path, client::DType::kI32, {2});
    ASSERT_TRUE(writer.ok());
    std::vector<uint8_t> too_many(12);
    EXPECT_EQ((*writer)->Write(too_many).code(), absl::StatusCode::kInvalidArgument);
    std::vector<uint8_t> four(4);
    ASSERT_TRUE((*writer)->Write(four).ok());
    EXPECT_EQ((*writer)->Finish().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(std::fopen(path.c_str(), "rb"), nullptr);  // removed by the destructor
  EXPECT_EQ(NpyWriter::Create(dir.path() + "/no/such/dir/x.npy", client::DType::kI32, {2})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace placement::placectl

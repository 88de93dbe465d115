#include "server/tensor/chunk_runs.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

// Checks every run of a kChunkToBox enumeration against the element
// coordinates it implies, and returns the bytes covered per box.
std::vector<int64_t> CheckRuns(const Shape& shape, int64_t elem, const std::vector<Box>& boxes,
                               int64_t begin, int64_t end, size_t* max_batch = nullptr) {
  std::vector<ByteRun> scratch;
  std::vector<int64_t> covered(boxes.size(), 0);
  std::vector<int64_t> next_chunk_offset(boxes.size(), -1);
  absl::Status status = ForEachChunkRunBatch(
      shape, elem, boxes, begin, end, RunDirection::kChunkToBox, &scratch,
      [&](size_t i, absl::Span<const ByteRun> runs) {
        if (max_batch) *max_batch = std::max(*max_batch, runs.size());
        const Box& box = boxes[i];
        for (const ByteRun& run : runs) {
          EXPECT_GT(run.length, 0);
          EXPECT_GT(run.src_offset, next_chunk_offset[i]) << "runs must increase";
          next_chunk_offset[i] = run.src_offset;
          // First and last byte of the run map to the same relative spot in the box.
          for (int64_t probe : {int64_t{0}, run.length - 1}) {
            const int64_t global = begin + run.src_offset + probe;
            EXPECT_GE(global, begin);
            EXPECT_LT(global, end);
            int64_t element = global / elem;
            std::vector<int64_t> coord(shape.size());
            for (size_t d = shape.size(); d-- > 0;) {
              coord[d] = element % shape[d];
              element /= shape[d];
            }
            int64_t box_linear = 0;
            for (size_t d = 0; d < shape.size(); ++d) {
              EXPECT_GE(coord[d], box[d].begin);
              EXPECT_LT(coord[d], box[d].end);
              box_linear = box_linear * box[d].size() + (coord[d] - box[d].begin);
            }
            EXPECT_EQ(run.dst_offset + probe, box_linear * elem + global % elem);
          }
          covered[i] += run.length;
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
  return covered;
}

TEST(ChunkRunsTest, HugeShapeOffsetsBeyond4GiB) {
  // f32[1048576, 8192]: 32 GiB, never allocated. Boxes of a 2 x 4 sharding.
  const Shape shape = {int64_t{1} << 20, 8192};
  const int64_t elem = 4;
  std::vector<Box> boxes;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      boxes.push_back({{r << 19, (r + 1) << 19}, {c * 2048, (c + 1) * 2048}});
    }
  }
  const int64_t row_bytes = 8192 * elem;
  // A 1 MiB chunk starting 3 bytes past 20 GiB (row 655360, in the second row block).
  const int64_t begin = (int64_t{20} << 30) + 3;
  const int64_t end = begin + (1 << 20);
  std::vector<int64_t> covered = CheckRuns(shape, elem, boxes, begin, end);
  // Rows 655360.. are in r = 1; each full row gives 8 KiB per column block.
  int64_t total = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    total += covered[i];
    if (i < 4) EXPECT_EQ(covered[i], 0) << "box " << i;
  }
  EXPECT_EQ(total, end - begin);
  // 32 full rows minus 3 bytes at the start plus 3 bytes into the next row.
  EXPECT_EQ(covered[4], 32 * 2048 * elem - 3 + 3);
  EXPECT_EQ(row_bytes * 32, end - begin);
}

TEST(ChunkRunsTest, HugeShapeRangeStraddlingBoxesAndTheLastByte) {
  // i8[3, 2^31 + 5]: rows longer than 2 GiB; the last chunk ends at the array's end.
  const Shape shape = {3, (int64_t{1} << 31) + 5};
  const int64_t total = 3 * shape[1];
  std::vector<Box> boxes = {{{0, 3}, {0, int64_t{1} << 30}},
                            {{0, 3}, {int64_t{1} << 30, shape[1]}}};
  const int64_t begin = total - (3 << 20) - 11;
  std::vector<int64_t> covered = CheckRuns(shape, 1, boxes, begin, total);
  EXPECT_EQ(covered[0] + covered[1], total - begin);
  EXPECT_EQ(covered[0], 0);  // the last 3 MiB of row 2 lie in the second column block
}

TEST(ChunkRunsTest, ElementsSplitAcrossChunksAndNarrowBoxesAreBatched) {
  // f64[100000, 8], column 3 only: one 8-byte run per row.
  const Shape shape = {100000, 8};
  std::vector<Box> boxes = {{{0, 100000}, {3, 4}}};
  size_t max_batch = 0;
  std::vector<int64_t> covered = CheckRuns(shape, 8, boxes, 5, 100000 * 64 - 5, &max_batch);
  EXPECT_EQ(covered[0], 100000 * 8 - 0);  // the clipped bytes are in columns 0 and 7
  EXPECT_EQ(max_batch, kMaxRunsPerBatch);
}

TEST(ChunkRunsTest, BoxToChunkMirrorsChunkToBox) {
  const Shape shape = {6, 10};
  std::vector<Box> boxes = {{{1, 4}, {2, 7}}, {{0, 6}, {0, 10}}};
  std::vector<ByteRun> scratch;
  std::vector<ByteRun> forward, backward;
  auto collect = [](std::vector<ByteRun>* out) {
    return [out](size_t, absl::Span<const ByteRun> runs) {
      out->insert(out->end(), runs.begin(), runs.end());
      return absl::OkStatus();
    };
  };
  ASSERT_TRUE(ForEachChunkRunBatch(shape, 2, boxes, 13, 97, RunDirection::kChunkToBox, &scratch,
                                   collect(&forward))
                  .ok());
  ASSERT_TRUE(ForEachChunkRunBatch(shape, 2, boxes, 13, 97, RunDirection::kBoxToChunk, &scratch,
                                   collect(&backward))
                  .ok());
  ASSERT_EQ(forward.size(), backward.size());
  for (size_t i = 0; i < forward.size(); ++i) {
    EXPECT_EQ(forward[i].src_offset, backward[i].dst_offset);
    EXPECT_EQ(forward[i].dst_offset, backward[i].src_offset);
    EXPECT_EQ(forward[i].length, backward[i].length);
  }
}

TEST(ChunkRunsTest, StopsAtTheFirstError) {
  const Shape shape = {4, 4};
  std::vector<Box> boxes = {{{0, 2}, {0, 4}}, {{2, 4}, {0, 4}}};
  std::vector<ByteRun> scratch;
  int calls = 0;
  absl::Status status = ForEachChunkRunBatch(shape, 4, boxes, 0, 64, RunDirection::kChunkToBox,
                                             &scratch, [&](size_t, absl::Span<const ByteRun>) {
                                               ++calls;
                                               return absl::InternalError("device lost");
                                             });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace placement::server

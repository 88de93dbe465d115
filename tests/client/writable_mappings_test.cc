// WritableMappings on local memory files: one mapping per file (keyed by the
// file, not the fd), a hit for a second fd of the same file, the byte bound
// evicting the least recently used, a mapping still held surviving its
// eviction, and a file sealed against writes refused PERMISSION_DENIED.
// FillFreshFile: a file with no pages is left unpopulated by Map and filled
// byte-exact through its fd and the mapping, whatever the size and offset,
// also when the file was sealed against write(2) after it was mapped.
#include "client/src/writable_mappings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "client/src/parallel_copy.h"
#include "gtest/gtest.h"

namespace placement::client {
namespace {

int MemoryFile(int64_t bytes) {
  const int fd = memfd_create("writable-mappings-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, bytes), 0);
  return fd;
}

TEST(WritableMappingsTest, OneMappingPerFileWhateverTheFd) {
  WritableMappings mappings(int64_t{1} << 30);
  const int fd = MemoryFile(1 << 20);
  auto first = mappings.Map(fd, 1 << 20);
  ASSERT_TRUE(first.ok()) << first.status();
  std::memset((*first)->base(), 7, 1 << 20);
  const int again = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(again, 0);
  auto second = mappings.Map(again, 1 << 20);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->base(), (*first)->base());
  EXPECT_EQ(mappings.hits(), 1);
  EXPECT_EQ(mappings.mapped_bytes(), 1 << 20);
  close(fd);
  close(again);
  // Too short a file for what the daemon says.
  const int small = MemoryFile(4096);
  EXPECT_TRUE(absl::IsInvalidArgument(mappings.Map(small, 8192).status()));
  close(small);
}

TEST(WritableMappingsTest, TheBoundEvictsTheLeastRecentlyUsedButNotWhatIsHeld) {
  WritableMappings mappings(2 << 20);
  const int a = MemoryFile(1 << 20), b = MemoryFile(1 << 20), c = MemoryFile(1 << 20);
  auto held = mappings.Map(a, 1 << 20);
  ASSERT_TRUE(held.ok());
  std::memset((*held)->base(), 1, 1 << 20);
  ASSERT_TRUE(mappings.Map(b, 1 << 20).ok());
  ASSERT_TRUE(mappings.Map(c, 1 << 20).ok());  // evicts a, the least recently used
  EXPECT_EQ(mappings.mapped_bytes(), 2 << 20);
  // Still mapped for its holder: writes land in the file.
  std::memset((*held)->base(), 2, 1 << 20);
  char byte = 0;
  ASSERT_EQ(pread(a, &byte, 1, 4096), 1);
  EXPECT_EQ(byte, 2);
  // a is mapped afresh now: a miss.
  const int64_t hits = mappings.hits();
  ASSERT_TRUE(mappings.Map(a, 1 << 20).ok());
  EXPECT_EQ(mappings.hits(), hits);
  for (int fd : {a, b, c}) close(fd);
}

TEST(WritableMappingsTest, AFileSealedAgainstWritesIsPermissionDenied) {
  WritableMappings mappings(int64_t{1} << 30);
  const int fd = MemoryFile(1 << 20);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
  auto mapped = mappings.Map(fd, 1 << 20);
  EXPECT_TRUE(absl::IsPermissionDenied(mapped.status())) << mapped.status();
  close(fd);
}

int64_t AllocatedBytes(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return static_cast<int64_t>(st.st_blocks) * 512;
}

std::vector<std::byte> Pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> out(n);
  uint32_t x = seed;
  for (std::byte& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return out;
}

TEST(FillFreshFileTest, FillsAFileWithNoPagesByteExactAtAnySizeAndOffset) {
  // Under the split (16 MiB: pwrite alone), split at a huge-page boundary,
  // and split from an offset that is not one.
  for (auto [bytes, offset] : {std::pair<size_t, int64_t>{(5 << 20) + 123, 0},
                               {size_t{40} << 20, 0},
                               {(size_t{24} << 20) + 4000, 3 * 4096}}) {
    const int64_t file_bytes = offset + static_cast<int64_t>(bytes) + 8192;
    const int fd = MemoryFile(file_bytes);
    WritableMappings mappings(int64_t{1} << 30);
    auto mapping = mappings.Map(fd, file_bytes);
    ASSERT_TRUE(mapping.ok()) << mapping.status();
    // Map left the empty file's pages to its writer.
    EXPECT_TRUE(FileHasNoPages(fd));
    const std::vector<std::byte> data = Pattern(bytes, static_cast<uint32_t>(bytes));
    FillFreshFile(fd, offset, (*mapping)->base() + offset, data.data(), bytes);
    EXPECT_FALSE(FileHasNoPages(fd));
    EXPECT_GE(AllocatedBytes(fd), static_cast<int64_t>(bytes));
    // The file's bytes, read through the fd and through the mapping.
    std::vector<std::byte> read(bytes);
    ASSERT_EQ(pread(fd, read.data(), bytes, offset), static_cast<ssize_t>(bytes));
    EXPECT_TRUE(read == data) << bytes << " bytes at offset " << offset;
    EXPECT_EQ(std::memcmp((*mapping)->base() + offset, data.data(), bytes), 0);
    // Around the range nothing was written.
    std::byte edge[2];
    ASSERT_EQ(pread(fd, &edge[0], 1, offset + static_cast<int64_t>(bytes)), 1);
    EXPECT_EQ(edge[0], std::byte{0});
    if (offset > 0) {
      ASSERT_EQ(pread(fd, &edge[1], 1, offset - 1), 1);
      EXPECT_EQ(edge[1], std::byte{0});
    }
    // Mapped again: the cached mapping comes back (its pwritten part is
    // mapped in then), and still reads the bytes.
    auto again = mappings.Map(fd, file_bytes);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->base(), (*mapping)->base());
    EXPECT_EQ(std::memcmp((*again)->base() + offset, data.data(), bytes), 0);
    close(fd);
  }
}

TEST(FillFreshFileTest, AFileSealedAgainstWriteIsFilledThroughTheMapping) {
  const size_t bytes = size_t{20} << 20;
  const int fd = MemoryFile(static_cast<int64_t>(bytes));
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  // write(2) is refused from now on; the mapping made before stays writable.
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
  const std::vector<std::byte> data = Pattern(bytes, 5);
  FillFreshFile(fd, 0, static_cast<std::byte*>(base), data.data(), bytes);
  EXPECT_EQ(std::memcmp(base, data.data(), bytes), 0);
  munmap(base, bytes);
  close(fd);
}

}  // namespace
}  // namespace placement::client

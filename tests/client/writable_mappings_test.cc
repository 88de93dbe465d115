// WritableMappings on local memory files: one mapping per file (keyed by the
// file, not the fd), a hit for a second fd of the same file, the byte bound
// evicting the least recently used, a mapping still held surviving its
// eviction, and a file sealed against writes refused PERMISSION_DENIED.
#include "client/src/writable_mappings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace
}  // namespace placement::client

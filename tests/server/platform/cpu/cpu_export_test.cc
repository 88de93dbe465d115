// CpuBackend::ExportShard (docs/api/views.md): a buffer of 256 KiB or more
// is exported in place -- an O_RDONLY fd of its own sealed memory file,
// which no descriptor can write -- and a smaller one as a private copy
// charged against the device's budget; an exported block is never handed to
// another allocation (a reader may still map it), and past the memory-file
// bound blocks are anonymous and their exports copies.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"

namespace placement::server {
namespace {

constexpr int64_t kKiB = 1024;

std::unique_ptr<CpuBackend> MakeBackend(int64_t max_file_blocks = -1) {
  CpuBackendOptions options;
  options.num_devices = 2;
  options.device_memory_bytes = 64 << 20;
  options.max_file_blocks = max_file_blocks;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

std::vector<uint8_t> Fill(DeviceBuffer& buffer, uint8_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(buffer.size()));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + seed);
  std::memcpy(buffer.data(), bytes.data(), bytes.size());
  return bytes;
}

// The exported bytes, read through a read-only mapping of the fd.
std::vector<uint8_t> ReadExport(const ShardExport& e) {
  void* data =
      mmap(nullptr, static_cast<size_t>(e.offset + e.size), PROT_READ, MAP_SHARED, e.fd, 0);
  EXPECT_NE(data, MAP_FAILED);
  if (data == MAP_FAILED) return {};
  const auto* bytes = static_cast<const uint8_t*>(data) + e.offset;
  std::vector<uint8_t> out(bytes, bytes + e.size);
  munmap(data, static_cast<size_t>(e.offset + e.size));
  return out;
}

TEST(CpuExportTest, ALargeBufferIsExportedInPlaceReadOnly) {
  auto backend = MakeBackend();
  auto buffer = backend->Allocate(0, 1 << 20);
  ASSERT_TRUE(buffer.ok());
  const std::vector<uint8_t> bytes = Fill(**buffer, 1);
  auto exported = backend->ExportShard(**buffer);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_FALSE((*exported)->copied());
  EXPECT_EQ((*exported)->size, 1 << 20);
  EXPECT_EQ(fcntl((*exported)->fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(ReadExport(**exported), bytes);
  // In place: the daemon's later writes show through the reader's mapping.
  static_cast<uint8_t*>((*buffer)->data())[5] = 0xee;
  EXPECT_EQ(ReadExport(**exported)[5], 0xee);
  const int seals = fcntl((*exported)->fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, (*exported)->fd, 0),
            MAP_FAILED);
  // A second export of the same buffer: another fd of the same memory.
  auto again = backend->ExportShard(**buffer);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->fd, (*exported)->fd);
  EXPECT_EQ(ReadExport(**again)[5], 0xee);
}

TEST(CpuExportTest, ASmallBufferIsExportedAsAChargedPrivateCopy) {
  auto backend = MakeBackend();
  auto buffer = backend->Allocate(1, 100);
  ASSERT_TRUE(buffer.ok());
  const std::vector<uint8_t> bytes = Fill(**buffer, 2);
  const int64_t in_use = backend->MemoryInUse(1);
  {
    auto exported = backend->ExportShard(**buffer);
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_TRUE((*exported)->copied());
    EXPECT_EQ((*exported)->size, 100);
    EXPECT_EQ(ReadExport(**exported), bytes);
    EXPECT_EQ(backend->MemoryInUse(1), in_use + 256 * kKiB);
  }
  EXPECT_EQ(backend->MemoryInUse(1), in_use);
  // An empty buffer exports nothing to map.
  auto empty = backend->Allocate(1, 0);
  ASSERT_TRUE(empty.ok());
  auto none = backend->ExportShard(**empty);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->fd, -1);
  EXPECT_EQ((*none)->size, 0);
}

// A tenant's in-place writer (ExportWritable) may seal its memory file
// with F_SEAL_SEAL before anyone views the buffer: the file can then never
// be made read-only for everyone, so the view is a private copy, sealed
// itself, that the writer's later writes do not reach.
TEST(CpuExportTest, AWritersSealSealMakesTheViewAPrivateCopy) {
  auto backend = MakeBackend();
  constexpr MemoryOwnerTag kTenant = 7;
  auto buffer = backend->AllocateFor(0, 1 << 20, kTenant);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::vector<uint8_t> bytes = Fill(**buffer, 4);
  auto writable = backend->ExportWritable(**buffer, kTenant);
  ASSERT_TRUE(writable.ok()) << writable.status();
  ASSERT_EQ(fcntl((*writable)->fd, F_ADD_SEALS, F_SEAL_SEAL), 0) << std::strerror(errno);
  const int64_t in_use = backend->MemoryInUse(0);
  auto view = backend->ExportShard(**buffer);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE((*view)->copied());
  EXPECT_EQ(backend->MemoryInUse(0), in_use + (1 << 20));
  EXPECT_EQ(ReadExport(**view), bytes);
  const int seals = fcntl((*view)->fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_FUTURE_WRITE | F_SEAL_SEAL), F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);
  // The writer still writes its own file; the view keeps what it saw.
  void* mapped = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, (*writable)->fd, 0);
  ASSERT_NE(mapped, MAP_FAILED) << std::strerror(errno);
  static_cast<uint8_t*>(mapped)[9] = 0xab;
  munmap(mapped, 1 << 20);
  EXPECT_EQ(static_cast<uint8_t*>((*buffer)->data())[9], 0xab);
  EXPECT_EQ(ReadExport(**view)[9], bytes[9]);
  // The tenant's file is not marked exported: its block stays the tenant's
  // to write in place again.
  view->reset();
  EXPECT_EQ(backend->MemoryInUse(0), in_use);
  EXPECT_EQ(backend->exported_blocks(), 0);
  EXPECT_TRUE(backend->ExportWritable(**buffer, kTenant).ok());
}

TEST(CpuExportTest, AnExportedBlockIsNeverReused) {
  auto backend = MakeBackend();
  void* exported_block = nullptr;
  std::unique_ptr<ShardExport> exported;
  {
    auto buffer = backend->Allocate(0, 1 << 20);
    ASSERT_TRUE(buffer.ok());
    Fill(**buffer, 3);
    exported_block = (*buffer)->data();
    auto e = backend->ExportShard(**buffer);
    ASSERT_TRUE(e.ok());
    exported = *std::move(e);
    EXPECT_EQ(backend->exported_blocks(), 1);
  }
  // Freed: not cached; a fresh block of its size takes its place in the
  // cache, made in the background (bounded wait).
  EXPECT_EQ(backend->exported_blocks(), 0);
  for (int i = 0; i < 2000 && backend->MemoryCached(0) != (1 << 20); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(backend->MemoryCached(0), 1 << 20);
  auto next = backend->Allocate(0, 1 << 20);  // takes the fresh block
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(backend->MemoryCached(0), 0);
  std::memset((*next)->data(), 0x77, 1 << 20);
  // The reader's fd still shows the old bytes, not the new buffer's.
  const std::vector<uint8_t> old = ReadExport(*exported);
  EXPECT_NE(old[0], 0x77);
  EXPECT_EQ(old[1], static_cast<uint8_t>(31 + 3));
  (void)exported_block;
  // A plain buffer is cached as before.
  next->reset();
  EXPECT_EQ(backend->MemoryCached(0), 1 << 20);
}

TEST(CpuExportTest, ARefillStaysWithinTheCacheCap) {
  CpuBackendOptions options;
  options.num_devices = 1;
  options.device_memory_bytes = 8 << 20;
  options.cache_bytes_per_device = 1 << 20;
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  // A plain block fills the 1 MiB cache.
  ASSERT_TRUE((*backend)->Allocate(0, 1 << 20).ok());
  ASSERT_EQ((*backend)->MemoryCached(0), 1 << 20);
  // An exported block freed now has no room to be replaced: no refill.
  auto held = (*backend)->Allocate(0, 1 << 20);  // takes the cached block
  auto exported = (*backend)->Allocate(0, 1 << 20);
  ASSERT_TRUE(held.ok() && exported.ok());
  held->reset();  // cached again: the cache is full
  ASSERT_TRUE((*backend)->ExportShard(**exported).ok());
  exported->reset();
  EXPECT_EQ((*backend)->refills_scheduled(), 0);
  EXPECT_EQ((*backend)->MemoryCached(0), 1 << 20);
  // With room, one is.
  auto again = (*backend)->Allocate(0, 1 << 20);  // empties the cache
  auto second = (*backend)->Allocate(0, 1 << 20);
  ASSERT_TRUE(again.ok() && second.ok());
  ASSERT_TRUE((*backend)->ExportShard(**second).ok());
  second->reset();
  EXPECT_EQ((*backend)->refills_scheduled(), 1);
}

TEST(CpuExportTest, PastTheMemoryFileBoundExportsAreCopies) {
  auto backend = MakeBackend(/*max_file_blocks=*/1);
  auto first = backend->Allocate(0, 1 << 20);
  auto second = backend->Allocate(0, 1 << 20);  // anonymous: the bound is 1
  ASSERT_TRUE(first.ok() && second.ok());
  const std::vector<uint8_t> bytes = Fill(**second, 4);
  auto in_place = backend->ExportShard(**first);
  ASSERT_TRUE(in_place.ok());
  EXPECT_FALSE((*in_place)->copied());
  // The copy needs a memory file of its own, and the bound is spent.
  auto copy = backend->ExportShard(**second);
  EXPECT_TRUE(absl::IsResourceExhausted(copy.status())) << copy.status();
  first->reset();
  in_place->reset();
  auto now = backend->ExportShard(**second);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_TRUE((*now)->copied());
  EXPECT_EQ(ReadExport(**now), bytes);
}

}  // namespace
}  // namespace placement::server

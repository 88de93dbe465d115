#include "client/src/parallel_copy.h"

#include <sys/mman.h>

#include <cstring>

#include "common/parallel_slices.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

namespace placement::client {

void ParallelCopy(void* dst, const void* src, size_t n) {
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  ForEachSlice(n, {}, [out, in](size_t lo, size_t hi) { std::memcpy(out + lo, in + lo, hi - lo); });
}

void PopulateMapping(void* base, size_t n) {
  auto* at = static_cast<char*>(base);
  ForEachSlice(n, {},
               [at](size_t lo, size_t hi) { (void)madvise(at + lo, hi - lo, MADV_POPULATE_READ); });
}

}  // namespace placement::client

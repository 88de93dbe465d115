// FdExhaustion: makes this process run out of file descriptors for a test,
// and gives them back however the test ends (so that a failure does not
// starve the tests after it). The fd limit is lowered to at most 256 and
// every fd under it is taken but `leave_free`.
#ifndef PLACEMENT_TESTS_TESTING_FD_EXHAUSTION_H_
#define PLACEMENT_TESTS_TESTING_FD_EXHAUSTION_H_

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace placement::testing {

class FdExhaustion {
 public:
  explicit FdExhaustion(int leave_free = 0) {
    lowered_ = getrlimit(RLIMIT_NOFILE, &before_) == 0;
    if (lowered_) {
      rlimit low = before_;
      low.rlim_cur = std::min<rlim_t>(before_.rlim_cur, 256);
      lowered_ = setrlimit(RLIMIT_NOFILE, &low) == 0;
    }
    if (!lowered_) return;  // ok() is false: the real limit may be a million fds
    for (int fd; (fd = dup(STDERR_FILENO)) >= 0;) taken_.push_back(fd);
    for (int i = 0; i < leave_free && !taken_.empty(); ++i) {
      close(taken_.back());
      taken_.pop_back();
    }
  }
  ~FdExhaustion() { Release(); }
  FdExhaustion(const FdExhaustion&) = delete;
  FdExhaustion& operator=(const FdExhaustion&) = delete;

  // Whether the limit was lowered and fds were taken: the test can run.
  bool ok() const { return lowered_ && !taken_.empty(); }
  // Gives the fds and the limit back now (the destructor does otherwise).
  void Release() {
    for (int fd : taken_) close(fd);
    taken_.clear();
    if (lowered_) setrlimit(RLIMIT_NOFILE, &before_);
    lowered_ = false;
  }

 private:
  rlimit before_{};
  bool lowered_ = false;
  std::vector<int> taken_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_FD_EXHAUSTION_H_

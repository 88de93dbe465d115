#include "bench/gloo_rank_processes.h"

#if PLACEMENT_WITH_GLOO

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::bench {
namespace {

struct Command {
  int64_t bytes = 0;  // 0: exit
  int32_t iters = 0;
};

// What a child answers: seconds per call (>= 0) after Start's handshake and
// each Command; negative when Gloo failed.
using Answer = double;

// Calls io(offset, remaining) -- a read or write of the bytes from
// `offset` -- until `n` bytes moved; false on end of file or an error.
template <typename Io>
bool MoveAll(size_t n, Io io) {
  for (size_t done = 0; done < n;) {
    const ssize_t moved = io(done, n - done);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return false;
    done += static_cast<size_t>(moved);
  }
  return true;
}

bool ReadFull(int fd, void* out, size_t n) {
  return MoveAll(
      n, [&](size_t at, size_t left) { return read(fd, static_cast<char*>(out) + at, left); });
}

bool WriteFull(int fd, const void* in, size_t n) {
  return MoveAll(n, [&](size_t at, size_t left) {
    return write(fd, static_cast<const char*>(in) + at, left);
  });
}

// A rank's whole life: connect, answer 0, then one answer per command.
[[noreturn]] void RankMain(int rank, int n, const std::string& dir, int command_fd, int result_fd) {
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    gloo::rendezvous::FileStore files(dir);
    gloo::rendezvous::PrefixStore store("ranks", files);
    context = std::make_shared<gloo::rendezvous::Context>(rank, n);
    context->setTimeout(std::chrono::seconds(120));
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(store, device);
  } catch (const std::exception&) {
    const Answer failed = -1;
    WriteFull(result_fd, &failed, sizeof failed);
    _exit(1);
  }
  const Answer connected = 0;
  if (!WriteFull(result_fd, &connected, sizeof connected)) _exit(1);
  Command command;
  std::vector<float> data;
  while (ReadFull(command_fd, &command, sizeof command) && command.bytes > 0) {
    Answer seconds = -1;
    try {
      const size_t count = static_cast<size_t>(command.bytes) / sizeof(float);
      data.assign(count, 1.0f);  // allocated and touched before the clock
      gloo::BarrierOptions before(context);
      gloo::barrier(before);
      const auto start = std::chrono::steady_clock::now();
      for (int32_t i = 0; i < command.iters; ++i) {
        gloo::AllreduceOptions options(context);
        options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        options.setOutput(data.data(), count);
        options.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        options.setTimeout(std::chrono::seconds(120));
        gloo::allreduce(options);
      }
      gloo::BarrierOptions after(context);
      gloo::barrier(after);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                command.iters;
    } catch (const std::exception&) {
      seconds = -1;
    }
    if (!WriteFull(result_fd, &seconds, sizeof seconds) || seconds < 0) _exit(1);
  }
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooRankProcesses>> GlooRankProcesses::Start(int n) {
  auto self = std::unique_ptr<GlooRankProcesses>(new GlooRankProcesses());
  std::string pattern =
      (std::filesystem::temp_directory_path() / "placement-gloo-ranks-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  self->dir_ = pattern;
  for (int r = 0; r < n; ++r) {
    int command[2], result[2];
    if (pipe(command) != 0 || pipe(result) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    }
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid == 0) {
      close(command[1]);
      close(result[0]);
      for (const Rank& earlier : self->ranks_) {  // the parent's ends for other ranks
        close(earlier.command_fd);
        close(earlier.result_fd);
      }
      RankMain(r, n, self->dir_, command[0], result[1]);
    }
    close(command[0]);
    close(result[1]);
    self->ranks_.push_back(Rank{pid, command[1], result[0]});
  }
  for (int r = 0; r < n; ++r) {
    Answer connected = -1;
    if (!ReadFull(self->ranks_[r].result_fd, &connected, sizeof connected) || connected < 0) {
      return absl::UnavailableError(
          absl::StrCat("Gloo rank process ", r, " of ", n, " could not connect"));
    }
  }
  return self;
}

GlooRankProcesses::~GlooRankProcesses() {
  // A rank may be stuck in Gloo (a peer failed or never connected, Start's
  // error paths): killed rather than waited for until its 120 s timeout.
  for (const Rank& rank : ranks_) {
    close(rank.command_fd);
    close(rank.result_fd);
    kill(rank.pid, SIGKILL);
    int status = 0;
    waitpid(rank.pid, &status, 0);
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::StatusOr<double> GlooRankProcesses::Time(int64_t bytes, int iters) {
  const Command command{bytes, iters};
  for (const Rank& rank : ranks_) {
    if (!WriteFull(rank.command_fd, &command, sizeof command)) {
      return absl::UnavailableError("a Gloo rank process is gone");
    }
  }
  double rank0 = -1;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Answer seconds = -1;
    if (!ReadFull(ranks_[r].result_fd, &seconds, sizeof seconds) || seconds < 0) {
      return absl::UnavailableError(
          absl::StrCat("Gloo rank process ", r, " failed an all-reduce of ", bytes, " bytes"));
    }
    if (r == 0) rank0 = seconds;
  }
  return rank0;
}

}  // namespace placement::bench

#endif  // PLACEMENT_WITH_GLOO

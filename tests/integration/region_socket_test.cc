// The region socket of a real daemon under a careless or hostile same-host
// process (server/region/fd_passing_listener.h): fifty connections that send
// nothing do not stop a real client from registering a region; a process
// passing hundreds of fds does not invalidate another client's token; a
// region registered outside a session by a client killed with SIGKILL is
// unmapped at once and no longer counts against --max_regions; the socket is
// a file with the mode it was given. Each test checks that the daemon keeps
// serving and that its descriptors and mappings come back.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/regions.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"

namespace placement::client {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr char kChildEnv[] = "PLACEMENT_REGION_SOCKET_TEST_CHILD";

// Whether process `pid` maps a memfd named `name`.
bool Maps(pid_t pid, const std::string& name) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:" + name) != std::string::npos) return true;
  }
  return false;
}

int ConnectIdle(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Forks a child that runs `body` and then waits for a byte on a pipe before
// exiting; Release() sends it and reaps the child.
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    int ready[2];
    int release[2];
    if (pipe(ready) != 0 || pipe(release) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(release[1]);
      const int result = body();
      (void)!write(ready[1], &result, sizeof(result));
      char byte;
      (void)!read(release[0], &byte, 1);
      _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    release_ = release[1];
    (void)!read(ready[0], &result_, sizeof(result_));
    close(ready[0]);
  }
  ~Child() { Release(); }
  int result() const { return result_; }
  void Release() {
    if (pid_ <= 0) return;
    (void)!write(release_, "x", 1);
    close(release_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  int result_ = -1;
};

class RegionSocketTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(std::vector<std::string> flags) {
    client_.reset();
    daemon_.reset();
    flags.insert(flags.end(), {"--backend=cpu", "--cpu_devices=2",
                               "--region_socket=" + dir_.path() + "/regions.sock"});
    auto daemon = DaemonProcess::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    auto client = daemon_->Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    socket_ = client_->GetStatus()->region_socket;
  }
  void ExpectServingAndBack(int64_t fds, int64_t mappings) {
    auto status = client_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->num_regions, 0);
    // Descriptors return once the daemon saw the peers hang up (a connection
    // holds its socket and its peer's pidfd); gRPC may hold a few more
    // sockets, and start a thread or two (two mappings each).
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (testing::OpenFds(daemon_->pid()) > fds + 4 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_LE(testing::OpenFds(daemon_->pid()), fds + 4);
    EXPECT_LE(testing::Mappings(daemon_->pid()), mappings + 16);
  }

  testing::TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::string socket_;
};

TEST_F(RegionSocketTest, FiftyIdleConnectionsDoNotStallARealClient) {
  EXPECT_EQ(socket_, dir_.path() + "/regions.sock");
  const int64_t fds = testing::OpenFds(daemon_->pid());
  const int64_t mappings = testing::Mappings(daemon_->pid());
  {
    Child idle([&] {
      int opened = 0;
      for (int i = 0; i < 50; ++i) opened += ConnectIdle(socket_) >= 0 ? 1 : 0;
      return opened;
    });
    ASSERT_EQ(idle.result(), 50);
    // Before, every idle connection held the socket for a second in turn;
    // now the registration is answered while all fifty stay connected.
    auto region = SharedRegion::Create(*client_, 1 << 20, "beside-idle");
    ASSERT_TRUE(region.ok()) << region.status();
    EXPECT_TRUE(Maps(daemon_->pid(), "beside-idle"));
    ASSERT_TRUE((*region)->Unregister().ok());
  }
  ExpectServingAndBack(fds, mappings);
}

TEST_F(RegionSocketTest, AProcessPassingHundredsOfFdsDoesNotBreakAnotherClient) {
  const int64_t fds = testing::OpenFds(daemon_->pid());
  // This client's token is deposited first; before, the 257th fd from the
  // flood evicted it and its RegisterRegion failed NOT_FOUND.
  absl::StatusOr<int> memfd = CreateSealedMemfd("before-flood", 1 << 20);
  ASSERT_TRUE(memfd.ok());
  absl::StatusOr<std::string> token = PassFd(socket_, *memfd);
  ASSERT_TRUE(token.ok()) << token.status();
  std::string refusal;
  {
    Child flood([&] {
      int accepted = 0;
      for (int i = 0; i < 300; ++i) {
        absl::StatusOr<int> fd = CreateSealedMemfd("flood", 4096);
        if (!fd.ok()) continue;
        absl::StatusOr<std::string> t = PassFd(socket_, *fd);
        close(*fd);
        accepted += t.ok() ? 1 : 0;
      }
      return accepted;
    });
    EXPECT_EQ(flood.result(), 32);  // the per-process bound
    // The daemon holds 32 of the flood's fds (until they expire), not 300:
    // each with the pidfd of its depositor, and this client's one.
    EXPECT_LE(testing::OpenFds(daemon_->pid()), fds + 2 * (32 + 1) + 4);
    // The first client's token still works, and it can pass more.
    auto region = RegionClient(*client_).RegisterFd(*memfd, 0, "before-flood");
    ASSERT_TRUE(region.ok()) << region.status();
    auto more = SharedRegion::Create(*client_, 4096, "after-flood");
    ASSERT_TRUE(more.ok()) << more.status();
    ASSERT_TRUE(RegionClient(*client_).Unregister(region->id).ok());
  }
  close(*memfd);
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok());
}

// The child side of AKilledClientsRegionOutsideASessionIsUnmappedAtOnce:
// registers a region without a session, writes its id to the file the
// environment names, and sleeps until killed.
TEST(RegionSocketChild, HoldsARegionOutsideASessionUntilKilled) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) GTEST_SKIP() << "runs only as the child of RegionSocketTest";
  const std::string text(spec);
  const size_t comma = text.find(',');
  ClientOptions durable;
  durable.session_policy = SessionPolicy::kNone;  // outside a session
  auto client = Client::Connect(text.substr(0, comma), durable);
  ASSERT_TRUE(client.ok()) << client.status();
  auto region = SharedRegion::Create(**client, 1 << 20, "killed-durable");
  ASSERT_TRUE(region.ok()) << region.status();
  const std::string ready = text.substr(comma + 1);
  std::ofstream(ready + ".tmp") << (*region)->id() << "\n";
  std::rename((ready + ".tmp").c_str(), ready.c_str());
  for (;;) absl::SleepFor(absl::Seconds(1));
}

TEST_F(RegionSocketTest, AKilledClientsRegionOutsideASessionIsUnmappedAtOnce) {
  Start({"--max_regions=1"});
  const int64_t fds = testing::OpenFds(daemon_->pid());
  const int64_t mappings = testing::Mappings(daemon_->pid());
  const std::string ready = dir_.path() + "/child_ready";
  std::vector<std::string> env_strings = {
      absl::StrCat(kChildEnv, "=", daemon_->address(), ",", ready)};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "region_socket_test";
  std::string filter = "--gtest_filter=RegionSocketChild.*";
  char* argv[] = {arg0.data(), filter.data(), nullptr};
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  const std::string region_id = testing::WaitForFileLine(ready, absl::Seconds(60));
  ASSERT_FALSE(region_id.empty()) << "the child never registered its region";
  auto listed = RegionClient(*client_).List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE(listed->front().session_id.empty());
  EXPECT_TRUE(Maps(daemon_->pid(), "killed-durable"));
  // --max_regions=1 is taken.
  auto refused = SharedRegion::Create(*client_, 4096, "second");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  // No lease to wait for: the daemon watches the process that passed the
  // fd. (Bounded wait, far above the pidfd's notice.)
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (Maps(daemon_->pid(), "killed-durable") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_FALSE(Maps(daemon_->pid(), "killed-durable"));
  EXPECT_THAT(daemon_->Stderr(), HasSubstr(absl::StrCat("region ", region_id,
                                                        " unregistered: the process that passed "
                                                        "its fd (pid ",
                                                        child, ") exited")));
  ExpectServingAndBack(fds, mappings);
  // Its place under --max_regions is free again.
  auto again = SharedRegion::Create(*client_, 4096, "second");
  ASSERT_TRUE(again.ok()) << again.status();
}

TEST_F(RegionSocketTest, ThePathSocketHasTheModeItWasGiven) {
  struct stat st {};
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  Start({"--region_socket_mode=0600"});
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace placement::client

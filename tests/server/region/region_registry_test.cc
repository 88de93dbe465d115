// RegionRegistry over real memfds handed over a real FdPassingListener
// socket: registration (sealed memfds only, tokens single-use), visibility by
// tenant and session, bounds on every use, Unregister waiting for the
// transfer that holds the region, sessions ending, limits.
#include "server/region/region_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

Caller Tenant(std::string tenant, std::string session = "") {
  Caller caller;
  caller.tenant = std::move(tenant);
  caller.session_id = std::move(session);
  return caller;
}

// Whether this process maps a memfd named `name`.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:" + name) != std::string::npos) return true;
  }
  return false;
}

class RegionRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = FdPassingListener::Start(
        absl::StrCat("@placement-region-test-", getpid(), "-", counter_++));
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    registry_ = std::make_unique<RegionRegistry>(listener_.get(), nullptr, options_);
  }

  // A sealed memfd of `size` bytes named `name`, passed to the daemon side:
  // the token. The fd is closed here (the region keeps the memory).
  std::string Pass(const std::string& name, int64_t size) {
    absl::StatusOr<int> fd = client::CreateSealedMemfd(name, size);
    EXPECT_TRUE(fd.ok()) << fd.status();
    absl::StatusOr<std::string> token = client::PassFd(listener_->address(), *fd);
    close(*fd);
    EXPECT_TRUE(token.ok()) << token.status();
    return token.value_or("");
  }

  absl::StatusOr<RegionSnapshot> Register(const Caller& caller, const std::string& name,
                                          int64_t size) {
    return registry_->Register(caller, name, 0, {RegionHandle::Kind::kFdToken, Pass(name, size)});
  }

  static inline int counter_ = 0;
  RegionRegistryOptions options_;
  std::unique_ptr<FdPassingListener> listener_;
  std::unique_ptr<RegionRegistry> registry_;
};

TEST_F(RegionRegistryTest, RegistersMapsAndUnmapsAPassedMemfd) {
  auto region = Register(Tenant("a"), "reg-basic", 8192);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_THAT(region->id, ::testing::StartsWith("r-"));
  EXPECT_EQ(region->id.size(), 34u);
  EXPECT_EQ(region->size, 8192);
  EXPECT_EQ(region->tenant, "a");
  EXPECT_EQ(registry_->size(), 1);
  EXPECT_EQ(registry_->mapped_bytes(), 8192);
  EXPECT_TRUE(Mapped("reg-basic"));
  ASSERT_TRUE(registry_->Unregister(Tenant("a"), region->id).ok());
  EXPECT_EQ(registry_->size(), 0);
  EXPECT_EQ(registry_->mapped_bytes(), 0);
  EXPECT_FALSE(Mapped("reg-basic"));
  EXPECT_EQ(registry_->Unregister(Tenant("a"), region->id).code(), absl::StatusCode::kNotFound);
}

TEST_F(RegionRegistryTest, BytesWrittenOnOneSideAreSeenOnTheOther) {
  absl::StatusOr<int> fd = client::CreateSealedMemfd("reg-shared", 4096);
  ASSERT_TRUE(fd.ok());
  char* mine = static_cast<char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0));
  ASSERT_NE(mine, MAP_FAILED);
  auto token = client::PassFd(listener_->address(), *fd);
  close(*fd);
  ASSERT_TRUE(token.ok());
  auto region = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, *token});
  ASSERT_TRUE(region.ok()) << region.status();
  std::memcpy(mine + 100, "hello", 5);
  auto bytes = registry_->Acquire(Tenant("a"), "region", region->id, 100, 5, RegionAccess::kRead);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string seen;
  ASSERT_TRUE(bytes
                  ->ReadInto([&](absl::string_view piece) {
                    absl::StrAppend(&seen, piece);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(seen, "hello");
  ASSERT_TRUE(bytes
                  ->WriteFrom([](int64_t offset, int64_t length, char* dst) {
                    std::memcpy(dst, std::string("HELLO").data() + offset, length);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(std::string(mine + 100, 5), "HELLO");
  munmap(mine, 4096);
}

TEST_F(RegionRegistryTest, TokensAreSingleUseAndUnknownTokensAreNotFound) {
  const std::string token = Pass("reg-token", 4096);
  ASSERT_TRUE(registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, token}).ok());
  auto again = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, token});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.status().message(), HasSubstr("unknown, expired or already used"));
  auto guessed =
      registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, std::string(32, '0')});
  EXPECT_EQ(guessed.status().code(), absl::StatusCode::kNotFound);
  auto empty = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, ""});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegionRegistryTest, RefusesUnsealedMemfdsAndNonMemoryFds) {
  int unsealed = memfd_create("reg-unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  auto token = client::PassFd(listener_->address(), unsealed);
  close(unsealed);
  ASSERT_TRUE(token.ok());
  auto region = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, *token});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(region.status().message(), HasSubstr("F_SEAL_SHRINK"));

  int pipes[2];
  ASSERT_EQ(pipe(pipes), 0);
  token = client::PassFd(listener_->address(), pipes[0]);
  close(pipes[0]);
  close(pipes[1]);
  ASSERT_TRUE(token.ok());
  region = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, *token});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(region.status().message(), HasSubstr("not shared memory"));
  EXPECT_EQ(registry_->size(), 0);
}

TEST_F(RegionRegistryTest, MemfdSealedAgainstWritingIsInvalidArgument) {
  int fd = memfd_create("reg-readonly", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_WRITE), 0);
  auto token = client::PassFd(listener_->address(), fd);
  close(fd);
  ASSERT_TRUE(token.ok());
  auto region = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, *token});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(region.status().message(), HasSubstr("F_SEAL_WRITE"));
  EXPECT_EQ(registry_->size(), 0);
}

TEST_F(RegionRegistryTest, SizeLargerThanTheMemoryIsOutOfRange) {
  auto region = registry_->Register(Tenant("a"), "", 8192,
                                    {RegionHandle::Kind::kFdToken, Pass("reg-small", 4096)});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(region.status().message(),
            "size_bytes 8192 is larger than the region's memory (4096 bytes)");
  auto part = registry_->Register(Tenant("a"), "", 1000,
                                  {RegionHandle::Kind::kFdToken, Pass("reg-part", 4096)});
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->size, 1000);
}

TEST_F(RegionRegistryTest, ShmNamesNeedTheOperatorsConsent) {
  auto region = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kShmName, "/x"});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(region.status().message(), HasSubstr("--allow_shm_regions"));
}

TEST_F(RegionRegistryTest, OtherTenantsAndSessionsSeeNotFound) {
  auto durable = Register(Tenant("a"), "reg-durable", 4096);
  auto scoped = Register(Tenant("a", "s-1"), "reg-scoped", 4096);
  ASSERT_TRUE(durable.ok() && scoped.ok());
  auto use = [&](const Caller& caller, const std::string& id) {
    return registry_->Acquire(caller, "region", id, 0, 16, RegionAccess::kRead).status().code();
  };
  EXPECT_EQ(use(Tenant("a"), durable->id), absl::StatusCode::kOk);
  EXPECT_EQ(use(Tenant("a", "s-1"), durable->id), absl::StatusCode::kOk);
  EXPECT_EQ(use(Tenant("b"), durable->id), absl::StatusCode::kNotFound);
  EXPECT_EQ(use(Tenant("a", "s-1"), scoped->id), absl::StatusCode::kOk);
  EXPECT_EQ(use(Tenant("a"), scoped->id), absl::StatusCode::kNotFound);
  EXPECT_EQ(use(Tenant("a", "s-2"), scoped->id), absl::StatusCode::kNotFound);
  EXPECT_EQ(use(Tenant("b", "s-1"), scoped->id), absl::StatusCode::kNotFound);
  absl::Status other =
      registry_->Acquire(Tenant("b"), "chunk.region", durable->id, 0, 1, RegionAccess::kRead)
          .status();
  EXPECT_EQ(other.message(), absl::StrCat("chunk.region.region_id '", durable->id,
                                          "': no such region (unregistered, its session ended, "
                                          "or it belongs to another tenant or session)"));
  EXPECT_EQ(registry_->Unregister(Tenant("b"), durable->id).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(registry_->List(Tenant("b")), ::testing::IsEmpty());
  EXPECT_EQ(registry_->List(Tenant("a")).size(), 1u);
  EXPECT_EQ(registry_->List(Tenant("a", "s-1")).size(), 2u);
  Caller admin = Tenant("ops");
  admin.role = Role::kAdmin;
  EXPECT_EQ(registry_->List(admin).size(), 2u);
  EXPECT_EQ(use(admin, scoped->id), absl::StatusCode::kOk);
}

TEST_F(RegionRegistryTest, EndingASessionUnmapsItsRegionsOnly) {
  auto durable = Register(Tenant("a"), "reg-keep", 4096);
  auto scoped = Register(Tenant("a", "s-9"), "reg-session", 4096);
  ASSERT_TRUE(durable.ok() && scoped.ok());
  EXPECT_TRUE(Mapped("reg-session"));
  EXPECT_EQ(registry_->EndSession("s-9"), 1);
  EXPECT_FALSE(Mapped("reg-session"));
  EXPECT_TRUE(Mapped("reg-keep"));
  EXPECT_EQ(registry_->size(), 1);
}

TEST_F(RegionRegistryTest, RegisteringIntoAnEndedSessionIsRefused) {
  registry_->set_session_check([](const std::string&) { return false; });
  auto region = Register(Tenant("a", "s-gone"), "reg-late", 4096);
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->size(), 0);
  EXPECT_FALSE(Mapped("reg-late"));
}

TEST_F(RegionRegistryTest, UnregisterWaitsForTheTransferHoldingTheRegion) {
  auto region = Register(Tenant("a"), "reg-inflight", 1 << 20);
  ASSERT_TRUE(region.ok());
  auto bytes =
      registry_->Acquire(Tenant("a"), "region", region->id, 0, 1 << 20, RegionAccess::kWrite);
  ASSERT_TRUE(bytes.ok());
  std::atomic<bool> unregistered{false};
  absl::Notification started;
  std::thread unregister([&] {
    started.Notify();
    EXPECT_TRUE(registry_->Unregister(Tenant("a"), region->id).ok());
    unregistered = true;
  });
  started.WaitForNotification();
  // New uses fail at once, while the transfer holding the bytes goes on:
  // its memory stays mapped and writable until it lets go.
  while (registry_->size() != 0) std::this_thread::yield();
  EXPECT_EQ(registry_->Acquire(Tenant("a"), "region", region->id, 0, 1, RegionAccess::kRead)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(bytes
                  ->WriteFrom([](int64_t, int64_t length, char* dst) {
                    std::memset(dst, 7, length);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_FALSE(unregistered.load());
  EXPECT_TRUE(Mapped("reg-inflight"));
  { RegionBytes done = *std::move(bytes); }
  unregister.join();
  EXPECT_TRUE(unregistered.load());
  EXPECT_FALSE(Mapped("reg-inflight"));
}

TEST_F(RegionRegistryTest, MaxRegionsIsEnforced) {
  options_.max_regions = 2;
  registry_ = std::make_unique<RegionRegistry>(listener_.get(), nullptr, options_);
  ASSERT_TRUE(Register(Tenant("a"), "reg-max1", 4096).ok());
  ASSERT_TRUE(Register(Tenant("b"), "reg-max2", 4096).ok());
  auto third = Register(Tenant("a"), "reg-max3", 4096);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max_regions=2"));
  EXPECT_FALSE(Mapped("reg-max3"));
}

TEST_F(RegionRegistryTest, MaxRegionsPerTenantIsEnforced) {
  options_.max_regions_per_tenant = 1;
  registry_ = std::make_unique<RegionRegistry>(listener_.get(), nullptr, options_);
  ASSERT_TRUE(Register(Tenant("a"), "reg-tenant1", 4096).ok());
  ASSERT_TRUE(Register(Tenant("b"), "reg-tenant2", 4096).ok());
  auto again = Register(Tenant("a", "s-1"), "reg-tenant3", 4096);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(again.status().message(),
            "cannot register a region: the tenant has 1 of --tenant_max_regions=1 registered; "
            "unregister some first");
  EXPECT_FALSE(Mapped("reg-tenant3"));
}

// A child process that passes a sealed memfd and writes the token to the
// parent, then waits until told to exit (a byte on `release`).
struct PassingChild {
  pid_t pid = -1;
  std::string token;
  int release = -1;

  static PassingChild Start(const std::string& address, const std::string& name) {
    int token_pipe[2];
    int release_pipe[2];
    PassingChild child;
    if (pipe(token_pipe) != 0 || pipe(release_pipe) != 0) return child;
    child.pid = fork();
    if (child.pid == 0) {
      close(token_pipe[0]);
      close(release_pipe[1]);
      absl::StatusOr<int> fd = client::CreateSealedMemfd(name, 4096);
      absl::StatusOr<std::string> token =
          fd.ok() ? client::PassFd(address, *fd) : absl::StatusOr<std::string>(fd.status());
      const std::string line = token.value_or("") + "\n";
      (void)!write(token_pipe[1], line.data(), line.size());
      char byte;
      (void)!read(release_pipe[0], &byte, 1);
      _exit(0);
    }
    close(token_pipe[1]);
    close(release_pipe[0]);
    char buffer[64];
    ssize_t n = read(token_pipe[0], buffer, sizeof(buffer));
    close(token_pipe[0]);
    child.token = n > 1 ? std::string(buffer, static_cast<size_t>(n - 1)) : "";
    child.release = release_pipe[1];
    return child;
  }
  void Exit() {
    (void)!write(release, "x", 1);
    close(release);
    int status = 0;
    waitpid(pid, &status, 0);
  }
};

TEST_F(RegionRegistryTest, ARegionOutsideSessionsGoesWithTheProcessThatPassedItsFd) {
  PassingChild durable_child = PassingChild::Start(listener_->address(), "reg-child-durable");
  PassingChild session_child = PassingChild::Start(listener_->address(), "reg-child-session");
  ASSERT_EQ(durable_child.token.size(), 32u);
  ASSERT_EQ(session_child.token.size(), 32u);
  auto durable =
      registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, durable_child.token});
  ASSERT_TRUE(durable.ok()) << durable.status();
  EXPECT_EQ(durable->owner_pid, durable_child.pid);
  EXPECT_EQ(durable->owner_uid, static_cast<int64_t>(getuid()));
  auto scoped = registry_->Register(Tenant("a", "s-1"), "", 0,
                                    {RegionHandle::Kind::kFdToken, session_child.token});
  ASSERT_TRUE(scoped.ok()) << scoped.status();
  EXPECT_TRUE(Mapped("reg-child-durable"));
  // Both clients die. The region outside a session goes with its process;
  // the session's region stays until the session ends.
  durable_child.Exit();
  session_child.Exit();
  // The watcher drops the region from the registry, then its mapping goes
  // with the last reference (a moment later on a slow or ASan build).
  for (int i = 0; i < 1000 && (registry_->size() != 1 || Mapped("reg-child-durable")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(registry_->size(), 1);
  EXPECT_FALSE(Mapped("reg-child-durable"));
  EXPECT_EQ(registry_->List(Tenant("a", "s-1")).front().id, scoped->id);
  EXPECT_EQ(registry_->EndSession("s-1"), 1);
  EXPECT_FALSE(Mapped("reg-child-session"));
}

TEST_F(RegionRegistryTest, ATokenWhosePasserExitedRegistersOnlyWithinASession) {
  PassingChild child = PassingChild::Start(listener_->address(), "reg-child-gone");
  ASSERT_EQ(child.token.size(), 32u);
  child.Exit();
  auto region =
      registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kFdToken, child.token});
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(region.status().message(),
              HasSubstr(absl::StrCat("the process that passed the region's fd (pid ", child.pid)));
  EXPECT_THAT(region.status().message(), HasSubstr("register it within a session"));
  EXPECT_EQ(registry_->size(), 0);
  EXPECT_FALSE(Mapped("reg-child-gone"));
}

TEST_F(RegionRegistryTest, ShmNamesAreReadThroughTheirFdAndAShrinkFailsOnlyTheTransfer) {
  options_.allow_shm_names = true;
  registry_ = std::make_unique<RegionRegistry>(listener_.get(), nullptr, options_);
  const std::string name = absl::StrCat("/placement-reg-test-", getpid());
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 3 << 20), 0);
  ASSERT_EQ(pwrite(fd, "abc", 3, 2 << 20), 3);
  auto outside = registry_->Register(Tenant("a"), "", 0, {RegionHandle::Kind::kShmName, name});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(outside.status().message(), HasSubstr("must be registered within a session"));
  auto region =
      registry_->Register(Tenant("a", "s-1"), "", 0, {RegionHandle::Kind::kShmName, name});
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(region->size, 3 << 20);
  const Caller caller = Tenant("a", "s-1");
  auto read = [&](int64_t offset, int64_t size, std::string* out) {
    auto bytes =
        registry_->Acquire(caller, "region", region->id, offset, size, RegionAccess::kRead);
    if (!bytes.ok()) return bytes.status();
    int pieces = 0;
    absl::Status status = bytes->ReadInto([&](absl::string_view piece) {
      ++pieces;
      absl::StrAppend(out, piece);
      return absl::OkStatus();
    });
    EXPECT_LE(pieces, 3);  // 1 MiB pieces through the bounce buffer
    return status;
  };
  std::string bytes;
  ASSERT_TRUE(read(0, 3 << 20, &bytes).ok());
  EXPECT_EQ(bytes.substr(2 << 20, 3), "abc");
  // The client shrinks its memory: a mapping would fault (SIGBUS) and kill
  // the process; the transfer fails instead, naming the sizes.
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  bytes.clear();
  absl::Status shrunk = read(0, 3 << 20, &bytes);
  EXPECT_EQ(shrunk.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(shrunk.message(), HasSubstr("shrank to 4096 bytes under the transfer"));
  {
    auto write =
        registry_->Acquire(caller, "destination", region->id, 8192, 100, RegionAccess::kWrite);
    ASSERT_TRUE(write.ok());
    absl::Status written = write->WriteFrom([](int64_t, int64_t length, char* dst) {
      std::memset(dst, 1, length);
      return absl::OkStatus();
    });
    EXPECT_EQ(written.code(), absl::StatusCode::kFailedPrecondition);
  }  // (the region's end waits for the transfers holding it)
  // Within the memory that is left, transfers still work.
  bytes.clear();
  EXPECT_TRUE(read(0, 4096, &bytes).ok());
  close(fd);
  shm_unlink(name.c_str());
  EXPECT_EQ(registry_->EndSession("s-1"), 1);
}

TEST_F(RegionRegistryTest, DestroyingTheRegistryUnmapsEverything) {
  ASSERT_TRUE(Register(Tenant("a"), "reg-stop", 4096).ok());
  EXPECT_TRUE(Mapped("reg-stop"));
  registry_.reset();
  EXPECT_FALSE(Mapped("reg-stop"));
}

TEST(FdPassingListenerTest, UnreachableSocketsAndTakenAddressesAreUnavailable) {
  auto listener = FdPassingListener::Start(absl::StrCat("@placement-fd-test-", getpid()));
  ASSERT_TRUE(listener.ok());
  EXPECT_EQ(client::PassFd("@placement-no-such-socket", 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(FdPassingListener::Start(listener->get()->address()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ((*listener)->pending(), 0);
}

}  // namespace
}  // namespace placement::server

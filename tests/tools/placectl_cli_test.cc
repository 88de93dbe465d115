// placectl's command line: help, version, usage errors found before any
// connection, the connect timeout, "--" and negative numbers, enum spelling,
// and the batch-size advice for asked hardware. The real binary throughout;
// a real daemon where one is needed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/placectl_fixture.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Nothing listens on 127.0.0.1:1, and the connect timeout is long: a command
// that dialled before checking its arguments would end UNAVAILABLE, not with
// a usage error.
CommandResult RunOffline(std::vector<std::string> args) {
  std::vector<std::string> argv = {PlacectlBinary(), "--target=127.0.0.1:1",
                                   "--connect_timeout=60s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

TEST(PlacectlHelpTest, HelpExitsZeroAndListsEveryCommand) {
  for (const char* flag : {"--help", "-h", "help"}) {
    auto r = RunCommand({PlacectlBinary(), flag});
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("usage: placectl"));
    for (const char* command :
         {"devices", "validate-batch-size N", "top", "mesh create", "tensor put-batch",
          "tensor get-shards", "tensor assemble", "tensor disassemble", "collective all-reduce",
          "collective all-reduce-batch", "collective all-gather", "collective reduce-scatter",
          "collective broadcast", "prefetch DIR"}) {
      EXPECT_THAT(r.out, HasSubstr(command)) << flag;
    }
    EXPECT_THAT(r.err, Not(HasSubstr("No flags matched")));
  }
}

TEST(PlacectlHelpTest, CommandHelpShowsItsFlags) {
  auto r = RunCommand({PlacectlBinary(), "help", "tensor", "put"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("usage: placectl tensor put FILE.npy [flags]"));
  EXPECT_THAT(r.out, HasSubstr("--rule (default: \"\")"));
  EXPECT_THAT(r.out, HasSubstr("--chunk_bytes (default: 1048576)"));
  EXPECT_THAT(r.out, HasSubstr("--connect_timeout (default: 2s)"));
  auto same = RunCommand({PlacectlBinary(), "tensor", "put", "x.npy", "--help"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.out, r.out);
  EXPECT_THAT(r.out, HasSubstr("--global_name (default: \"\")"));
  EXPECT_THAT(r.out, HasSubstr("--global_timeout (default: 1m)"));
  EXPECT_THAT(r.out, HasSubstr("multi-controller upload"));
  auto reduce = RunCommand({PlacectlBinary(), "help", "collective", "all-reduce"});
  EXPECT_EQ(reduce.exit_code, 0) << reduce.err;
  EXPECT_THAT(reduce.out, HasSubstr("--controller (default: single)"));
  auto get = RunCommand({PlacectlBinary(), "help", "tensor", "get"});
  EXPECT_THAT(get.out, HasSubstr("--process (default: -1)"));
  auto group = RunCommand({PlacectlBinary(), "help", "collective"});
  EXPECT_EQ(group.exit_code, 0) << group.err;
  EXPECT_THAT(group.out, HasSubstr("collective broadcast ID"));
  EXPECT_THAT(group.out, Not(HasSubstr("tensor put")));
  auto unknown = RunCommand({PlacectlBinary(), "help", "frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no command 'frobnicate'"));
}

TEST(PlacectlHelpTest, VersionAndNoCommand) {
  auto version = RunCommand({PlacectlBinary(), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("placectl "));
  auto bare = RunCommand({PlacectlBinary()});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_THAT(bare.err, HasSubstr("commands:"));
}

struct UsageCase {
  std::vector<std::string> args;
  std::string message;
};

TEST(PlacectlUsageTest, ArgumentsAreCheckedBeforeConnecting) {
  const UsageCase cases[] = {
      {{"validate-batch-size", "eight"}, "N must be an integer, got 'eight'"},
      {{"validate-batch-size"}, "'validate-batch-size' needs N: got 0 arguments, expected 1"},
      {{"devices", "extra"}, "'devices' takes no arguments, got 'extra'"},
      {{"tensor", "describe", "a", "b", "c"}, "unexpected extra 'b' 'c'"},
      {{"tensor", "get", "t-1"}, "'tensor get' needs ID FILE.npy: got 1 argument, expected 2"},
      {{"devices", "--spec=x"}, "--spec does not apply to 'devices'"},
      {{"--frobnicate", "devices"}, "unknown flag --frobnicate"},
      {{"devices", "--timeout_seconds"}, "flag --timeout_seconds needs a value"},
      {{"tensor", "get", "t-1", "x.npy", "--device=abc"}, "invalid value 'abc' for --device"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"tensor"}, "'tensor' needs a subcommand"},
      {{"tensor", "frobnicate"}, "unknown tensor command 'frobnicate'"},
      {{"tensor", "put", "x.npy", "--device=1", "--mesh=m"},
       "give only one of --device, --mesh (with --spec) and --replicated"},
      {{"tensor", "put", "x.npy", "--rule=bogus", "--mesh=m"},
       "--rule must be shard_batch_dim, replicate, model_state or data_partition, got 'bogus'"},
      {{"tensor", "put", "x.npy", "--rule=model_state"}, "--rule=model_state needs --mesh"},
      {{"tensor", "put", "x.npy", "--mesh=m", "--batch_axis=1"},
       "--batch_axis applies only with --rule=shard_batch_dim"},
      {{"tensor", "put", "x.npy", "--rule=shard_batch_dim", "--mesh=m", "--spec=data"},
       "--rule=shard_batch_dim does not take --spec"},
      {{"tensor", "put", "x.npy", "--rule=model_state", "--mesh=m", "--param_sharding=half"},
       "--param_sharding must be replicate or shard, got 'half'"},
      {{"tensor", "put", "x.npy", "--rule=replicate", "--devices=0,x"},
       "--devices entry 'x' is not an integer"},
      {{"tensor", "place", "t-1"}, "tensor place needs --device, --mesh, --replicated or --rule"},
      {{"tensor", "rm"}, "give tensor ids or --prefix=P"},
      {{"tensor", "rm", "t-1", "--prefix=x"}, "give tensor ids or --prefix, not both"},
      {{"tensor", "rm", "--prefix="}, "--prefix must not be empty"},
      {{"tensor", "put-batch", "images"}, "'images' is not KEY=FILE.npy"},
      {{"tensor", "put-batch", "a=x.npy", "a=y.npy"}, "key 'a' is given twice"},
      {{"tensor", "assemble", "8,x", "t-1", "--device=0"}, "SHAPE entry 'x' is not an integer"},
      {{"tensor", "assemble", "8", "t-1"}, "tensor assemble needs --mesh"},
      {{"tensor", "assemble", "8", "t-1", "--mesh=m", "--partial=data", "--partial_op=avg"},
       "--partial_op must be sum, mean, max, min or prod, got 'avg'"},
      {{"collective", "all-reduce", "t-1", "--op=median"},
       "--op must be sum, mean, max, min or prod, got 'median'"},
      {{"collective", "broadcast", "t-1"}, "collective broadcast needs --root=DEVICE"},
      {{"collective", "all-gather", "t-1", "--root=1"}, "--root does not apply"},
      {{"mesh", "create", "data=2", "--num_devices=2"}, "--num_devices applies only with --preset"},
      {{"mesh", "create", "--preset=pipeline"}, "--preset must be data, model or hybrid"},
      {{"top", "--once", "--iterations=2"}, "give --once or --iterations, not both"},
      {{"prefetch", "dir", "--buffer_size=0"}, "--buffer_size must be >= 1, got 0"},
      {{"devices", "--timeout_seconds=0"}, "--timeout_seconds must be >= 1"},
      {{"devices", "--connect_timeout=0s"}, "--connect_timeout must be positive"},
      // Cluster flags.
      {{"collective", "all-reduce", "t-1", "--controller=both"},
       "--controller must be single or multi, got 'both'"},
      {{"collective", "broadcast", "t-1", "--root=0", "--controller="},
       "--controller must be single or multi, got ''"},
      {{"tensor", "ls", "--controller=multi"}, "--controller does not apply to 'tensor ls'"},
      {{"tensor", "get", "t-1", "x.npy", "--device=0", "--process=1"},
       "give --device or --process, not both"},
      {{"tensor", "get", "t-1", "x.npy", "--process=-1"}, "--process must be a process index >= 0"},
      {{"tensor", "get", "t-1", "x.npy", "--global_name=g"}, "--global_name does not apply"},
      {{"tensor", "put", "x.npy", "--mesh=m", "--global_shape=8"},
       "--global_shape needs --global_name"},
      {{"tensor", "put", "x.npy", "--mesh=m", "--global_timeout=5s"},
       "--global_timeout needs --global_name"},
      {{"tensor", "put", "x.npy", "--global_name=g"},
       "--global_name needs a placement over a mesh: --mesh (with --spec), --replicated or "
       "--rule=data_partition"},
      {{"tensor", "put", "x.npy", "--global_name=g", "--device=0"},
       "--global_name needs a placement over a mesh"},
      {{"tensor", "put-batch", "a=x.npy", "--global_name=g", "--rule=shard_batch_dim", "--mesh=m"},
       "--global_name needs a placement over a mesh"},
      {{"tensor", "put", "x.npy", "--global_name=", "--mesh=m"}, "--global_name must not be empty"},
      {{"tensor", "put", "x.npy", "--global_name=" + std::string(257, 'g'), "--mesh=m"},
       "--global_name is 257 bytes; at most 256"},
      {{"tensor", "put", "x.npy", "--global_name=g", "--mesh=m", "--name=w"},
       "give --name or --global_name, not both"},
      {{"tensor", "put-batch", "a=x.npy", "--global_name=g", "--replicated=m",
        "--global_shape=8,x"},
       "--global_shape entry 'x' is not an integer"},
      {{"tensor", "put", "x.npy", "--global_name=g", "--mesh=m", "--global_shape=-8,3"},
       "--global_shape entries must be >= 0, got -8"},
      {{"tensor", "put", "x.npy", "--global_name=g", "--rule=data_partition", "--mesh=m",
        "--global_timeout=0s"},
       "--global_timeout must be positive, got 0"},
      {{"tensor", "put", "x.npy", "--global_name=g", "--mesh=m", "--global_timeout=soon"},
       "invalid value 'soon' for --global_timeout"},
  };
  for (const UsageCase& c : cases) {
    auto r = RunOffline(c.args);
    std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << what;
    EXPECT_THAT(r.err, Not(HasSubstr("UNAVAILABLE"))) << what;
  }
}

TEST(PlacectlUsageTest, LocalFileErrorsComeBeforeConnecting) {
  auto missing = RunOffline({"tensor", "put", "/nonexistent/x.npy"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND: cannot open /nonexistent/x.npy"));
  auto no_dir = RunOffline({"prefetch", "/nonexistent/batches"});
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_THAT(no_dir.err, HasSubstr("NOT_FOUND: /nonexistent/batches is not a directory"));
}

// A TCP socket on 127.0.0.1 that listens and never answers: connections
// complete in the kernel, and the HTTP/2 handshake never does.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_, 16) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "silent listener: " << strerror(errno);
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() {
    if (fd_ >= 0) close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(PlacectlConnectTest, RefusedFailsAtOnceSilenceAfterTheConnectTimeout) {
  // Refused: no waiting for the connect timeout (60 s here).
  auto r =
      RunCommand({PlacectlBinary(), "--target=127.0.0.1:1", "--connect_timeout=60s", "devices"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE: cannot reach placementd at 127.0.0.1:1: the "
                               "connection failed (nothing listens there"));
  SilentListener silent;
  auto shorter = RunCommand(
      {PlacectlBinary(), "--target=" + silent.address(), "--connect_timeout=100ms", "info"});
  EXPECT_EQ(shorter.exit_code, 1);
  EXPECT_THAT(shorter.err,
              HasSubstr("cannot reach placementd at " + silent.address() + " within 100ms"));
  auto empty = RunCommand({PlacectlBinary(), "--target=", "info"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("--target must not be empty"));
  auto bad = RunCommand({PlacectlBinary(), "--connect_timeout=soon", "info"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("invalid value 'soon' for --connect_timeout"));
}

// How placectl prints a CPU daemon's devices, enums and batch-size advice:
// the daemon is a CPU one whatever $PLACEMENT_TEST_BACKEND says.
class PlacectlCliTest : public PlacectlFixture {
 protected:
  std::vector<std::string> DaemonFlags() const override {
    return {"--backend=cpu", "--cpu_devices=8"};
  }
};

TEST_F(PlacectlCliTest, NegativeNumbersAndDoubleDash) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"validate-batch-size", "-5", "--hardware=v100"},
        {"validate-batch-size", "--hardware", "v100", "--", "-5"},
        {"--hardware=v100", "validate-batch-size", "-5"}}) {
    auto r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("Batch size -5 is below minimum recommended 16 for v100."));
  }
  // After "--" a dash word is an operand, not a flag.
  auto dash = Run({"tensor", "describe", "--", "--json"});
  EXPECT_EQ(dash.exit_code, 1);
  EXPECT_THAT(dash.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(dash.err, HasSubstr("--json"));
}

TEST_F(PlacectlCliTest, EnumsPrintTheSameEverywhere) {
  auto devices = Run({"devices"});
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("0   cpu       cpu   cpu       0 B"));  // KIND, HARDWARE
  EXPECT_THAT(devices.out, Not(HasSubstr("HARDWARE_TYPE")));
  auto info = Run({"info"});
  EXPECT_THAT(info.out, HasSubstr("hardware_type: cpu"));
  auto batch = Run({"batch-size"});
  EXPECT_THAT(batch.out, HasSubstr("hardware:  cpu"));
  auto top = Run({"top", "--once"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_THAT(top.out, Not(HasSubstr("HARDWARE_TYPE")));
}

TEST_F(PlacectlCliTest, BatchSizeAdviceSpeaksOfTheAskedHardware) {
  // h100 asked on a CPU daemon: the seed's message for h100, and no advice
  // about this host's 8 CPU devices.
  auto asked = Run({"validate-batch-size", "1", "--hardware=h100"});
  EXPECT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("Batch size 1 is below minimum recommended 64 for h100."));
  EXPECT_THAT(asked.out, Not(HasSubstr("data-parallel")));
  EXPECT_THAT(asked.out, Not(HasSubstr("warning:")));
  // The detected hardware: the advice is about this host's devices.
  auto here = Run({"validate-batch-size", "12"});
  EXPECT_EQ(here.exit_code, 0) << here.err;
  EXPECT_THAT(here.out, HasSubstr("for cpu"));
  EXPECT_THAT(here.out,
              HasSubstr("warning: batch size 12 is not divisible by the 8 data-parallel devices"));
}

TEST_F(PlacectlCliTest, ExtraArgumentsAreErrorsWithADaemonToo) {
  auto r = Run({"status", "now"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'status' takes no arguments, got 'now'"));
  auto ok = Run({"status"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("streams:      0 prefetch"));
  EXPECT_THAT(ok.out, HasSubstr("cluster:      single\n"));  // a lone daemon
  EXPECT_THAT(Run({"--json", "status"}).out, HasSubstr("\"state\":\"CLUSTER_STATE_SINGLE\""));
}

}  // namespace
}  // namespace placement::testing

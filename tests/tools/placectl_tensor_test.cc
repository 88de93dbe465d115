// placectl mesh / tensor end to end against a real daemon with 8 CPU
// devices, moving .npy files written here by hand (and, where python3 with
// numpy is importable, files numpy itself writes and reads).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using ::testing::HasSubstr;
using testing::PlacectlBinary;
using testing::RunCommand;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A version 1.0 .npy file, laid out exactly as numpy's np.save writes it.
std::string Npy(const std::string& descr, const std::string& shape_tuple, const std::string& data,
                bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape_tuple + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict + data;
}

std::string RandomData(size_t n, uint32_t seed, bool boolean = false) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(boolean ? (rng() & 1) : rng());
  return out;
}

// The value of the first "key":"value" pair in compact JSON.
std::string JsonString(const std::string& json, const std::string& key) {
  std::string needle = "\"" + key + "\":\"";
  size_t at = json.find(needle);
  if (at == std::string::npos) return "";
  at += needle.size();
  return json.substr(at, json.find('"', at) - at);
}

class PlacectlTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon =
        testing::DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=8"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = daemon_->Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    baseline_ = MemoryInUse();
  }
  void TearDown() override {
    if (client_ != nullptr) EXPECT_EQ(MemoryInUse(), baseline_);
  }

  std::vector<int64_t> MemoryInUse() const {
    std::vector<int64_t> out;
    auto devices = client_->ListDevices();
    EXPECT_TRUE(devices.ok());
    if (devices.ok()) {
      for (const auto& d : *devices) out.push_back(d.memory_in_use_bytes);
    }
    return out;
  }

  testing::CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=" + daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  testing::TempDir dir_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::vector<int64_t> baseline_;
};

TEST_F(PlacectlTensorTest, MeshCommands) {
  auto created = Run({"mesh", "create", "data=2,model=4", "--mesh_id=grid"});
  EXPECT_EQ(created.exit_code, 0) << created.err;
  EXPECT_THAT(created.out, HasSubstr("grid"));
  EXPECT_THAT(created.out, HasSubstr("data=2,model=4"));
  EXPECT_THAT(created.out, HasSubstr("0,1,2,3,4,5,6,7"));

  auto explicit_devices = Run({"mesh", "create", "x=2", "--mesh_id=pair", "--devices=6,3"});
  EXPECT_EQ(explicit_devices.exit_code, 0) << explicit_devices.err;
  EXPECT_THAT(explicit_devices.out, HasSubstr("6,3"));

  auto dp = Run({"--json", "mesh", "create", "--preset=data", "--num_devices=4"});
  EXPECT_EQ(dp.exit_code, 0) << dp.err;
  EXPECT_THAT(dp.out, HasSubstr("\"name\":\"data\""));
  auto hybrid = Run({"mesh", "create", "--preset=hybrid", "--data_parallel=4", "--model_parallel=2",
                     "--data_axis=dp", "--model_axis=tp"});
  EXPECT_EQ(hybrid.exit_code, 0) << hybrid.err;
  EXPECT_THAT(hybrid.out, HasSubstr("dp=4,tp=2"));

  auto too_big = Run({"mesh", "create", "data=16"});
  EXPECT_EQ(too_big.exit_code, 1);
  EXPECT_THAT(too_big.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(too_big.err,
              HasSubstr("Not enough devices: mesh requires 16 devices but only 8 available."));
  EXPECT_EQ(Run({"mesh", "create", "data=0"}).exit_code, 1);
  EXPECT_EQ(Run({"mesh", "create", "data"}).exit_code, 2);
  EXPECT_EQ(Run({"mesh", "create", "--preset=pipeline"}).exit_code, 2);

  auto list = Run({"mesh", "ls"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("ID"));
  EXPECT_THAT(list.out, HasSubstr("grid"));
  EXPECT_THAT(list.out, HasSubstr("pair"));

  auto info = Run({"mesh", "info", "grid"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("total_devices: 8"));
  EXPECT_THAT(info.out, HasSubstr("{data: 2, model: 4}"));
  EXPECT_THAT(info.out, HasSubstr("[0 1 2 3]"));
  auto info_json = Run({"--json", "mesh", "info", "grid"});
  EXPECT_THAT(info_json.out, HasSubstr("\"total_devices\":\"8\""));

  auto missing = Run({"mesh", "info", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));

  auto removed = Run({"mesh", "rm", "grid"});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_THAT(Run({"mesh", "ls"}).out, ::testing::Not(HasSubstr("grid")));
}

TEST_F(PlacectlTensorTest, PutGetDescribePlaceRemove) {
  ASSERT_EQ(Run({"mesh", "create", "data=2,model=4", "--mesh_id=grid"}).exit_code, 0);
  std::string data = RandomData(8 * 12 * 4, 1);
  std::string in = Npy("<f4", "(8, 12)", data);
  WriteFile(Path("x.npy"), in);

  auto put = Run(
      {"--json", "tensor", "put", Path("x.npy"), "--mesh=grid", "--spec=data,model", "--name=x"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  std::string id = JsonString(put.out, "id");
  ASSERT_FALSE(id.empty()) << put.out;

  auto get = Run({"tensor", "get", id, Path("back.npy")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, HasSubstr("f32[8,12]"));
  EXPECT_EQ(ReadFile(Path("back.npy")), in);  // byte for byte, header included

  // Device 5 sits at (1, 1): rows 4..8, columns 3..6.
  auto shard = Run({"tensor", "get", id, Path("shard.npy"), "--device=5"});
  ASSERT_EQ(shard.exit_code, 0) << shard.err;
  std::string expected;
  for (int r = 4; r < 8; ++r) expected += data.substr((r * 12 + 3) * 4, 3 * 4);
  EXPECT_EQ(ReadFile(Path("shard.npy")), Npy("<f4", "(4, 3)", expected));

  // --process: the node's distinct shards, rows concatenated when they split
  // dimension 0 only (a lone daemon is node 0 and holds every row); another
  // node holds nothing.
  auto rows =
      Run({"--json", "tensor", "put", Path("x.npy"), "--rule=data_partition", "--mesh=grid"});
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  std::string rows_id = JsonString(rows.out, "id");
  auto node = Run({"tensor", "get", rows_id, Path("node.npy"), "--process=0"});
  ASSERT_EQ(node.exit_code, 0) << node.err;
  EXPECT_EQ(ReadFile(Path("node.npy")), in);
  auto other = Run({"tensor", "get", rows_id, Path("other.npy"), "--process=1"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.err, HasSubstr("NOT_FOUND"));
  ASSERT_EQ(Run({"tensor", "rm", rows_id}).exit_code, 0);

  auto describe = Run({"tensor", "describe", id});
  EXPECT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_THAT(describe.out, HasSubstr("P('data', 'model')"));
  EXPECT_THAT(describe.out, HasSubstr("DEVICE  NODE  INDEX"));
  EXPECT_THAT(describe.out, HasSubstr("5       0     [4:8, 3:6]"));
  auto ls = Run({"tensor", "ls"});
  EXPECT_THAT(ls.out, HasSubstr(id));
  EXPECT_THAT(ls.out, HasSubstr("f32[8,12]"));
  EXPECT_THAT(Run({"tensor", "ls", "--name_prefix=y"}).out, ::testing::Not(HasSubstr(id)));

  auto placed = Run({"--json", "tensor", "place", id, "--replicated=grid", "--donate"});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  std::string replicated = JsonString(placed.out, "id");
  ASSERT_FALSE(replicated.empty());
  auto gone = Run({"tensor", "describe", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
  auto on_device = Run({"--json", "tensor", "place", replicated, "--device=3", "--name=moved"});
  ASSERT_EQ(on_device.exit_code, 0) << on_device.err;
  std::string moved = JsonString(on_device.out, "id");
  ASSERT_EQ(Run({"tensor", "get", moved, Path("moved.npy")}).exit_code, 0);
  EXPECT_EQ(ReadFile(Path("moved.npy")), in);
  auto resharded = Run({"tensor", "place", moved, "--mesh=grid", "--spec=None,(data,model)"});
  EXPECT_EQ(resharded.exit_code, 1);  // 12 does not divide by 8
  EXPECT_THAT(resharded.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_EQ(Run({"tensor", "place", moved, "--mesh=grid", "--spec=None,(data,model)", "--padded"})
                .exit_code,
            0);

  EXPECT_EQ(Run({"tensor", "place", moved}).exit_code, 2);
  EXPECT_EQ(Run({"tensor", "place", moved, "--device=1", "--replicated=grid"}).exit_code, 2);
  EXPECT_EQ(Run({"tensor", "place", moved, "--spec=data"}).exit_code, 2);

  auto rm_refused = Run({"mesh", "rm", "grid"});
  EXPECT_EQ(rm_refused.exit_code, 1);
  EXPECT_THAT(rm_refused.err, HasSubstr("FAILED_PRECONDITION"));
  auto rm = Run({"tensor", "rm", replicated, moved});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.out, HasSubstr("deleted 2 tensors"));
  auto forced = Run({"mesh", "rm", "grid", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(forced.out, HasSubstr("1 tensors deleted"));
}

TEST_F(PlacectlTensorTest, EveryDTypeRoundTrips) {
  struct Case {
    const char* descr;
    int size;
  };
  const Case cases[] = {{"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"<V2", 2}, {"|i1", 1},
                        {"<i2", 2}, {"<i4", 4}, {"<i8", 8}, {"|u1", 1}, {"|b1", 1}};
  std::vector<std::string> ids;
  for (const Case& c : cases) {
    // Over one chunk, so every file takes the chunked path.
    std::string data =
        RandomData(size_t{3} * 100 * 4000 * c.size, c.size, std::string(c.descr) == "|b1");
    std::string in = Npy(c.descr, "(3, 100, 4000)", data);
    WriteFile(Path("in.npy"), in);
    auto put = Run({"--json", "tensor", "put", Path("in.npy"), "--device=2"});
    ASSERT_EQ(put.exit_code, 0) << c.descr << ": " << put.err;
    std::string id = JsonString(put.out, "id");
    ids.push_back(id);
    auto get = Run({"tensor", "get", id, Path("out.npy")});
    ASSERT_EQ(get.exit_code, 0) << c.descr << ": " << get.err;
    EXPECT_TRUE(ReadFile(Path("out.npy")) == in) << c.descr;
  }
  std::vector<std::string> rm = {"tensor", "rm"};
  rm.insert(rm.end(), ids.begin(), ids.end());
  EXPECT_EQ(Run(rm).exit_code, 0);
}

TEST_F(PlacectlTensorTest, BadFilesAndUsage) {
  WriteFile(Path("fortran.npy"), Npy("<f4", "(2, 3)", std::string(24, '\0'), true));
  auto fortran = Run({"tensor", "put", Path("fortran.npy")});
  EXPECT_EQ(fortran.exit_code, 1);
  EXPECT_THAT(fortran.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(fortran.err, HasSubstr("Fortran order"));

  WriteFile(Path("short.npy"), Npy("<f4", "(32, 32)", std::string(4000, '\0')));
  auto short_file = Run({"tensor", "put", Path("short.npy")});
  EXPECT_EQ(short_file.exit_code, 1);
  EXPECT_THAT(short_file.err, HasSubstr("expected 4096 data bytes for f32[32,32]"));

  WriteFile(Path("u16.npy"), Npy("<u2", "(2,)", std::string(4, '\0')));
  auto u16 = Run({"tensor", "put", Path("u16.npy")});
  EXPECT_EQ(u16.exit_code, 1);
  EXPECT_THAT(u16.err, HasSubstr("'<u2' is not supported"));

  EXPECT_EQ(Run({"tensor", "put", Path("missing.npy")}).exit_code, 1);
  EXPECT_EQ(Run({"tensor", "put"}).exit_code, 2);
  EXPECT_EQ(Run({"tensor", "frobnicate"}).exit_code, 2);
  EXPECT_EQ(Run({"tensor", "put", Path("short.npy"), "--device=1", "--mesh=m"}).exit_code, 2);
  EXPECT_EQ(Run({"tensor", "put", Path("short.npy"), "--mesh=m", "--spec=(a"}).exit_code, 2);

  auto unknown = Run({"tensor", "get", "t-nope", Path("nope.npy")});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(std::fopen(Path("nope.npy").c_str(), "rb"), nullptr);  // no partial file
  auto ls = Run({"--json", "tensor", "ls"});
  EXPECT_EQ(ls.exit_code, 0);
  EXPECT_THAT(ls.out, ::testing::Not(HasSubstr("\"id\"")));
}

// Cross-check with numpy itself, where it can be imported.
TEST_F(PlacectlTensorTest, NumpyWritesAndReadsOurFiles) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with numpy is not importable here";
  }
  std::string script = Path("np.py");
  WriteFile(
      script,
      "import sys, numpy as np\n"
      "mode, path = sys.argv[1], sys.argv[2]\n"
      "ref = {'f': np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7,\n"
      "       'i': np.arange(-6, 6, dtype=np.int64).reshape(3, 4),\n"
      "       'b': np.array([True, False, True]),\n"
      "       'h': np.linspace(-2, 2, 10, dtype=np.float16)}\n"
      "if mode == 'write':\n"
      "    for k, v in ref.items(): np.save(path + k + '.npy', v)\n"
      "else:\n"
      "    for k, v in ref.items():\n"
      "        got = np.load(path + k + '.npy')\n"
      "        assert got.dtype == v.dtype and got.shape == v.shape, (k, got.dtype, got.shape)\n"
      "        assert np.array_equal(got, v), k\n"
      "    print('numpy agrees')\n");
  auto written = RunCommand({"/usr/bin/env", "python3", script, "write", Path("ref_")});
  ASSERT_EQ(written.exit_code, 0) << written.err;
  std::vector<std::string> ids;
  for (const char* k : {"f", "i", "b", "h"}) {
    auto put = Run({"--json", "tensor", "put", Path(std::string("ref_") + k + ".npy")});
    ASSERT_EQ(put.exit_code, 0) << k << ": " << put.err;
    ids.push_back(JsonString(put.out, "id"));
    auto get = Run({"tensor", "get", ids.back(), Path(std::string("ours_") + k + ".npy")});
    ASSERT_EQ(get.exit_code, 0) << k << ": " << get.err;
  }
  auto read = RunCommand({"/usr/bin/env", "python3", script, "read", Path("ours_")});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_THAT(read.out, HasSubstr("numpy agrees"));
  std::vector<std::string> rm = {"tensor", "rm"};
  rm.insert(rm.end(), ids.begin(), ids.end());
  EXPECT_EQ(Run(rm).exit_code, 0);
}

}  // namespace
}  // namespace placement

// Shared pieces of the placectl end-to-end tests: a real daemon with 8 CPU
// devices, a runner for the real placectl binary, and .npy files written by
// hand exactly as np.save writes them.
#ifndef PLACEMENT_TESTS_TOOLS_PLACECTL_FIXTURE_H_
#define PLACEMENT_TESTS_TOOLS_PLACECTL_FIXTURE_H_

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "tests/testing/daemon_process.h"

namespace placement::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A version 1.0 .npy file, laid out as np.save writes it.
inline std::string Npy(const std::string& descr, const std::string& shape_tuple,
                       const std::string& data) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_tuple + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// The float32 data of a version 1.0 .npy file.
inline std::vector<float> NpyFloats(const std::string& file) {
  if (file.size() < 10) return {};
  size_t header = 10 + static_cast<uint8_t>(file[8]) + (static_cast<uint8_t>(file[9]) << 8);
  std::vector<float> out((file.size() - header) / sizeof(float));
  std::memcpy(out.data(), file.data() + header, out.size() * sizeof(float));
  return out;
}

// The value of the first "key":"value" pair in compact JSON.
inline std::string JsonString(const std::string& json, const std::string& key, size_t from = 0) {
  std::string needle = "\"" + key + "\":\"";
  size_t at = json.find(needle, from);
  if (at == std::string::npos) return "";
  at += needle.size();
  return json.substr(at, json.find('"', at) - at);
}

// Every value of "key":"value" pairs in compact JSON, in order.
inline std::vector<std::string> JsonStrings(const std::string& json, const std::string& key) {
  std::vector<std::string> out;
  std::string needle = "\"" + key + "\":\"";
  for (size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at)) {
    at += needle.size();
    out.push_back(json.substr(at, json.find('"', at) - at));
  }
  return out;
}

// A daemon with 8 CPU devices; TearDown checks every device's memory is back
// at its baseline (nothing a command made outlives it unless the test keeps
// it on purpose and deletes it).
class PlacectlFixture : public ::testing::Test {
 protected:
  // The daemon's flags (its backend is TestBackend() unless they name one).
  virtual std::vector<std::string> DaemonFlags() const { return {"--cpu_devices=8"}; }

  void SetUp() override {
    auto daemon = DaemonProcess::Start({.extra_flags = DaemonFlags()});
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

  CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=" + daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  // Runs a --json command that must succeed and returns the first "id".
  std::string RunForId(std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    CommandResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return JsonString(r.out, "id");
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::vector<int64_t> baseline_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TOOLS_PLACECTL_FIXTURE_H_

#include "common/mesh.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

Mesh MustCreate(std::vector<MeshAxis> axes, std::vector<int64_t> ids) {
  absl::StatusOr<Mesh> mesh = Mesh::Create(std::move(axes), std::move(ids));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

// Expects INVALID_ARGUMENT whose message contains every one of `parts`.
void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(status.message(), part))
        << "message '" << status.message() << "' lacks '" << part << "'";
  }
}

TEST(MeshTest, CreateTwoAxes) {
  Mesh mesh = MustCreate({{"data", 2}, {"model", 4}}, Iota(8));
  EXPECT_EQ(mesh.num_devices(), 8);
  EXPECT_EQ(mesh.num_axes(), 2);
  EXPECT_EQ(mesh.axes()[0], (MeshAxis{"data", 2}));
  EXPECT_EQ(mesh.axes()[1], (MeshAxis{"model", 4}));
  EXPECT_EQ(mesh.device_ids(), Iota(8));
  EXPECT_EQ(mesh.AxisNames(), (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(mesh.AxisSizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mesh.AxisIndex("data"), 0);
  EXPECT_EQ(mesh.AxisIndex("model"), 1);
  EXPECT_EQ(mesh.AxisIndex("x"), -1);
  EXPECT_EQ(mesh.AxisIndex(""), -1);
  EXPECT_EQ(mesh.ToString(), "Mesh(data=2, model=4)");
  EXPECT_EQ(mesh.DebugString(), "Mesh(data=2, model=4; devices=[0, 1, 2, 3, 4, 5, 6, 7])");
}

TEST(MeshTest, AcceptedAxisNames) {
  for (const char* name : {"a", "_", "Z9", "data.parallel", "x-y", "_0.-", "abc_DEF"}) {
    EXPECT_TRUE(Mesh::Create({{name, 1}}, {0}).ok()) << name;
  }
  EXPECT_TRUE(Mesh::Create({{std::string(64, 'a'), 1}}, {0}).ok());
}

TEST(MeshTest, CreateErrors) {
  ExpectInvalid(Mesh::Create({}, {0}).status(), {"axes", "empty", "1 device"});
  ExpectInvalid(Mesh::Create({{"x", 0}}, {}).status(), {"axes[0].size", "'x'", "is 0", ">= 1"});
  ExpectInvalid(Mesh::Create({{"x", 2}, {"y", -3}}, {0, 1}).status(), {"axes[1].size", "-3"});
  ExpectInvalid(Mesh::Create({{"", 1}}, {0}).status(), {"axes[0].name", "empty"});
  ExpectInvalid(Mesh::Create({{"x", 2}, {"x", 2}}, Iota(4)).status(),
                {"axes[1].name", "'x'", "duplicate"});
  for (const char* bad : {"1x", "a b", "-a", ".a", "a/b", "a:b", "é"}) {
    ExpectInvalid(Mesh::Create({{"ok", 1}, {bad, 1}}, {0}).status(),
                  {"axes[1].name", bad, "[A-Za-z_][A-Za-z0-9_.-]{0,63}"});
  }
  ExpectInvalid(Mesh::Create({{std::string(65, 'a'), 1}}, {0}).status(), {"65 characters"});
  ExpectInvalid(Mesh::Create({{"x", 2}, {"y", 4}}, Iota(6)).status(),
                {"(x=2, y=4)", "need 8 device ids", "got 6"});
  ExpectInvalid(Mesh::Create({{"x", 2}}, {0, 1, 2}).status(), {"need 2", "got 3"});
  ExpectInvalid(Mesh::Create({{"x", 4}}, {0, 1, 2, 1}).status(),
                {"device_ids[3]", "is 1", "unique"});
  ExpectInvalid(Mesh::Create({{"x", 2}}, {0, -5}).status(), {"device_ids[1]", "-5", ">= 0"});
  ExpectInvalid(Mesh::Create({{"x", int64_t{1} << 40}, {"y", int64_t{1} << 40}}, {}).status(),
                {"more than"});
}

TEST(MeshTest, SingleDevice) {
  Mesh mesh = Mesh::SingleDevice(5);
  EXPECT_EQ(mesh.num_axes(), 0);
  EXPECT_EQ(mesh.num_devices(), 1);
  EXPECT_EQ(mesh.device_ids(), (std::vector<int64_t>{5}));
  EXPECT_TRUE(mesh.Coordinates(0).empty());
  EXPECT_EQ(mesh.PositionAt({}), 0);
  EXPECT_EQ(mesh.PositionOf(5), 0);
  EXPECT_EQ(mesh.PositionOf(0), -1);
  EXPECT_EQ(mesh.ToString(), "Mesh()");
  EXPECT_EQ(mesh.DebugString(), "Mesh(devices=[5])");
  EXPECT_EQ(mesh, Mesh::SingleDevice(5));
  EXPECT_FALSE(mesh == Mesh::SingleDevice(4));
  absl::StatusOr<Groups> groups = mesh.AxisGroups({});
  ASSERT_TRUE(groups.ok());
  EXPECT_EQ(*groups, (Groups{{0}}));
  EXPECT_EQ(*mesh.AxisDeviceGroups({}), (Groups{{5}}));
  ExpectInvalid(mesh.AxisGroups({"x"}).status(), {"'x'", "Mesh()"});
}

TEST(MeshTest, CoordinatesAreMixedRadixAxisZeroMostSignificant) {
  Mesh mesh = MustCreate({{"a", 2}, {"b", 3}, {"c", 4}}, Iota(24));
  for (int64_t p = 0; p < 24; ++p) {
    const std::vector<int64_t> coords = mesh.Coordinates(p);
    EXPECT_EQ(coords, (std::vector<int64_t>{p / 12, (p / 4) % 3, p % 4})) << p;
    EXPECT_EQ(mesh.PositionAt(coords), p);
  }
  EXPECT_EQ(mesh.Coordinates(23), (std::vector<int64_t>{1, 2, 3}));
}

TEST(MeshTest, CustomDeviceOrder) {
  Mesh mesh = MustCreate({{"x", 2}, {"y", 2}}, {3, 1, 0, 2});
  EXPECT_EQ(mesh.PositionOf(3), 0);
  EXPECT_EQ(mesh.PositionOf(1), 1);
  EXPECT_EQ(mesh.PositionOf(0), 2);
  EXPECT_EQ(mesh.PositionOf(2), 3);
  EXPECT_EQ(mesh.PositionOf(4), -1);
  EXPECT_EQ(mesh.PositionOf(-1), -1);
  EXPECT_EQ(*mesh.AxisGroups({"y"}), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(*mesh.AxisDeviceGroups({"y"}), (Groups{{3, 1}, {0, 2}}));
  EXPECT_EQ(*mesh.AxisDeviceGroups({"x"}), (Groups{{3, 0}, {1, 2}}));
  // Sparse, large ids are fine.
  EXPECT_TRUE(Mesh::Create({{"x", 2}}, {1000, 7}).ok());
}

TEST(MeshTest, Equality) {
  Mesh a = MustCreate({{"x", 2}, {"y", 2}}, Iota(4));
  EXPECT_EQ(a, MustCreate({{"x", 2}, {"y", 2}}, Iota(4)));
  EXPECT_FALSE(a == MustCreate({{"x", 2}, {"y", 2}}, {0, 1, 3, 2}));
  EXPECT_FALSE(a == MustCreate({{"x", 2}, {"z", 2}}, Iota(4)));
  EXPECT_FALSE(a == MustCreate({{"y", 2}, {"x", 2}}, Iota(4)));
  EXPECT_FALSE(a == MustCreate({{"x", 4}}, Iota(4)));
  Mesh copy = a;  // value semantics
  EXPECT_EQ(copy, a);
}

TEST(MeshTest, AxisGroups2x4) {
  Mesh mesh = MustCreate({{"data", 2}, {"model", 4}}, Iota(8));
  EXPECT_EQ(*mesh.AxisGroups({"model"}), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"data"}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"data", "model"}), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  // 'model' most significant: rank = 2 * model + data.
  EXPECT_EQ(*mesh.AxisGroups({"model", "data"}), (Groups{{0, 4, 1, 5, 2, 6, 3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({}), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(MeshTest, AxisGroups2x2x2) {
  Mesh mesh = MustCreate({{"a", 2}, {"b", 2}, {"c", 2}}, Iota(8));
  // Position = 4a + 2b + c.
  EXPECT_EQ(*mesh.AxisGroups({"a"}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"b"}), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"c"}), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"a", "b"}), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"b", "a"}), (Groups{{0, 4, 2, 6}, {1, 5, 3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"a", "c"}), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"c", "a"}), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"c", "b", "a"}), (Groups{{0, 4, 2, 6, 1, 5, 3, 7}}));
  EXPECT_EQ(*mesh.AxisGroups({"a", "b", "c"}), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(MeshTest, AxisGroupsMatchBruteForceDefinition) {
  Mesh mesh = MustCreate({{"a", 2}, {"b", 3}, {"c", 1}, {"d", 2}}, Iota(12));
  const std::vector<std::vector<std::string>> cases = {
      {"a"}, {"b"}, {"c"}, {"d"}, {"b", "a"}, {"d", "b"}, {"a", "c", "d"}, {"d", "c", "b", "a"}};
  for (const std::vector<std::string>& names : cases) {
    absl::StatusOr<Groups> groups = mesh.AxisGroups(names);
    ASSERT_TRUE(groups.ok()) << groups.status();
    int64_t group_size = 1;
    for (const std::string& n : names) group_size *= mesh.axes()[mesh.AxisIndex(n)].size;
    ASSERT_EQ(static_cast<int64_t>(groups->size()), 12 / group_size);
    std::vector<int> seen(12, 0);
    for (size_t g = 0; g < groups->size(); ++g) {
      const std::vector<int64_t>& group = (*groups)[g];
      ASSERT_EQ(static_cast<int64_t>(group.size()), group_size);
      for (size_t r = 0; r < group.size(); ++r) {
        ++seen[group[r]];
        const std::vector<int64_t> coords = mesh.Coordinates(group[r]);
        const std::vector<int64_t> first = mesh.Coordinates(group[0]);
        int64_t rank = 0;
        for (const std::string& n : names) {
          const int i = mesh.AxisIndex(n);
          rank = rank * mesh.axes()[i].size + coords[i];
        }
        EXPECT_EQ(rank, static_cast<int64_t>(r));
        for (int i = 0; i < mesh.num_axes(); ++i) {
          const bool named =
              std::find(names.begin(), names.end(), mesh.axes()[i].name) != names.end();
          if (!named) {
            EXPECT_EQ(coords[i], first[i]);
          }
        }
      }
      if (g > 0) {
        EXPECT_LT((*groups)[g - 1][0], group[0]);  // row-major over the other axes
      }
    }
    for (int count : seen) EXPECT_EQ(count, 1);
  }
}

TEST(MeshTest, AxisGroupsErrors) {
  Mesh mesh = MustCreate({{"data", 2}, {"model", 4}}, Iota(8));
  ExpectInvalid(mesh.AxisGroups({"nope"}).status(),
                {"axis_names[0]", "'nope'", "Mesh(data=2, model=4)"});
  ExpectInvalid(mesh.AxisGroups({"data", "data"}).status(),
                {"axis_names[1]", "'data'", "more than once"});
  ExpectInvalid(mesh.AxisDeviceGroups({"model", "x"}).status(), {"axis_names[1]", "'x'"});
}

TEST(MeshTest, ValidateAxisName) {
  EXPECT_TRUE(ValidateAxisName("data", "f").ok());
  ExpectInvalid(ValidateAxisName("9", "axes[2].name"), {"axes[2].name", "'9'"});
}

}  // namespace
}  // namespace placement

// Every call the C++ client library makes carries the client's bearer token
// and its session (Client::Impl::Prepare adds them call by call; the channel
// has no interceptor that would catch a call that forgot). Against a real
// placementd that requires tokens: the typed calls of every family (devices,
// meshes, tensors, regions, collectives, views, prefetch, sessions), unary
// and streams, uploads and downloads over every transfer path, must be
// admitted (a call without the token fails UNAUTHENTICATED), and everything
// they create must belong to the client's session (closing the session
// leaves none of it behind).
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/integration/view_fixture.h"

namespace placement::client {
namespace {

class ClientCallMetadataTest : public ViewTest {};

// f32[262144] (1 MiB: large enough for every transfer path) of `seed`.
std::vector<float> Values(float seed) {
  std::vector<float> values(262144);
  for (size_t i = 0; i < values.size(); ++i) values[i] = seed + static_cast<float>(i % 97);
  return values;
}

TEST_F(ClientCallMetadataTest, EveryLibraryCallCarriesTheTokenAndTheSession) {
  const Client& alice = *alice_;
  ASSERT_FALSE(alice.session_id().empty());
  std::vector<std::string> made;  // every tensor alice's calls created
  auto keep = [&](const absl::StatusOr<TensorInfo>& info, const char* what) {
    EXPECT_TRUE(info.ok()) << what << ": " << info.status();
    if (info.ok()) made.push_back(info->id);
  };

  // Devices and the daemon.
  EXPECT_TRUE(alice.ListDevices().ok());
  EXPECT_TRUE(alice.GetDeviceInfo().ok());
  EXPECT_TRUE(alice.GetStatus().ok());
  EXPECT_TRUE(alice.ListStreams().ok());
  EXPECT_TRUE(alice.ValidateBatchSize(64).ok());

  // Meshes.
  MeshClient meshes(alice);
  auto mesh = meshes.Create({{"data", 8}}, {.mesh_id = "metadata-mesh"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_TRUE(meshes.Get("metadata-mesh").ok());
  EXPECT_TRUE(meshes.List().ok());

  // Uploads and downloads over every path.
  TensorClient tensors(alice);
  const std::vector<float> values = Values(1.0f);
  const HostArray array = HostArray::Of(values, {262144});
  for (TransferPath path : {TransferPath::kStream, TransferPath::kRegion, TransferPath::kInPlace}) {
    SCOPED_TRACE(static_cast<int>(path));
    auto up = tensors.Upload(array, {}, UploadOptions{.path = path});
    keep(up, "Upload");
    if (!up.ok()) continue;
    std::vector<float> back(values.size());
    auto down = tensors.Download(up->id, AsWritableBytes(back), DownloadSelection::Whole(),
                                 DownloadOptions{.path = path});
    ASSERT_TRUE(down.ok()) << down.status();
    EXPECT_EQ(std::memcmp(back.data(), values.data(), values.size() * sizeof(float)), 0);
  }
  auto batch = tensors.UploadBatch({{"x", array}, {"y", array}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (const NamedTensor& named : *batch) made.push_back(named.tensor.id);
  auto uploader = tensors.StartUpload(DType::kF32, {262144});
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  ASSERT_TRUE((*uploader)->Write(AsBytes(absl::MakeConstSpan(values))).ok());
  keep((*uploader)->Finish(), "StartUpload");
  auto bytes = tensors.DownloadBytes(made.front());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(tensors.Describe(made.front()).ok());
  EXPECT_TRUE(tensors.List().ok());

  // Regions named explicitly.
  auto region = SharedRegion::Create(alice, 1 << 20);
  ASSERT_TRUE(region.ok()) << region.status();
  std::memcpy((*region)->data(), values.data(), 1 << 20);
  keep(tensors.UploadFromRegion(**region, 0, DType::kF32, {262144}), "UploadFromRegion");
  EXPECT_TRUE(tensors.DownloadToRegion(made.back(), **region, 0).ok());
  EXPECT_TRUE(RegionClient(alice).List().ok());
  EXPECT_TRUE((*region)->Unregister().ok());

  // Delete and Persist (a persisted tensor outlives the session).
  ASSERT_TRUE(tensors.Delete({made.back()}).ok());
  made.pop_back();
  auto durable = tensors.Upload(array);
  ASSERT_TRUE(durable.ok()) << durable.status();
  ASSERT_TRUE(tensors.Persist({durable->id}).ok());

  // Placement, collectives and views on a tensor sharded over the mesh.
  auto sharded = tensors.Upload(array, Placement::Sharded("metadata-mesh", {{"data"}}));
  keep(sharded, "Upload sharded");
  ASSERT_TRUE(sharded.ok());
  auto replicated = tensors.Place(made.front(), Rule::Replicate({0, 1}));
  keep(replicated, "Place");
  auto pieces = tensors.Disassemble(sharded->id);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  for (const TensorInfo& piece : *pieces) made.push_back(piece.id);
  CollectiveClient collectives(alice);
  keep(collectives.AllReduce(sharded->id, ReduceOp::kSum), "AllReduce");
  auto fused = collectives.AllReduceBatch({sharded->id}, ReduceOp::kSum);
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (const TensorInfo& info : *fused) made.push_back(info.id);
  keep(collectives.AllGather(sharded->id, 0), "AllGather");
  keep(collectives.Broadcast(sharded->id, 0), "Broadcast");
  auto view = tensors.View(sharded->id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(ListExports(alice).ok());
  view->reset();

  // A prefetch stream (opened in the session: it ends with it).
  auto stream = PrefetchStream::Open(alice, {.release = ReleaseMode::kExplicit});
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto sent = (*stream)->SendBatch({{"x", array}});
  ASSERT_TRUE(sent.ok()) << sent.status();
  auto read = (*stream)->Read();
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  absl::Status released = (*stream)->Release((*read)->sequence);
  EXPECT_TRUE(released.ok()) << released;
  ASSERT_TRUE((*stream)->CloseSend().ok());
  auto end = (*stream)->Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  stream->reset();

  // Everything alice made is alice's (her tenant) and her session's: once
  // the session closes, the admin finds none of it.
  auto all = TensorClient(*root_).List();
  ASSERT_TRUE(all.ok()) << all.status();
  int seen = 0;
  for (const TensorInfo& t : *all) {
    for (const std::string& id : made) seen += t.id == id;
  }
  EXPECT_EQ(seen, static_cast<int>(made.size()));
  alice_.reset();
  EXPECT_TRUE(WaitFor([&] {
    auto left = TensorClient(*root_).List();
    if (!left.ok()) return false;
    for (const TensorInfo& t : *left) {
      for (const std::string& id : made) {
        if (t.id == id) return false;
      }
    }
    return true;
  })) << "tensors of alice's calls outlived her session";
  EXPECT_TRUE(TensorClient(*root_).Describe(durable->id).ok());
}

// The same calls without the token are refused: the daemon does require it,
// so the test above shows the token travelled.
TEST_F(ClientCallMetadataTest, WithoutTheTokenCallsAreRefused) {
  ClientOptions options;
  options.session_policy = SessionPolicy::kNone;
  auto anonymous = Client::Connect(daemon_->address(), options);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ((*anonymous)->ListDevices().status().code(), absl::StatusCode::kUnauthenticated);
  const std::vector<float> values = Values(2.0f);
  EXPECT_EQ(
      TensorClient(**anonymous)
          .Upload(HostArray::Of(values, {262144}), {}, UploadOptions{.path = TransferPath::kStream})
          .status()
          .code(),
      absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace placement::client

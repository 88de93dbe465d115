// Authentication and tenant isolation through every RPC, against a real
// daemon with --auth_file: bearer tokens good / bad / missing; tenant B sees
// tenant A's tensors as ids that do not exist (NOT_FOUND, never the bytes) on
// List, Describe, Download, Place, Assemble, Disassemble, Delete and every
// collective; names resolve within the caller's tenant; an admin sees and
// manages them; per-tenant quotas.
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/mesh_service.grpc.pb.h"
#include "placement/v1/prefetch_service.grpc.pb.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/auth_tokens.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::TempDir;

using testing::Sha256Hex;

// One tenant's view of the daemon: every call carries its bearer token.
class As {
 public:
  As(std::shared_ptr<grpc::Channel> channel, std::string token)
      : tensors_(pb::TensorService::NewStub(channel)),
        collectives_(pb::CollectiveService::NewStub(channel)),
        meshes_(pb::MeshService::NewStub(channel)),
        devices_(pb::DeviceService::NewStub(channel)),
        prefetch_(pb::PrefetchService::NewStub(channel)),
        sessions_(pb::SessionService::NewStub(channel)),
        token_(std::move(token)) {}

  std::unique_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_unique<grpc::ClientContext>();
    if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return context;
  }

  // Uploads float32[n] = {0, 1, ...} replicated over devices 0 and 1.
  absl::StatusOr<pb::TensorInfo> Upload(int n, const std::string& name = "w",
                                        grpc::StatusCode* code = nullptr) const {
    auto context = Context();
    pb::UploadResponse response;
    auto writer = tensors_->Upload(context.get(), &response);
    pb::UploadRequest header;
    header.mutable_header()->set_dtype(pb::DTYPE_F32);
    header.mutable_header()->add_shape(n);
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_owner("label-" + name);
    header.mutable_header()->mutable_rule()->mutable_replicate()->add_device_ids(0);
    header.mutable_header()->mutable_rule()->mutable_replicate()->add_device_ids(1);
    writer->Write(header);
    std::vector<float> values(n);
    for (int i = 0; i < n; ++i) values[i] = static_cast<float>(i);
    pb::UploadRequest chunk;
    chunk.set_chunk(std::string(reinterpret_cast<const char*>(values.data()), n * 4));
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (code != nullptr) *code = status.error_code();
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response.tensor();
  }

  // The whole array's bytes, or the status.
  grpc::Status Download(const std::string& id, std::string* bytes) const {
    auto context = Context();
    pb::DownloadRequest request;
    request.set_tensor_id(id);
    auto reader = tensors_->Download(context.get(), request);
    pb::DownloadResponse response;
    while (reader->Read(&response)) {
      if (response.has_chunk()) bytes->append(response.chunk());
    }
    return reader->Finish();
  }

  grpc::Status Describe(const std::string& id) const {
    auto context = Context();
    pb::DescribeRequest request;
    request.set_tensor_id(id);
    pb::DescribeResponse response;
    return tensors_->Describe(context.get(), request, &response);
  }
  std::vector<std::string> List() const {
    auto context = Context();
    pb::ListTensorsResponse response;
    grpc::Status status = tensors_->List(context.get(), {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<std::string> ids;
    for (const auto& t : response.tensors()) ids.push_back(t.id());
    return ids;
  }
  // Every page of List at `page_size`; the number of pages in *pages.
  std::vector<std::string> ListPaged(int page_size, int* pages) const {
    std::vector<std::string> ids;
    pb::ListTensorsRequest request;
    request.set_page_size(page_size);
    *pages = 0;
    do {
      auto context = Context();
      pb::ListTensorsResponse response;
      grpc::Status status = tensors_->List(context.get(), request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) break;
      for (const auto& t : response.tensors()) ids.push_back(t.id());
      request.set_page_token(response.next_page_token());
      ++*pages;
    } while (!request.page_token().empty());
    return ids;
  }
  grpc::Status Delete(const std::string& id) const {
    auto context = Context();
    pb::DeleteTensorsRequest request;
    request.add_tensor_ids(id);
    pb::DeleteTensorsResponse response;
    return tensors_->Delete(context.get(), request, &response);
  }
  grpc::Status Place(const std::string& id, bool donate) const {
    auto context = Context();
    pb::PlaceRequest request;
    request.add_tensor_ids(id);
    request.mutable_rule()->mutable_placement()->set_device_id(1);
    request.set_source(donate ? pb::SOURCE_HANDLING_DONATE : pb::SOURCE_HANDLING_KEEP);
    pb::PlaceResponse response;
    return tensors_->Place(context.get(), request, &response);
  }
  grpc::Status Disassemble(const std::string& id) const {
    auto context = Context();
    pb::DisassembleRequest request;
    request.set_tensor_id(id);
    pb::DisassembleResponse response;
    return tensors_->Disassemble(context.get(), request, &response);
  }
  grpc::Status Assemble(const std::string& id, int n) const {
    auto context = Context();
    pb::AssembleRequest request;
    request.add_shape(n);
    request.mutable_placement()->set_device_id(0);
    request.add_tensor_ids(id);
    pb::AssembleResponse response;
    return tensors_->Assemble(context.get(), request, &response);
  }
  // Every collective on `id`; the codes in order AllReduce, AllReduceBatch,
  // AllGather, ReduceScatter, Broadcast.
  std::vector<grpc::StatusCode> Collectives(const std::string& id) const {
    std::vector<grpc::StatusCode> codes;
    pb::CollectiveResponse response;
    {
      auto context = Context();
      pb::AllReduceRequest request;
      request.set_tensor_id(id);
      request.set_op_name("sum");
      codes.push_back(collectives_->AllReduce(context.get(), request, &response).error_code());
    }
    {
      auto context = Context();
      pb::AllReduceBatchRequest request;
      request.add_tensor_ids(id);
      request.set_op_name("sum");
      pb::AllReduceBatchResponse batch;
      codes.push_back(collectives_->AllReduceBatch(context.get(), request, &batch).error_code());
    }
    {
      auto context = Context();
      pb::AllGatherRequest request;
      request.set_tensor_id(id);
      codes.push_back(collectives_->AllGather(context.get(), request, &response).error_code());
    }
    {
      auto context = Context();
      pb::ReduceScatterRequest request;
      request.set_tensor_id(id);
      request.set_op_name("sum");
      codes.push_back(collectives_->ReduceScatter(context.get(), request, &response).error_code());
    }
    {
      auto context = Context();
      pb::BroadcastRequest request;
      request.set_tensor_id(id);
      codes.push_back(collectives_->Broadcast(context.get(), request, &response).error_code());
    }
    return codes;
  }
  grpc::Status CreateMesh(const std::string& id) const {
    auto context = Context();
    pb::CreateMeshRequest request;
    request.set_mesh_id(id);
    request.mutable_data_parallel();
    pb::CreateMeshResponse response;
    return meshes_->CreateMesh(context.get(), request, &response);
  }
  grpc::Status GetMesh(const std::string& id) const {
    auto context = Context();
    pb::GetMeshRequest request;
    request.set_mesh_id(id);
    pb::GetMeshResponse response;
    return meshes_->GetMesh(context.get(), request, &response);
  }
  int CountMeshes() const {
    auto context = Context();
    pb::ListMeshesResponse response;
    EXPECT_TRUE(meshes_->ListMeshes(context.get(), {}, &response).ok());
    return response.meshes_size();
  }
  grpc::Status DeleteMesh(const std::string& id) const {
    auto context = Context();
    pb::DeleteMeshRequest request;
    request.set_mesh_id(id);
    request.set_force(true);
    pb::DeleteMeshResponse response;
    return meshes_->DeleteMesh(context.get(), request, &response);
  }
  // Places `id` replicated on mesh `mesh_id`.
  grpc::Status PlaceOnMesh(const std::string& id, const std::string& mesh_id) const {
    auto context = Context();
    pb::PlaceRequest request;
    request.add_tensor_ids(id);
    request.mutable_rule()->mutable_placement()->set_replicated_mesh_id(mesh_id);
    pb::PlaceResponse response;
    return tensors_->Place(context.get(), request, &response);
  }
  // Opens a prefetch stream whose rule replicates over `mesh_id`, and ends it.
  grpc::Status PrefetchOnMesh(const std::string& mesh_id) const {
    auto context = Context();
    auto stream = prefetch_->Prefetch(context.get());
    pb::PrefetchRequest open;
    open.mutable_open()->mutable_rule()->mutable_placement()->set_replicated_mesh_id(mesh_id);
    stream->Write(open);
    stream->WritesDone();
    pb::PrefetchResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  }
  grpc::Status ListDevices() const {
    auto context = Context();
    pb::ListDevicesResponse response;
    return devices_->ListDevices(context.get(), {}, &response);
  }

 private:
  std::unique_ptr<pb::TensorService::Stub> tensors_;
  std::unique_ptr<pb::CollectiveService::Stub> collectives_;
  std::unique_ptr<pb::MeshService::Stub> meshes_;
  std::unique_ptr<pb::DeviceService::Stub> devices_;
  std::unique_ptr<pb::PrefetchService::Stub> prefetch_;
  std::unique_ptr<pb::SessionService::Stub> sessions_;

 public:
  // Empty on failure.
  std::string OpenSession() const {
    auto context = Context();
    pb::OpenSessionResponse response;
    return sessions_->OpenSession(context.get(), {}, &response).ok() ? response.session().id() : "";
  }
  grpc::Status RenewSession(const std::string& id) const {
    auto context = Context();
    pb::RenewSessionRequest request;
    request.set_session_id(id);
    pb::RenewSessionResponse response;
    return sessions_->RenewSession(context.get(), request, &response);
  }
  grpc::Status CloseSession(const std::string& id) const {
    auto context = Context();
    pb::CloseSessionRequest request;
    request.set_session_id(id);
    pb::CloseSessionResponse response;
    return sessions_->CloseSession(context.get(), request, &response);
  }
  int CountSessions() const {
    auto context = Context();
    pb::ListSessionsResponse response;
    EXPECT_TRUE(sessions_->ListSessions(context.get(), {}, &response).ok());
    return response.sessions_size();
  }
  // ListDevices joined to session `id`.
  grpc::Status ListDevicesIn(const std::string& id) const {
    auto context = Context();
    context->AddMetadata("placement-session", id);
    pb::ListDevicesResponse response;
    return devices_->ListDevices(context.get(), {}, &response);
  }

 private:
  std::string token_;
};

class TenantIsolationTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags = {}) {
    const std::string creds = dir_.path() + "/creds";
    std::ofstream(creds) << "token sha256:" << Sha256Hex("alpha-token") << " team-a user alice\n"
                         << "token sha256:" << Sha256Hex("bravo-token") << " team-b user bob\n"
                         << "token sha256:" << Sha256Hex("root-token") << " ops admin root\n";
    flags.push_back("--auth_file=" + creds);
    flags.push_back("--backend=cpu");
    flags.push_back("--cpu_devices=2");
    auto daemon = DaemonProcess::Start({.extra_flags = flags});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
    a_ = std::make_unique<As>(channel, "alpha-token");
    b_ = std::make_unique<As>(channel, "bravo-token");
    admin_ = std::make_unique<As>(channel, "root-token");
    nobody_ = std::make_unique<As>(channel, "");
    wrong_ = std::make_unique<As>(channel, "alpha-tokeN");
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<As> a_, b_, admin_, nobody_, wrong_;
};

TEST_F(TenantIsolationTest, TokensGoodBadAndMissing) {
  Start();
  EXPECT_TRUE(a_->ListDevices().ok());
  grpc::Status missing = nobody_->ListDevices();
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("requires credentials"));
  grpc::Status wrong = wrong_->ListDevices();
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("bearer token is not recognised"));
  grpc::StatusCode upload_code = grpc::StatusCode::OK;
  EXPECT_FALSE(nobody_->Upload(4, "w", &upload_code).ok());
  EXPECT_EQ(upload_code, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, OtherTenantsTensorsAreNotFoundOnEveryRpc) {
  Start();
  auto mine = a_->Upload(8, "w");
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->tenant(), "team-a");
  EXPECT_EQ(mine->owner(), "label-w");
  const std::string id = mine->id();

  EXPECT_THAT(b_->List(), ::testing::IsEmpty());
  auto not_found = [&](const grpc::Status& s) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_EQ(s.error_message(), absl::StrCat("tensor '", id, "' does not exist"));
  };
  not_found(b_->Describe(id));
  std::string stolen;
  not_found(b_->Download(id, &stolen));
  EXPECT_TRUE(stolen.empty());
  not_found(b_->Place(id, /*donate=*/false));
  not_found(b_->Place(id, /*donate=*/true));
  not_found(b_->Disassemble(id));
  not_found(b_->Assemble(id, 8));
  for (grpc::StatusCode code : b_->Collectives(id)) EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
  not_found(b_->Delete(id));

  // Untouched: tenant A still has it, with its bytes.
  EXPECT_THAT(a_->List(), ::testing::ElementsAre(id));
  std::string bytes;
  ASSERT_TRUE(a_->Download(id, &bytes).ok());
  ASSERT_EQ(bytes.size(), 32u);
  EXPECT_EQ(reinterpret_cast<const float*>(bytes.data())[7], 7.0f);
  // The owner's own calls reach the core (not NOT_FOUND).
  EXPECT_TRUE(a_->Describe(id).ok());
  EXPECT_TRUE(a_->Place(id, /*donate=*/false).ok());

  // An admin sees every tenant and manages them.
  EXPECT_EQ(admin_->List().size(), 2u);
  EXPECT_TRUE(admin_->Describe(id).ok());
  std::string admin_bytes;
  EXPECT_TRUE(admin_->Download(id, &admin_bytes).ok());
  EXPECT_EQ(admin_bytes, bytes);
  EXPECT_TRUE(admin_->Delete(id).ok());
  EXPECT_EQ(a_->Describe(id).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

// Names resolve within the caller's tenant: another tenant's tensor of the
// same name neither answers for it nor makes it ambiguous, and a name only
// another tenant uses is as unknown as a made-up one. An admin sees every
// tenant, so for it the shared name is ambiguous, listing both.
TEST_F(TenantIsolationTest, NamesResolveWithinTheCallersTenant) {
  Start();
  auto a = a_->Upload(8, "shared");
  auto b = b_->Upload(8, "shared");
  auto b_only = b_->Upload(8, "b-only");
  ASSERT_TRUE(a.ok() && b.ok() && b_only.ok());
  EXPECT_TRUE(a_->Describe("shared").ok());
  std::string bytes_a, bytes_b;
  ASSERT_TRUE(a_->Download("shared", &bytes_a).ok());
  ASSERT_TRUE(b_->Download("shared", &bytes_b).ok());
  EXPECT_EQ(bytes_a.size(), 32u);
  EXPECT_EQ(bytes_b.size(), 32u);
  // Each deletes its own by name; the other's stays.
  ASSERT_TRUE(a_->Delete("shared").ok());
  EXPECT_TRUE(b_->Describe("shared").ok());
  EXPECT_EQ(a_->Describe("shared").error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status hidden = a_->Describe("b-only");
  EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(hidden.error_message(), "tensor 'b-only' does not exist");
  // A second "shared" of tenant A: ambiguous for A (its two ids), and for
  // the admin (all three), never naming B's id to A.
  auto a2 = a_->Upload(8, "shared");
  auto a3 = a_->Upload(8, "shared");
  ASSERT_TRUE(a2.ok() && a3.ok());
  grpc::Status ambiguous = a_->Describe("shared");
  EXPECT_EQ(ambiguous.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(ambiguous.error_message(), HasSubstr("is the name of 2 tensors"));
  EXPECT_THAT(ambiguous.error_message(), HasSubstr(a2->id()));
  EXPECT_THAT(ambiguous.error_message(), HasSubstr(a3->id()));
  EXPECT_THAT(ambiguous.error_message(), ::testing::Not(HasSubstr(b->id())));
  grpc::Status admin = admin_->Describe("shared");
  EXPECT_EQ(admin.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(admin.error_message(), HasSubstr("is the name of 3 tensors"));
  EXPECT_THAT(admin.error_message(), HasSubstr(b->id()));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, CredentialsAreReloadedOnSighupAndKeptWhenBroken) {
  Start();
  auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
  As charlie(channel, "charlie-token");
  EXPECT_EQ(charlie.ListDevices().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // A broken file is refused and the old credentials stay.
  const std::string creds = dir_.path() + "/creds";
  std::ofstream(creds, std::ios::app) << "token nonsense team-c user\n";
  ASSERT_EQ(kill(daemon_->pid(), SIGHUP), 0);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (daemon_->Stderr().find("--auth_file not reloaded") == std::string::npos &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(daemon_->Stderr(), HasSubstr("--auth_file not reloaded, keeping the previous 3 "
                                           "credential(s): "));
  EXPECT_TRUE(a_->ListDevices().ok());

  // A good one takes effect: charlie gets in, alpha's token is gone.
  std::ofstream(creds, std::ios::trunc)
      << "token sha256:" << Sha256Hex("charlie-token") << " team-c user\n";
  ASSERT_EQ(kill(daemon_->pid(), SIGHUP), 0);
  while (!charlie.ListDevices().ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(charlie.ListDevices().ok());
  EXPECT_EQ(a_->ListDevices().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, ListPagesThroughTheCallersTensorsOnly) {
  Start();
  std::vector<std::string> mine;
  for (int i = 0; i < 5; ++i) {
    auto t = a_->Upload(1, absl::StrCat("a", i));
    ASSERT_TRUE(t.ok());
    mine.push_back(t->id());
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b_->Upload(1, absl::StrCat("b", i)).ok());
  int pages = 0;
  EXPECT_EQ(a_->ListPaged(2, &pages), mine);  // sorted by name: a0..a4
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(admin_->ListPaged(3, &pages).size(), 8u);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, OtherTenantsSessionsAreNotFound) {
  Start();
  const std::string id = a_->OpenSession();
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(a_->ListDevicesIn(id).ok());
  EXPECT_EQ(b_->RenewSession(id).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(b_->CloseSession(id).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status joined = b_->ListDevicesIn(id);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(joined.error_message(),
            absl::StrCat("placement-session metadata: session '", id,
                         "' does not exist (closed, expired or never opened)"));
  EXPECT_EQ(b_->CountSessions(), 0);
  EXPECT_EQ(a_->CountSessions(), 1);
  EXPECT_EQ(admin_->CountSessions(), 1);
  EXPECT_TRUE(a_->CloseSession(id).ok());
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, OtherTenantsMeshesAreNotFound) {
  Start();
  ASSERT_TRUE(a_->CreateMesh("a-mesh").ok());
  auto mine = b_->Upload(8, "w");
  ASSERT_TRUE(mine.ok()) << mine.status();
  const std::string missing = "mesh 'a-mesh' does not exist";
  EXPECT_EQ(b_->GetMesh("a-mesh").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(b_->GetMesh("a-mesh").error_message(), missing);
  EXPECT_EQ(b_->CountMeshes(), 0);
  EXPECT_EQ(b_->DeleteMesh("a-mesh").error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status placed = b_->PlaceOnMesh(mine->id(), "a-mesh");
  EXPECT_EQ(placed.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(placed.error_message(), missing);
  grpc::Status prefetched = b_->PrefetchOnMesh("a-mesh");
  EXPECT_EQ(prefetched.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(prefetched.error_message(), missing);
  // Its owner and an admin see and use it.
  EXPECT_TRUE(a_->GetMesh("a-mesh").ok());
  EXPECT_EQ(a_->CountMeshes(), 1);
  EXPECT_EQ(admin_->CountMeshes(), 1);
  auto theirs = a_->Upload(8, "w");
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(a_->PlaceOnMesh(theirs->id(), "a-mesh").ok());
  EXPECT_TRUE(a_->DeleteMesh("a-mesh").ok());
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, OverlongIdsAndNamesAreRefusedWithoutEchoingThem) {
  Start();
  const std::string huge(1 << 20, 'x');
  grpc::Status status = a_->Describe(huge);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "tensor_id is 1048576 bytes long; tensor ids and names are at most 256");
  status = a_->Delete(huge);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "tensor_ids[0] is 1048576 bytes long; tensor ids and names are at most 256");
  // Names are bounded the same way (the owner label is "label-" + name).
  auto named = a_->Upload(4, std::string(300, 'n'));
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(named.status().message(), "header.name is 300 bytes long; at most 256");
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, QuotasArePerTenantAndPageRounded) {
  // 3 pages per tenant: a float32[8] replicated on 2 devices costs two pages
  // (32 bytes each, rounded up), so one fits and a second does not.
  Start({"--tenant_max_device_bytes=12288", "--tenant_max_tensors=3"});
  ASSERT_TRUE(a_->Upload(8, "one").ok());
  auto second = a_->Upload(8, "two");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(),
              HasSubstr("tenant 'team-a': cannot hold 8192 more device bytes (page-rounded); "
                        "8192 of 12288 bytes in use"));
  // Tenant B has its own budget.
  ASSERT_TRUE(b_->Upload(8, "one").ok());
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(TenantIsolationTest, TensorCountQuota) {
  Start({"--tenant_max_tensors=2"});
  ASSERT_TRUE(a_->Upload(1, "one").ok());
  ASSERT_TRUE(a_->Upload(1, "two").ok());
  auto third = a_->Upload(1, "three");
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(),
              HasSubstr("tenant 'team-a' holds 2 of at most 2 tensors (--tenant_max_tensors)"));
  ASSERT_TRUE(b_->Upload(1, "one").ok());
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement

#include "server/tensor/batch_upload_session.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {

absl::StatusOr<std::unique_ptr<BatchUploadSession>> BatchUploadSession::Start(
    RemoteShards* remote, TensorStore* store, std::vector<BatchArray> arrays) {
  if (arrays.empty()) {
    return absl::InvalidArgumentError("the batch header lists no arrays");
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<std::string> keys;
  std::vector<std::unique_ptr<UploadSession>> sessions;
  for (size_t i = 0; i < arrays.size(); ++i) {
    BatchArray& array = arrays[i];
    if (array.key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("arrays[", i, "].key is empty"));
    }
    if (!seen.insert(array.key).second) {
      return absl::InvalidArgumentError(absl::StrCat("arrays[", i, "].key '", array.key,
                                                     "' is a duplicate; keys must be unique"));
    }
    absl::StatusOr<std::unique_ptr<UploadSession>> session =
        UploadSession::Start(store, std::move(array.spec), std::move(array.target), remote);
    if (!session.ok()) {
      return absl::Status(session.status().code(),
                          absl::StrCat("array '", array.key, "': ", session.status().message()));
    }
    keys.push_back(array.key);
    sessions.push_back(std::move(*session));
  }
  return std::unique_ptr<BatchUploadSession>(
      new BatchUploadSession(std::move(keys), std::move(sessions)));
}

absl::StatusOr<std::unique_ptr<BatchUploadSession>> BatchUploadSession::FromSessions(
    std::vector<std::string> keys, std::vector<std::unique_ptr<UploadSession>> sessions) {
  if (keys.empty()) return absl::InvalidArgumentError("the batch header lists no arrays");
  return std::unique_ptr<BatchUploadSession>(
      new BatchUploadSession(std::move(keys), std::move(sessions)));
}

std::string BatchUploadSession::Label(size_t index) const {
  return absl::StrCat("array ", index, " '", keys_[index], "'");
}

absl::Status BatchUploadSession::Write(int64_t array_index, absl::string_view bytes) {
  if (sessions_.empty()) {
    return absl::FailedPreconditionError("batch upload is already committed or aborted");
  }
  absl::Status status;
  if (array_index < 0 || array_index >= static_cast<int64_t>(sessions_.size())) {
    status = absl::InvalidArgumentError(absl::StrCat("chunk.array_index ", array_index,
                                                     " is out of range; the batch has ",
                                                     sessions_.size(), " arrays"));
  } else if (static_cast<size_t>(array_index) < current_) {
    status = absl::InvalidArgumentError(absl::StrCat("chunk.array_index ", array_index,
                                                     " comes after array ", current_,
                                                     "; array_index must not go backwards"));
  } else {
    for (; current_ < static_cast<size_t>(array_index) && status.ok(); ++current_) {
      status = sessions_[current_]->CheckComplete(Label(current_));
    }
    if (status.ok()) {
      status = sessions_[current_]->Write(bytes);
      if (!status.ok()) {
        status = absl::Status(status.code(), absl::StrCat(Label(current_), ": ", status.message()));
      }
    }
  }
  if (!status.ok()) Abort();
  return status;
}

absl::StatusOr<std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>>>
BatchUploadSession::Commit() {
  if (sessions_.empty()) {
    return absl::FailedPreconditionError("batch upload is already committed or aborted");
  }
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (absl::Status status = sessions_[i]->CheckComplete(Label(i)); !status.ok()) {
      Abort();
      return status;
    }
  }
  std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> out;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    // Cannot fail: every session was checked complete above.
    absl::StatusOr<std::shared_ptr<const Tensor>> tensor = sessions_[i]->Commit();
    out.emplace_back(keys_[i], std::move(*tensor));
  }
  sessions_.clear();
  return out;
}

void BatchUploadSession::Abort() { sessions_.clear(); }

}  // namespace placement::server

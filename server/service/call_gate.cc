#include "server/service/call_gate.h"

namespace placement::server {

void CallGate::Ticket::Reset() {
  if (gate_ == nullptr) return;
  absl::MutexLock lock(&gate_->mu_);
  --gate_->in_flight_;
  gate_ = nullptr;
}

absl::Status CallGate::Enter(Ticket* ticket, bool even_if_not_ready) {
  ticket->Reset();
  {
    absl::MutexLock lock(&mu_);
    if (draining_) {
      return absl::UnavailableError(
          "placementd is draining (shutting down); retry on another node");
    }
    if (!not_ready_.empty() && !even_if_not_ready) return absl::UnavailableError(not_ready_);
    ++in_flight_;
  }
  *ticket = Ticket(this);
  return absl::OkStatus();
}

void CallGate::SetNotReady(std::string reason) {
  absl::MutexLock lock(&mu_);
  not_ready_ = std::move(reason);
}

void CallGate::SetReady() {
  absl::MutexLock lock(&mu_);
  not_ready_.clear();
}

absl::StatusOr<Caller> CallGate::Admit(const grpc::ServerContextBase& context, Ticket* ticket,
                                       bool even_if_not_ready) {
  if (absl::Status entered = Enter(ticket, even_if_not_ready); !entered.ok()) return entered;
  absl::StatusOr<Caller> caller =
      authenticator_ == nullptr ? Caller{} : authenticator_->Authenticate(context);
  if (caller.ok() && sessions_ != nullptr) {
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find("placement-session"); it != metadata.end()) {
      std::string id(it->second.data(), it->second.size());
      if (absl::Status joined = sessions_->CheckJoin(*caller, id); !joined.ok()) {
        caller = joined;
      } else {
        caller->session_id = std::move(id);
      }
    }
  }
  if (!caller.ok()) ticket->Reset();
  return caller;
}

absl::Status CallGate::AdoptCreated(const Caller& caller,
                                    const std::vector<std::string>& tensor_ids) {
  if (caller.session_id.empty() || sessions_ == nullptr) return absl::OkStatus();
  return sessions_->Adopt(caller.session_id, tensor_ids);
}

absl::StatusOr<std::unique_ptr<SessionManager::Watch>> CallGate::WatchSession(
    const Caller& caller, std::function<void()> on_end) {
  if (caller.session_id.empty() || sessions_ == nullptr) return nullptr;
  return sessions_->WatchSession(caller.session_id, std::move(on_end));
}

absl::StatusOr<StreamRegistry::Lease> CallGate::OpenStream(const Caller& caller,
                                                           grpc::CallbackServerContext* context,
                                                           StreamKind kind) {
  if (streams_ == nullptr) return StreamRegistry::Lease();
  std::function<void()> cancel;
  if (kind != StreamKind::kPrefetch) cancel = [context] { context->TryCancel(); };
  return streams_->Open(caller.tenant, kind, std::move(cancel));
}

void CallGate::StartDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool CallGate::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

int64_t CallGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool CallGate::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

}  // namespace placement::server

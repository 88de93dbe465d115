// CallGate: admits RPCs while serving and refuses them with UNAVAILABLE once
// draining starts, counting calls in flight so shutdown can wait for them.
// Every handler (unary or stream) holds a Ticket for the life of its call.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_CALL_GATE_H_
#define PLACEMENT_SERVER_SERVICE_CALL_GATE_H_

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

class CallGate {
 public:
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(CallGate* gate) : gate_(gate) {}
    Ticket(Ticket&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Ticket& operator=(Ticket&& other) noexcept {
      Reset();
      gate_ = other.gate_;
      other.gate_ = nullptr;
      return *this;
    }
    ~Ticket() { Reset(); }
    void Reset();
    bool held() const { return gate_ != nullptr; }

   private:
    CallGate* gate_ = nullptr;
  };

  // UNAVAILABLE ("placementd is draining ...") once StartDraining ran.
  absl::Status Enter(Ticket* ticket);
  void StartDraining();
  bool draining() const;
  int64_t in_flight() const;
  // Blocks until no call is in flight or `deadline` passes; true if idle.
  bool WaitIdle(absl::Time deadline);

 private:
  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_CALL_GATE_H_

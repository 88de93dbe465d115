#include "server/service/malformed_request_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(const ServerRpcInfo& info)
      : method_(info.method() != nullptr ? info.method() : ""),
        unary_request_(info.type() == ServerRpcInfo::Type::UNARY ||
                       info.type() == ServerRpcInfo::Type::SERVER_STREAMING) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (unary_request_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      malformed_ = methods->GetRecvMessage() == nullptr;
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("malformed request: the request bytes do not parse as the request message "
                       "of ",
                       method_)));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const bool unary_request_;  // one request message, parsed before the handler runs
  bool malformed_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new MalformedRequestInterceptor(*info);
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeMalformedRequestInterceptorFactory() {
  return std::make_unique<Factory>();
}

}  // namespace placement::server

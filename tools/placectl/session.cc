#include "tools/placectl/session.h"

#include <cstdio>

#include "tools/placectl/output.h"

namespace placement::placectl {

const client::Client* Session::client() {
  if (client_ != nullptr) return client_.get();
  if (!connect_status_.ok()) return nullptr;
  client::ClientOptions options = options_.connection;
  options.default_deadline = options_.call_timeout;
  options.connect_timeout = options_.connect_timeout;
  auto connected = client::Client::Connect(options_.target, options);
  if (!connected.ok()) {
    connect_status_ = connected.status();
    ReportError(connect_status_);
    return nullptr;
  }
  client_ = *std::move(connected);
  return client_.get();
}

int Session::UsageError(absl::string_view why) const {
  std::fprintf(stderr, "placectl: %.*s\n%s (see 'placectl help %s')\n",
               static_cast<int>(why.size()), why.data(), UsageLine(*command_).c_str(),
               command_->path.c_str());
  return 2;
}

}  // namespace placement::placectl

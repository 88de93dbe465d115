// Session: what one placectl invocation knows once its command line parsed:
// the global options, the command, the flags given, and a connection to the
// daemon made on first use. Commands check their operands and flags first
// and call client() only when the request is complete, so a usage error never
// waits for a daemon.
//
// Not thread-safe; one per process.
#ifndef PLACEMENT_TOOLS_PLACECTL_SESSION_H_
#define PLACEMENT_TOOLS_PLACECTL_SESSION_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/client/client.h"
#include "tools/placectl/args.h"

namespace placement::placectl {

struct GlobalOptions {
  std::string target;
  bool json = false;
  // Deadline of each unary call.
  absl::Duration call_timeout = absl::Seconds(30);
  // How long to wait for the daemon to accept the connection.
  absl::Duration connect_timeout = absl::Seconds(2);
  // TLS, token and session fields (security_options.h); the deadlines above
  // override its own.
  client::ClientOptions connection;
};

class Session {
 public:
  Session(GlobalOptions options, const CommandSpec* command, std::set<std::string> given_flags)
      : options_(std::move(options)), command_(command), given_(std::move(given_flags)) {}

  const GlobalOptions& options() const { return options_; }
  bool json() const { return options_.json; }
  const CommandSpec& command() const { return *command_; }
  // True when --name (or --noname) was on the command line.
  bool Given(absl::string_view flag) const { return given_.count(std::string(flag)) > 0; }

  // The connected client, dialled on the first call. On failure prints
  // "placectl: UNAVAILABLE: cannot reach placementd at ADDR within 2s" and
  // returns null (the caller exits 1).
  const client::Client* client();

  // Prints "placectl: <why>" and the command's usage line; returns 2.
  int UsageError(absl::string_view why) const;

 private:
  GlobalOptions options_;
  const CommandSpec* command_;
  std::set<std::string> given_;
  std::unique_ptr<client::Client> client_;
  absl::Status connect_status_;
};

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_SESSION_H_

#include "tests/testing/network_namespaces.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/testing/daemon_process.h"

namespace placement::testing {
namespace {

std::string IpBinary() { return access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip"; }

absl::Status Ip(std::vector<std::string> args) {
  args.insert(args.begin(), IpBinary());
  CommandResult r = RunCommand(args, absl::Seconds(10));
  if (r.exit_code != 0) {
    std::string joined;
    for (const auto& a : args) absl::StrAppend(&joined, a, " ");
    return absl::UnavailableError(absl::StrCat(joined, "failed (", r.exit_code, "): ", r.err));
  }
  return absl::OkStatus();
}

}  // namespace

const absl::Status& NetworkNamespaces::Usable() {
  static const absl::Status* const usable = new absl::Status(Create(1).status());
  return *usable;
}

absl::StatusOr<std::unique_ptr<NetworkNamespaces>> NetworkNamespaces::Create(int count) {
  if (geteuid() != 0) return absl::FailedPreconditionError("network namespaces need root");
  std::unique_ptr<NetworkNamespaces> ns(new NetworkNamespaces());
  const int tag = getpid() % 100000;
  // 10.A.B.0/24 from the pid: A in [100, 199], B in [0, 255].
  const int a = 100 + (tag / 256) % 100;
  const int b = tag % 256;
  ns->bridge_ = absl::StrCat("plb", tag);
  // A test process that died before its destructor ran (SIGKILL, a crash)
  // leaves its namespaces and bridge behind; a later process with the same
  // pid tag would collide with them, so remove them first (deleting a
  // namespace deletes the veth pairs inside it).
  for (int i = 0; i < count + 8; ++i) {
    Ip({"netns", "del", absl::StrCat("plns", tag, "-", i)}).IgnoreError();
  }
  Ip({"link", "del", ns->bridge_}).IgnoreError();
  if (absl::Status s = Ip({"link", "add", ns->bridge_, "type", "bridge"}); !s.ok()) {
    ns->bridge_.clear();
    return s;
  }
  auto fail = [&](absl::Status s) -> absl::StatusOr<std::unique_ptr<NetworkNamespaces>> {
    return s;  // `ns` cleans up what was made
  };
  if (absl::Status s =
          Ip({"addr", "add", absl::StrCat("10.", a, ".", b, ".254/24"), "dev", ns->bridge_});
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = Ip({"link", "set", ns->bridge_, "up"}); !s.ok()) return fail(s);
  for (int i = 0; i < count; ++i) {
    const std::string name = absl::StrCat("plns", tag, "-", i);
    const std::string host_end = absl::StrCat("plh", tag, "x", i);
    const std::string ns_end = absl::StrCat("pln", tag, "x", i);
    const std::string address = absl::StrCat("10.", a, ".", b, ".", i + 1);
    if (absl::Status s = Ip({"netns", "add", name}); !s.ok()) return fail(s);
    ns->names_.push_back(name);
    if (absl::Status s = Ip({"link", "add", host_end, "type", "veth", "peer", "name", ns_end});
        !s.ok()) {
      return fail(s);
    }
    ns->host_ends_.push_back(host_end);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"link", "set", ns_end, "netns", name},
             {"link", "set", host_end, "master", ns->bridge_},
             {"link", "set", host_end, "up"},
             {"-n", name, "addr", "add", address + "/24", "dev", ns_end},
             {"-n", name, "link", "set", ns_end, "up"},
             {"-n", name, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Ip(args); !s.ok()) return fail(s);
    }
    ns->addresses_.push_back(address);
  }
  return ns;
}

NetworkNamespaces::~NetworkNamespaces() {
  for (const std::string& end : host_ends_) Ip({"link", "del", end}).IgnoreError();
  for (const std::string& name : names_) Ip({"netns", "del", name}).IgnoreError();
  if (!bridge_.empty()) Ip({"link", "del", bridge_}).IgnoreError();
}

std::vector<std::string> NetworkNamespaces::ExecPrefix(int i) const {
  return {IpBinary(), "netns", "exec", names_[i]};
}

absl::Status NetworkNamespaces::SetLinkUp(int i, bool up) {
  return Ip({"link", "set", host_ends_[i], up ? "up" : "down"});
}

}  // namespace placement::testing

#include "tests/testing/test_certificates.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace placement::testing {
namespace {

// RunCommand execs argv[0] as a path: resolve "openssl" through $PATH.
std::string Which(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

absl::Status Run(std::vector<std::string> argv) {
  argv[0] = Which(argv[0]);
  CommandResult result = RunCommand(argv);
  if (result.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(argv, " "), " exited ", result.exit_code, ": ", result.err));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return out.good() ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

// A new key `name`.key and a signing request `name`.csr for CN=`cn`.
absl::Status Request(const TestCertificates& certs, const std::string& name,
                     const std::string& cn) {
  return Run({"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", certs.Key(name), "-out",
              absl::StrCat(certs.dir(), "/", name, ".csr"), "-subj", absl::StrCat("/CN=", cn)});
}

}  // namespace

absl::Status TestCertificates::Issue(const std::string& name, const std::string& common_name,
                                     const std::string& signer,
                                     const std::string& extensions) const {
  if (absl::Status s = Request(*this, name, common_name); !s.ok()) return s;
  const std::string ext = absl::StrCat(dir(), "/", name, ".ext");
  if (absl::Status s = WriteFile(ext, extensions); !s.ok()) return s;
  return Run({"openssl", "x509", "-req", "-in", absl::StrCat(dir(), "/", name, ".csr"), "-CA",
              Cert(signer), "-CAkey", Key(signer), "-CAcreateserial", "-out", Cert(name), "-days",
              "30", "-extfile", ext});
}

std::string TestCertificates::Read(const std::string& path) const {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<TestCertificates>> TestCertificates::Create() {
  auto certs = std::unique_ptr<TestCertificates>(new TestCertificates());
  const std::string d = certs->dir();
  auto self_signed_ca = [&](const std::string& name) {
    return Run({"openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                certs->Key(name),
                "-out",
                certs->Cert(name),
                "-days",
                "30",
                "-subj",
                absl::StrCat("/CN=", name),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign"});
  };
  for (const char* ca : {"ca", "other_ca"}) {
    if (absl::Status s = self_signed_ca(ca); !s.ok()) return s;
  }
  const std::string server_ext =
      "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
      "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  const std::string client_ext =
      "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"
      "subjectAltName=DNS:trainer-1.team-a.example\n";
  if (absl::Status s = certs->Issue("server", "placementd", "ca", server_ext); !s.ok()) return s;
  if (absl::Status s = certs->Issue("client", "trainer-1", "ca", client_ext); !s.ok()) return s;
  if (absl::Status s = certs->Issue("stranger", "stranger", "other_ca", client_ext); !s.ok()) {
    return s;
  }

  // An expired certificate needs explicit dates, which only `openssl ca` sets.
  if (absl::Status s = Request(*certs, "expired", "trainer-1"); !s.ok()) return s;
  const std::string db = absl::StrCat(d, "/ca_db");
  if (absl::Status s = WriteFile(db + ".index", ""); !s.ok()) return s;
  if (absl::Status s = WriteFile(db + ".serial", "1000\n"); !s.ok()) return s;
  const std::string config = absl::StrCat(
      "[ca]\ndefault_ca=test\n[test]\ndatabase=", db, ".index\nserial=", db,
      ".serial\nnew_certs_dir=", d, "\ndefault_md=sha256\npolicy=any\ncopy_extensions=none\n",
      "[any]\ncommonName=supplied\n[client]\nbasicConstraints=CA:FALSE\n",
      "extendedKeyUsage=clientAuth\nsubjectAltName=DNS:trainer-1.team-a.example\n");
  if (absl::Status s = WriteFile(d + "/ca.cnf", config); !s.ok()) return s;
  if (absl::Status s = Run({"openssl",
                            "ca",
                            "-batch",
                            "-config",
                            d + "/ca.cnf",
                            "-cert",
                            certs->Cert("ca"),
                            "-keyfile",
                            certs->Key("ca"),
                            "-in",
                            d + "/expired.csr",
                            "-out",
                            certs->Cert("expired"),
                            "-startdate",
                            "20200101000000Z",
                            "-enddate",
                            "20200201000000Z",
                            "-extensions",
                            "client",
                            "-notext"});
      !s.ok()) {
    return s;
  }
  return certs;
}

}  // namespace placement::testing

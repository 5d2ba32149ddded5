#pragma once

// Test support for doctest suites that need an SSH host: start the test sshd
// or fail (never skip), connect or fail with sshd's log, processes by command
// line, and environment variables for one scope. Bounded polling is wait.hpp's.

#include <doctest/doctest.h>

#include "files.hpp"
#include "net.hpp"
#include "ssh_transport.hpp"
#include "sshd.hpp"
#include "wait.hpp"

#include <specctl/remote/openssh_host.hpp>
#include <specctl/remote/ssh_host.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace specctl::test {

// Every SSH test needs a real sshd; not being able to start one is a failure
// with the reason, never a silent skip.
inline std::unique_ptr<TestSshd> require_sshd() {
  auto sshd = TestSshd::start();
  if (!sshd) {
    MESSAGE("cannot start a test sshd: " << sshd.error());
    FAIL("the SSH tests need a working /usr/sbin/sshd (scripts/setup.sh --tests)");
  }
  return std::move(*sshd);
}

inline std::unique_ptr<remote::SshHost> require_host(const remote::SshTarget& target, const TestSshd& sshd) {
  auto host = remote::connect_ssh(target);
  if (!host) {
    MESSAGE("sshd log:\n" << sshd.log());
    FAIL("connect_ssh failed: " << std::string(host.error().what()));
  }
  return std::move(*host);
}

// An OpenSSH target for the test sshd: its key only (IdentitiesOnly, no agent
// keys), its known_hosts, strict checking, a generated -F file that keeps
// ~/.ssh/config out, and a control folder of its own.
inline remote::OpenSshTarget openssh_target_for(const TestSshd& sshd) {
  auto config = sshd.dir() / "ssh_config";
  write_file(config, "IdentitiesOnly yes\n");
  remote::OpenSshTarget t;
  t.name = "testnode";
  t.destination = sshd.address();
  t.user = sshd.user();
  t.port = sshd.port();
  t.identities = {sshd.user_key().string()};
  t.known_hosts = sshd.known_hosts().string();
  t.strict_host_key_checking = "yes";
  t.config_file = config.string();
  t.control_dir = (sshd.dir() / "cm").string();
  t.connect_timeout = std::chrono::seconds{10};
  t.keepalive = std::chrono::seconds{5};
  return t;
}

inline std::unique_ptr<remote::Host> require_openssh(const remote::OpenSshTarget& target, const TestSshd& sshd) {
  auto host = remote::connect_openssh(target);
  if (!host) {
    MESSAGE("sshd log:\n" << sshd.log());
    FAIL("connect_openssh failed: " << std::string(host.error().what()));
  }
  return std::move(*host);
}

// The test sshd as a Host over the transport under test (ssh_transport.hpp):
// specctl's own client, or the system ssh in the "openssh" pass.
inline std::unique_ptr<remote::Host> require_host_under_test(const TestSshd& sshd) {
  if (testing_openssh()) {
    return require_openssh(openssh_target_for(sshd), sshd);
  }
  return require_host(sshd.target(), sshd);
}

// Whether any process's command line contains `marker` (the test "node" is this machine).
inline bool process_running(const std::string& marker) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Sets or unsets an environment variable for one scope. Only for use while
// no other thread reads the environment (no SSH host is reconnecting).
class EnvGuard {
public:
  EnvGuard(const char* name, const std::optional<std::string>& value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
    }
    set(value);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  ~EnvGuard() { set(m_old); }

private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(m_name, value->c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }
  const char* m_name;
  std::optional<std::string> m_old;
};

} // namespace specctl::test

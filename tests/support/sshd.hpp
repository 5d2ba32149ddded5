#pragma once

// Test support: a throwaway OpenSSH server (and ssh-agent) on 127.0.0.1.
//
//   auto sshd = specctl::test::TestSshd::start();   // or the reason it cannot run
//   REQUIRE_MESSAGE(sshd, sshd.error());
//   auto host = specctl::remote::connect_ssh((*sshd)->target());
//
// A test that needs several "machines" starts one sshd per loopback address
// (all of 127.0.0.0/8 is this machine on Linux), each giving its sessions an
// environment of their own:
//
//   auto node = TestSshd::start({.listen_address = "127.0.0.2",
//                                .session_env = {"SPECSIM_GPU_DIR=/tmp/node-a"}});
//
// Everything lives in a fresh temporary directory: host key, user key,
// authorized_keys, a known_hosts that trusts the host key, sshd_config and
// sshd's log. The destructor kills sshd and every process under it and removes
// the directory, also when a test fails. No shell is involved in starting
// anything but a chroot's /proc mount; every wait has a deadline.

#include "files.hpp"
#include "net.hpp"
#include "process.hpp"
#include "skip.hpp"
#include "wait.hpp"

#include <specctl/remote/ssh_host.hpp>

#include <chrono>
#include <expected>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

inline constexpr auto k_sshd_start_timeout = std::chrono::seconds{15};
inline constexpr auto k_sshd_stop_grace = std::chrono::seconds{2};

// Writes an unencrypted ed25519 key pair at `path` and `path`.pub.
std::expected<void, std::string> generate_key(const std::filesystem::path& path);

// "ssh-ed25519 AAAA..." from a .pub file, without its comment.
std::string public_key_of(const std::filesystem::path& pub);

// "SHA256:..." of a public key file, as ssh-keygen prints it.
std::string fingerprint_of(const std::filesystem::path& pub);

// Where a test sshd listens and what its sessions see.
struct SshdOptions {
  // An IPv4 loopback address: 127.0.0.2, 127.0.0.3, ... stand for other machines.
  std::string listen_address = "127.0.0.1";
  // "NAME=value" for every session (sshd_config SetEnv, OpenSSH 7.8 and later); it
  // overrides sshd's default PATH, so a node's PATH can hold a fake nvidia-smi.
  std::vector<std::string> session_env;
  // A network namespace to run sshd (and so every session) in: a name under
  // /run/netns, as `ip netns add` makes. Empty: this process's. sshd listens on
  // `listen_address` inside it, an address this process may not reach at all;
  // jump_topology.hpp builds such namespaces. (The braces spare callers that
  // designate the other fields GCC 12's -Wmissing-field-initializers.)
  std::string netns{};
  // A root folder every session runs in (sshd_config ChrootDirectory): another
  // system's files, as a debootstrap root gives them (old_root.hpp). sshd runs in a
  // mount namespace of its own with /proc mounted in the root, so nothing is left
  // mounted after it. dir(), and so session_home(), then lie inside the root:
  // inside() is their path as a session sees it. Empty: no chroot.
  std::string chroot{};
};

// The iproute2 `ip` program (/usr/sbin/ip, /sbin/ip, or ip in PATH); empty when there is none.
std::string ip_program();

// Whether a TCP connect to `ip`:`port` succeeds from inside the network namespace
// `netns` (a name under /run/netns). A short-lived thread joins the namespace
// (network namespaces are per thread) and connects; the caller's stays as it was.
bool port_accepts_in_netns(const std::string& netns, int port, const std::string& ip);

class TestSshd {
public:
  // Why no test sshd can run here (it is not installed, or SPECCTL_TEST_WITHOUT
  // names it), or nothing: the reason a suite that needs one skips.
  static std::optional<std::string> unavailable();

  // Starts sshd, or says why it cannot (not installed, no privilege separation
  // directory and no right to create it, ...).
  static std::expected<std::unique_ptr<TestSshd>, std::string> start(SshdOptions options = {});

  TestSshd(const TestSshd&) = delete;
  TestSshd& operator=(const TestSshd&) = delete;
  ~TestSshd();

  int port() const { return m_port; }
  // The address sshd listens on (127.0.0.1 unless the options said otherwise).
  const std::string& address() const { return m_options.listen_address; }
  const std::string& user() const { return m_user; }
  const std::filesystem::path& dir() const { return m_dir; }
  // The authorized user key (private half; ".pub" beside it).
  std::filesystem::path user_key() const { return m_dir / "user_key"; }
  // sshd reads it at each login: a line appended authorizes another key at once.
  std::filesystem::path authorized_keys() const { return m_dir / "authorized_keys"; }
  std::filesystem::path host_key() const { return m_dir / "host_key"; }
  // A known_hosts file that trusts this server's host key for [address]:port.
  std::filesystem::path known_hosts() const { return m_dir / "known_hosts"; }
  // HOME of every session (sshd_config SetEnv): empty, so no shell start-up runs.
  std::filesystem::path session_home() const { return m_dir / "home"; }
  // This server's line for a known_hosts file.
  std::string known_hosts_line() const;
  std::string host_key_fingerprint() const { return fingerprint_of(m_dir / "host_key.pub"); }
  // What sshd wrote with -e, to show when a test fails.
  std::string log() const { return read_file(m_dir / "sshd.log"); }
  pid_t pid() const { return m_pid; }
  // `path` as the sessions see it: without the chroot folder in front (itself when there is none).
  std::string inside(const std::filesystem::path& path) const;

  // A target that reaches this server as the current user with the test key,
  // strict host key checking, and short timeouts and backoff.
  remote::SshTarget target(std::string name = "testnode") const;

  // The sshd processes serving connections now (sshd forks one or two per connection).
  std::vector<pid_t> session_pids() const;

  // Gives the server a new host key (known_hosts() still holds the old one) and makes it
  // offer that key from the next connection on: SIGHUP re-execs sshd (same pid), which
  // reads its keys again, and this waits until it listens again. (Before OpenSSH 9.8 each
  // connection read the key; the listener of 9.8 and later, Debian 13's, holds it.)
  std::expected<void, std::string> change_host_key();

  // Cuts every connection the way a network failure would look to the
  // client: SIGKILLs the sshd processes serving them, so their sockets close.
  // Commands they started keep running. Returns how many processes it killed.
  std::size_t kill_sessions();

  // Stops sshd and kills everything still running under it (sessions and the
  // commands they started). Safe to call twice.
  void stop();

private:
  TestSshd() = default;

  std::expected<void, std::string> prepare();
  std::expected<void, std::string> launch(int port);

  SshdOptions m_options;
  std::filesystem::path m_dir;
  std::string m_user;
  int m_port = -1;
  pid_t m_pid = -1;
};

// An ssh-agent on a socket in `dir`, holding the keys added to it.
class TestSshAgent {
public:
  static std::expected<std::unique_ptr<TestSshAgent>, std::string> start(const std::filesystem::path& dir);

  TestSshAgent(const TestSshAgent&) = delete;
  TestSshAgent& operator=(const TestSshAgent&) = delete;
  ~TestSshAgent();

  const std::filesystem::path& socket() const { return m_socket; }

  std::expected<void, std::string> add(const std::filesystem::path& key);

private:
  TestSshAgent() = default;
  std::filesystem::path m_dir;
  std::filesystem::path m_socket;
  pid_t m_pid = -1;
};

} // namespace specctl::test

#pragma once

// Test support: a node that can be reached only through jump hosts, made of real
// sshds in Linux network namespaces (needs root, iproute2 and sshd).
//
//   hops = 1:  client ─127.0.0.1─▶ bastion [J1] ─198.51.100.0/24─▶ target [T]
//   hops = 2:  client ─127.0.0.1─▶ bastion [J1] ─198.51.100.0/24─▶ login2 [J2]
//                                                ─203.0.113.0/24─▶ target [T]
//
//   auto topology = JumpTopology::start({.hops = 2});
//   // ssh -F topology->ssh_config() -J topology->jump_spec() -p PORT USER@ADDRESS
//
// The bastion listens on 127.0.0.1 in this process's namespace: an acceptor thread
// here forks, for each connection, an `sshd -i` (inetd mode) that first joined J1.
// So the bastion is on loopback, yet everything its sessions connect to (ssh -W,
// direct-tcpip) is seen from J1. login2 and the target are TestSshd daemons started
// inside J2 and T. Each link is a veth pair made inside the namespaces it joins;
// nothing appears in this process's namespace, which therefore has no route to J2
// or T: a direct connection goes to the default route, if any, and fails. The link
// addresses are RFC 5737 documentation ranges, which no real host uses.
//
// Namespaces are "specctl-jt-<pid>-<serial>-<j1|j2|t>": parallel test processes
// never collide, and start() removes those of dead processes (a test killed with
// -9) with whatever still runs in them. The destructor kills every sshd, session
// and command the topology started and deletes its namespaces. One user key is
// authorized on every hop; every hop's sessions see SPECCTL_TEST_HOP=<hop>.

#include "sshd.hpp"

#include <specctl/remote/ssh_host.hpp>
#include <specctl/util/unique_fd.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <expected>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

// How long the killed bastion sessions and a restarted hop get to settle.
inline constexpr auto k_jump_settle_timeout = std::chrono::seconds{15};

enum class Hop { bastion, login2, target };

// "bastion", "login2", "target".
std::string_view hop_name(Hop hop);

struct JumpTopologyOptions {
  // 1: bastion → target; 2: bastion → login2 → target.
  int hops = 1;
  // The target's sessions' environment (SshdOptions::session_env), e.g. specsim's PATH.
  std::vector<std::string> target_session_env{};
};

class JumpTopology {
public:
  // Why no topology can be built here (not root, no ip, no network namespaces,
  // no sshd; or SPECCTL_TEST_WITHOUT names "netns" or "sshd"), or nothing.
  static std::optional<std::string> unavailable();

  static std::expected<std::unique_ptr<JumpTopology>, std::string> start(JumpTopologyOptions options = {});

  JumpTopology(const JumpTopology&) = delete;
  JumpTopology& operator=(const JumpTopology&) = delete;
  ~JumpTopology();

  int hops() const { return m_options.hops; }
  // The user every hop is logged into (the current one).
  const std::string& user() const;

  // Where `hop` listens, as the hop before it sees it (the bastion: 127.0.0.1).
  // login2 in a one-hop topology: "" and -1.
  std::string address(Hop hop) const;
  int port(Hop hop) const;
  // The namespace `hop`'s sessions (and their connections) run in; "" for login2 in one hop.
  std::string netns(Hop hop) const;
  // `hop`'s line for a known_hosts file ("[address]:port key"), with its current key.
  std::string known_hosts_line(Hop hop) const;
  std::string host_key_fingerprint(Hop hop) const;

  // A known_hosts content trusting every hop's current key, each by the address
  // the hop before it sees.
  std::string known_hosts_lines() const;
  // known_hosts_lines() as they were at start: change_host_key() leaves this file
  // alone, so a client using it sees the change.
  std::filesystem::path known_hosts() const { return m_dir / "known_hosts"; }
  // The one key authorized on every hop (private half; ".pub" beside it).
  std::filesystem::path user_key() const;
  // An ssh_config for the system client (`ssh -F`): user, key, known_hosts(),
  // strict host key checking, batch mode, short timeouts. `ssh -J` hands -F, not
  // -o, to the ssh that reaches the jump hosts, so the hops' settings live here.
  std::filesystem::path ssh_config() const { return m_dir / "ssh_config"; }
  // The hops before the target for `ssh -J` / ProxyJump:
  // "user@127.0.0.1:P" or "user@127.0.0.1:P,user@198.51.100.2:Q".
  std::string jump_spec() const;

  // `hop` reached directly, for building a ProxyJump chain of targets: the
  // TestSshd::target() settings with this hop's address, port, user_key() and
  // known_hosts(). Only the bastion is reachable from this process this way.
  remote::SshTarget hop_target(Hop hop, std::string name) const;
  // The target's TestSshd: session_pids(), kill_sessions(), log(), dir().
  TestSshd& target_sshd() { return *m_target; }
  // login2's, or nullptr in a one-hop topology.
  TestSshd* login2_sshd() { return m_login2.get(); }

  // How many connections the bastion has accepted so far.
  std::size_t bastion_connections() const;
  // The bastion's sshd processes serving connections now.
  std::vector<pid_t> bastion_session_pids() const;
  // What a dropped bastion looks like: SIGKILLs the bastion's per-connection sshds
  // (their sockets close, and with them every hop and tunnel through them), waits
  // until they are gone, and returns how many it killed. The bastion keeps accepting.
  std::size_t kill_bastion_sessions();

  // Gives `hop` a new host key: the next connection to it presents a different key
  // (sessions open now go on). login2 and the target re-exec their sshd (SIGHUP)
  // and are listening again when this returns.
  std::expected<void, std::string> change_host_key(Hop hop);

  // Every hop's sshd log, headed by the hop, for failure messages.
  std::string logs() const;

private:
  JumpTopology() = default;

  std::expected<void, std::string> make_namespaces();
  std::expected<void, std::string> make_link(const std::string& from, const std::string& to, const std::string& net);
  std::expected<void, std::string> start_bastion();
  void accept_loop();
  void reap_connections();
  pid_t serve_connection(int socket);

  JumpTopologyOptions m_options;
  std::filesystem::path m_dir;
  std::string m_ip;
  // Every namespace made so far, deleted by the destructor.
  std::vector<std::string> m_namespaces;
  std::string m_j1;
  std::string m_j2;
  std::string m_t;
  std::unique_ptr<TestSshd> m_target;
  std::unique_ptr<TestSshd> m_login2;

  // The bastion. The children's argv, environment, log and namespace are ready
  // before fork: a threaded process's child may only make async-signal-safe calls.
  util::UniqueFd m_j1_fd;
  util::UniqueFd m_listen_fd;
  util::UniqueFd m_bastion_log;
  std::vector<std::string> m_bastion_argv;
  std::vector<char*> m_bastion_args;
  int m_bastion_port = -1;
  std::atomic<bool> m_stop{false};
  std::thread m_acceptor;
  mutable std::mutex m_mutex;
  std::vector<pid_t> m_connections;
  std::size_t m_accepted = 0;
};

} // namespace specctl::test

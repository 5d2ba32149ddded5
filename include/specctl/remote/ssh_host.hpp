#pragma once

#include <specctl/remote/host.hpp>
#include <specctl/util/unique_fd.hpp>

#include <chrono>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::remote {

// What to do with a host key that known_hosts does not vouch for. A key that
// differs from the recorded one is refused under every policy.
enum class HostKeyPolicy {
  strict,     // unknown keys are refused (OpenSSH StrictHostKeyChecking=yes)
  accept_new, // unknown keys are appended to known_hosts (StrictHostKeyChecking=accept-new)
};

inline constexpr util::Duration k_default_ssh_connect_timeout = std::chrono::seconds{15};
inline constexpr util::Duration k_default_ssh_keepalive = std::chrono::seconds{15};
inline constexpr util::Duration k_default_reconnect_backoff = std::chrono::seconds{1};
inline constexpr util::Duration k_default_reconnect_backoff_max = std::chrono::seconds{30};

// Everything needed to reach one node over SSH. Kept free of experiment types
// so that the remote layer never reaches up; the caller fills it from the
// experiment file and ~/.ssh/config (lookup_ssh_config).
struct SshTarget {
  // Names the host in messages ("node1"); may be empty.
  std::string name;
  // Empty: the current local user, as ssh does.
  std::string user;
  std::string hostname;
  int port = 22;
  // Private key files (IdentityFile; "~" is expanded; "<file>.pub" is used
  // when present), tried in order before ssh-agent. None: ssh-agent, then
  // ~/.ssh/id_ed25519, id_ecdsa and id_rsa. Keys with a passphrase must come
  // from the agent: specctl never prompts.
  std::vector<std::string> identities;
  // IdentitiesOnly: of the agent's keys, only those whose public half is one
  // of `identities` (their .pub beside them) are offered.
  bool identities_only = false;
  std::string known_hosts = "~/.ssh/known_hosts";
  // HostKeyAlias: the name known_hosts records this node's key under, instead
  // of "[hostname]:port".
  std::optional<std::string> host_key_alias;
  // ProxyCommand: a command run with /bin/sh on this machine (tokens already
  // expanded), whose standard input and output carry the SSH connection; run
  // again for each reconnection, and ended (its process group) with it.
  std::optional<std::string> proxy_command;
  // ProxyJump: the hops to go through, in order. The first is reached
  // directly (or by its own proxy_command), each next one through a
  // direct-tcpip channel of the one before, and this node through the last.
  // A hop's own `jumps` are used only for the first hop.
  std::vector<SshTarget> jumps;
  HostKeyPolicy host_key_policy = HostKeyPolicy::strict;
  // Bounds one connection attempt: TCP connect, handshake and authentication.
  util::Duration connect_timeout = k_default_ssh_connect_timeout;
  // How often keepalives go out on a quiet connection. Together with
  // TCP_USER_TIMEOUT (keepalive_count intervals) they turn a peer or path that vanished
  // without a word into a lost connection. Zero disables both.
  util::Duration keepalive = k_default_ssh_keepalive;
  // Unanswered keepalive intervals after which the peer counts as gone (ServerAliveCountMax).
  int keepalive_count = 3;
  // After a drop: attempts (at least one) to reconnect, the first at once,
  // then after `reconnect_backoff`, doubling up to `reconnect_backoff_max`.
  // The host reconnects right away when it has tunnels or commands waiting,
  // else at the next exec; after all attempts failed, waiting commands fail
  // and the next exec starts a new round.
  int reconnect_attempts = 5;
  util::Duration reconnect_backoff = k_default_reconnect_backoff;
  util::Duration reconnect_backoff_max = k_default_reconnect_backoff_max;
  // Shells kept open for specctl's commands, so that the user's shell start-up
  // is paid per shell (docs/ssh.md); 0: a session per command.
  int shells = k_default_shells;

  // "node1 (root@10.0.0.7:2222)", or "root@10.0.0.7:2222" without a name.
  std::string describe() const;
  // How the connection goes: "laptop → bastion → node1", "laptop → (ProxyCommand) → node1",
  // or "laptop → node1".
  std::string route() const;
};

namespace detail {
class SshLoop;
}
class ShellPool;

// A node reached with libssh2. One thread per host owns the SSH session and
// runs every command channel and tunnel connection over it; see ssh_host.cpp
// for why. Commands and tunnels survive a dropped connection as described on
// `exec` and `open_tunnel`.
class SshHost final : public Host {
public:
  explicit SshHost(std::unique_ptr<detail::SshLoop> loop);
  // Stops the I/O thread and closes the session, the tunnels and their
  // connections; bounded by a few seconds even when the peer is unresponsive.
  ~SshHost() override;

  std::string describe() const override;

  // Runs `command_line` as `/bin/sh -c` on the node, in one of a few shells
  // kept open per connection (shell_pool.hpp), so that the user's shell
  // start-up is paid per shell rather than per command; on a channel of its
  // own when none is free or shells do not start. The remote command runs
  // under `timeout -s KILL` (when the node has coreutils' timeout), so it is
  // killed with its process group shortly after `timeout` even when the
  // connection is gone; a command that outlives `timeout` comes back with
  // `timed_out` set. `timeout` counts from the moment the command starts:
  // waiting for a lost connection to come back is bounded separately by the
  // reconnect settings. A command that had not started when the connection
  // dropped is run on the new connection; one that had started is never run
  // twice: its result is an error saying the connection was lost.
  std::expected<CommandResult, Error> exec(const std::string& command_line, util::Duration timeout) override;

  // Listens on 127.0.0.1:<returned port>; each connection there is forwarded
  // (direct-tcpip) to `target_host:target_port` as the node sees it. Forwarded
  // connections that are open when the SSH connection drops are closed; the
  // port stays open and new connections go over the new SSH connection.
  std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port) override;

  // Streams the bytes to `cat` over one command channel's standard input.
  std::expected<void, Error> write_file(const std::string& path, std::string_view bytes,
                                        util::Duration timeout = k_default_upload_timeout) override;

  // A connected socket whose bytes reach `target_host:target_port` as the
  // node sees it (a direct-tcpip channel; the other end of a socket pair):
  // what the next hop of a ProxyJump chain speaks SSH over. Waits at most
  // `timeout` for the node to open the channel; a refusal ("administratively
  // prohibited", "Connection refused") is an error naming this host.
  std::expected<util::UniqueFd, Error> open_stream(const std::string& target_host, int target_port,
                                                   util::Duration timeout);

  bool over_ssh() const override { return true; }
  int reconnect_count() const override;

private:
  std::unique_ptr<detail::SshLoop> m_loop;
  // After the loop, so that the shells' streams close before it stops.
  std::unique_ptr<ShellPool> m_shells;
};

// Connects and authenticates once (no retries, bounded by connect_timeout) and
// returns a host whose I/O thread keeps the connection alive from then on.
// Errors name the host and say what failed: unreachable, timed out (kind
// timed_out), host key unknown or changed (with its SHA256 fingerprint),
// authentication refused.
std::expected<std::unique_ptr<SshHost>, Error> connect_ssh(const SshTarget& target);

} // namespace specctl::remote

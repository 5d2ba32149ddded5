#pragma once

#include <specctl/remote/host.hpp>

#include <chrono>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::remote {

inline constexpr util::Duration k_default_openssh_connect_timeout = std::chrono::seconds{15};
inline constexpr util::Duration k_default_openssh_keepalive = std::chrono::seconds{15};

// A node reached through the system's `ssh` client, for what libssh2 cannot do:
// Kerberos/GSSAPI, FIDO keys, certificates, the user's whole ~/.ssh/config.
// Every value below becomes one argument of ssh (never a local shell's input).
struct OpenSshTarget {
  // Names the host in messages ("node1"); may be empty.
  std::string name;
  // What follows `ssh`: a ~/.ssh/config alias (so the user's whole config
  // applies) or a host name.
  std::string destination;
  // -l and -p, only when the experiment says so (else ssh's config decides).
  std::optional<std::string> user;
  std::optional<int> port;
  // -i, each in turn.
  std::vector<std::string> identities;
  // -o UserKnownHostsFile=.
  std::optional<std::string> known_hosts;
  // -o StrictHostKeyChecking=: "yes" or "accept-new".
  std::optional<std::string> strict_host_key_checking;
  // The hops before the node, nearest first, each with its own settings
  // (destination, user, port, identities, known_hosts, host key policy,
  // timeouts; a first hop may have `jumps` of its own). They become a chain of
  // ProxyCommands, each its own `ssh -W`: ssh's -J would hand the hops only
  // -F, losing every setting the experiment gives them.
  std::vector<OpenSshTarget> jumps;
  // -F, when not ssh's default (tests use a generated file).
  std::optional<std::string> config_file;
  // Where the master's socket lives (ControlPath=<control_dir>/%C); created
  // with mode 0700 when missing. One per Host: closing the Host ends the
  // master there. Short: the socket's path must fit in 90 bytes (sun_path is
  // 108, and ssh adds 17 while it creates the socket).
  std::string control_dir;
  // -o ConnectTimeout (whole seconds, at least one).
  util::Duration connect_timeout = k_default_openssh_connect_timeout;
  // -o ServerAliveInterval with ServerAliveCountMax 3; zero disables it.
  util::Duration keepalive = k_default_openssh_keepalive;
  // The client: looked up in PATH when it has no slash.
  std::string ssh_program = "ssh";

  // "node1 (openssh: gpu-node-1)", "node1 (openssh: root@10.0.0.7:22)".
  std::string describe() const;
};

// Starts (or reuses) the master connection and checks that the node runs a
// command over it. Errors name the host and carry ssh's own last line of
// stderr ("node1 (openssh: x): root@x: Permission denied (publickey)."): kind
// unreachable for a host that refuses or drops the connection, timed_out for
// one that does not answer within the connect timeout, failed for refused
// keys and host keys, bad_input for a target ssh cannot use.
//
// The host's contract is SshHost's: see openssh_host.cpp for how it is kept.
//  - exec: the exit code, stdout and stderr of the command; ssh's own failures
//    are errors, never a CommandResult. The remote command runs under
//    `timeout -s KILL`; one that outlives `timeout` (counted from its start)
//    comes back with `timed_out`. A command that had started when the master
//    connection died is an error saying so and is never run twice; one that
//    had not started runs on a new master.
//  - open_tunnel: a listener on 127.0.0.1 whose every connection is carried
//    by its own `ssh -W` over the master; it lives until the Host is
//    destroyed and survives the master being re-established.
//  - write_file: the bytes stream to `cat` on ssh's stdin, into a temporary
//    file renamed into place.
//  - the destructor ends the master (`ssh -O exit`), kills the ssh processes
//    it started that still run, and removes the control socket; bounded by a
//    few seconds whatever the node does.
std::expected<std::unique_ptr<Host>, Error> connect_openssh(const OpenSshTarget& target);

} // namespace specctl::remote

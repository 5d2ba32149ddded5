#pragma once

// How a connection's bytes reach a node's sshd: a TCP socket, a ProxyCommand's
// standard input and output, or a direct-tcpip channel of the previous hop of a
// ProxyJump chain. Whatever it is, libssh2 sees one non-blocking socket.

#include "ssh_connection.hpp"

#include <specctl/remote/ssh_host.hpp>

#include <expected>
#include <memory>

namespace specctl::remote::ssh {

// Opens a fresh stream to the target for every (re)connection. One route per
// host; only its I/O thread (or connect_ssh before it) calls `open`.
class Route {
public:
  Route() = default;
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;
  virtual ~Route() = default;

  virtual std::expected<Stream, ConnectFailure> open(const SshTarget& target, Clock::time_point deadline,
                                                     const StopSignal& stop) = 0;
};

// Connects the jump hosts a ProxyJump names (each through the ones before it)
// and keeps them for the route's life, or says which hop failed and why.
std::expected<std::unique_ptr<Route>, Error> make_route(const SshTarget& target);

} // namespace specctl::remote::ssh

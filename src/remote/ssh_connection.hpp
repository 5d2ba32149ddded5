#pragma once

// One authenticated SSH connection: the TCP socket, the libssh2 session on it,
// and the bounded waits used while setting it up.

#include "ssh_handles.hpp"

#include <specctl/remote/ssh_host.hpp>
#include <specctl/util/error.hpp>

#include <atomic>
#include <chrono>
#include <expected>
#include <memory>
#include <string>

namespace specctl::remote::ssh {

using Clock = std::chrono::steady_clock;

// Lets a thread blocked in a connection wait be told to give up. Waits poll
// in short slices and look at the flag between them.
struct StopSignal {
  const std::atomic<bool>* stopping = nullptr;

  bool stop_requested() const { return stopping != nullptr && stopping->load(); }
};

// State shared with libssh2's socket callbacks; lives on the heap so that its
// address survives moving the Connection.
struct Transport {
  int fd = -1;
  StopSignal stop;
  // How long a send may wait for room in the socket before the peer counts as gone.
  util::Duration send_stall_limit{};
  bool failed = false;
  std::string failure;
};

enum class Retry { yes, no };

struct ConnectFailure {
  Error error;
  // Authentication and host key refusals will not get better by retrying.
  Retry retry = Retry::yes;
};

// What a stream leaves running besides its socket (a ProxyCommand); ended
// when the connection that used it closes.
class StreamKeeper {
public:
  StreamKeeper() = default;
  StreamKeeper(const StreamKeeper&) = delete;
  StreamKeeper& operator=(const StreamKeeper&) = delete;
  virtual ~StreamKeeper() = default;
  // Why the stream may have ended, for an error message ("ProxyCommand exited
  // with status 255: ssh: connect to host bastion port 22: Connection refused"); may be empty.
  virtual std::string diagnosis() = 0;
};

// A non-blocking socket to the node's sshd, whatever carries it.
struct Stream {
  util::UniqueFd fd;
  std::unique_ptr<StreamKeeper> keeper;
};

class Route;

// Everything libssh2 needs for one connection. Sends never return EAGAIN to
// libssh2 (see send_callback in ssh_connection.cpp), so a session can carry
// many channels at once from one thread without losing packets.
class Connection {
public:
  Connection(std::unique_ptr<Transport> transport, Stream stream, Session session);
  Connection(Connection&&) noexcept = default;
  // Assigning would free the old session after its socket; use std::optional::emplace.
  Connection& operator=(Connection&&) = delete;
  // Says goodbye when the transport still works, shuts the socket down so no
  // libssh2 call can block, then frees the session and closes the socket.
  ~Connection();

  LIBSSH2_SESSION* session() const { return m_session.get(); }
  int fd() const { return m_socket.get(); }
  // The socket failed (peer closed, reset, or a send stalled past the limit).
  bool transport_failed() const { return m_transport->failed; }
  const std::string& transport_failure() const { return m_transport->failure; }
  // Shuts the socket down, so that every later libssh2 call fails at once.
  void mark_failed(std::string why);
  // Waits in libssh2's callbacks then also end when `stop` is requested.
  void set_stop(const StopSignal& stop) { m_transport->stop = stop; }
  // What the stream's keeper says about a failure; empty for a plain socket.
  std::string stream_diagnosis() const { return m_keeper ? m_keeper->diagnosis() : std::string(); }

private:
  // First, so that a ProxyCommand outlives the session's goodbye.
  std::unique_ptr<StreamKeeper> m_keeper;
  std::unique_ptr<Transport> m_transport;
  util::UniqueFd m_socket;
  Session m_session;
};

// Connects over a stream from `route`, verifies the host key, authenticates;
// at most `target.connect_timeout`.
std::expected<Connection, ConnectFailure> establish(const SshTarget& target, Route& route, const StopSignal& stop);

// A TCP connection to target.hostname:port, tuned for SSH.
std::expected<util::UniqueFd, ConnectFailure> connect_tcp(const SshTarget& target, Clock::time_point deadline,
                                                          const StopSignal& stop);

enum class WaitResult { ready, timed_out, stopped };

// Waits until the session's socket can make progress in the direction libssh2
// is blocked on, the deadline passes, or a stop is requested.
WaitResult wait_for_session(LIBSSH2_SESSION* session, int fd, Clock::time_point deadline, const StopSignal& stop);

// Runs a non-blocking libssh2 call until it stops answering EAGAIN; gives
// LIBSSH2_ERROR_TIMEOUT past the deadline and LIBSSH2_ERROR_SOCKET_DISCONNECT
// when stopped.
template <typename Call>
auto run_until_done(LIBSSH2_SESSION* session, int fd, Clock::time_point deadline, const StopSignal& stop, Call&& call)
    -> decltype(call()) {
  while (true) {
    auto rc = call();
    if (rc != LIBSSH2_ERROR_EAGAIN) {
      return rc;
    }
    switch (wait_for_session(session, fd, deadline, stop)) {
    case WaitResult::ready:
      break;
    case WaitResult::timed_out:
      return LIBSSH2_ERROR_TIMEOUT;
    case WaitResult::stopped:
      return LIBSSH2_ERROR_SOCKET_DISCONNECT;
    }
  }
}

// "~/x" -> "$HOME/x".
std::string expand_home(const std::string& path);

// Verifies the session's host key against target.known_hosts under its
// policy, appending an unknown key when the policy allows.
std::expected<void, ConnectFailure> verify_host_key(LIBSSH2_SESSION* session, const SshTarget& target);

// The host key algorithms to offer, those already recorded for this host first.
std::string preferred_host_key_methods(const SshTarget& target);

// Public key authentication: identity file, else ssh-agent, else default keys.
std::expected<void, ConnectFailure> authenticate(LIBSSH2_SESSION* session, int fd, const SshTarget& target,
                                                 Clock::time_point deadline, const StopSignal& stop);

} // namespace specctl::remote::ssh

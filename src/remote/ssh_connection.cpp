#include "ssh_connection.hpp"
#include "ssh_route.hpp"

#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specctl::remote::ssh {

namespace {

// Waits poll in slices this long so that a stop request is seen promptly.
constexpr auto k_wait_slice = std::chrono::milliseconds{100};
// A send that finds no room in the socket for this long means the peer is gone,
// whatever the keepalive says.
constexpr util::Duration k_min_send_stall_limit = std::chrono::seconds{10};
// Saying goodbye to a peer must not hold up closing a host.
constexpr util::Duration k_goodbye_stall_limit = std::chrono::seconds{1};

// Polls one fd for `events` until it is ready, the deadline passes or a stop is requested.
WaitResult wait_for_fd(int fd, short events, Clock::time_point deadline, const StopSignal& stop) {
  while (true) {
    if (stop.stop_requested()) {
      return WaitResult::stopped;
    }
    if (Clock::now() >= deadline) {
      return WaitResult::timed_out;
    }
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, std::min(util::poll_timeout_ms(deadline), static_cast<int>(k_wait_slice.count())));
    if (rc > 0) {
      return WaitResult::ready;
    }
    if (rc < 0 && errno != EINTR) {
      return WaitResult::ready; // let the caller's next call report the error
    }
  }
}

// libssh2 treats a short send as EAGAIN and then insists that the very same
// call is repeated before any other one; with several channels on a session a
// different call would complete the old packet and silently drop its own. So
// this callback never returns short: it waits, bounded, until everything is
// in the socket, and a peer that accepts nothing for the stall limit is gone.
ssize_t send_callback(libssh2_socket_t fd, const void* buffer, size_t length, int flags, void** abstract) {
  auto* transport = static_cast<Transport*>(*abstract);
  const char* bytes = static_cast<const char*>(buffer);
  auto deadline = Clock::now() + transport->send_stall_limit;
  std::size_t sent = 0;
  while (sent < length) {
    ssize_t n = ::send(fd, bytes + sent, length - sent, flags | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      switch (wait_for_fd(fd, POLLOUT, deadline, transport->stop)) {
      case WaitResult::ready:
        continue;
      case WaitResult::timed_out:
        transport->failed = true;
        transport->failure =
            fmt::format("the peer accepted no data for {}", util::format_duration(transport->send_stall_limit));
        return -ETIMEDOUT;
      case WaitResult::stopped:
        transport->failed = true;
        transport->failure = "the host is being closed";
        return -EPIPE;
      }
    }
    int error = n < 0 ? errno : EPIPE;
    transport->failed = true;
    transport->failure = std::strerror(error);
    return -error;
  }
  return static_cast<ssize_t>(length);
}

// Plain recv, except that a closed or broken socket is remembered so that the
// owner can tell a lost connection from a refused request.
ssize_t recv_callback(libssh2_socket_t fd, void* buffer, size_t length, int flags, void** abstract) {
  auto* transport = static_cast<Transport*>(*abstract);
  while (true) {
    ssize_t n = ::recv(fd, buffer, length, flags);
    if (n > 0) {
      // sshd leaves Nagle on for non-interactive sessions, so each of its
      // small replies waits for our ACK; a delayed ACK (40 ms) then stalls
      // every request-reply step. Quick ACKs are not sticky in Linux.
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
      return n;
    }
    if (n == 0) {
      transport->failed = true;
      transport->failure = "the connection was closed by the peer";
      return 0;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return -EAGAIN;
    }
    int error = errno;
    transport->failed = true;
    transport->failure = std::strerror(error);
    return -error;
  }
}

util::Duration send_stall_limit(const SshTarget& target) {
  return std::max(
      {std::max(1, target.keepalive_count) * target.keepalive, target.connect_timeout, k_min_send_stall_limit});
}

ConnectFailure timed_out(const SshTarget& target, std::string_view during) {
  return {Error(fmt::format("{}: timed out after {} {}", target.describe(),
                            util::format_duration(target.connect_timeout), during),
                ErrorKind::timed_out)};
}

void tune_socket(int fd, const SshTarget& target) {
  int one = 1;
  // Commands and tunnelled requests are small and latency bound.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (target.keepalive.count() > 0) {
    // Keepalives are sent every interval, so data unacknowledged for three of
    // them means the peer or the path is gone; the kernel then fails the socket.
    auto limit = static_cast<unsigned int>((std::max(1, target.keepalive_count) * target.keepalive).count());
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &limit, sizeof limit);
  }
}

} // namespace

std::expected<util::UniqueFd, ConnectFailure> connect_tcp(const SshTarget& target, Clock::time_point deadline,
                                                          const StopSignal& stop) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto port = std::to_string(target.port);
  // getaddrinfo has no deadline of its own; the resolver's timeouts bound it.
  int rc = ::getaddrinfo(target.hostname.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return std::unexpected(ConnectFailure{
        Error(fmt::format("{}: cannot resolve \"{}\": {}", target.describe(), target.hostname, gai_strerror(rc)))});
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    util::UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = std::strerror(errno);
        continue;
      }
      switch (wait_for_fd(fd.get(), POLLOUT, deadline, stop)) {
      case WaitResult::ready:
        break;
      case WaitResult::timed_out:
        return std::unexpected(timed_out(target, fmt::format("connecting to {} port {}", target.hostname, port)));
      case WaitResult::stopped:
        return std::unexpected(ConnectFailure{Error(fmt::format("{}: closed while connecting", target.describe()))});
      }
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        last_error = std::strerror(error);
        continue;
      }
    }
    tune_socket(fd.get(), target);
    return fd;
  }
  return std::unexpected(ConnectFailure{Error(
      fmt::format("{}: cannot connect to {} port {}: {}", target.describe(), target.hostname, port, last_error))});
}

std::string expand_home(const std::string& path) {
  if (path == "~" || path.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    if (home != nullptr && *home != '\0') {
      return std::string(home) + path.substr(1);
    }
  }
  return path;
}

WaitResult wait_for_session(LIBSSH2_SESSION* session, int fd, Clock::time_point deadline, const StopSignal& stop) {
  int directions = libssh2_session_block_directions(session);
  short events = 0;
  if ((directions & LIBSSH2_SESSION_BLOCK_INBOUND) != 0) {
    events |= POLLIN;
  }
  if ((directions & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0) {
    events |= POLLOUT;
  }
  if (events == 0) {
    events = POLLIN;
  }
  return wait_for_fd(fd, events, deadline, stop);
}

Connection::Connection(std::unique_ptr<Transport> transport, Stream stream, Session session)
    : m_keeper(std::move(stream.keeper)), m_transport(std::move(transport)), m_socket(std::move(stream.fd)),
      m_session(std::move(session)) {}

Connection::~Connection() {
  if (!m_session) {
    return;
  }
  if (!m_transport->failed && libssh2_userauth_authenticated(m_session.get()) != 0) {
    m_transport->send_stall_limit = k_goodbye_stall_limit;
    libssh2_session_disconnect(m_session.get(), "specctl closing the connection");
  }
  // From here on every send fails at once, so freeing cannot block or EAGAIN.
  ::shutdown(m_socket.get(), SHUT_RDWR);
  m_transport->failed = true;
  m_session.reset();
}

void Connection::mark_failed(std::string why) {
  if (!m_transport->failed) {
    m_transport->failed = true;
    m_transport->failure = std::move(why);
  }
  ::shutdown(m_socket.get(), SHUT_RDWR);
}

namespace {

// libssh2 1.11.1 (Debian 13) deprecated callback_set, which takes the function as a void*,
// for callback_set2, which takes a function pointer; 1.10 (Debian 12) has only the first.
template <typename Fn> void set_callback(LIBSSH2_SESSION* session, int type, Fn* callback) {
#if LIBSSH2_VERSION_NUM >= 0x010b01
  libssh2_session_callback_set2(session, type, reinterpret_cast<libssh2_cb_generic*>(callback));
#else
  libssh2_session_callback_set(session, type, reinterpret_cast<void*>(callback));
#endif
}

} // namespace

std::expected<Connection, ConnectFailure> establish(const SshTarget& target, Route& route, const StopSignal& stop) {
  ensure_libssh2_initialized();
  auto deadline = Clock::now() + target.connect_timeout;
  auto stream = route.open(target, deadline, stop);
  if (!stream) {
    return std::unexpected(std::move(stream.error()));
  }
  auto transport = std::make_unique<Transport>();
  transport->fd = stream->fd.get();
  transport->stop = stop;
  transport->send_stall_limit = send_stall_limit(target);
  Session session(libssh2_session_init_ex(nullptr, nullptr, nullptr, transport.get()));
  if (!session) {
    return std::unexpected(
        ConnectFailure{Error(fmt::format("{}: libssh2 could not create a session", target.describe()))});
  }
  set_callback(session.get(), LIBSSH2_CALLBACK_SEND, &send_callback);
  set_callback(session.get(), LIBSSH2_CALLBACK_RECV, &recv_callback);
  libssh2_session_set_blocking(session.get(), 0);
  auto methods = preferred_host_key_methods(target);
  libssh2_session_method_pref(session.get(), LIBSSH2_METHOD_HOSTKEY, methods.c_str());
  Connection connection(std::move(transport), std::move(*stream), std::move(session));

  LIBSSH2_SESSION* s = connection.session();
  int rc =
      run_until_done(s, connection.fd(), deadline, stop, [&] { return libssh2_session_handshake(s, connection.fd()); });
  if (rc == LIBSSH2_ERROR_TIMEOUT) {
    return std::unexpected(timed_out(target, "in the SSH handshake"));
  }
  if (rc != 0) {
    auto why = connection.transport_failed() ? connection.transport_failure() : last_error_message(s);
    // A ProxyCommand that failed says why on its standard error.
    if (auto diagnosis = connection.stream_diagnosis(); !diagnosis.empty()) {
      why += fmt::format(" ({})", diagnosis);
    }
    return std::unexpected(ConnectFailure{Error(fmt::format("{}: SSH handshake failed: {}", target.describe(), why))});
  }
  if (auto verified = verify_host_key(s, target); !verified) {
    return std::unexpected(std::move(verified.error()));
  }
  if (auto authenticated = authenticate(s, connection.fd(), target, deadline, stop); !authenticated) {
    return std::unexpected(std::move(authenticated.error()));
  }
  if (target.keepalive.count() > 0) {
    // No reply wanted: libssh2 would keep every reply queued for the whole
    // session. TCP_USER_TIMEOUT turns an unacknowledged keepalive into an error.
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(target.keepalive).count();
    libssh2_keepalive_config(s, 0, static_cast<unsigned>(std::max<long long>(1, seconds)));
  }
  return connection;
}

} // namespace specctl::remote::ssh

#include "ssh_loop.hpp"

#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specctl::remote {

namespace ssh {

bool OpContext::connection_gone(int rc) {
  if (connection->transport_failed()) {
    lost = connection->transport_failure();
    return true;
  }
  switch (rc) {
  case LIBSSH2_ERROR_SOCKET_SEND:
  case LIBSSH2_ERROR_SOCKET_RECV:
  case LIBSSH2_ERROR_SOCKET_DISCONNECT:
  case LIBSSH2_ERROR_SOCKET_TIMEOUT:
  case LIBSSH2_ERROR_BAD_SOCKET:
  case LIBSSH2_ERROR_TIMEOUT:
  case LIBSSH2_ERROR_KEX_FAILURE:
  case LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE:
  case LIBSSH2_ERROR_DECRYPT:
  case LIBSSH2_ERROR_ENCRYPT:
  case LIBSSH2_ERROR_INVALID_MAC:
  case LIBSSH2_ERROR_PROTO: {
    auto message = last_error_message(connection->session());
    lost = message.empty() ? fmt::format("libssh2 error {}", rc) : message;
    return true;
  }
  default:
    return false;
  }
}

} // namespace ssh

namespace detail {

namespace {

using ssh::Clock;

// Steps over all operations per wake-up while they keep making progress;
// then poll() runs once so new sockets and timers are looked at.
constexpr int k_max_passes = 64;
// poll() wakes at least this often, a backstop for anything not event driven.
constexpr auto k_idle_wake = std::chrono::seconds{5};
// A channel whose close the peer never confirms is left to the session.
constexpr auto k_close_limit = std::chrono::seconds{30};
constexpr auto k_close_check = std::chrono::seconds{1};
// Slack on top of the longest legitimate wait for an answer from the thread.
constexpr auto k_answer_slack = std::chrono::seconds{10};

std::string strip_prefix(const std::string& message, const std::string& prefix) {
  return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
}

int poll_ms(Clock::time_point now, Clock::time_point until) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, std::chrono::milliseconds(k_idle_wake).count()));
}

} // namespace

SshLoop::SshLoop(SshTarget target, std::unique_ptr<ssh::Route> route, ssh::Connection connection)
    : m_target(std::move(target)), m_route(std::move(route)), m_where(m_target.describe()),
      m_wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!m_wake) {
    throw Error(fmt::format("{}: cannot create an eventfd: {}", m_where, std::strerror(errno)));
  }
  connection.set_stop(ssh::StopSignal{&m_stopping});
  m_connection.emplace(std::move(connection));
  m_ctx.target = &m_target;
  m_ctx.where = m_where;
  m_next_keepalive = Clock::now() + m_target.keepalive;
  m_thread = std::thread([this] { run(); });
}

SshLoop::~SshLoop() {
  m_stopping = true;
  wake();
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

void SshLoop::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(m_wake.get(), &one, sizeof one);
}

void SshLoop::drain_wake() {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(m_wake.get(), &count, sizeof count);
}

util::Duration SshLoop::answer_bound(util::Duration timeout) const {
  // Each reconnection round: its attempts plus the waits between them.
  util::Duration round = m_target.connect_timeout * std::max(1, m_target.reconnect_attempts);
  util::Duration backoff = m_target.reconnect_backoff;
  for (int i = 1; i < m_target.reconnect_attempts; ++i) {
    round += backoff;
    backoff = std::min(backoff * 2, m_target.reconnect_backoff_max);
  }
  // A command may wait behind an abandoned tunnel open, then for reconnection
  // rounds each time its connection drops before it starts.
  return timeout + ssh::k_abandoned_open_limit + m_target.connect_timeout + (ssh::k_max_connection_losses + 1) * round +
         k_answer_slack;
}

std::expected<CommandResult, Error> SshLoop::exec(const std::string& command_line, util::Duration timeout,
                                                  std::string input) {
  if (timeout <= util::Duration::zero()) {
    return std::unexpected(
        Error(fmt::format("{}: the timeout for \"{}\" must be positive", m_where, command_line), ErrorKind::bad_input));
  }
  std::promise<ssh::ExecOutcome> promise;
  auto answer = promise.get_future();
  {
    std::lock_guard lock(m_mutex);
    if (m_stopping) {
      return std::unexpected(Error(fmt::format("{}: the host is closed", m_where)));
    }
    m_incoming_ops.push_back(
        std::make_unique<ssh::ExecOp>(m_where, command_line, timeout, std::move(promise), std::move(input)));
  }
  wake();
  auto bound = answer_bound(timeout);
  if (answer.wait_for(bound) != std::future_status::ready) {
    // Only a bug in the I/O thread gets here; the bound is its worst case.
    return std::unexpected(
        Error(fmt::format("{}: no answer for \"{}\" within {}", m_where, command_line, util::format_duration(bound)),
              ErrorKind::timed_out));
  }
  return answer.get();
}

std::expected<int, Error> SshLoop::open_tunnel(const std::string& target_host, int target_port) {
  auto fail = [&](std::string why) {
    return std::unexpected(
        Error(fmt::format("{}: cannot open a tunnel to {}:{}: {}", m_where, target_host, target_port, why)));
  };
  if (target_host.empty() || target_port <= 0 || target_port > 65535) {
    return std::unexpected(Error(fmt::format("{}: invalid tunnel target \"{}:{}\"", m_where, target_host, target_port),
                                 ErrorKind::bad_input));
  }
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail(std::strerror(errno));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return fail(std::strerror(errno));
  }
  int port = ntohs(address.sin_port);
  {
    std::lock_guard lock(m_mutex);
    if (m_stopping) {
      return fail("the host is closed");
    }
    m_incoming_listeners.push_back(Listener{std::move(fd), target_host, target_port});
  }
  wake();
  return port;
}

std::expected<util::UniqueFd, Error> SshLoop::open_stream(const std::string& target_host, int target_port,
                                                          util::Duration timeout) {
  const auto what = fmt::format("cannot forward to {}:{}", target_host, target_port);
  if (target_host.empty() || target_port <= 0 || target_port > 65535) {
    return std::unexpected(Error(fmt::format("{}: {}: not an address", m_where, what), ErrorKind::bad_input));
  }
  return open_channel_stream(what, timeout, [&](util::UniqueFd theirs, ssh::OpenNotice on_open) {
    return std::make_unique<ssh::TunnelConnectionOp>(std::move(theirs), target_host, target_port, 0,
                                                     std::move(on_open));
  });
}

std::expected<util::UniqueFd, Error> SshLoop::open_exec_stream(const std::string& command_line,
                                                               util::Duration timeout) {
  return open_channel_stream(fmt::format("cannot start \"{}\"", command_line), timeout,
                             [&](util::UniqueFd theirs, ssh::OpenNotice on_open) {
                               return std::make_unique<ssh::TunnelConnectionOp>(
                                   std::move(theirs), ssh::TunnelConnectionOp::Exec{command_line}, std::move(on_open));
                             });
}

std::expected<util::UniqueFd, Error>
SshLoop::open_channel_stream(const std::string& what, util::Duration timeout,
                             const std::function<std::unique_ptr<ssh::Op>(util::UniqueFd, ssh::OpenNotice)>& make_op) {
  auto fail = [&](std::string why, ErrorKind kind = ErrorKind::failed) {
    return std::unexpected(Error(fmt::format("{}: {}: {}", m_where, what, why), kind));
  };
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
    return fail(std::strerror(errno));
  }
  util::UniqueFd ours(pair[0]);
  util::UniqueFd theirs(pair[1]);
  auto promise = std::make_shared<std::promise<std::optional<std::string>>>();
  auto answer = promise->get_future();
  {
    std::lock_guard lock(m_mutex);
    if (m_stopping) {
      return fail("the host is closed");
    }
    m_incoming_ops.push_back(make_op(
        std::move(theirs), [promise](std::optional<std::string> refused) { promise->set_value(std::move(refused)); }));
  }
  wake();
  // The open waits for a connection first when this hop is reconnecting. An
  // answer that comes after we gave up finds our end closed: the channel ends.
  if (answer.wait_for(timeout) != std::future_status::ready) {
    return fail(fmt::format("no answer within {}", util::format_duration(timeout)), ErrorKind::timed_out);
  }
  if (auto refused = answer.get()) {
    return fail(strip_prefix(*refused, m_where + ": "));
  }
  return ours;
}

void SshLoop::run() {
  while (!m_stopping) {
    take_incoming();
    if (!m_connection && !m_gave_up && wants_connection()) {
      reconnect();
      continue;
    }
    service();
    keepalive();
    if (!m_connection && !m_gave_up && wants_connection()) {
      // Lost just now: reconnect at once rather than after the next wake-up.
      continue;
    }
    wait_for_events();
  }
  shut_down();
}

void SshLoop::take_incoming() {
  std::lock_guard lock(m_mutex);
  if (!m_incoming_ops.empty()) {
    // New work is worth another round of reconnection attempts.
    m_gave_up = false;
  }
  for (auto& op : m_incoming_ops) {
    m_ops.push_back(std::move(op));
  }
  m_incoming_ops.clear();
  for (auto& listener : m_incoming_listeners) {
    m_listeners.push_back(std::move(listener));
  }
  m_incoming_listeners.clear();
}

bool SshLoop::wants_connection() const {
  return !m_ops.empty() || !m_listeners.empty();
}

bool SshLoop::sleep_unless_stopped(util::Duration how_long) {
  auto until = Clock::now() + how_long;
  while (!m_stopping) {
    auto now = Clock::now();
    if (now >= until) {
      return true;
    }
    pollfd p{m_wake.get(), POLLIN, 0};
    if (::poll(&p, 1, poll_ms(now, until)) > 0) {
      // New work waits in the queue; only a stop ends the wait early.
      drain_wake();
    }
  }
  return false;
}

void SshLoop::reconnect() {
  auto started = Clock::now();
  auto backoff = m_target.reconnect_backoff;
  int attempts = std::max(1, m_target.reconnect_attempts);
  std::optional<ssh::ConnectFailure> last;
  int attempt = 0;
  for (; attempt < attempts; ++attempt) {
    // The first attempt goes at once: a dropped connection to a live sshd
    // comes back immediately.
    if (attempt > 0) {
      if (!sleep_unless_stopped(backoff)) {
        return;
      }
      backoff = std::min(backoff * 2, m_target.reconnect_backoff_max);
    }
    auto connection = ssh::establish(m_target, *m_route, ssh::StopSignal{&m_stopping});
    if (connection) {
      m_connection.emplace(std::move(*connection));
      m_next_keepalive = Clock::now() + m_target.keepalive;
      ++m_reconnects;
      return;
    }
    if (m_stopping) {
      return;
    }
    last = std::move(connection.error());
    if (last->retry == ssh::Retry::no) {
      ++attempt;
      break;
    }
  }
  m_gave_up = true;
  auto took = std::chrono::duration_cast<util::Duration>(Clock::now() - started);
  abandon_all(Error(fmt::format("{}: the connection was lost ({}) and {} reconnection attempt{} in {} failed; last: {}",
                                m_where, m_lost_why, attempt, attempt == 1 ? "" : "s", util::format_duration(took),
                                strip_prefix(last->error.what(), m_where + ": ")),
                    last->retry == ssh::Retry::yes && last->error.kind() == ErrorKind::failed ? ErrorKind::unreachable
                                                                                              : last->error.kind()));
}

void SshLoop::service() {
  if (!m_connection) {
    return;
  }
  m_busy = false;
  m_ctx.connection = &*m_connection;
  for (int pass = 0; pass < k_max_passes; ++pass) {
    m_ctx.now = Clock::now();
    m_ctx.exec_channels = static_cast<int>(std::count_if(
        m_ops.begin(), m_ops.end(), [](const std::unique_ptr<ssh::Op>& op) { return op->holds_exec_channel(); }));
    bool progress = false;
    for (auto& op : m_ops) {
      progress = op->step(m_ctx) || progress;
      if (m_ctx.lost) {
        break;
      }
    }
    for (auto& channel : m_ctx.closing) {
      m_closing.push_back(ClosingChannel{std::move(channel), m_ctx.now});
    }
    m_ctx.closing.clear();
    if (!m_ctx.lost) {
      progress = reap_closing() || progress;
    }
    if (!m_ctx.lost && m_connection->transport_failed()) {
      m_ctx.lost = m_connection->transport_failure();
    }
    if (m_ctx.lost) {
      auto why = std::move(*m_ctx.lost);
      m_ctx.lost.reset();
      lose_connection(why);
      return;
    }
    std::erase_if(m_ops, [](const std::unique_ptr<ssh::Op>& op) { return op->finished(); });
    if (!progress) {
      return;
    }
  }
  m_busy = true;
}

bool SshLoop::reap_closing() {
  bool progress = false;
  auto now = Clock::now();
  for (auto it = m_closing.begin(); it != m_closing.end();) {
    int rc = libssh2_channel_free(it->channel.get());
    if (rc == LIBSSH2_ERROR_EAGAIN) {
      if (now - it->since < k_close_limit) {
        ++it;
        continue;
      }
    }
    // Freed (any other answer frees it too), or left to the session.
    it->channel.release();
    it = m_closing.erase(it);
    progress = true;
  }
  return progress;
}

void SshLoop::lose_connection(const std::string& why) {
  m_connection->mark_failed(why);
  m_lost_why = why;
  for (auto& op : m_ops) {
    op->connection_lost(why);
  }
  // The dying session frees every channel it still has.
  for (auto& closing : m_closing) {
    closing.channel.release();
  }
  m_closing.clear();
  for (auto& channel : m_ctx.closing) {
    channel.release();
  }
  m_ctx.closing.clear();
  m_ctx.opener = nullptr;
  m_ctx.connection = nullptr;
  std::erase_if(m_ops, [](const std::unique_ptr<ssh::Op>& op) { return op->finished(); });
  m_connection.reset();
}

void SshLoop::keepalive() {
  if (!m_connection || m_target.keepalive <= util::Duration::zero()) {
    return;
  }
  auto now = Clock::now();
  if (now < m_next_keepalive) {
    return;
  }
  int next_seconds = 0;
  int rc = libssh2_keepalive_send(m_connection->session(), &next_seconds);
  if (rc != 0 || m_connection->transport_failed()) {
    lose_connection(m_connection->transport_failed() ? m_connection->transport_failure() : "keepalive failed");
    return;
  }
  m_next_keepalive = now + std::chrono::seconds{std::max(1, next_seconds)};
}

void SshLoop::wait_for_events() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{m_wake.get(), POLLIN, 0});
  auto now = Clock::now();
  auto until = m_busy ? now : now + k_idle_wake;
  std::size_t ssh_index = 0;
  bool readers = false;
  if (m_connection) {
    readers = !m_closing.empty() || std::any_of(m_ops.begin(), m_ops.end(),
                                                [](const std::unique_ptr<ssh::Op>& op) { return op->reads_session(); });
    ssh_index = fds.size();
    // Without a reader, data would keep poll() returning; only a hang-up
    // matters then.
    fds.push_back(pollfd{m_connection->fd(), static_cast<short>(readers ? POLLIN : POLLRDHUP), 0});
    if (m_target.keepalive > util::Duration::zero()) {
      until = std::min(until, m_next_keepalive);
    }
    if (!m_closing.empty()) {
      until = std::min(until, now + k_close_check);
    }
  }
  std::size_t first_listener = fds.size();
  for (const auto& listener : m_listeners) {
    fds.push_back(pollfd{listener.fd.get(), POLLIN, 0});
  }
  for (const auto& op : m_ops) {
    op->add_poll_fds(fds);
    if (auto deadline = op->deadline()) {
      until = std::min(until, *deadline);
    }
  }
  int ready = ::poll(fds.data(), fds.size(), poll_ms(now, until));
  if (ready <= 0) {
    return;
  }
  if ((fds[0].revents & POLLIN) != 0) {
    drain_wake();
  }
  if (ssh_index != 0) {
    short events = fds[ssh_index].revents;
    bool hung_up = (events & (POLLHUP | POLLRDHUP)) != 0 && !readers;
    if ((events & (POLLERR | POLLNVAL)) != 0 || hung_up) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(m_connection->fd(), SOL_SOCKET, SO_ERROR, &error, &length);
      lose_connection(error != 0 ? std::strerror(error) : "the connection was closed by the peer");
    }
  }
  for (std::size_t i = 0; i < m_listeners.size(); ++i) {
    if ((fds[first_listener + i].revents & POLLIN) != 0) {
      accept_connections(m_listeners[i]);
    }
  }
}

void SshLoop::accept_connections(Listener& listener) {
  while (true) {
    sockaddr_in peer{};
    socklen_t length = sizeof peer;
    int fd = ::accept4(listener.fd.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    m_ops.push_back(std::make_unique<ssh::TunnelConnectionOp>(util::UniqueFd(fd), listener.target_host,
                                                              listener.target_port, ntohs(peer.sin_port)));
    m_gave_up = false;
  }
}

void SshLoop::abandon_all(const Error& error) {
  for (auto& op : m_ops) {
    op->abandon(error);
  }
  m_ops.clear();
  m_ctx.opener = nullptr;
}

void SshLoop::shut_down() {
  abandon_all(Error(fmt::format("{}: the host was closed", m_where)));
  for (auto& closing : m_closing) {
    closing.channel.release();
  }
  m_closing.clear();
  m_connection.reset();
  m_listeners.clear();
  std::lock_guard lock(m_mutex);
  for (auto& op : m_incoming_ops) {
    op->abandon(Error(fmt::format("{}: the host was closed", m_where)));
  }
  m_incoming_ops.clear();
  m_incoming_listeners.clear();
}

} // namespace detail

} // namespace specctl::remote

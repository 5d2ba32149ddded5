#include "ssh_ops.hpp"

#include <specctl/util/duration.hpp>

#include <fmt/format.h>

#include <cerrno>

#include <sys/socket.h>

namespace specctl::remote::ssh {

namespace {

bool would_block() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

} // namespace

TunnelConnectionOp::TunnelConnectionOp(util::UniqueFd client, std::string target_host, int target_port, int origin_port,
                                       OpenNotice on_open)
    : m_client(std::move(client)), m_on_open(std::move(on_open)), m_target_host(std::move(target_host)),
      m_target_port(target_port), m_origin_port(origin_port) {}

TunnelConnectionOp::TunnelConnectionOp(util::UniqueFd client, Exec exec, OpenNotice on_open)
    : m_client(std::move(client)), m_on_open(std::move(on_open)), m_exec(std::move(exec.command_line)) {}

void TunnelConnectionOp::notify(std::optional<std::string> refused) {
  if (m_on_open) {
    auto on_open = std::move(m_on_open);
    m_on_open = nullptr;
    on_open(std::move(refused));
  }
}

bool TunnelConnectionOp::holds_exec_channel() const {
  return !m_exec.empty() && m_stage != Stage::waiting && m_stage != Stage::done;
}

bool TunnelConnectionOp::reads_session() const {
  switch (m_stage) {
  case Stage::opening:
  case Stage::starting:
    return true;
  case Stage::pumping:
    // Reading our channel, waiting for window space, or sending EOF all read the session.
    return (m_down.empty() && !m_remote_eof) || !m_up.empty() || (m_client_eof && !m_eof_sent);
  default:
    return false;
  }
}

void TunnelConnectionOp::add_poll_fds(std::vector<pollfd>& fds) const {
  if (m_stage != Stage::pumping) {
    return;
  }
  short events = 0;
  if (m_up.empty() && !m_client_eof) {
    events |= POLLIN;
  }
  if (!m_down.empty()) {
    events |= POLLOUT;
  }
  if (events != 0) {
    fds.push_back(pollfd{m_client.get(), events, 0});
  }
}

std::optional<Clock::time_point> TunnelConnectionOp::deadline() const {
  if (m_stage == Stage::opening || m_stage == Stage::starting) {
    return m_open_deadline;
  }
  return std::nullopt;
}

bool TunnelConnectionOp::step(OpContext& ctx) {
  bool progress = false;
  const bool may_open = m_exec.empty() || ctx.exec_channels < k_max_exec_channels;
  if (m_stage == Stage::waiting && may_open && ctx.claim_open(this, m_open_deadline)) {
    if (!m_exec.empty()) {
      ++ctx.exec_channels;
    }
    m_stage = Stage::opening;
    progress = true;
  }
  if (m_stage == Stage::opening) {
    progress = step_open(ctx) || progress;
  }
  if (m_stage == Stage::starting) {
    progress = step_start(ctx) || progress;
  }
  if (m_stage == Stage::pumping) {
    progress = pump_up(ctx) || progress;
    if (m_stage == Stage::pumping && !ctx.lost) {
      progress = pump_down(ctx) || progress;
    }
    if (m_stage == Stage::pumping && !ctx.lost && m_eof_sent && m_client_shut) {
      close(ctx);
      progress = true;
    }
  }
  return progress;
}

bool TunnelConnectionOp::step_open(OpContext& ctx) {
  LIBSSH2_CHANNEL* channel = m_exec.empty() ? libssh2_channel_direct_tcpip_ex(ctx.session(), m_target_host.c_str(),
                                                                              m_target_port, "127.0.0.1", m_origin_port)
                                            : libssh2_channel_open_session(ctx.session());
  if (channel == nullptr) {
    int rc = libssh2_session_last_errno(ctx.session());
    if (rc == LIBSSH2_ERROR_EAGAIN) {
      if (ctx.now < m_open_deadline) {
        return false;
      }
      if (m_client) {
        // sshd answers only once its connect to the target is done, which
        // for an unreachable target takes minutes. The client is told now;
        // the open itself must still finish, because libssh2 cannot abandon
        // an open half way and would resume it for the next channel.
        notify(fmt::format("no answer to opening a channel {} within {}",
                           m_exec.empty() ? fmt::format("to {}:{}", m_target_host, m_target_port)
                                          : fmt::format("to run \"{}\"", m_exec),
                           util::format_duration(ctx.target->connect_timeout)));
        m_client.reset();
        m_open_deadline = ctx.now + k_abandoned_open_limit;
        return true;
      }
      ctx.lost = fmt::format("the server did not answer a channel open within {}",
                             util::format_duration(k_abandoned_open_limit));
      return false;
    }
    ctx.opener = nullptr;
    if (ctx.connection_gone(rc)) {
      return false;
    }
    // Typically nothing listens on the target port yet; the client sees the
    // connection closed, as it would without a tunnel.
    auto why = last_error_message(ctx.session());
    notify(why.empty() ? fmt::format("libssh2 error {}", rc) : why);
    close(ctx);
    return true;
  }
  ctx.opener = nullptr;
  m_channel = Channel(channel);
  if (!m_exec.empty()) {
    // Only stdout reaches the client: the shell's stderr (what the user's rc
    // files print there) is dropped as it comes, so it never fills the window.
    libssh2_channel_handle_extended_data2(channel, LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE);
    m_stage = Stage::starting;
    return true;
  }
  return pump_from_now(ctx);
}

bool TunnelConnectionOp::pump_from_now(OpContext& ctx) {
  notify(std::nullopt);
  if (!m_client) {
    close(ctx);
    return true;
  }
  m_stage = Stage::pumping;
  return true;
}

bool TunnelConnectionOp::step_start(OpContext& ctx) {
  int rc = libssh2_channel_exec(m_channel.get(), m_exec.c_str());
  if (rc == LIBSSH2_ERROR_EAGAIN) {
    if (ctx.now >= m_open_deadline) {
      notify(fmt::format("the server did not start \"{}\" within {}", m_exec,
                         util::format_duration(ctx.target->connect_timeout)));
      close(ctx);
      return true;
    }
    return false;
  }
  if (rc != 0) {
    if (ctx.connection_gone(rc)) {
      return false;
    }
    notify(fmt::format("the server refused to run \"{}\": {}", m_exec, last_error_message(ctx.session())));
    close(ctx);
    return true;
  }
  return pump_from_now(ctx);
}

bool TunnelConnectionOp::pump_up(OpContext& ctx) {
  bool progress = false;
  if (m_up.empty() && !m_client_eof) {
    ssize_t n = ::recv(m_client.get(), m_up.bytes.data(), m_up.bytes.size(), 0);
    if (n > 0) {
      m_up.begin = 0;
      m_up.end = static_cast<std::size_t>(n);
      progress = true;
    } else if (n == 0) {
      m_client_eof = true;
      progress = true;
    } else if (!would_block()) {
      close(ctx);
      return true;
    }
  }
  while (!m_up.empty()) {
    ssize_t n = libssh2_channel_write(m_channel.get(), m_up.bytes.data() + m_up.begin, m_up.end - m_up.begin);
    if (n > 0) {
      m_up.begin += static_cast<std::size_t>(n);
      progress = true;
      continue;
    }
    if (n == 0 || n == LIBSSH2_ERROR_EAGAIN) {
      // The node's window is full; its adjustment arrives on the session.
      return progress;
    }
    if (!ctx.connection_gone(static_cast<int>(n))) {
      close(ctx);
    }
    return true;
  }
  if (m_client_eof && !m_eof_sent) {
    int rc = libssh2_channel_send_eof(m_channel.get());
    if (rc == 0) {
      m_eof_sent = true;
      progress = true;
    } else if (rc != LIBSSH2_ERROR_EAGAIN) {
      if (!ctx.connection_gone(rc)) {
        close(ctx);
      }
      return true;
    }
  }
  return progress;
}

bool TunnelConnectionOp::pump_down(OpContext& ctx) {
  bool progress = false;
  if (m_down.empty() && !m_remote_eof) {
    ssize_t n = libssh2_channel_read(m_channel.get(), m_down.bytes.data(), m_down.bytes.size());
    if (n > 0) {
      m_down.begin = 0;
      m_down.end = static_cast<std::size_t>(n);
      progress = true;
    } else if (n == 0 || n == LIBSSH2_ERROR_EAGAIN) {
      if (libssh2_channel_eof(m_channel.get()) != 0) {
        m_remote_eof = true;
        progress = true;
      }
    } else {
      if (!ctx.connection_gone(static_cast<int>(n))) {
        close(ctx);
      }
      return true;
    }
  }
  while (!m_down.empty()) {
    ssize_t n = ::send(m_client.get(), m_down.bytes.data() + m_down.begin, m_down.end - m_down.begin, MSG_NOSIGNAL);
    if (n > 0) {
      m_down.begin += static_cast<std::size_t>(n);
      progress = true;
      continue;
    }
    if (n < 0 && would_block()) {
      return progress;
    }
    // The client went away.
    close(ctx);
    return true;
  }
  if (m_remote_eof && !m_client_shut) {
    ::shutdown(m_client.get(), SHUT_WR);
    m_client_shut = true;
    progress = true;
  }
  return progress;
}

void TunnelConnectionOp::close(OpContext& ctx) {
  ctx.release(this, m_channel);
  m_client.reset();
  m_stage = Stage::done;
}

void TunnelConnectionOp::connection_lost(const std::string& why) {
  (void)why;
  m_channel.release();
  switch (m_stage) {
  case Stage::waiting:
    break;
  case Stage::opening:
  case Stage::starting:
    // The open never completed (or only the login shell of an exec may have
    // started), so the connection can start over.
    m_stage = Stage::waiting;
    break;
  default:
    // Bytes already went both ways; the client must see the break.
    m_client.reset();
    m_stage = Stage::done;
    break;
  }
}

void TunnelConnectionOp::abandon(const Error& error) {
  notify(error.what());
  m_channel.release();
  m_client.reset();
  m_stage = Stage::done;
}

} // namespace specctl::remote::ssh

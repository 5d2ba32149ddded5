#include "ssh_ops.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/shell.hpp>

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>

namespace specctl::remote::ssh {

namespace {

// Reads per step, so that one chatty command cannot starve the other channels.
constexpr int k_reads_per_step = 64;

struct SignalNumber {
  std::string_view name;
  int number;
};

// The names sshd reports in "exit-signal" (RFC 4254 6.10) with Linux numbers.
constexpr std::array k_signals = {
    SignalNumber{"HUP", 1},   SignalNumber{"INT", 2},   SignalNumber{"QUIT", 3},  SignalNumber{"ILL", 4},
    SignalNumber{"TRAP", 5},  SignalNumber{"ABRT", 6},  SignalNumber{"BUS", 7},   SignalNumber{"FPE", 8},
    SignalNumber{"KILL", 9},  SignalNumber{"USR1", 10}, SignalNumber{"SEGV", 11}, SignalNumber{"USR2", 12},
    SignalNumber{"PIPE", 13}, SignalNumber{"ALRM", 14}, SignalNumber{"TERM", 15},
};

int signal_number(std::string_view name) {
  for (const auto& s : k_signals) {
    if (s.name == name) {
      return s.number;
    }
  }
  return 0;
}

void append_capped(std::string& to, const char* data, std::size_t size) {
  if (to.size() < k_max_command_output) {
    to.append(data, std::min(size, k_max_command_output - to.size()));
  }
}

} // namespace

std::string wrap_command(const std::string& command_line, util::Duration timeout) {
  const long seconds = remote_kill_seconds(timeout);
  // The login shell only runs this line; the command itself always gets
  // /bin/sh. `timeout` puts itself in a new process group and kills the
  // whole group, so children die too (unless they made their own session).
  return fmt::format("command -v timeout >/dev/null 2>&1 && set -- timeout -s KILL {}; exec \"$@\" /bin/sh -c {}",
                     seconds, util::shell_quote(command_line));
}

ExecOp::ExecOp(std::string where, std::string command_line, util::Duration timeout, std::promise<ExecOutcome> promise,
               std::string input)
    : m_where(std::move(where)), m_command_line(std::move(command_line)),
      m_wrapped(wrap_command(m_command_line, timeout)), m_timeout(timeout), m_promise(std::move(promise)),
      m_input(std::move(input)) {}

ExecOp::~ExecOp() {
  // Dropping the op must never leave its caller waiting.
  settle(std::unexpected(
      Error(fmt::format("{}: the host was closed before {} finished", m_where, util::brief_command(m_command_line)))));
}

void ExecOp::settle(ExecOutcome outcome) {
  if (!m_settled) {
    m_settled = true;
    m_promise.set_value(std::move(outcome));
  }
}

bool ExecOp::reads_session() const {
  return m_stage != Stage::queued && m_stage != Stage::done;
}

bool ExecOp::holds_exec_channel() const {
  return reads_session();
}

std::optional<Clock::time_point> ExecOp::deadline() const {
  switch (m_stage) {
  case Stage::opening:
    return m_open_deadline;
  case Stage::starting:
  case Stage::running:
  case Stage::closing:
    return m_deadline;
  default:
    return std::nullopt;
  }
}

bool ExecOp::step(OpContext& ctx) {
  bool progress = false;
  // A step that cannot go on leaves its stage as it is, and the later stages wait.
  if (m_stage == Stage::queued && ctx.exec_channels < k_max_exec_channels && ctx.claim_open(this, m_open_deadline)) {
    ++ctx.exec_channels;
    m_stage = Stage::opening;
    progress = true;
  }
  if (m_stage == Stage::opening) {
    progress = step_open(ctx) || progress;
  }
  if (m_stage == Stage::starting) {
    progress = step_start(ctx) || progress;
  }
  if (m_stage == Stage::running) {
    progress = step_read(ctx) || progress;
  }
  if (m_stage == Stage::closing) {
    progress = step_close(ctx) || progress;
  }
  return progress;
}

bool ExecOp::step_open(OpContext& ctx) {
  LIBSSH2_CHANNEL* channel = libssh2_channel_open_session(ctx.session());
  if (channel == nullptr) {
    int rc = libssh2_session_last_errno(ctx.session());
    if (rc == LIBSSH2_ERROR_EAGAIN) {
      if (ctx.now >= m_open_deadline) {
        // libssh2 cannot abandon an open half way, so the session is unusable.
        ctx.lost = fmt::format("the server did not answer a channel open within {}",
                               util::format_duration(ctx.target->connect_timeout));
      }
      return false;
    }
    ctx.opener = nullptr;
    if (ctx.connection_gone(rc)) {
      return false;
    }
    fail(ctx, fmt::format("{}: cannot open a channel to run {}: {}", m_where, util::brief_command(m_command_line),
                          last_error_message(ctx.session())));
    return true;
  }
  ctx.opener = nullptr;
  m_channel = Channel(channel);
  m_stage = Stage::starting;
  m_started_at = ctx.now;
  m_deadline = ctx.now + m_timeout;
  return true;
}

bool ExecOp::step_start(OpContext& ctx) {
  // From the first byte of the request on, the command may be running.
  m_started = true;
  int rc = libssh2_channel_exec(m_channel.get(), m_wrapped.c_str());
  if (rc == LIBSSH2_ERROR_EAGAIN) {
    return time_out_if_due(ctx);
  }
  if (rc != 0) {
    if (ctx.connection_gone(rc)) {
      return false;
    }
    fail(ctx, fmt::format("{}: the server refused to run {}: {}", m_where, util::brief_command(m_command_line),
                          last_error_message(ctx.session())));
    return true;
  }
  m_stage = Stage::running;
  return true;
}

bool ExecOp::step_read(OpContext& ctx) {
  bool progress = false;
  // The input as far as the channel's window takes it; the rest at later steps.
  for (int writes = 0; writes < k_reads_per_step && m_input_sent < m_input.size(); ++writes) {
    constexpr std::size_t k_write_piece = 32 * 1024;
    const std::size_t piece = std::min(k_write_piece, m_input.size() - m_input_sent);
    ssize_t n = libssh2_channel_write(m_channel.get(), m_input.data() + m_input_sent, piece);
    if (n > 0) {
      m_input_sent += static_cast<std::size_t>(n);
      progress = true;
      continue;
    }
    if (n == LIBSSH2_ERROR_EAGAIN || n == 0) {
      break;
    }
    if (ctx.connection_gone(static_cast<int>(n))) {
      return false;
    }
    fail(ctx, fmt::format("{}: sending the input of {} failed: {}", m_where, util::brief_command(m_command_line),
                          last_error_message(ctx.session())));
    return true;
  }
  if (!m_eof_sent && m_input_sent == m_input.size()) {
    // A command reading stdin sees end of file once its input (often none) is sent.
    int rc = libssh2_channel_send_eof(m_channel.get());
    if (rc == 0) {
      m_eof_sent = true;
      progress = true;
    } else if (rc != LIBSSH2_ERROR_EAGAIN && ctx.connection_gone(rc)) {
      return false;
    }
  }
  std::array<char, 32 * 1024> buffer{};
  for (int stream : {0, SSH_EXTENDED_DATA_STDERR}) {
    std::string& to = stream == 0 ? m_result.out : m_result.err;
    for (int reads = 0; reads < k_reads_per_step; ++reads) {
      ssize_t n = libssh2_channel_read_ex(m_channel.get(), stream, buffer.data(), buffer.size());
      if (n > 0) {
        append_capped(to, buffer.data(), static_cast<std::size_t>(n));
        progress = true;
        continue;
      }
      if (n == 0 || n == LIBSSH2_ERROR_EAGAIN) {
        break;
      }
      if (ctx.connection_gone(static_cast<int>(n))) {
        return false;
      }
      fail(ctx, fmt::format("{}: reading the output of {} failed: {}", m_where, util::brief_command(m_command_line),
                            last_error_message(ctx.session())));
      return true;
    }
  }
  if (libssh2_channel_eof(m_channel.get()) != 0) {
    m_stage = Stage::closing;
    return true;
  }
  return time_out_if_due(ctx) || progress;
}

bool ExecOp::step_close(OpContext& ctx) {
  // Only after end of file: sshd then sends the exit status before its close.
  int rc = libssh2_channel_close(m_channel.get());
  if (rc == LIBSSH2_ERROR_EAGAIN) {
    return time_out_if_due(ctx);
  }
  if (rc != 0 && ctx.connection_gone(rc)) {
    return false;
  }
  m_result.exit_code = libssh2_channel_get_exit_status(m_channel.get());
  char* signal = nullptr;
  std::size_t signal_size = 0;
  libssh2_channel_get_exit_signal(m_channel.get(), &signal, &signal_size, nullptr, nullptr, nullptr, nullptr);
  if (signal != nullptr) {
    // As a shell reports a command killed by a signal.
    int number = signal_number(std::string_view(signal, signal_size));
    m_result.exit_code = number > 0 ? 128 + number : -1;
    libssh2_free(ctx.session(), signal);
  }
  if (m_result.out.size() >= k_max_command_output || m_result.err.size() >= k_max_command_output) {
    m_result.err += fmt::format("\n[specctl: output cut at {} MiB]\n", k_max_command_output / (1024 * 1024));
  }
  finish(ctx, std::move(m_result));
  return true;
}

bool ExecOp::time_out_if_due(OpContext& ctx) {
  if (ctx.now < m_deadline) {
    return false;
  }
  // Closing the channel does not stop the command (sshd sends no signal
  // without a tty); the remote `timeout` kills it a moment later.
  m_result.timed_out = true;
  m_result.exit_code = -1;
  finish(ctx, std::move(m_result));
  return true;
}

void ExecOp::finish(OpContext& ctx, ExecOutcome outcome) {
  ctx.release(this, m_channel);
  m_stage = Stage::done;
  settle(std::move(outcome));
}

void ExecOp::fail(OpContext& ctx, std::string message) {
  finish(ctx, std::unexpected(Error(std::move(message))));
}

void ExecOp::connection_lost(const std::string& why) {
  m_channel.release();
  if (m_stage == Stage::done) {
    return;
  }
  if (!m_started) {
    // Nothing reached the command yet, so running it on the next connection
    // cannot run it twice.
    if (++m_connections_lost <= k_max_connection_losses) {
      m_stage = Stage::queued;
      return;
    }
    settle(std::unexpected(Error(fmt::format("{}: could not start {}: the connection dropped {} times ({})", m_where,
                                             util::brief_command(m_command_line), m_connections_lost, why),
                                 ErrorKind::unreachable)));
    m_stage = Stage::done;
    return;
  }
  auto ran = std::chrono::duration_cast<util::Duration>(Clock::now() - m_started_at);
  settle(std::unexpected(
      Error(fmt::format("{}: connection lost while running {} ({}, after {}); it was not run again and may still be "
                        "running on the host until its {} timeout kills it",
                        m_where, util::brief_command(m_command_line), why, util::format_duration(ran),
                        util::format_duration(m_timeout)),
            ErrorKind::unreachable)));
  m_stage = Stage::done;
}

void ExecOp::abandon(const Error& error) {
  m_channel.release();
  if (m_stage != Stage::done) {
    settle(std::unexpected(error));
    m_stage = Stage::done;
  }
}

} // namespace specctl::remote::ssh

#pragma once

// The work the SSH I/O thread multiplexes over one session: commands and
// forwarded TCP connections. Each is a small state machine that makes what
// progress it can without blocking whenever the loop steps it.

#include "ssh_connection.hpp"

#include <specctl/remote/host.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <poll.h>

namespace specctl::remote::ssh {

using ExecOutcome = std::expected<CommandResult, Error>;

// How often a command may lose its connection before it starts; then it fails.
inline constexpr int k_max_connection_losses = 3;
// How long a tunnel's channel open whose client already gave up may still take
// before the session counts as hung; sshd's own connect gives up after about
// two minutes. Other opens wait behind it (libssh2 opens one at a time).
inline constexpr auto k_abandoned_open_limit = std::chrono::minutes{3};

// Command channels (commands and the shells of shell_pool.hpp) at once: below
// sshd's default MaxSessions (10) per connection; more commands wait.
inline constexpr int k_max_exec_channels = 8;

class Op;

// What a step may use and change besides its own state.
struct OpContext {
  Connection* connection = nullptr;
  const SshTarget* target = nullptr;
  std::string where; // target->describe(), for messages
  Clock::time_point now;
  // libssh2 keeps one channel open in progress per session; this op holds it.
  Op* opener = nullptr;
  // Command channels open now; kept below sshd's MaxSessions (10 by default).
  int exec_channels = 0;
  // Channels to close politely; the loop frees them as the peer confirms.
  std::vector<Channel> closing;
  // Set by a step that found the connection gone.
  std::optional<std::string> lost;

  LIBSSH2_SESSION* session() const { return connection->session(); }
  // Takes the session's channel open for `op` when no other op holds it; the
  // open may then take until `deadline`, connect_timeout from now.
  bool claim_open(Op* op, Clock::time_point& deadline) {
    if (opener != nullptr) {
      return false;
    }
    opener = op;
    deadline = now + target->connect_timeout;
    return true;
  }
  // Gives back what an op that ends holds: the channel open, and its channel
  // (closed politely).
  void release(const Op* op, Channel& channel) {
    if (opener == op) {
      opener = nullptr;
    }
    if (channel) {
      closing.push_back(std::move(channel));
    }
  }
  // Decides whether a failed libssh2 call means the connection is gone (and
  // records it in `lost`) or only this channel failed.
  bool connection_gone(int rc);
};

class Op {
public:
  Op() = default;
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  virtual ~Op() = default;

  // Makes what progress it can; true when anything changed.
  virtual bool step(OpContext& ctx) = 0;
  virtual bool finished() const = 0;
  // Whether the next step will read from the session, so the loop may wait
  // for the socket to become readable.
  virtual bool reads_session() const = 0;
  virtual bool holds_exec_channel() const { return false; }
  // Local sockets to wait on.
  virtual void add_poll_fds(std::vector<pollfd>& fds) const { (void)fds; }
  // When the op must be stepped even if nothing happens.
  virtual std::optional<Clock::time_point> deadline() const { return std::nullopt; }
  // The connection dropped. Channels are released to the dying session, which
  // frees them. An op that can start over on the next connection stays.
  virtual void connection_lost(const std::string& why) = 0;
  // No connection will come: the host is closing or reconnecting gave up.
  virtual void abandon(const Error& error) = 0;
};

// One command run with `exec`; see SshHost::exec for the contract.
class ExecOp final : public Op {
public:
  // `input` is the command's standard input, then end of file.
  ExecOp(std::string where, std::string command_line, util::Duration timeout, std::promise<ExecOutcome> promise,
         std::string input = {});
  ~ExecOp() override;

  bool step(OpContext& ctx) override;
  bool finished() const override { return m_stage == Stage::done; }
  bool reads_session() const override;
  bool holds_exec_channel() const override;
  std::optional<Clock::time_point> deadline() const override;
  void connection_lost(const std::string& why) override;
  void abandon(const Error& error) override;

private:
  enum class Stage { queued, opening, starting, running, closing, done };

  bool step_open(OpContext& ctx);
  bool step_start(OpContext& ctx);
  bool step_read(OpContext& ctx);
  bool step_close(OpContext& ctx);
  bool time_out_if_due(OpContext& ctx);
  void finish(OpContext& ctx, ExecOutcome outcome);
  void fail(OpContext& ctx, std::string message);
  void settle(ExecOutcome outcome);

  std::string m_where;
  std::string m_command_line;
  std::string m_wrapped;
  util::Duration m_timeout;
  std::promise<ExecOutcome> m_promise;
  bool m_settled = false;
  Stage m_stage = Stage::queued;
  Channel m_channel;
  Clock::time_point m_open_deadline;
  Clock::time_point m_started_at;
  Clock::time_point m_deadline;
  bool m_started = false;
  bool m_eof_sent = false;
  std::string m_input;
  std::size_t m_input_sent = 0;
  int m_connections_lost = 0;
  CommandResult m_result;
};

// The command line the node runs for `command_line`: /bin/sh under
// `timeout -s KILL`, so the remote command dies shortly after `timeout` even
// when nobody is connected any more.
std::string wrap_command(const std::string& command_line, util::Duration timeout);

// Told once whether a forwarded connection's channel opened: nothing, or why not.
using OpenNotice = std::function<void(std::optional<std::string> refused)>;

// One connection accepted on a tunnel's port, or one end of a socket pair a
// next hop's SSH connection speaks over, forwarded over a direct-tcpip channel.
// Or, made with `exec`, one end of a socket pair that is the stdin and stdout
// of a command on the node (a shell of shell_pool.hpp); its stderr is dropped.
class TunnelConnectionOp final : public Op {
public:
  TunnelConnectionOp(util::UniqueFd client, std::string target_host, int target_port, int origin_port,
                     OpenNotice on_open = {});
  struct Exec {
    std::string command_line;
  };
  TunnelConnectionOp(util::UniqueFd client, Exec exec, OpenNotice on_open);

  bool step(OpContext& ctx) override;
  bool finished() const override { return m_stage == Stage::done; }
  bool reads_session() const override;
  bool holds_exec_channel() const override;
  void add_poll_fds(std::vector<pollfd>& fds) const override;
  std::optional<Clock::time_point> deadline() const override;
  void connection_lost(const std::string& why) override;
  void abandon(const Error& error) override;

private:
  enum class Stage { waiting, opening, starting, pumping, done };
  static constexpr std::size_t k_buffer_size = 32 * 1024; // libssh2's largest data packet

  struct Buffer {
    std::vector<char> bytes = std::vector<char>(k_buffer_size);
    std::size_t begin = 0;
    std::size_t end = 0;
    bool empty() const { return begin == end; }
  };

  bool step_open(OpContext& ctx);
  bool step_start(OpContext& ctx);
  // The channel is open (and its command started): tells the waiter, then pumps.
  bool pump_from_now(OpContext& ctx);
  bool pump_up(OpContext& ctx);
  bool pump_down(OpContext& ctx);
  void close(OpContext& ctx);
  void notify(std::optional<std::string> refused);

  util::UniqueFd m_client;
  OpenNotice m_on_open;
  std::string m_target_host;
  int m_target_port = 0;
  int m_origin_port = 0;
  std::string m_exec; // the command, for an exec channel
  Stage m_stage = Stage::waiting;
  Channel m_channel;
  Clock::time_point m_open_deadline;
  Buffer m_up;   // client -> node
  Buffer m_down; // node -> client
  bool m_client_eof = false;
  bool m_eof_sent = false;
  bool m_remote_eof = false;
  bool m_client_shut = false;
};

} // namespace specctl::remote::ssh

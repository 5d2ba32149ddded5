#pragma once

#include "ssh_ops.hpp"
#include "ssh_route.hpp"

#include <specctl/remote/ssh_host.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace specctl::remote::detail {

// The I/O thread of one SshHost and everything it owns.
//
// libssh2 sessions are not thread-safe, and in non-blocking mode a call that
// returned EAGAIN must be repeated before the session is used for anything
// else. So exactly one thread ever touches the session: this one. It runs every
// command channel and every forwarded connection as a small state machine
// (ssh_ops.hpp) over the one session, waits for all their sockets with one
// poll(), sends keepalives, notices a dropped connection and reconnects.
// Callers of exec() and open_tunnel() only hand work over through a
// mutex-protected queue and an eventfd, and wait for a future.
//
// One session for commands and tunnels, rather than a session per tunnel,
// because a reconnect then restores everything at once and the node sees one
// login; the cost is that a slow tunnel client and a command share one thread,
// which only moves bytes.
class SshLoop {
public:
  SshLoop(SshTarget target, std::unique_ptr<ssh::Route> route, ssh::Connection connection);
  SshLoop(const SshLoop&) = delete;
  SshLoop& operator=(const SshLoop&) = delete;
  ~SshLoop();

  const std::string& describe() const { return m_where; }
  const SshTarget& target() const { return m_target; }
  std::expected<CommandResult, Error> exec(const std::string& command_line, util::Duration timeout,
                                           std::string input = {});
  std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port);
  std::expected<util::UniqueFd, Error> open_stream(const std::string& target_host, int target_port,
                                                   util::Duration timeout);
  // A stream that is the stdin and stdout of `command_line` on the node.
  std::expected<util::UniqueFd, Error> open_exec_stream(const std::string& command_line, util::Duration timeout);
  int reconnect_count() const { return m_reconnects.load(); }

private:
  struct Listener {
    util::UniqueFd fd;
    std::string target_host;
    int target_port = 0;
  };
  struct ClosingChannel {
    ssh::Channel channel;
    ssh::Clock::time_point since;
  };

  std::expected<util::UniqueFd, Error>
  open_channel_stream(const std::string& what, util::Duration timeout,
                      const std::function<std::unique_ptr<ssh::Op>(util::UniqueFd, ssh::OpenNotice)>& make_op);
  void run();
  void take_incoming();
  bool wants_connection() const;
  void reconnect();
  bool sleep_unless_stopped(util::Duration how_long);
  void service();
  bool reap_closing();
  void lose_connection(const std::string& why);
  void keepalive();
  void wait_for_events();
  void accept_connections(Listener& listener);
  void abandon_all(const Error& error);
  void shut_down();
  void wake();
  void drain_wake();
  util::Duration answer_bound(util::Duration timeout) const;

  const SshTarget m_target;
  // Before the connection, which may speak over a stream the route keeps open.
  std::unique_ptr<ssh::Route> m_route;
  const std::string m_where;
  std::atomic<bool> m_stopping{false};
  util::UniqueFd m_wake;
  std::atomic<int> m_reconnects{0};

  std::mutex m_mutex;
  std::vector<std::unique_ptr<ssh::Op>> m_incoming_ops;
  std::vector<Listener> m_incoming_listeners;

  // Owned by the I/O thread alone.
  std::optional<ssh::Connection> m_connection;
  std::vector<std::unique_ptr<ssh::Op>> m_ops;
  std::vector<Listener> m_listeners;
  std::vector<ClosingChannel> m_closing;
  ssh::OpContext m_ctx;
  bool m_gave_up = false;
  bool m_busy = false;
  std::string m_lost_why;
  ssh::Clock::time_point m_next_keepalive;

  // Last, so that everything above exists before the thread starts.
  std::thread m_thread;
};

} // namespace specctl::remote::detail

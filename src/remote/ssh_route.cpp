#include "ssh_route.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/spawn.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace specctl::remote {

std::string SshTarget::route() const {
  std::string out = "laptop";
  if (!jumps.empty()) {
    // A first hop's own route comes first: it is how the chain starts.
    auto first = jumps.front().route();
    out = first.substr(0, first.rfind(" → "));
    for (const auto& hop : jumps) {
      out += " → " + (hop.name.empty() ? hop.hostname : hop.name);
    }
  } else if (proxy_command) {
    out += " → (ProxyCommand)";
  }
  return out + " → " + (name.empty() ? hostname : name);
}

namespace ssh {

namespace {

// How long an ended ProxyCommand's process group gets between TERM and KILL.
constexpr auto k_proxy_grace = std::chrono::seconds{1};
// How often an ended ProxyCommand is looked at while it has its grace.
constexpr auto k_proxy_poll = std::chrono::milliseconds{10};
// The least time a jump host gets to open the channel to the next hop.
constexpr auto k_min_stream_wait = std::chrono::milliseconds{1};
// The most of a ProxyCommand's standard error kept for messages.
constexpr std::size_t k_proxy_stderr_limit = 4096;

class DirectRoute final : public Route {
public:
  std::expected<Stream, ConnectFailure> open(const SshTarget& target, Clock::time_point deadline,
                                             const StopSignal& stop) override {
    auto fd = connect_tcp(target, deadline, stop);
    if (!fd) {
      return std::unexpected(std::move(fd.error()));
    }
    return Stream{std::move(*fd), nullptr};
  }
};

// A running ProxyCommand: its own session and process group, so that ending
// it ends whatever it started (an `ssh -W`, a cloud CLI) and nothing else.
class ProxyProcess final : public StreamKeeper {
public:
  ProxyProcess(pid_t pid, util::UniqueFd errors) : m_pid(pid), m_errors(std::move(errors)) {}

  ~ProxyProcess() override {
    if (!ended()) {
      ::kill(-m_pid, SIGTERM);
      auto until = Clock::now() + k_proxy_grace;
      while (Clock::now() < until && !ended()) {
        std::this_thread::sleep_for(k_proxy_poll);
      }
    }
    if (m_unreaped) {
      // Anything it left behind in its group. The leader is still our
      // unreaped child, so the group's id cannot belong to anyone else yet.
      ::kill(-m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }

  std::string diagnosis() override {
    drain();
    std::string out;
    if (ended() && m_unreaped) {
      out = m_info.si_code == CLD_EXITED ? fmt::format("ProxyCommand exited with status {}", m_info.si_status)
                                         : fmt::format("ProxyCommand killed by signal {}", m_info.si_status);
    }
    auto text = m_stderr;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
      text.pop_back();
    }
    auto last = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    if (!last.empty()) {
      out += (out.empty() ? "ProxyCommand said: " : ": ") + last;
    }
    return out;
  }

private:
  // True once the process has ended. It is left a zombie (waitid's WNOWAIT):
  // its pid, and with it its group's id, stay ours until the destructor.
  bool ended() {
    if (m_ended) {
      return true;
    }
    m_info = {};
    int rc = ::waitid(P_PID, static_cast<id_t>(m_pid), &m_info, WEXITED | WNOWAIT | WNOHANG);
    if (rc == 0 && m_info.si_pid == m_pid) {
      m_ended = true;
    } else if (rc < 0 && errno == ECHILD) {
      // Reaped by someone else: its id may be anyone's now.
      m_ended = true;
      m_unreaped = false;
    }
    return m_ended;
  }

  void drain() {
    char buffer[1024];
    while (m_errors) {
      ssize_t n = ::read(m_errors.get(), buffer, sizeof buffer);
      if (n <= 0) {
        return;
      }
      m_stderr.append(buffer, static_cast<std::size_t>(n));
      if (m_stderr.size() > k_proxy_stderr_limit) {
        m_stderr.erase(0, m_stderr.size() - k_proxy_stderr_limit);
      }
    }
  }

  pid_t m_pid;
  util::UniqueFd m_errors;
  std::string m_stderr;
  siginfo_t m_info{};
  bool m_ended = false;
  bool m_unreaped = true;
};

class ProxyCommandRoute final : public Route {
public:
  explicit ProxyCommandRoute(std::string command) : m_command(std::move(command)) {}

  std::expected<Stream, ConnectFailure> open(const SshTarget& target, Clock::time_point, const StopSignal&) override {
    auto fail = [&](std::string why) {
      return std::unexpected(ConnectFailure{
          Error(fmt::format("{}: cannot run ProxyCommand \"{}\": {}", target.describe(), m_command, why))});
    };
    int pair[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return fail(std::strerror(errno));
    }
    util::UniqueFd ours(pair[0]);
    util::UniqueFd theirs(pair[1]);
    int pipe_fds[2] = {-1, -1};
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      return fail(std::strerror(errno));
    }
    util::UniqueFd error_read(pipe_fds[0]);
    util::UniqueFd error_write(pipe_fds[1]);
    util::SpawnSetup setup;
    setup.add_dup2(theirs.get(), STDIN_FILENO);
    setup.add_dup2(theirs.get(), STDOUT_FILENO);
    setup.add_dup2(error_write.get(), STDERR_FILENO);
    // Nothing of the SSH loop's leaks into it; ProxyProcess ends its whole group.
    setup.detach();
    auto spawned = setup.spawn("/bin/sh", {"/bin/sh", "-c", m_command});
    if (!spawned) {
      return fail(std::strerror(spawned.error()));
    }
    const pid_t pid = *spawned;
    theirs.reset();
    error_write.reset();
    ::fcntl(error_read.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(ours.get(), F_SETFL, O_NONBLOCK);
    return Stream{std::move(ours), std::make_unique<ProxyProcess>(pid, std::move(error_read))};
  }

private:
  std::string m_command;
};

class JumpRoute final : public Route {
public:
  explicit JumpRoute(std::unique_ptr<SshHost> previous) : m_previous(std::move(previous)) {}

  std::expected<Stream, ConnectFailure> open(const SshTarget& target, Clock::time_point deadline,
                                             const StopSignal&) override {
    auto left = std::chrono::duration_cast<util::Duration>(deadline - Clock::now());
    if (left <= util::Duration::zero()) {
      left = k_min_stream_wait;
    }
    auto fd = m_previous->open_stream(target.hostname, target.port, left);
    if (!fd) {
      return std::unexpected(ConnectFailure{
          Error(fmt::format("{}: through {}", target.describe(), fd.error().what()), fd.error().kind())});
    }
    return Stream{std::move(*fd), nullptr};
  }

private:
  std::unique_ptr<SshHost> m_previous;
};

} // namespace

std::expected<std::unique_ptr<Route>, Error> make_route(const SshTarget& target) {
  if (!target.jumps.empty()) {
    // The last hop, reached through the ones before it (its own route when it is the only one).
    SshTarget previous = target.jumps.back();
    if (target.jumps.size() > 1) {
      previous.jumps.assign(target.jumps.begin(), target.jumps.end() - 1);
    }
    auto host = connect_ssh(previous);
    if (!host) {
      return std::unexpected(Error(fmt::format("{}: cannot reach jump host {}", target.describe(), host.error().what()),
                                   host.error().kind()));
    }
    return std::make_unique<JumpRoute>(std::move(*host));
  }
  if (target.proxy_command) {
    return std::make_unique<ProxyCommandRoute>(*target.proxy_command);
  }
  return std::make_unique<DirectRoute>();
}

} // namespace ssh

} // namespace specctl::remote

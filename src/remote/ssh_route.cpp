#include "ssh_route.hpp"

#include <specctl/util/duration.hpp>

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
    if (reap(false)) {
      ::kill(-m_pid, SIGKILL); // anything it left behind in its group
      return;
    }
    ::kill(-m_pid, SIGTERM);
    auto until = Clock::now() + k_proxy_grace;
    while (Clock::now() < until) {
      if (reap(false)) {
        break;
      }
      std::this_thread::sleep_for(k_proxy_poll);
    }
    ::kill(-m_pid, SIGKILL);
    reap(true);
  }

  std::string diagnosis() override {
    drain();
    std::string out;
    if (reap(false)) {
      out = WIFEXITED(m_status) ? fmt::format("ProxyCommand exited with status {}", WEXITSTATUS(m_status))
                                : fmt::format("ProxyCommand killed by signal {}", WTERMSIG(m_status));
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
  // True once the process has ended (and was waited for).
  bool reap(bool block) {
    if (m_reaped) {
      return true;
    }
    pid_t done = ::waitpid(m_pid, &m_status, block ? 0 : WNOHANG);
    m_reaped = done == m_pid || (done < 0 && errno == ECHILD);
    return m_reaped;
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
  int m_status = 0;
  bool m_reaped = false;
};

class ProxyCommandRoute final : public Route {
public:
  explicit ProxyCommandRoute(std::string command) : m_command(std::move(command)) {}

  std::expected<Stream, ConnectFailure> open(const SshTarget& target, Clock::time_point, const StopSignal&) override {
    auto fail = [&](std::string why) {
      return std::unexpected(
          ConnectFailure{Error(fmt::format("{}: cannot run ProxyCommand \"{}\": {}", target.describe(), m_command, why))});
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
    // Everything the child needs is ready before fork: after it, only
    // async-signal-safe calls.
    const char* argv[] = {"/bin/sh", "-c", m_command.c_str(), nullptr};
    int child_end = theirs.get();
    int child_errors = error_write.get();
    pid_t pid = ::fork();
    if (pid < 0) {
      return fail(std::strerror(errno));
    }
    if (pid == 0) {
      ::setsid();
      if (::dup2(child_end, STDIN_FILENO) < 0 || ::dup2(child_end, STDOUT_FILENO) < 0 ||
          ::dup2(child_errors, STDERR_FILENO) < 0) {
        ::_exit(127);
      }
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
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

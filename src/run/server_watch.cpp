#include "server_watch.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <charconv>
#include <fmt/format.h>
#include <sstream>
#include <thread>
#include <utility>

namespace specctl::run::detail {

ServerWatch::ServerWatch(remote::Host& host, const remote::RunFiles& files, int pid,
                         const std::atomic<bool>* outer_stop, bool heartbeat)
    : m_host(host), m_files(files), m_pid(pid), m_heartbeat(heartbeat), m_outer(outer_stop),
      m_thread([this] { loop(); }) {}

ServerWatch::~ServerWatch() {
  {
    std::lock_guard lock(m_mutex);
    m_quit = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

namespace {

// The launched pid is the shell that runs the server as its child and then writes the
// exit code. Between the server's death and the shell's exit (a loaded machine takes
// tens of milliseconds) the shell still lives: the server is alive only while the shell
// has a living child, which ps sees in the shell's session.
struct Status {
  std::optional<int> exit_code;
  bool server_alive = false;
};

std::expected<Status, Error> server_status(remote::Host& host, const remote::RunFiles& files, int shell,
                                           bool heartbeat) {
  // The heartbeat says to other runs' cleanups that this run is alive.
  std::string touch = heartbeat ? fmt::format("touch {} 2>/dev/null; ", util::shell_quote(files.heartbeat())) : "";
  auto ran =
      host.exec(fmt::format("{}printf '%s|' \"$(cat {} 2>/dev/null)\"; ps -o ppid=,stat= -s {} 2>/dev/null; true",
                            touch, util::shell_quote(files.exit()), shell));
  if (!ran) {
    return std::unexpected(ran.error());
  }
  Status status;
  const auto bar = ran->out.find('|');
  if (bar == std::string::npos) {
    return std::unexpected(Error(fmt::format("{}: unexpected answer while watching the server", host.describe())));
  }
  const std::string code = util::trim(ran->out.substr(0, bar));
  int value = 0;
  if (auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), value);
      ec == std::errc() && end == code.data() + code.size() && !code.empty()) {
    status.exit_code = value;
  }
  std::istringstream lines(ran->out.substr(bar + 1));
  int ppid = 0;
  std::string stat;
  while (lines >> ppid >> stat) {
    status.server_alive = status.server_alive || (ppid == shell && !stat.starts_with('Z'));
  }
  return status;
}

} // namespace

int ServerWatch::troubles() const {
  const auto since = m_check_since.load();
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  const bool slow_now = since != 0 && std::chrono::steady_clock::duration(now - since) >
                                          std::chrono::steady_clock::duration(k_slow_watch_check);
  return m_troubles.load() + (slow_now ? 1 : 0);
}

bool ServerWatch::check() {
  const auto asked = std::chrono::steady_clock::now();
  m_check_since = asked.time_since_epoch().count();
  auto status = server_status(m_host, m_files, m_pid, m_heartbeat);
  m_check_since = 0;
  if (!status || std::chrono::steady_clock::now() - asked > k_slow_watch_check) {
    ++m_troubles;
  }
  // A lost round trip says nothing about the server: the next one asks again.
  if (!status || (status->server_alive && !status->exit_code)) {
    return false;
  }
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  // Stop the benchmark first: every moment more is a request sent to a closed port.
  m_stop = true;
  // The shell writes the code a moment after its child ended: wait for it, briefly.
  constexpr int k_exit_code_tries = 20;
  constexpr std::chrono::milliseconds k_exit_code_wait{50};
  std::optional<int> code = status->exit_code;
  for (int i = 0; i < k_exit_code_tries && !code; ++i) {
    std::this_thread::sleep_for(k_exit_code_wait);
    if (auto again = remote::read_exit_code(m_host, m_files); again) {
      code = *again;
    }
  }
  std::lock_guard lock(m_mutex);
  if (!m_death) {
    m_death = Death{code, after};
  }
  return true;
}

void ServerWatch::loop() {
  // The outer flag is read often (Ctrl-C should stop a level at once); the host only every period.
  constexpr std::chrono::milliseconds k_outer_poll{50};
  auto next_check = std::chrono::steady_clock::now() + k_watch_period;
  std::unique_lock lock(m_mutex);
  while (!m_quit) {
    m_wake.wait_for(lock, k_outer_poll, [this] { return m_quit || m_poked; });
    if (m_quit) {
      break;
    }
    if (m_outer != nullptr && m_outer->load()) {
      m_stop = true;
    }
    const bool poked = std::exchange(m_poked, false);
    if ((!poked && std::chrono::steady_clock::now() < next_check) || m_death) {
      continue;
    }
    lock.unlock();
    if (check()) {
      m_stop = true;
    }
    // Alive, or not known: the level goes on (a lost round trip must not hold it).
    m_hold = false;
    next_check = std::chrono::steady_clock::now() + k_watch_period;
    lock.lock();
  }
}

void ServerWatch::poke(bench::FailureKind kind) {
  using bench::FailureKind;
  if (kind == FailureKind::connect || kind == FailureKind::closed_before_send || kind == FailureKind::no_response) {
    m_hold = true;
  }
  {
    std::lock_guard lock(m_mutex);
    m_poked = true;
  }
  m_wake.notify_all();
}

std::optional<ServerWatch::Death> ServerWatch::death() {
  {
    std::lock_guard lock(m_mutex);
    if (m_death) {
      return m_death;
    }
  }
  check();
  std::lock_guard lock(m_mutex);
  return m_death;
}

} // namespace specctl::run::detail

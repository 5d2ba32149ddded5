#include "server_watch.hpp"

#include <utility>

namespace specctl::run::detail {

ServerWatch::ServerWatch(remote::Host& host, const remote::RunFiles& files, int pid,
                         const std::atomic<bool>* outer_stop)
    : m_host(host), m_files(files), m_pid(pid), m_outer(outer_stop), m_thread([this] { loop(); }) {}

ServerWatch::~ServerWatch() {
  {
    std::lock_guard lock(m_mutex);
    m_quit = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

bool ServerWatch::check() {
  auto poll = remote::poll_server(m_host, m_files, m_pid, 0, 0);
  // A lost round trip says nothing about the server: the next one asks again.
  if (!poll || (poll->alive && !poll->exit_code)) {
    return false;
  }
  std::lock_guard lock(m_mutex);
  if (!m_death) {
    m_death =
        Death{poll->exit_code, std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count()};
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
    next_check = std::chrono::steady_clock::now() + k_watch_period;
    lock.lock();
  }
}

void ServerWatch::poke() {
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

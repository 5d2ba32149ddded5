#pragma once

// Test support: loopback TCP helpers. A tiny echo server stands in for a
// server on a node; exchange() pushes bytes through a port and collects the
// answer. Every socket has send and receive timeouts, so nothing hangs.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specctl::test {

inline constexpr auto k_socket_timeout = std::chrono::seconds{30};

inline std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) {
    b = static_cast<char>(generator() & 0xff);
  }
  return bytes;
}

inline void set_socket_timeouts(int fd) {
  timeval tv{};
  tv.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(k_socket_timeout).count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A connected socket to 127.0.0.1:port, or -1.
inline int connect_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  set_socket_timeouts(fd);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `data` to 127.0.0.1:port while reading what comes back, until the peer closes.
inline std::optional<std::string> exchange(int port, const std::string& data) {
  int fd = connect_local(port);
  if (fd < 0) {
    return std::nullopt;
  }
  std::thread writer([&] {
    std::size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
  });
  std::string received;
  std::vector<char> buffer(64 * 1024);
  while (true) {
    ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n <= 0) {
      break;
    }
    received.append(buffer.data(), static_cast<std::size_t>(n));
  }
  writer.join();
  ::close(fd);
  return received;
}

// A TCP echo server on 127.0.0.1 with a thread per connection.
class EchoServer {
public:
  EchoServer() {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ::bind(m_fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(m_fd, 64);
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(address.sin_port);
    m_acceptor = std::thread([this] { accept_loop(); });
  }
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;
  ~EchoServer() {
    m_stop = true;
    m_acceptor.join();
    std::lock_guard lock(m_mutex);
    for (auto& worker : m_workers) {
      worker.join();
    }
    ::close(m_fd);
  }

  int port() const { return m_port; }
  int connections() const { return m_connections.load(); }

private:
  static constexpr int k_accept_poll_ms = 100;

  void accept_loop() {
    while (!m_stop) {
      pollfd p{m_fd, POLLIN, 0};
      if (::poll(&p, 1, k_accept_poll_ms) <= 0) {
        continue;
      }
      int client = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        continue;
      }
      ++m_connections;
      set_socket_timeouts(client);
      std::lock_guard lock(m_mutex);
      m_workers.emplace_back([client] { echo(client); });
    }
  }

  static void echo(int client) {
    std::vector<char> buffer(64 * 1024);
    while (true) {
      ssize_t n = ::recv(client, buffer.data(), buffer.size(), 0);
      if (n <= 0) {
        break;
      }
      ssize_t sent = 0;
      while (sent < n) {
        ssize_t m = ::send(client, buffer.data() + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
        if (m <= 0) {
          ::close(client);
          return;
        }
        sent += m;
      }
    }
    ::shutdown(client, SHUT_WR);
    ::close(client);
  }

  int m_fd = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_connections{0};
  std::mutex m_mutex;
  std::vector<std::thread> m_workers;
  std::thread m_acceptor;
};

} // namespace specctl::test

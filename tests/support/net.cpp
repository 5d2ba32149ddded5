#include "net.hpp"

#include <specctl/util/unique_fd.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace specctl::test {

namespace {

// An IPv4 socket address; 0.0.0.0 when `ip` is not a dotted quad.
sockaddr_in ipv4_address(const std::string& ip, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  return address;
}

} // namespace

int free_port(const std::string& ip) {
  // Tests run side by side (ctest -j), each its own process: a port one of them read back
  // from bind(0) and closed could be handed to the next, whose sshd then sat on another's
  // server port. So ports come from below the kernel's ephemeral range (no bind(0) or
  // outgoing connection takes them), each held by a lock file for the life of the process
  // that took it (flock: released even by kill -9). Below 30000, where the examples serve.
  constexpr int k_first = 20000;
  constexpr int k_count = 9990;
  static std::mutex mutex;
  static std::vector<util::UniqueFd> held;
  std::lock_guard lock(mutex);
  const std::string dir = "/tmp/specctl-test-ports";
  if (::mkdir(dir.c_str(), 0777) == 0) {
    ::chmod(dir.c_str(), 0777);
  }
  const int start = static_cast<int>(std::random_device{}() % k_count);
  for (int i = 0; i < k_count; ++i) {
    const int port = k_first + (start + i) % k_count;
    util::UniqueFd claim(::open((dir + "/" + std::to_string(port)).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666));
    if (!claim || ::flock(claim.get(), LOCK_EX | LOCK_NB) != 0) {
      continue;
    }
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address = ipv4_address(ip, port);
    if (fd && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      held.push_back(std::move(claim));
      return port;
    }
  }
  throw std::runtime_error("cannot find a free port on " + ip + " between " + std::to_string(k_first) + " and " +
                           std::to_string(k_first + k_count - 1));
}

std::vector<int> distinct_free_ports(std::size_t count) {
  std::set<int> ports;
  while (ports.size() < count) {
    ports.insert(free_port());
  }
  return {ports.begin(), ports.end()};
}

bool port_accepts(int port, const std::string& ip) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = ipv4_address(ip, port);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
}

bool connection_refused(int port) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = ipv4_address("127.0.0.1", port);
  const int result = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  return result != 0 && errno == ECONNREFUSED;
}

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) {
    b = static_cast<char>(generator() & 0xff);
  }
  return bytes;
}

void set_socket_timeouts(int fd) {
  timeval tv{};
  tv.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(k_socket_timeout).count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

ssize_t recv_retrying(int fd, void* buffer, std::size_t size, int flags) {
  while (true) {
    ssize_t n = ::recv(fd, buffer, size, flags);
    if (n >= 0 || errno != EINTR) {
      return n;
    }
  }
}

ssize_t send_retrying(int fd, const void* buffer, std::size_t size) {
  while (true) {
    ssize_t n = ::send(fd, buffer, size, MSG_NOSIGNAL);
    if (n >= 0 || errno != EINTR) {
      return n;
    }
  }
}

int connect_local(int port) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  set_socket_timeouts(fd.get());
  sockaddr_in address = ipv4_address("127.0.0.1", port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return -1;
  }
  return fd.release();
}

std::optional<std::string> round_trip(int port, const std::string& data) {
  util::UniqueFd fd(connect_local(port));
  if (!fd) {
    return std::nullopt;
  }
  std::thread writer([&] {
    std::size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = send_retrying(fd.get(), data.data() + sent, data.size() - sent);
      if (n <= 0) {
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd.get(), SHUT_WR);
  });
  std::string received;
  std::vector<char> buffer(64 * 1024);
  while (true) {
    ssize_t n = recv_retrying(fd.get(), buffer.data(), buffer.size());
    if (n <= 0) {
      break;
    }
    received.append(buffer.data(), static_cast<std::size_t>(n));
  }
  writer.join();
  return received;
}

std::string ask(int port, const std::string& text) {
  util::UniqueFd fd(connect_local(port));
  if (!fd || send_retrying(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return "cannot send";
  }
  std::string back;
  char buffer[256];
  while (back.size() < text.size()) {
    ssize_t n = recv_retrying(fd.get(), buffer, sizeof buffer);
    if (n <= 0) {
      break;
    }
    back.append(buffer, static_cast<std::size_t>(n));
  }
  return back;
}

EchoServer::EchoServer() {
  m_fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address = ipv4_address("127.0.0.1", 0);
  socklen_t length = sizeof address;
  ::bind(m_fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(m_fd.get(), 64);
  ::getsockname(m_fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  m_port = ntohs(address.sin_port);
  m_acceptor = std::thread([this] { accept_loop(); });
}

EchoServer::~EchoServer() {
  m_stop = true;
  m_acceptor.join();
  std::lock_guard lock(m_mutex);
  for (auto& worker : m_workers) {
    worker.join();
  }
}

void EchoServer::accept_loop() {
  while (!m_stop) {
    pollfd p{m_fd.get(), POLLIN, 0};
    if (::poll(&p, 1, k_accept_poll_ms) <= 0) {
      continue;
    }
    int client = ::accept4(m_fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      continue;
    }
    ++m_connections;
    set_socket_timeouts(client);
    std::lock_guard lock(m_mutex);
    m_workers.emplace_back([client] { echo(client); });
  }
}

void EchoServer::echo(int client) {
  util::UniqueFd fd(client);
  std::vector<char> buffer(64 * 1024);
  while (true) {
    ssize_t n = recv_retrying(fd.get(), buffer.data(), buffer.size());
    if (n <= 0) {
      break;
    }
    ssize_t sent = 0;
    while (sent < n) {
      ssize_t m = send_retrying(fd.get(), buffer.data() + sent, static_cast<std::size_t>(n - sent));
      if (m <= 0) {
        return;
      }
      sent += m;
    }
  }
  ::shutdown(fd.get(), SHUT_WR);
}

} // namespace specctl::test

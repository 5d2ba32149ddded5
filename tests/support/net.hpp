#pragma once

// Test support: loopback TCP. Free ports for servers a test starts, whether a
// port accepts, and a tiny echo server that stands in for a server on a node;
// round_trip() pushes bytes through a port and collects the answer. Every socket
// has send and receive timeouts, so nothing hangs.

#include <specctl/util/unique_fd.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace specctl::test {

inline constexpr auto k_socket_timeout = std::chrono::seconds{30};

// A port nobody listens on right now on the IPv4 address `ip`, and that no other test
// process is given while this one lives (net.cpp says how). Throws std::runtime_error
// when no port can be bound there.
int free_port(const std::string& ip = "127.0.0.1");

// `count` ports free now and distinct from each other: servers on several "nodes"
// that are all this machine would collide on one port.
std::vector<int> distinct_free_ports(std::size_t count);

// Whether a TCP connect to `ip`:`port` succeeds.
bool port_accepts(int port, const std::string& ip = "127.0.0.1");

// Whether a TCP connect to 127.0.0.1:`port` is refused.
bool connection_refused(int port);

std::string random_bytes(std::size_t size, unsigned seed);

void set_socket_timeouts(int fd);

// recv(2) and send(2) that go on after EINTR. A socket with a timeout is never
// restarted by the kernel, and a process that spawns gets signals it ignores
// (SIGCHLD queued while the spawning thread blocked every signal) that still
// interrupt another thread's recv: a bare recv then reads -1 as "closed".
ssize_t recv_retrying(int fd, void* buffer, std::size_t size, int flags = 0);
ssize_t send_retrying(int fd, const void* buffer, std::size_t size);

// A connected socket to 127.0.0.1:port, or -1.
int connect_local(int port);

// Sends `data` to 127.0.0.1:port while reading what comes back, until the peer closes.
std::optional<std::string> round_trip(int port, const std::string& data);

// Sends `text` through 127.0.0.1:`port` and reads as many bytes back, keeping
// its side open meanwhile (as an HTTP client does; round_trip shuts it first).
std::string ask(int port, const std::string& text);

// A TCP echo server on 127.0.0.1 with a thread per connection.
class EchoServer {
public:
  EchoServer();
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;
  ~EchoServer();

  int port() const { return m_port; }
  int connections() const { return m_connections.load(); }

private:
  static constexpr int k_accept_poll_ms = 100;

  void accept_loop();
  static void echo(int client);

  util::UniqueFd m_fd;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_connections{0};
  std::mutex m_mutex;
  std::vector<std::thread> m_workers;
  std::thread m_acceptor;
};

} // namespace specctl::test

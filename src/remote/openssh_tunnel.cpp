#include "openssh_tunnel.hpp"

#include "openssh_host_impl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace specctl::remote::openssh {

namespace {

// How often the thread reaps the `ssh -W` processes of closed connections
// when nothing else wakes it.
constexpr int k_reap_interval_ms = 200;

} // namespace

TunnelRelay::TunnelRelay(const OpenSshHost& host) : m_host(host) {
  m_wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m_wake) {
    throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  m_thread = std::thread([this] { run(); });
}

TunnelRelay::~TunnelRelay() {
  m_stop = true;
  wake();
  if (m_thread.joinable()) {
    m_thread.join();
  }
  // Child's destructor SIGKILLs and reaps each `ssh -W`.
  m_children.clear();
}

void TunnelRelay::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(m_wake.get(), &one, sizeof one);
}

std::expected<int, Error> TunnelRelay::listen(const std::string& target_host, int target_port) {
  const auto where = m_host.describe();
  auto fail = [&](const char* what) {
    return std::unexpected(Error(fmt::format("{}: cannot open a tunnel to {}:{}: {}: {}", where, target_host,
                                             target_port, what, std::strerror(errno))));
  };
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return fail("socket");
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return fail("bind");
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return fail("listen");
  }
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return fail("getsockname");
  }
  const int port = ntohs(address.sin_port);
  // ssh reads "-W host:port" at the last colon unless the host is bracketed.
  auto forward = target_host.find(':') != std::string::npos ? fmt::format("[{}]:{}", target_host, target_port)
                                                            : fmt::format("{}:{}", target_host, target_port);
  {
    std::lock_guard lock(m_mutex);
    m_listeners.push_back(Listener{std::move(fd), std::move(forward)});
  }
  wake();
  return port;
}

void TunnelRelay::run() {
  std::vector<pollfd> fds;
  std::vector<std::string> forwards;
  while (!m_stop) {
    fds.assign(1, pollfd{m_wake.get(), POLLIN, 0});
    forwards.clear();
    {
      std::lock_guard lock(m_mutex);
      for (const auto& listener : m_listeners) {
        fds.push_back(pollfd{listener.fd.get(), POLLIN, 0});
        forwards.push_back(listener.forward);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), k_reap_interval_ms);
    if (ready < 0 && errno != EINTR) {
      break;
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(m_wake.get(), &count, sizeof count);
    }
    for (std::size_t i = 1; i < fds.size() && !m_stop; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      while (true) {
        util::UniqueFd client(::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (!client) {
          break;
        }
        int one = 1;
        // Requests and streamed tokens are small: no Nagle delay on our side.
        ::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        // The master (or, when none listens, this ssh becoming the master)
        // carries it; should ssh fail, its end closes and so does the client's.
        auto spawned = spawn_ssh(m_host.argv({"-W", forwards[i - 1]}), Stdio::socket, client.get());
        if (spawned) {
          m_children.push_back(std::move(spawned->child));
        }
      }
    }
    std::erase_if(m_children, [](Child& child) { return child.poll_exit().has_value(); });
  }
}

} // namespace specctl::remote::openssh

// Test tool for the shell suites: picks a free loopback port, or holds one busy the
// way a foreign server would (listening, never answering), so that a suite needs
// neither python3 nor a port that happens to be free.
//
//   specctl_test_port_holder free              prints a port free on 127.0.0.1 now
//   specctl_test_port_holder hold PORT FILE    listens on 127.0.0.1:PORT (0: any free
//                                              port), then writes the port to FILE
//
// `hold` keeps listening until it is killed, and at most k_hold_limit, so a suite
// that dies without killing it leaves nothing behind for long. It exits 2 when PORT
// is taken already (something else listens there).

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

constexpr auto k_hold_limit = std::chrono::minutes{5};
constexpr int k_exit_taken = 2;
constexpr int k_exit_usage = 64;

// A socket bound to 127.0.0.1:port (0: one the kernel picks) and its port, or fd -1.
struct Bound {
  int fd = -1;
  int port = 0;
};

Bound bind_loopback(int port) {
  Bound bound;
  bound.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (bound.fd < 0) {
    return bound;
  }
  // A closed connection's TIME_WAIT must not count as busy; a listener still does.
  int on = 1;
  ::setsockopt(bound.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t length = sizeof address;
  if (::bind(bound.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(bound.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(bound.fd);
    bound.fd = -1;
    return bound;
  }
  bound.port = ntohs(address.sin_port);
  return bound;
}

int usage() {
  std::fputs("usage: specctl_test_port_holder free | hold PORT FILE\n", stderr);
  return k_exit_usage;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "free") {
    auto bound = bind_loopback(0);
    if (bound.fd < 0) {
      std::fprintf(stderr, "specctl_test_port_holder: cannot bind 127.0.0.1:0: %s\n", std::strerror(errno));
      return 1;
    }
    ::close(bound.fd);
    std::printf("%d\n", bound.port);
    return 0;
  }
  if (argc != 4 || std::string_view(argv[1]) != "hold") {
    return usage();
  }
  char* end = nullptr;
  long port = std::strtol(argv[2], &end, 10);
  if (*argv[2] == '\0' || *end != '\0' || port < 0 || port > 65535) {
    return usage();
  }
  auto bound = bind_loopback(static_cast<int>(port));
  if (bound.fd < 0 || ::listen(bound.fd, 1) != 0) {
    std::fprintf(stderr, "specctl_test_port_holder: 127.0.0.1:%ld is taken: %s\n", port, std::strerror(errno));
    return k_exit_taken;
  }
  // Written once the socket listens, and renamed into place: a reader never sees half a number.
  const std::filesystem::path file = argv[3];
  const std::filesystem::path partial = file.string() + ".partial";
  {
    std::ofstream out(partial);
    out << bound.port << "\n";
    if (!out.flush()) {
      std::fprintf(stderr, "specctl_test_port_holder: cannot write %s\n", partial.c_str());
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::rename(partial, file, ec);
  if (ec) {
    std::fprintf(stderr, "specctl_test_port_holder: cannot write %s: %s\n", file.c_str(), ec.message().c_str());
    return 1;
  }
  std::this_thread::sleep_for(k_hold_limit);
  return 0;
}

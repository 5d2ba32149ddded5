#include <doctest/doctest.h>

#include "../support/ssh_testing.hpp"

#include <specctl/remote/ssh_host.hpp>
#include <specctl/util/shell.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

// Tunnels, reconnection and closing, against a real sshd on 127.0.0.1.

namespace {

using namespace std::chrono_literals;
using namespace specctl::test;
using specctl::ErrorKind;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Generous: on a loaded CI machine a login shell alone can take a second.
constexpr auto k_tunnel_command_timeout = std::chrono::seconds{20};

} // namespace

TEST_CASE("ssh tunnel forwards TCP connections to a port on the node") {
  auto sshd = require_sshd();
  auto host = require_host(sshd->target(), *sshd);
  EchoServer echo;

  SUBCASE("several MiB each way arrive intact") {
    auto port = host->open_tunnel("127.0.0.1", echo.port());
    REQUIRE(port);
    CHECK(*port != echo.port());
    auto data = random_bytes(4 * 1024 * 1024, 11);
    auto back = round_trip(*port, data);
    REQUIRE(back);
    CHECK(back->size() == data.size());
    CHECK((*back == data));
  }
  SUBCASE("concurrent connections do not mix") {
    auto port = host->open_tunnel("localhost", echo.port());
    REQUIRE(port);
    constexpr int k_connections = 6;
    std::vector<std::future<bool>> done;
    for (int i = 0; i < k_connections; ++i) {
      done.push_back(std::async(std::launch::async, [&, i] {
        auto data = random_bytes(1024 * 1024 + static_cast<std::size_t>(i), static_cast<unsigned>(100 + i));
        auto back = round_trip(*port, data);
        return back && *back == data;
      }));
    }
    for (auto& d : done) {
      CHECK(d.get());
    }
    CHECK(echo.connections() == k_connections);
    // Commands still run beside the tunnel.
    CHECK(host->exec("true", k_tunnel_command_timeout));
  }
  SUBCASE("a connection to a closed port on the node is closed at once") {
    auto port = host->open_tunnel("127.0.0.1", free_port());
    REQUIRE(port);
    int fd = connect_local(*port);
    REQUIRE(fd >= 0);
    auto started = Clock::now();
    char byte = 0;
    ssize_t n = recv_retrying(fd, &byte, 1);
    ::close(fd);
    CHECK(n <= 0);
    CHECK(Clock::now() - started < 10s);
    // The session is fine afterwards.
    auto good = host->open_tunnel("127.0.0.1", echo.port());
    REQUIRE(good);
    CHECK(round_trip(*good, "ping") == std::optional<std::string>("ping"));
  }
  SUBCASE("an invalid target is refused") {
    auto port = host->open_tunnel("127.0.0.1", 0);
    REQUIRE_FALSE(port);
    CHECK(port.error().kind() == ErrorKind::bad_input);
  }
}

TEST_CASE("ssh tunnel to a target that never answers gives up on the client, not on the session") {
  auto sshd = require_sshd();
  auto target = sshd->target();
  target.connect_timeout = 1s;
  auto host = require_host(target, *sshd);
  // A listener whose accept queue is full drops new SYNs: sshd's connect to it hangs.
  int blackhole = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(blackhole, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(blackhole, 0) == 0);
  ::getsockname(blackhole, reinterpret_cast<sockaddr*>(&address), &length);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    fillers.push_back(fd);
  }
  auto port = host->open_tunnel("127.0.0.1", ntohs(address.sin_port));
  REQUIRE(port);
  int fd = connect_local(*port);
  REQUIRE(fd >= 0);
  auto started = Clock::now();
  char byte = 0;
  CHECK(recv_retrying(fd, &byte, 1) <= 0);
  CHECK(Clock::now() - started < 10s);
  ::close(fd);
  // sshd's next SYN now meets a closed port, so the abandoned open ends and
  // commands (which wait for it) run on the same session.
  ::close(blackhole);
  for (int filler : fillers) {
    ::close(filler);
  }
  auto result = host->exec("echo ok", k_tunnel_command_timeout);
  REQUIRE(result);
  CHECK(result->out == "ok\n");
  CHECK(host->reconnect_count() == 0);
}

TEST_CASE("ssh host reconnects after the connection drops") {
  auto sshd = require_sshd();
  auto target = sshd->target();

  SUBCASE("an idle connection comes back by itself, and so do its tunnels") {
    auto host = require_host(target, *sshd);
    EchoServer echo;
    auto port = host->open_tunnel("127.0.0.1", echo.port());
    REQUIRE(port);
    REQUIRE(round_trip(*port, "before") == std::optional<std::string>("before"));
    // A forwarded connection open at the drop cannot survive it: its client sees the break.
    int held = connect_local(*port);
    REQUIRE(held >= 0);
    char byte = 'x';
    REQUIRE(send_retrying(held, &byte, 1) == 1);
    REQUIRE(recv_retrying(held, &byte, 1) == 1);
    REQUIRE(sshd->kill_sessions() > 0);
    CHECK(recv_retrying(held, &byte, 1) <= 0);
    ::close(held);
    CHECK(wait_until([&] { return host->reconnect_count() >= 1; }));
    CHECK(round_trip(*port, "after") == std::optional<std::string>("after"));
    auto result = host->exec("echo again", k_tunnel_command_timeout);
    REQUIRE(result);
    CHECK(result->out == "again\n");
  }
  SUBCASE("a command issued right after the drop runs on the new connection") {
    auto host = require_host(target, *sshd);
    REQUIRE(host->exec("true", k_tunnel_command_timeout));
    REQUIRE(sshd->kill_sessions() > 0);
    auto result = host->exec("echo hi", k_tunnel_command_timeout);
    REQUIRE_MESSAGE(result, (result ? "" : result.error().what()));
    CHECK(result->out == "hi\n");
    CHECK(host->reconnect_count() == 1);
  }
  SUBCASE("a command running when the connection drops is reported and never run twice") {
    auto host = require_host(target, *sshd);
    auto runs = sshd->dir() / "runs";
    auto command = "echo run >> " + specctl::util::shell_quote(runs.string()) + "; sleep 4";
    auto pending = std::async(std::launch::async, [&] { return host->exec(command, 6s); });
    REQUIRE(wait_until([&] { return fs::exists(runs); }));
    REQUIRE(sshd->kill_sessions() > 0);
    REQUIRE(pending.wait_for(k_wait_timeout) == std::future_status::ready);
    auto result = pending.get();
    REQUIRE_FALSE(result);
    CHECK(std::string(result.error().what()).find("connection lost while running") != std::string::npos);
    CHECK(std::string(result.error().what()).find("it was not run again") != std::string::npos);
    auto after = host->exec("echo back", k_tunnel_command_timeout);
    REQUIRE(after);
    CHECK(after->out == "back\n");
    CHECK(read_file(runs) == "run\n");
  }
  SUBCASE("reconnecting gives up after its attempts when sshd is gone") {
    target.reconnect_attempts = 2;
    target.reconnect_backoff = 100ms;
    auto host = require_host(target, *sshd);
    sshd->stop();
    auto started = Clock::now();
    auto result = host->exec("true", 5s);
    REQUIRE_FALSE(result);
    CHECK(Clock::now() - started < 15s);
    std::string message = result.error().what();
    INFO(message);
    CHECK(message.starts_with(target.describe() + ": the connection was lost"));
    CHECK(message.find("2 reconnection attempts") != std::string::npos);
    CHECK(message.find("Connection refused") != std::string::npos);
  }
}

TEST_CASE("closing an ssh host is prompt and closes its tunnels") {
  auto sshd = require_sshd();
  auto host = require_host(sshd->target(), *sshd);
  EchoServer echo;
  auto port = host->open_tunnel("127.0.0.1", echo.port());
  REQUIRE(port);
  int fd = connect_local(*port);
  REQUIRE(fd >= 0);
  REQUIRE(send_retrying(fd, "x", 1) == 1);
  char byte = 0;
  REQUIRE(recv_retrying(fd, &byte, 1) == 1);
  auto started = Clock::now();
  host.reset();
  CHECK(Clock::now() - started < 3s);
  CHECK(recv_retrying(fd, &byte, 1) <= 0);
  ::close(fd);
  CHECK_FALSE(port_accepts(*port));
}
